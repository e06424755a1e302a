package stream

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// The model: a table (id int key, v text, big text stored out of line) and
// a history of transactions applied in commit order. A chunk read in a
// snapshot and merged with the window's changes must equal the model's
// state of the chunk's range at the merge point.

var modelTable = &change.Table{
	ID:      change.TableID{Schema: "public", Name: "t"},
	Columns: []change.Column{{Name: "id", BaseOID: 20}, {Name: "v", BaseOID: 25}, {Name: "big", BaseOID: 25}},
	Key:     []int{0},
}

type modelTxn struct {
	xid     uint32
	changes []change.Change
	keys    map[int]bool // keys written, for the visibility rule
	// truncate: TRUNCATE locks the whole table, so every later writer of
	// the table waited for it.
	truncate bool
}

type modelState map[int]change.Row

func (s modelState) apply(c change.Change) {
	switch c.Kind {
	case change.Truncate:
		clear(s)
	case change.Delete:
		delete(s, keyInt(c.OldKey))
	case change.Insert, change.Update:
		var prior change.Row
		if c.OldKey != nil {
			prior = s[keyInt(c.OldKey)]
			delete(s, keyInt(c.OldKey))
		} else {
			prior = s[keyInt(modelTable.RowKey(c.Row))]
		}
		row := slices.Clone(c.Row)
		for i, v := range row {
			if v.Unchanged {
				row[i] = prior[i]
			}
		}
		s[keyInt(modelTable.RowKey(row))] = row
	}
}

func keyInt(k change.Key) int { n, _ := strconv.Atoi(k[0].Text); return n }
func key(n int) change.Key    { return change.Key{change.Text(strconv.Itoa(n))} }

func row(id int, v, big string) change.Row {
	return change.Row{change.Text(strconv.Itoa(id)), change.Text(v), change.Text(big)}
}

// genHistory makes random transactions over keys 1..n against a state that
// evolves with them, so every change is valid where it is applied.
func genHistory(r *rand.Rand, initial modelState, n, txns int) []modelTxn {
	state := modelState{}
	for k, v := range initial {
		state[k] = v
	}
	xids := r.Perm(txns) // commit order differs from xid order
	var out []modelTxn
	for i := range txns {
		t := modelTxn{xid: uint32(1000 + xids[i]), keys: map[int]bool{}}
		for range 1 + r.IntN(4) {
			c, ok := genChange(r, state, n, i)
			if !ok {
				continue
			}
			switch {
			case c.Kind == change.Truncate:
				t.truncate = true
			case c.OldKey != nil:
				t.keys[keyInt(c.OldKey)] = true
			}
			if c.Row != nil {
				t.keys[keyInt(modelTable.RowKey(c.Row))] = true
			}
			state.apply(c)
			t.changes = append(t.changes, c)
		}
		out = append(out, t)
	}
	return out
}

func genChange(r *rand.Rand, state modelState, n, step int) (change.Change, bool) {
	k := 1 + r.IntN(n)
	cur, exists := state[k]
	v := fmt.Sprintf("v%d-%d", step, r.IntN(1000))
	switch op := r.IntN(20); {
	case op == 0 && r.IntN(8) == 0:
		return change.Change{Kind: change.Truncate, Table: modelTable}, true
	case !exists:
		return change.Change{Kind: change.Insert, Table: modelTable, Row: row(k, v, "big"+v)}, true
	case op < 5:
		return change.Change{Kind: change.Delete, Table: modelTable, OldKey: key(k)}, true
	case op < 9:
		// primary-key update, possibly across chunk boundaries; big unchanged
		nk := k + 1 + r.IntN(3)
		if _, taken := state[nk]; taken || nk > n {
			return change.Change{}, false
		}
		nr := change.Row{change.Text(strconv.Itoa(nk)), change.Text(v), {Unchanged: true}}
		return change.Change{Kind: change.Update, Table: modelTable, Row: nr, OldKey: key(k)}, true
	case op < 15:
		// unchanged TOAST marker on big
		return change.Change{Kind: change.Update, Table: modelTable, Row: change.Row{cur[0], change.Text(v), {Unchanged: true}}}, true
	default:
		return change.Change{Kind: change.Update, Table: modelTable, Row: row(k, v, "big"+v)}, true
	}
}

type setSnapshot map[uint32]bool

func (s setSnapshot) VisibleXid(x uint32) bool { return s[x] }
func (s setSnapshot) Widen(x uint32) uint64    { return uint64(x) }
func (s setSnapshot) Horizon() uint64          { return 0 }

// visibleSet picks the transactions a snapshot sees: a prefix of the commit
// order, less some near its end whose commit was logged but not yet visible.
// A transaction can only be missed if no later visible one wrote the same
// keys (it would have waited on the row lock).
func visibleSet(r *rand.Rand, txns []modelTxn, cut int) setSnapshot {
	vis := setSnapshot{}
	for i := 0; i < cut; i++ {
		vis[txns[i].xid] = true
	}
	for i := cut - 1; i >= 0 && i >= cut-4; i-- {
		if r.IntN(2) == 0 {
			continue
		}
		conflict := false
		for j := i + 1; j < cut && !conflict; j++ {
			if vis[txns[j].xid] {
				conflict = txns[i].truncate || txns[j].truncate
				for k := range txns[i].keys {
					conflict = conflict || txns[j].keys[k]
				}
			}
		}
		if !conflict {
			vis[txns[i].xid] = false
		}
	}
	return vis
}

func TestMergeAgainstModel(t *testing.T) {
	for seed := range uint64(3000) {
		checkMergeSeed(t, seed, true)
	}
}

// TestMergeNeedsWindow proves the model test can fail: without the window's
// changes, merged chunks are wrong for some seeds.
func TestMergeNeedsWindow(t *testing.T) {
	failures := 0
	for seed := range uint64(300) {
		ft := &testing.T{}
		if !checkMergeSeedResult(ft, seed, false) {
			failures++
		}
	}
	if failures == 0 {
		t.Fatal("dropping the window never changed a merged chunk: the model test cannot detect a broken merge")
	}
}

func checkMergeSeed(t *testing.T, seed uint64, useWindow bool) {
	t.Helper()
	if !checkMergeSeedResult(t, seed, useWindow) {
		t.FailNow()
	}
}

func checkMergeSeedResult(t *testing.T, seed uint64, useWindow bool) bool {
	r := rand.New(rand.NewPCG(seed, 7))
	const n = 40
	initial := modelState{}
	for k := 1; k <= n; k += 1 + r.IntN(2) {
		initial[k] = row(k, "init", "big-init")
	}
	txns := genHistory(r, initial, n, 5+r.IntN(30))
	cut := r.IntN(len(txns) + 1)
	vis := visibleSet(r, txns, cut)
	merge := cut + r.IntN(len(txns)-cut+1) // the merge point is at or past the snapshot

	snap := cloneState(initial)
	truth := cloneState(initial)
	var window []change.Change
	for i, tx := range txns[:merge] {
		for _, c := range tx.changes {
			truth.apply(c)
		}
		if vis[tx.xid] {
			for _, c := range tx.changes {
				snap.apply(c)
			}
		} else if i < merge && useWindow {
			window = append(window, tx.changes...)
		}
	}
	low, high := r.IntN(n), 0
	high = low + 1 + r.IntN(n-low)
	lastChunk := r.IntN(4) == 0
	in := func(k int) bool { return k > low && (lastChunk || k <= high) }
	var rows []change.Row
	for _, k := range sortedKeys(snap) {
		if in(k) {
			rows = append(rows, snap[k])
		}
	}
	merged, _, unresolved := Merge(modelTable, rows, window, func(k change.Key) bool { return in(keyInt(k)) })
	got := modelState{}
	for _, rw := range merged {
		got[keyInt(modelTable.RowKey(rw))] = rw
	}
	want := modelState{}
	for k, rw := range truth {
		if in(k) {
			want[k] = rw
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("seed %d: key %d missing from merged chunk (want %v)", seed, k, w)
			return false
		}
		for i := range w {
			if g[i].Unchanged && unresolved {
				continue // kept from the destination: checked by the sink tests
			}
			if g[i] != w[i] {
				t.Errorf("seed %d: key %d column %d = %v, want %v", seed, k, i, g[i], w[i])
				return false
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("seed %d: merged chunk has key %d the source no longer has", seed, k)
			return false
		}
	}
	return true
}

func cloneState(s modelState) modelState {
	out := modelState{}
	for k, v := range s {
		out[k] = v
	}
	return out
}

func sortedKeys(s modelState) []int {
	ks := make([]int, 0, len(s))
	for k := range s {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
