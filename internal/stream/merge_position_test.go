package stream

import (
	"math/rand/v2"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// positionSnapshot is a chunk snapshot whose rule is a log position, as a
// MySQL or MariaDB consistent snapshot's: it reflects exactly the
// transactions committed at or before at.
type positionSnapshot struct{ at change.LSN }

func (s positionSnapshot) VisibleXid(uint32) bool            { return true }
func (s positionSnapshot) Widen(uint32) uint64               { return 0 }
func (s positionSnapshot) Horizon() uint64                   { return 0 }
func (s positionSnapshot) SeesCommit(commit change.LSN) bool { return commit <= s.at }

// TestMergeAgainstModelPositionRule runs the merge model under the window
// rule of a source whose snapshot is a log position: the chunk registers,
// then its snapshot is taken at position P (transactions applied by the
// stream between registration and the read are in the window but at or
// before P; transactions logged after P, committed or not when the read
// ran, are after it); the chunk merges when the stream has passed P, or
// later. Keys move across the chunk's bounds and rows are deleted, as in
// the PostgreSQL model.
func TestMergeAgainstModelPositionRule(t *testing.T) {
	for seed := range uint64(3000) {
		if !checkPositionRuleSeed(t, seed, true) {
			t.FailNow()
		}
	}
}

// TestMergePositionRuleNeedsIt proves the test above can fail: a merge that
// takes the window's transactions as all visible (the transaction id rule
// such a snapshot does not follow) is wrong for some seeds.
func TestMergePositionRuleNeedsIt(t *testing.T) {
	failures := 0
	for seed := range uint64(300) {
		if !checkPositionRuleSeed(&testing.T{}, seed, false) {
			failures++
		}
	}
	if failures == 0 {
		t.Fatal("ignoring the position never changed a merged chunk: the test cannot detect a broken rule")
	}
}

func checkPositionRuleSeed(t *testing.T, seed uint64, byPosition bool) bool {
	r := rand.New(rand.NewPCG(seed, 11))
	const n = 40
	initial := modelState{}
	for k := 1; k <= n; k += 1 + r.IntN(2) {
		initial[k] = row(k, "init", "big-init")
	}
	txns := genHistory(r, initial, n, 5+r.IntN(30))
	// Transaction i commits at position i+1; the chunk registers after reg
	// transactions, its snapshot is at cut >= reg, it merges after merge.
	reg := r.IntN(len(txns) + 1)
	cut := reg + r.IntN(len(txns)-reg+1)
	merge := cut + r.IntN(len(txns)-cut+1)
	var snap source.Snapshot = positionSnapshot{at: change.LSN(cut)}
	read := cloneState(initial)
	truth := cloneState(initial)
	var window []change.Change
	for i, tx := range txns[:merge] {
		for _, c := range tx.changes {
			truth.apply(c)
			if i < cut {
				read.apply(c)
			}
		}
		if i < reg {
			continue // applied before the chunk registered: not in its window
		}
		sees := source.Sees(snap, tx.xid, change.LSN(i+1))
		if !byPosition {
			sees = snap.VisibleXid(tx.xid)
		}
		if !sees {
			window = append(window, tx.changes...)
		}
	}
	low := r.IntN(n)
	high := low + 1 + r.IntN(n-low)
	lastChunk := r.IntN(4) == 0
	in := func(k int) bool { return k > low && (lastChunk || k <= high) }
	var rows []change.Row
	for _, k := range sortedKeys(read) {
		if in(k) {
			rows = append(rows, read[k])
		}
	}
	merged, _, unresolved := Merge(modelTable, rows, window, func(k change.Key) bool { return in(keyInt(k)) })
	return sameChunk(t, seed, modelTable, merged, truth, in, unresolved)
}

// sameChunk compares a merged chunk with the model's rows in its range.
func sameChunk(t *testing.T, seed uint64, tbl *change.Table, merged []change.Row, truth modelState, in func(int) bool, unresolved bool) bool {
	got := modelState{}
	for _, rw := range merged {
		got[keyInt(tbl.RowKey(rw))] = rw
	}
	for k, w := range truth {
		if !in(k) {
			continue
		}
		g, ok := got[k]
		if !ok {
			t.Errorf("seed %d: key %d missing from merged chunk (want %v)", seed, k, w)
			return false
		}
		for i := range w {
			if g[i].Unchanged && unresolved {
				continue
			}
			if g[i] != w[i] {
				t.Errorf("seed %d: key %d column %d = %v, want %v", seed, k, i, g[i], w[i])
				return false
			}
		}
	}
	for k := range got {
		if _, ok := truth[k]; !ok || !in(k) {
			t.Errorf("seed %d: merged chunk has key %d the source no longer has", seed, k)
			return false
		}
	}
	return true
}
