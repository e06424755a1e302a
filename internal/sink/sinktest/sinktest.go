// Package sinktest is the conformance suite every sink.Sink implementation
// runs from its own tests, so that all destinations honour one contract:
// upsert semantics, Unchanged values, chunk replacement, the checkpoint
// committed with the data, idempotent batches and lossless text round trips.
package sinktest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// Run runs the suite. open must return a fresh, empty sink of the test's own
// (its own database or file); Run closes it when the test ends. Subtests run
// in parallel, so open must be safe to call concurrently.
func Run(t *testing.T, open func(t *testing.T) sink.Sink) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s sink.Sink)
	}{
		{"EnsureTableIdempotent", testEnsureTableIdempotent},
		{"InsertUpdateDelete", testInsertUpdateDelete},
		{"Truncate", testTruncate},
		{"UpdateMovingKeyCarriesUnchanged", testUpdateMovingKeyCarriesUnchanged},
		{"UnchangedKeepsValue", testUnchangedKeepsValue},
		{"ChunkReplacesRange", testChunkReplacesRange},
		{"ChunkUnboundedAndPartialRows", testChunkUnboundedAndPartialRows},
		{"ChunkKeep", testChunkKeep},
		{"ChunkUpdateOnly", testChunkUpdateOnly},
		{"ChunkReportsChanges", testChunkReportsChanges},
		{"ChangeReportsChanges", testChangeReportsChanges},
		{"CompositeKey", testCompositeKey},
		{"ReadRangeBounds", testReadRangeBounds},
		{"ReadKeys", testReadKeys},
		{"Checkpoint", testCheckpoint},
		{"CheckpointResume", testCheckpointResume},
		{"ApplyTwiceIsOnce", testApplyTwiceIsOnce},
		{"FailedBatchCommitsNothing", testFailedBatchCommitsNothing},
		{"Identifiers", testIdentifiers},
		{"Nulls", testNulls},
		{"TypesRoundTrip", testTypesRoundTrip},
		{"ManyRows", testManyRows},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// unchanged marks a value an update did not carry.
var unchanged = change.Value{Unchanged: true}

// r builds a row: a string is a text value, nil is NULL, a change.Value is
// itself.
func r(vals ...any) change.Row {
	row := make(change.Row, len(vals))
	for i, v := range vals {
		switch v := v.(type) {
		case nil:
			row[i] = change.Null
		case string:
			row[i] = change.Text(v)
		case change.Value:
			row[i] = v
		default:
			panic(fmt.Sprintf("sinktest: value %#v", v))
		}
	}
	return row
}

// k builds a key the way r builds a row.
func k(vals ...any) change.Key { return change.Key(r(vals...)) }

func ins(t *change.Table, row change.Row) sink.Op {
	return sink.Op{Change: &change.Change{Kind: change.Insert, Table: t, Row: row}}
}

func upd(t *change.Table, oldKey change.Key, row change.Row) sink.Op {
	return sink.Op{Change: &change.Change{Kind: change.Update, Table: t, Row: row, OldKey: oldKey}}
}

func del(t *change.Table, key change.Key) sink.Op {
	return sink.Op{Change: &change.Change{Kind: change.Delete, Table: t, OldKey: key}}
}

func trunc(t *change.Table) sink.Op {
	return sink.Op{Change: &change.Change{Kind: change.Truncate, Table: t}}
}

func chunk(t *change.Table, low, high change.Key, rows ...change.Row) *sink.Chunk {
	return &sink.Chunk{Table: t, Low: low, High: high, Rows: rows}
}

func ensure(t *testing.T, s sink.Sink, tables ...*change.Table) {
	t.Helper()
	for _, tbl := range tables {
		if err := capable(t, s).EnsureTable(t.Context(), tbl); err != nil {
			t.Fatal(err)
		}
	}
}

// apply commits ops in one batch of stream "test".
func apply(t *testing.T, s sink.Sink, ops ...sink.Op) {
	t.Helper()
	if err := s.Apply(t.Context(), &sink.Batch{Stream: "test", Ops: ops}); err != nil {
		t.Fatal(err)
	}
}

// applyChunk applies one chunk and checks how many rows it removed.
func applyChunk(t *testing.T, s sink.Sink, c *sink.Chunk, removed int64) {
	t.Helper()
	apply(t, s, sink.Op{Chunk: c})
	if c.Removed != removed {
		t.Errorf("chunk (%v, %v] of %s removed %d rows, want %d", c.Low, c.High, c.Table.ID, c.Removed, removed)
	}
}

func readAll(t *testing.T, s sink.Sink, tbl *change.Table) []change.Row {
	t.Helper()
	return readRange(t, s, tbl, nil, nil)
}

func readRange(t *testing.T, s sink.Sink, tbl *change.Table, low, high change.Key) []change.Row {
	t.Helper()
	rows, err := capable(t, s).ReadRange(t.Context(), tbl, low, high)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// expect compares the destination's rows of tbl with want, in order.
func expect(t *testing.T, s sink.Sink, tbl *change.Table, want ...change.Row) {
	t.Helper()
	expectRows(t, tbl.ID.String(), readAll(t, s, tbl), want)
}

func expectRows(t *testing.T, what string, got, want []change.Row) {
	t.Helper()
	g, w := formatRows(got), formatRows(want)
	if g != w {
		t.Errorf("%s:\ngot:\n%swant:\n%s", what, g, w)
	}
}

func formatRows(rows []change.Row) string {
	var b strings.Builder
	for _, row := range rows {
		for i, v := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			switch {
			case v.Unchanged:
				b.WriteString("<unchanged>")
			case v.Null:
				b.WriteString("NULL")
			default:
				fmt.Fprintf(&b, "%q", v.Text)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func col(name, typ string, oid uint32) change.Column {
	c := change.Column{Name: name, Type: typ, TypeOID: oid, BaseOID: oid}
	if typ == "text" || strings.HasPrefix(typ, "character") {
		// the test servers' default collation (C.UTF-8) sorts like bytes
		c.Collation, c.ByteOrder = "default", true
	}
	return c
}

// orders is public.orders(id bigint, customer text, amount numeric(12,2),
// note text), keyed by id.
func orders() *change.Table {
	return &change.Table{
		ID: change.TableID{Schema: "public", Name: "orders"},
		Columns: []change.Column{
			col("id", "bigint", 20),
			col("customer", "text", 25),
			col("amount", "numeric(12,2)", 1700),
			col("note", "text", 25),
		},
		Key: []int{0},
	}
}

// lines is sales.lines with its key (region COLLATE "C", id) in another
// order than its columns.
func lines() *change.Table {
	region := col("region", "text", 25)
	region.Collation, region.ByteOrder = "C", true
	return &change.Table{
		ID: change.TableID{Schema: "sales", Name: "lines"},
		Columns: []change.Column{
			col("qty", "integer", 23),
			col("id", "integer", 23),
			region,
		},
		Key: []int{2, 1},
	}
}

// order builds an orders row.
func order(id, customer string, note any) change.Row {
	return r(id, customer, "1.00", note)
}

// Full is a destination with every capability, as the cases here need.
type Full interface {
	sink.Sink
	sink.TableCreator
	sink.RangeReplacer
	sink.Reader
}

// capable is s with every capability, or the test fails naming the one
// missing.
func capable(t *testing.T, s sink.Sink) Full {
	t.Helper()
	f, ok := s.(Full)
	if !ok {
		t.Fatalf("%T lacks a capability the conformance cases need (it has %v)", s, sink.Capabilities(s))
	}
	return f
}
