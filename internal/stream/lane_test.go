package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// The chunk lane against the model: a random history of live batches and
// chunk batches (each chunk holding the source's rows of its range at its
// batch, as the applier merges it) goes through the writer into a model
// destination whose chunk lane commits only when the test lets it, at
// random moments. Every row the destination holds must be one the source's
// key held, never older than the one it replaced (a chunk must not write
// back a row a live change moved on, a live change must not land before
// one that came first); no commit may move the written position back; at
// the end the destination must equal the source.

var laneOther = &change.Table{ID: change.TableID{Schema: "public", Name: "u"}, Columns: modelTable.Columns, Key: modelTable.Key}

func intKeyOrder(*change.Table) func(a, b change.Key) int {
	return func(a, b change.Key) int { return keyInt(a) - keyInt(b) }
}

// laneDest is the model destination both of the writer's sinks write to.
type laneDest struct {
	mu       sync.Mutex
	rows     map[change.TableID]modelState
	position change.LSN
	// cursors are the latest cursor committed by table (its Rows: the
	// order the test sent them in).
	cursors map[change.TableID]int64
	// history lists each key's rows in the source's order (absent as
	// ""); version is the index there of the row the destination holds.
	history map[change.TableID]map[int][]string
	version map[change.TableID]map[int]int
	flight  []*sink.Chunk
	release chan struct{}
	failed  []string
	// overtook counts the writer's commits while a chunk was in flight;
	// beside the lanes' batches begun while another lane's was in flight.
	overtook, beside int
	// lanes counts the lanes opened; maxLanes (0: any; below 0: none)
	// refuses more.
	lanes, maxLanes int
}

// rowPrint is a row's text ("" for none), cheaper than fmt's.
func rowPrint(r change.Row, ok bool) string {
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, v := range r {
		b.WriteString(v.Text)
		if v.Null || v.Unchanged {
			b.WriteString("\x01")
		}
		b.WriteByte(0)
	}
	return b.String()
}

// record notes the source's row of every key of st as its latest
// version, when it changed.
func (d *laneDest) record(st map[change.TableID]modelState) {
	for id, rows := range st {
		for k := 1; k <= laneKeys; k++ {
			r, ok := rows[k]
			h := d.history[id][k]
			if p := rowPrint(r, ok); len(h) == 0 || h[len(h)-1] != p {
				d.history[id][k] = append(h, p)
			}
		}
	}
}

type laneSink struct {
	d      *laneDest
	isLane bool
}

func (s *laneSink) Checkpoint(context.Context, string) (sink.Checkpoint, error) {
	return sink.Checkpoint{}, nil
}
func (s *laneSink) Close() error { return nil }
func (s *laneSink) ChunkLane(context.Context) (sink.Sink, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.maxLanes < 0 || s.d.maxLanes > 0 && s.d.lanes >= s.d.maxLanes {
		return nil, errors.New("too many connections")
	}
	s.d.lanes++
	return &laneSink{d: s.d, isLane: true}, nil
}

func (s *laneSink) Apply(ctx context.Context, b *sink.Batch) error {
	d := s.d
	if s.isLane {
		d.mu.Lock()
		if b.Position != 0 {
			d.failed = append(d.failed, fmt.Sprintf("the lane was given position %d", b.Position))
		}
		if len(d.flight) > 0 {
			d.beside++
		}
		for _, op := range b.Ops {
			d.flight = append(d.flight, op.Chunk)
		}
		d.mu.Unlock()
		select {
		case <-d.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.isLane {
		d.flight = slices.DeleteFunc(d.flight, func(c *sink.Chunk) bool {
			return slices.ContainsFunc(b.Ops, func(op sink.Op) bool { return op.Chunk == c })
		})
	} else if len(d.flight) > 0 {
		d.overtook++
	}
	for _, op := range b.Ops {
		switch {
		case op.Chunk != nil:
			c := op.Chunk
			st := d.rows[c.Table.ID]
			for k := range st {
				if (c.Low == nil || k > keyInt(c.Low)) && (c.High == nil || k <= keyInt(c.High)) {
					delete(st, k)
				}
			}
			for _, r := range c.Rows {
				st[keyInt(c.Table.RowKey(r))] = r
			}
		case op.Change != nil:
			d.applyChange(*op.Change)
		}
	}
	for id, c := range b.Cursors {
		if c.Rows < d.cursors[id] {
			d.failed = append(d.failed, fmt.Sprintf("%s's cursor went back from the one sent %d to the one sent %d", id, d.cursors[id], c.Rows))
		}
		d.cursors[id] = c.Rows
	}
	if b.Position != 0 {
		if b.Position < d.position {
			d.failed = append(d.failed, fmt.Sprintf("position went back from %d to %d", d.position, b.Position))
		}
		d.position = b.Position
	}
	d.check()
	return nil
}

// applyChange applies c; a destination that diverged may lack the row an
// update's unchanged value comes from, which is a failure, not a panic.
func (d *laneDest) applyChange(c change.Change) {
	defer func() {
		if r := recover(); r != nil {
			d.failed = append(d.failed, fmt.Sprintf("%s %s lacks the row it updates: %v", c.Kind, c.Table.ID, r))
		}
	}()
	d.rows[c.Table.ID].apply(c)
}

// check finds each key's row in the key's history, at or after the
// version the destination held before.
func (d *laneDest) check() {
	for id, st := range d.rows {
		for k := 1; k <= laneKeys; k++ {
			r, ok := st[k]
			p, h, from := rowPrint(r, ok), d.history[id][k], d.version[id][k]
			at := slices.Index(h[from:], p)
			if at < 0 {
				d.failed = append(d.failed, fmt.Sprintf("%s key %d holds %q, not the source's row then or later (history %q from %d)", id, k, p, h, from))
				continue
			}
			d.version[id][k] = from + at
		}
	}
}

const laneKeys = 30

func cloneStates(src map[change.TableID]modelState) map[change.TableID]modelState {
	out := map[change.TableID]modelState{}
	for id, st := range src {
		out[id] = maps.Clone(st)
	}
	return out
}

// runLaneSeed pushes one random history through a writer with keyOrder and
// returns what went wrong, how many commits overtook a chunk, and how many
// chunk batches were begun beside another.
func runLaneSeed(t *testing.T, seed uint64, keyOrder func(*change.Table) func(a, b change.Key) int) (failed []string, overtook, beside int) {
	t.Helper()
	return runLaneSeedLanes(t, seed, keyOrder, 0, nil)
}

// runLaneSeedLanes is runLaneSeed with a destination that opens maxLanes
// lanes at most (0: any; below 0: none), telling usable how many the
// applier may fill.
func runLaneSeedLanes(t *testing.T, seed uint64, keyOrder func(*change.Table) func(a, b change.Key) int, maxLanes int, usable *atomic.Int32) (failed []string, overtook, beside int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	source := map[change.TableID]modelState{modelTable.ID: {}, laneOther.ID: {}}
	for k := 1; k <= laneKeys; k++ {
		if r.IntN(3) > 0 {
			source[modelTable.ID][k] = row(k, "init", "big")
			source[laneOther.ID][k] = row(k, "init", "big")
		}
	}
	d := &laneDest{rows: cloneStates(source), release: make(chan struct{}), cursors: map[change.TableID]int64{}, maxLanes: maxLanes,
		history: map[change.TableID]map[int][]string{modelTable.ID: {}, laneOther.ID: {}},
		version: map[change.TableID]map[int]int{modelTable.ID: {}, laneOther.ID: {}}}
	d.record(source)
	in := make(chan *outBatch)
	w := &writer{sink: &laneSink{d: d}, in: in, confirm: func(change.LSN) {}, committed: func(context.Context, *outBatch) {},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), retry: retryPolicy{Initial: 1, Max: 1}, health: newDestHealth(func(error) {}), keyOrder: keyOrder,
		lanes: chunkLanes{max: 2, usable: usable}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.run(ctx) }()
	send := func(b *outBatch) {
		if r.IntN(3) == 0 {
			select { // the lane may commit now, if it waits
			case d.release <- struct{}{}:
			default:
			}
		}
		for {
			select {
			case in <- b:
				return
			case d.release <- struct{}{}: // the writer waits for the lane
			}
		}
	}
	pos := change.LSN(0)
	// The chunk batches in flight. The applier merges two at most (the
	// writer's lanes), never two of one table; this sends up to three, of
	// any tables, to see the writer keep one table's batches in order.
	var inFlight []chan *outBatch
	for range 120 {
		pos++
		b := &outBatch{Batch: sink.Batch{Stream: "s", Position: pos, Cursors: map[change.TableID]sink.Cursor{}}}
		tbl := modelTable
		if r.IntN(3) == 0 {
			tbl = laneOther
		}
		inFlight = slices.DeleteFunc(inFlight, func(c chan *outBatch) bool { return len(c) > 0 })
		if r.IntN(4) == 0 && len(inFlight) < 3 {
			// A chunk of a random range of one table, as the source holds it.
			lo, hi := r.IntN(laneKeys), r.IntN(laneKeys+1)
			c := &sink.Chunk{Table: tbl}
			if lo > 0 {
				c.Low = key(lo)
			}
			if hi > lo && hi < laneKeys {
				c.High = key(hi)
			}
			for k := 1; k <= laneKeys; k++ {
				if row, ok := source[tbl.ID][k]; ok && (c.Low == nil || k > lo) && (c.High == nil || k <= hi) {
					c.Rows = append(c.Rows, row)
				}
			}
			b.Ops = append(b.Ops, sink.Op{Chunk: c})
			// Rows orders one table's cursors as they were sent.
			b.Cursors[tbl.ID] = sink.Cursor{BackfillID: 1, After: c.High, Rows: int64(pos)}
			b.chunks = []committedChunk{{backfillID: 1, table: tbl.ID, rows: len(c.Rows)}}
			committed := make(chan *outBatch, 1)
			b.committed, inFlight = committed, append(inFlight, committed)
		} else {
			// One or two source transactions of one to three changes.
			for range 1 + r.IntN(2) {
				txn := &change.Txn{Xid: uint32(pos)}
				for range 1 + r.IntN(3) {
					tbl := modelTable
					if r.IntN(2) == 0 {
						tbl = laneOther
					}
					c, ok := genChange(r, source[tbl.ID], laneKeys, int(pos))
					if !ok {
						continue
					}
					c.Table = tbl
					source[tbl.ID].apply(c)
					b.Ops = append(b.Ops, sink.Op{Change: &c, Txn: txn})
				}
				d.mu.Lock()
				d.record(source) // a transaction's rows are seen together
				d.mu.Unlock()
			}
		}
		d.mu.Lock()
		d.record(source)
		d.mu.Unlock()
		send(b)
	}
	close(in)
	for done := false; !done; {
		select {
		case err := <-ran:
			if err != nil {
				t.Fatalf("seed %d: writer: %v", seed, err)
			}
			done = true
		case d.release <- struct{}{}:
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	failed = d.failed
	for id, st := range source {
		if !maps.EqualFunc(st, d.rows[id], slices.Equal) {
			failed = append(failed, fmt.Sprintf("%s ends as %v, want %v", id, d.rows[id], st))
		}
	}
	return failed, d.overtook, d.beside
}

func TestChunkLaneAgainstModel(t *testing.T) {
	for _, order := range []struct {
		name string
		f    func(*change.Table) func(a, b change.Key) int
	}{{"keys ordered", intKeyOrder}, {"order unknown", nil}} {
		t.Run(order.name, func(t *testing.T) {
			overtook, beside := 0, 0
			for seed := range uint64(150) {
				failed, n, m := runLaneSeed(t, seed, order.f)
				if len(failed) > 0 {
					t.Fatalf("seed %d: %s", seed, failed[0])
				}
				overtook, beside = overtook+n, beside+m
			}
			// Live changes did commit while chunks were written, and
			// chunks of tables apart were written at once.
			if overtook == 0 || beside == 0 {
				t.Fatalf("%d commits overtook a chunk in flight, %d chunk batches were begun beside another: want some of each", overtook, beside)
			}
			t.Logf("%d commits overtook a chunk in flight; %d chunk batches were begun beside another", overtook, beside)
		})
	}
}

// TestChunkLaneRefused: a destination that opens one chunk lane and
// refuses the second. Histories still end right, and the writer tells the
// applier it may have one batch of chunks in flight, not two.
func TestChunkLaneRefused(t *testing.T) {
	for seed := range uint64(40) {
		usable := &atomic.Int32{}
		usable.Store(2)
		failed, _, _ := runLaneSeedLanes(t, seed, intKeyOrder, 1, usable)
		if len(failed) > 0 {
			t.Fatalf("seed %d: %s", seed, failed[0])
		}
		if n := usable.Load(); n != 1 && n != 2 {
			t.Fatalf("seed %d: the applier may fill %d lanes", seed, n)
		} else if n == 1 {
			return // the refusal was seen and told
		}
	}
	t.Fatal("no history needed a second lane: the refusal was never told")
}

// TestChunkLaneNoneOpens: a destination that opens no chunk lane. Every
// chunk batch is written with the live changes, histories still end right,
// and the applier is told to send one chunk batch at a time.
func TestChunkLaneNoneOpens(t *testing.T) {
	told := false
	for seed := range uint64(20) {
		usable := &atomic.Int32{}
		usable.Store(2)
		failed, overtook, beside := runLaneSeedLanes(t, seed, intKeyOrder, -1, usable)
		if len(failed) > 0 {
			t.Fatalf("seed %d: %s", seed, failed[0])
		}
		if overtook != 0 || beside != 0 {
			t.Fatalf("seed %d: %d commits overtook a chunk, %d chunk batches went beside another, with no lane", seed, overtook, beside)
		}
		switch n := usable.Load(); n {
		case 0:
			told = true
		case 2: // no chunk came: no lane was asked for
		default:
			t.Fatalf("seed %d: the applier may fill %d lanes, want 0 once a lane was refused", seed, n)
		}
	}
	if !told {
		t.Fatal("no history asked for a lane: the refusal was never told")
	}
}

// TestChunkLaneNeedsItsRanges proves the model test can fail: with an
// order that puts every key outside every bounded range, changes overtake
// chunks of their own keys, and some histories end wrong.
func TestChunkLaneNeedsItsRanges(t *testing.T) {
	lying := func(*change.Table) func(a, b change.Key) int {
		return func(a, b change.Key) int { return 1 } // every key after every bound
	}
	for seed := range uint64(200) {
		if failed, _, _ := runLaneSeed(t, seed, lying); len(failed) > 0 {
			t.Logf("seed %d failed with a lying key order: %s", seed, failed[0])
			return
		}
	}
	t.Fatal("no history failed with a lying key order: the model test cannot see the lane's ranges")
}
