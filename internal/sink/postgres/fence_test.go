package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// TestFence: once a stream's new owner fenced the destination at a higher
// epoch, the former owner commits nothing more — not after a reconnect,
// not by fencing again at its old epoch — while the new owner writes.
func TestFence(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	old, neu := open(t, dsn), open(t, dsn)
	defer old.Close()
	defer neu.Close()
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "f"}, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23},
		{Name: "v", Type: "text", TypeOID: 25, BaseOID: 25, Collation: "C"},
	}}
	ctx := t.Context()
	if err := old.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	insert := func(s *Sink, id string, pos change.LSN) error {
		return s.Apply(ctx, &sink.Batch{Stream: "s", Position: pos, Ops: []sink.Op{
			{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: change.Row{change.Text(id), change.Text("x")}}}}})
	}
	if err := old.Fence(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if err := insert(old, "1", 10); err != nil {
		t.Fatalf("the owner's write: %v", err)
	}
	if err := neu.Fence(ctx, "s", 2); err != nil {
		t.Fatalf("the new owner's fence: %v", err)
	}
	// The new owner ended the old one's session; its retry reconnects and
	// is refused.
	for range 2 {
		if err := insert(old, "2", 20); err != nil && !errors.Is(err, sink.ErrFenced) && old.conn != nil && !old.conn.IsClosed() {
			t.Fatalf("the former owner's write: %v, want ErrFenced (or its ended session)", err)
		}
	}
	// The fence check fails the transaction the commit is queued in; that
	// is no rejection of the batch, and leaves no transaction open.
	if err := insert(old, "2", 20); !errors.Is(err, sink.ErrFenced) || errors.Is(err, sink.ErrRejected) {
		t.Errorf("the former owner's write after reconnecting: %v, want ErrFenced (not a rejection)", err)
	}
	// A chunk's first round trip finds it, inside the chunk's op: the
	// error blames no op.
	chunk := &sink.Batch{Stream: "s", Position: 20, Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, BackfillID: 1,
		Rows: []change.Row{{change.Text("2"), change.Text("x")}}}}}}
	if err := old.Apply(ctx, chunk); !errors.Is(err, sink.ErrFenced) || strings.Contains(err.Error(), "op 0") {
		t.Errorf("the former owner's chunk: %v, want ErrFenced, blaming no op", err)
	}
	if st := old.conn.PgConn().TxStatus(); st != 'I' {
		t.Errorf("the former owner's connection after its fenced write: transaction status %q, want idle", st)
	}
	if err := old.Fence(ctx, "s", 1); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("fencing again at the old epoch: %v, want ErrFenced", err)
	}
	// Nor does it change the table's shape.
	wider := *tbl
	wider.Columns = append(append([]change.Column{}, tbl.Columns...), change.Column{Name: "w", Type: "text", TypeOID: 25, BaseOID: 25, Collation: "C"})
	err := old.AlterTable(ctx, &wider, []sink.AlterStep{{Kind: sink.AddColumn, Column: wider.Columns[2]}})
	if !errors.Is(err, sink.ErrFenced) || errors.Is(err, sink.ErrRejected) {
		t.Errorf("the former owner's ALTER TABLE: %v, want ErrFenced (not a rejection)", err)
	}
	ts, err := neu.table(tbl)
	if err != nil {
		t.Fatal(err)
	}
	if cols, err := neu.destColumns(ctx, ts.name); err != nil || len(cols) != 2 {
		t.Errorf("destination columns after the former owner's ALTER TABLE: %v %v, want 2", cols, err)
	}
	if err := insert(neu, "3", 30); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	rows, err := neu.ReadRange(ctx, tbl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := neu.Checkpoint(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0][0].Text != "1" || rows[1][0].Text != "3" || cp.Position != 30 {
		t.Errorf("rows %v at position %d; want ids 1 and 3 at 30: the former owner's row 2 must not be there", rows, cp.Position)
	}
}
