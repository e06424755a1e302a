package sqlite

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

const benchChunk = 1000

func benchSetup(b *testing.B) (*Sink, *change.Table) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	tbl := &change.Table{
		ID: change.TableID{Schema: "public", Name: "bench"},
		Columns: []change.Column{
			{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"},
			{Name: "amount", Type: "numeric(12,2)"}, {Name: "at", Type: "timestamp with time zone"},
		},
		Key: []int{0},
	}
	if err := s.EnsureTable(b.Context(), tbl); err != nil {
		b.Fatal(err)
	}
	return s, tbl
}

func benchRows(from int) []change.Row {
	rows := make([]change.Row, benchChunk)
	for i := range rows {
		id := strconv.Itoa(from + i)
		rows[i] = change.Row{change.Text(id), change.Text("customer " + id),
			change.Text("123.45"), change.Text("2024-02-29 13:45:01.123456+00")}
	}
	return rows
}

// BenchmarkChunkInsert applies chunks of new rows (a first backfill).
func BenchmarkChunkInsert(b *testing.B) {
	s, tbl := benchSetup(b)
	for i := range b.N {
		low := change.Key{change.Text(strconv.Itoa(i*benchChunk - 1))}
		c := &sink.Chunk{Table: tbl, Low: low, High: change.Key{change.Text(strconv.Itoa((i+1)*benchChunk - 1))}, Rows: benchRows(i * benchChunk)}
		if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkRowInserts applies batches of single-row inserts.
func BenchmarkRowInserts(b *testing.B) {
	s, tbl := benchSetup(b)
	for i := range b.N {
		ops := make([]sink.Op, 0, benchChunk)
		for _, r := range benchRows(i * benchChunk) {
			ops = append(ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: r}})
		}
		if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: ops}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "rows/s")
}
