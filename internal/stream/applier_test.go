package stream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

type noSource struct{}

func (noSource) WantPosition(change.LSN) {}
func (noSource) InRange(_ context.Context, _ *change.Table, keys []change.Key, _, _ change.Key) ([]bool, error) {
	return make([]bool, len(keys)), nil
}

func newTestApplier(t *testing.T) *applier {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	a := newApplier(done, applierConfig{BatchChanges: 1 << 20, BatchDelay: time.Hour, WindowMaxChanges: 100, RaceHorizon: time.Minute},
		"s", noSource{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, make(chan *outBatch, 10), 0)
	a.batch = a.newBatch()
	return a
}

// A transaction applied before a chunk registered, whose commit the chunk's
// snapshot does not see yet, forces the chunk to be read again — whether
// the snapshot lists it as in progress or its id is past the snapshot's
// xmax (then it is in no list at all).
func TestAppliedButInvisibleForcesReread(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	txn := &change.Txn{Xid: 900, EndLSN: 10, Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(1, "a", "b")}}}
	if err := a.handleEvent(ctx, change.Event{Txn: txn}); err != nil {
		t.Fatal(err)
	}
	pc := &pendingChunk{table: modelTable, result: make(chan ChunkResult, 1)}
	if err := a.handleRequest(ctx, applierRequest{register: pc, ack: make(chan struct{})}); err != nil {
		t.Fatal(err)
	}
	pc.read = ChunkRead{Snapshot: setSnapshot{}, Position: 5} // sees nothing of 900
	if err := a.handleRequest(ctx, applierRequest{submit: pc}); err != nil {
		t.Fatal(err)
	}
	if r := <-pc.result; !r.Retry {
		t.Fatalf("chunk merged over an applied, invisible transaction: %+v", r)
	}
	// Seen by the snapshot, it is merged.
	pc2 := &pendingChunk{table: modelTable, result: make(chan ChunkResult, 1)}
	a.handleRequest(ctx, applierRequest{register: pc2, ack: make(chan struct{})})
	pc2.read = ChunkRead{Snapshot: setSnapshot{900: true}, Position: 5, Rows: []change.Row{row(1, "a", "b")}}
	a.handleRequest(ctx, applierRequest{submit: pc2})
	if r := <-pc2.result; r.Retry || r.Rows != 1 {
		t.Fatalf("chunk whose snapshot sees every applied transaction: %+v", r)
	}
}

// TestAppliedBeforePositionSnapshotForcesReread: MariaDB sends a group
// commit's events to the stream before the snapshot position moves past
// them, so a transaction applied before a chunk registered can commit
// after its snapshot's position; that chunk is read again. One whose
// position covers every applied commit merges.
func TestAppliedBeforePositionSnapshotForcesReread(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	txn := &change.Txn{Xid: 910, CommitLSN: 20, EndLSN: 20, Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(1, "a", "b")}}}
	if err := a.handleEvent(ctx, change.Event{Txn: txn}); err != nil {
		t.Fatal(err)
	}
	pc := &pendingChunk{table: modelTable, result: make(chan ChunkResult, 1)}
	if err := a.handleRequest(ctx, applierRequest{register: pc, ack: make(chan struct{})}); err != nil {
		t.Fatal(err)
	}
	pc.read = ChunkRead{Snapshot: positionSnapshot{at: 19}, Position: 19} // one commit behind
	if err := a.handleRequest(ctx, applierRequest{submit: pc}); err != nil {
		t.Fatal(err)
	}
	if r := <-pc.result; !r.Retry {
		t.Fatalf("chunk merged over a transaction applied before its snapshot's position: %+v", r)
	}
	pc2 := &pendingChunk{table: modelTable, result: make(chan ChunkResult, 1)}
	a.handleRequest(ctx, applierRequest{register: pc2, ack: make(chan struct{})})
	pc2.read = ChunkRead{Snapshot: positionSnapshot{at: 20}, Position: 20, Rows: []change.Row{row(1, "a", "b")}}
	a.handleRequest(ctx, applierRequest{submit: pc2})
	if r := <-pc2.result; r.Retry || r.Rows != 1 {
		t.Fatalf("chunk whose position covers every applied commit: %+v", r)
	}
}

// A batch with changes is offered to the writer at once when nothing is
// queued (group commit), not held for the flush timer; one that only moved
// the position is not.
func TestFillingBatchOfferedAtOnce(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	if b, out := a.nextOut(); b != nil || out != nil {
		t.Fatalf("an empty batch offered: %v", b)
	}
	a.handleEvent(ctx, change.Event{Progress: 5})
	if b, _ := a.nextOut(); b != nil {
		t.Fatal("a batch that only moved the position offered before the timer")
	}
	txn := &change.Txn{Xid: 901, EndLSN: 10, Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(1, "a", "b")}}}
	if err := a.handleEvent(ctx, change.Event{Txn: txn}); err != nil {
		t.Fatal(err)
	}
	b, out := a.nextOut()
	if b == nil || out == nil || len(b.Ops) != 1 || b.Position != 10 {
		t.Fatalf("batch with one change not offered at once: %+v", b)
	}
	a.handedOver(b)
	if next, _ := a.nextOut(); next != nil || a.lastSent != 10 {
		t.Fatalf("after the hand-over: offered %v, last sent %v", next, a.lastSent)
	}
}

// A merged chunk is written in a batch of its own, after the live changes
// before it; no other chunk is merged until it is committed.
func TestChunkAloneAndOneInFlight(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	txn := &change.Txn{Xid: 902, EndLSN: 10, Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(7, "a", "b")}}}
	if err := a.handleEvent(ctx, change.Event{Txn: txn}); err != nil {
		t.Fatal(err)
	}
	submit := func(id int) *pendingChunk {
		pc := &pendingChunk{table: modelTable, result: make(chan ChunkResult, 1), ends: true}
		a.handleRequest(ctx, applierRequest{register: pc, ack: make(chan struct{})})
		pc.read = ChunkRead{Snapshot: setSnapshot{902: true}, Position: 5, Rows: []change.Row{row(id, "x", "y")}}
		if err := a.handleRequest(ctx, applierRequest{submit: pc}); err != nil {
			t.Fatal(err)
		}
		return pc
	}
	first := submit(1)
	if r := <-first.result; r.Retry {
		t.Fatalf("first chunk: %+v", r)
	}
	if len(a.outq) != 2 || a.outq[0].Ops[0].Change == nil || len(a.outq[1].Ops) != 1 || a.outq[1].Ops[0].Chunk == nil || len(a.inFlight) != 1 || a.inFlight[0] != a.outq[1] {
		t.Fatalf("queue after the merge: %d batches, want the live change, then the chunk alone, in flight", len(a.outq))
	}
	second := submit(2)
	select {
	case r := <-second.result:
		t.Fatalf("second chunk merged while the first is in flight: %+v", r)
	default:
	}
	if err := a.chunkCommitted(ctx, a.inFlight[0]); err != nil { // the writer committed it
		t.Fatal(err)
	}
	if r := <-second.result; r.Retry || len(a.outq) != 3 || len(a.inFlight) != 1 || a.inFlight[0] != a.outq[2] {
		t.Fatalf("second chunk after the first committed: %+v, %d batches queued", r, len(a.outq))
	}
}

// With two chunk lanes, a chunk of another table is merged while one is in
// flight, a chunk of a table in flight is not, nor a third table's while
// both lanes are taken; a verify chunk waits for every batch in flight,
// and no later chunk is merged before it.
func TestChunksOfTablesApartInFlight(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	a.cfg.ChunkLanes = 2
	third := &change.Table{ID: change.TableID{Schema: "public", Name: "v"}, Columns: modelTable.Columns, Key: modelTable.Key}
	submit := func(tbl *change.Table, id int) *pendingChunk {
		pc := &pendingChunk{table: tbl, result: make(chan ChunkResult, 1), ends: true}
		a.handleRequest(ctx, applierRequest{register: pc, ack: make(chan struct{})})
		pc.read = ChunkRead{Snapshot: setSnapshot{}, Rows: []change.Row{row(id, "x", "y")}}
		if err := a.handleRequest(ctx, applierRequest{submit: pc}); err != nil {
			t.Fatal(err)
		}
		return pc
	}
	merged := func(pc *pendingChunk) bool {
		select {
		case r := <-pc.result:
			if r.Retry || r.Err != nil {
				t.Fatalf("chunk of %s: %+v", pc.table.ID, r)
			}
			return true
		default:
			return false
		}
	}
	first, other := submit(modelTable, 1), submit(laneOther, 2)
	if !merged(first) || !merged(other) || len(a.inFlight) != 2 {
		t.Fatalf("two chunks of tables apart: %d batches in flight, want both", len(a.inFlight))
	}
	again, late := submit(modelTable, 3), submit(third, 4)
	if merged(again) || merged(late) {
		t.Fatal("merged a chunk of a table in flight, or a third while both lanes are taken")
	}
	if err := a.chunkCommitted(ctx, a.inFlight[1]); err != nil { // the other table's
		t.Fatal(err)
	}
	if merged(again) || !merged(late) {
		t.Fatal("after the other table's commit: want the third table's chunk merged, not the first table's")
	}

	// A verify chunk ready first holds back a later chunk of a table
	// apart while batches are in flight.
	verify := &pendingChunk{table: laneOther, verify: true, submitted: true}
	later := &pendingChunk{table: third, submitted: true}
	a.pending = []*pendingChunk{verify, later}
	if got := a.nextToMerge(); got != nil {
		t.Fatalf("next to merge with a verify chunk waiting: %s, want none", got.table.ID)
	}
	a.inFlight = nil
	if got := a.nextToMerge(); got != verify {
		t.Fatal("the verify chunk is not merged once no batch is in flight")
	}
	// The writer could open one lane only: one batch in flight.
	a.cfg.LanesOpen = &atomic.Int32{}
	a.cfg.LanesOpen.Store(1)
	a.pending = nil
	first, other = submit(modelTable, 5), submit(laneOther, 6)
	if !merged(first) || merged(other) || len(a.inFlight) != 1 {
		t.Fatalf("with one lane open: %d batches in flight, want the first table's alone", len(a.inFlight))
	}
}

// While the writer is stuck, batches that only move the position join one
// another in the queue: they never fill it, so the applier keeps reading
// and a change that arrives is received (and ages on the lag clock). A
// batch with a change is queued on its own, and positions after it start a
// new one.
func TestPositionOnlyBatchesJoin(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	a.lag = &lagClock{}
	for pos := change.LSN(1); pos <= 3*maxQueued; pos++ {
		if err := a.handleEvent(ctx, change.Event{Progress: pos, Resume: fmt.Sprint(pos)}); err != nil {
			t.Fatal(err)
		}
		a.flush() // the flush timer
	}
	if len(a.outq) != 1 || a.outq[0].Position != 3*maxQueued || a.outq[0].Resume != fmt.Sprint(change.LSN(3*maxQueued)) {
		t.Fatalf("queue after %d keepalives: %d batches, want one at the last position", 3*maxQueued, len(a.outq))
	}
	txn := &change.Txn{Xid: 903, EndLSN: 100, CommitTime: time.Now().Add(-time.Minute),
		Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(1, "a", "b")}}}
	if err := a.handleEvent(ctx, change.Event{Txn: txn}); err != nil {
		t.Fatal(err)
	}
	if a.lag.lag(time.Now()) < time.Minute {
		t.Fatalf("a change received behind a stuck writer shows lag %s", a.lag.lag(time.Now()))
	}
	a.flush()
	a.handleEvent(ctx, change.Event{Progress: 101})
	a.flush()
	a.handleEvent(ctx, change.Event{Progress: 102})
	a.flush()
	if len(a.outq) != 3 || len(a.outq[1].Ops) != 1 || a.outq[1].Position != 100 || a.outq[2].Position != 102 || len(a.outq[2].Ops) != 0 {
		t.Fatalf("queue: %d batches, want the positions, the change at 100, the positions to 102", len(a.outq))
	}
}

// While the applier waits for the destination to commit (a verify, a
// schema change), it takes the events up to the next transaction and the
// lag clock counts that one: a locked destination shows a growing lag.
// Keepalives before it do not use up the taking (their positions are kept
// as the latest). The events are handled after, in order, and the hold ends
// once a commit covers the transaction.
func TestWaitingApplierHoldsNextEvent(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	events := make(chan change.Event)
	a.events = events
	b, waited := waitingForCommit(ctx, a)
	txn := &change.Txn{Xid: 904, EndLSN: 50, CommitTime: time.Now().Add(-time.Minute),
		Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(1, "a", "b")}}}
	for _, ev := range []change.Event{{Progress: 40, Resume: "r40"}, {Progress: 45, Resume: "r45"}, {Txn: txn, Resume: "r50"}} {
		select {
		case events <- ev:
		case <-time.After(waitTimeout):
			t.Fatalf("the applier does not take %+v while it waits for a commit", ev)
		}
	}
	close(b.done)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if got := a.lag.lag(time.Now()); got < time.Minute {
		t.Fatalf("lag of a change held while waiting: %s, want a minute or more", got)
	}
	if len(a.held) != 2 || a.held[0].Progress != 45 || a.held[0].Resume != "r45" || a.held[1].Txn != txn || len(a.batch.Ops) != 0 {
		t.Fatalf("held %+v, batch of %d ops: want the last keepalive and the transaction held, not handled", a.held, len(a.batch.Ops))
	}
	if err := a.handleHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.held) != 0 || len(a.batch.Ops) != 1 || a.position != 50 || a.resume != "r50" {
		t.Fatalf("after handling: held %v, %d ops, position %v, resume %q", a.held, len(a.batch.Ops), a.position, a.resume)
	}
	a.lag.committed(49)
	if a.lag.lag(time.Now()) < time.Minute {
		t.Fatal("a commit before the held change ended its lag")
	}
	a.lag.committed(50)
	if got := a.lag.lag(time.Now()); got != 0 {
		t.Fatalf("lag after the commit covering it: %s", got)
	}
}

// TestWaitForOwnSchemaChangeCountsLag: a transaction whose schema change
// waits for the destination to commit (conformTxn's flushAndWait) counts
// on the lag clock while it waits, before it is batched.
func TestWaitForOwnSchemaChangeCountsLag(t *testing.T) {
	ctx := context.Background()
	a := newTestApplier(t)
	a.events = make(chan change.Event)
	txn := &change.Txn{Xid: 905, EndLSN: 60, CommitTime: time.Now().Add(-time.Minute),
		Changes: []change.Change{{Kind: change.Insert, Table: modelTable, Row: row(1, "a", "b")}}}
	a.handling = txn
	b, waited := waitingForCommit(ctx, a)
	if got := a.lag.lag(time.Now()); got < time.Minute {
		t.Fatalf("lag while the transaction's own schema change waits: %s, want a minute or more", got)
	}
	close(b.done)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	a.lag.committed(60)
	if got := a.lag.lag(time.Now()); got != 0 {
		t.Fatalf("lag after the commit covering it: %s", got)
	}
}

// waitingForCommit has a (its lag clock new) wait in flushAndWait for a
// writer that took the batch and has not committed it: close b.done to
// commit; waited says how the wait ended.
func waitingForCommit(ctx context.Context, a *applier) (b *outBatch, waited <-chan error) {
	a.lag = &lagClock{}
	out := make(chan *outBatch)
	a.out = out
	done := make(chan error, 1)
	go func() { done <- a.flushAndWait(ctx) }()
	return <-out, done
}
