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
			{Name: "id", Type: "bigint", Tag: change.TagInt64}, {Name: "name", Type: "text", Tag: change.TagText},
			{Name: "amount", Type: "numeric(12,2)", Tag: change.TagDecimal}, {Name: "at", Type: "timestamp with time zone", Tag: change.TagTimestampTZ},
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

// tracking is what a chunk or change of a table a task reads asks for
// (docs/lineage.md): nil when untracked.
func tracking(tracked bool) *sink.Changes {
	if tracked {
		return sink.NewChanges([]string{"at"})
	}
	return nil
}

// BenchmarkChunkInsert applies chunks of new rows (a first backfill);
// BenchmarkChunkInsertTracked the same, noting what each chunk changes.
func BenchmarkChunkInsert(b *testing.B)        { benchChunkInsert(b, false) }
func BenchmarkChunkInsertTracked(b *testing.B) { benchChunkInsert(b, true) }

func benchChunkInsert(b *testing.B, tracked bool) {
	s, tbl := benchSetup(b)
	for i := range b.N {
		low := change.Key{change.Text(strconv.Itoa(i*benchChunk - 1))}
		c := &sink.Chunk{Table: tbl, Low: low, High: change.Key{change.Text(strconv.Itoa((i+1)*benchChunk - 1))}, Rows: benchRows(i * benchChunk),
			Changed: tracking(tracked)}
		if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkRowInserts applies batches of single-row inserts;
// BenchmarkRowInsertsTracked the same on a table with late_after, each
// change reading the row it replaces.
func BenchmarkRowInserts(b *testing.B)        { benchRowInserts(b, false) }
func BenchmarkRowInsertsTracked(b *testing.B) { benchRowInserts(b, true) }

func benchRowInserts(b *testing.B, tracked bool) {
	s, tbl := benchSetup(b)
	for i := range b.N {
		ops := make([]sink.Op, 0, benchChunk)
		for _, r := range benchRows(i * benchChunk) {
			ops = append(ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: r}, Changed: tracking(tracked)})
		}
		if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: ops}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "rows/s")
}
