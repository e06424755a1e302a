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
