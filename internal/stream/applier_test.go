package stream

import (
	"context"
	"io"
	"log/slog"
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
	if len(a.outq) != 2 || a.outq[0].Ops[0].Change == nil || len(a.outq[1].Ops) != 1 || a.outq[1].Ops[0].Chunk == nil || a.inFlight != a.outq[1] {
		t.Fatalf("queue after the merge: %d batches, want the live change, then the chunk alone, in flight", len(a.outq))
	}
	second := submit(2)
	select {
	case r := <-second.result:
		t.Fatalf("second chunk merged while the first is in flight: %+v", r)
	default:
	}
	close(a.inFlight.done) // the writer committed it
	if err := a.chunkCommitted(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-second.result; r.Retry || len(a.outq) != 3 || a.inFlight != a.outq[2] {
		t.Fatalf("second chunk after the first committed: %+v, %d batches queued", r, len(a.outq))
	}
}
