package postgres

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

const benchChunk = 1000

func benchTable() *change.Table {
	return &change.Table{
		ID: change.TableID{Schema: "public", Name: "bench"},
		Columns: []change.Column{
			{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"},
			{Name: "amount", Type: "numeric(12,2)"}, {Name: "at", Type: "timestamp with time zone"},
		},
		Key: []int{0},
	}
}

func benchRows(from int) []change.Row {
	rows := make([]change.Row, benchChunk)
	for i := range rows {
		id := strconv.Itoa(from + i)
		rows[i] = change.Row{change.Text(id), change.Text("customer " + id + "\twith a tab"),
			change.Text("123.45"), change.Text("2024-02-29 13:45:01.123456+00")}
	}
	return rows
}

func benchSink(b *testing.B) *Sink {
	dsn, err := server.CreateDatabase(b.Context(), "b"+strconv.FormatInt(dbSeq.Add(1), 10))
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.EnsureTable(b.Context(), benchTable()); err != nil {
		b.Fatal(err)
	}
	return s
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
	s, tbl := benchSink(b), benchTable()
	for i := range b.N {
		low, high := change.Key{change.Text(strconv.Itoa(i*benchChunk - 1))}, change.Key{change.Text(strconv.Itoa((i+1)*benchChunk - 1))}
		c := &sink.Chunk{Table: tbl, Low: low, High: high, Rows: benchRows(i * benchChunk), Changed: tracking(tracked)}
		if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkChunkIdentical re-applies a chunk the destination already has;
// BenchmarkChunkIdenticalTracked the same, noting what it changes.
func BenchmarkChunkIdentical(b *testing.B)        { benchChunkIdentical(b, false) }
func BenchmarkChunkIdenticalTracked(b *testing.B) { benchChunkIdentical(b, true) }

func benchChunkIdentical(b *testing.B, tracked bool) {
	s, tbl := benchSink(b), benchTable()
	c := &sink.Chunk{Table: tbl, Rows: benchRows(0), Changed: tracking(tracked)}
	batch := &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}
	if err := s.Apply(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.Apply(b.Context(), batch); err != nil {
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
	s, tbl := benchSink(b), benchTable()
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

// BenchmarkCopyBaseline is plain COPY into the same table, one transaction
// per chunk: the floor the chunk path is measured against.
func BenchmarkCopyBaseline(b *testing.B) {
	s := benchSink(b)
	conn, err := pgx.ConnectConfig(b.Context(), s.cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	ts, _ := newTableSQL(benchTable())
	for i := range b.N {
		data, _, _ := copyData(ts, benchRows(i*benchChunk))
		if _, err := conn.PgConn().CopyFrom(b.Context(), bytes.NewReader(data), "COPY bench FROM STDIN"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkChunkAfterManyTables applies re-backfill chunks (through the
// staging table) to one table after 400 others were backfilled on the same
// sink: the chunk's commit must not pay for the tables done before it.
func BenchmarkChunkAfterManyTables(b *testing.B) {
	s, tbl := benchSink(b), benchTable()
	for i := range 300 {
		other := &change.Table{ID: change.TableID{Schema: "public", Name: "done" + strconv.Itoa(i)},
			Columns: benchTable().Columns, Key: []int{0}}
		if err := s.EnsureTable(b.Context(), other); err != nil {
			b.Fatal(err)
		}
		for range 2 { // the second chunk goes through the staging table
			c := &sink.Chunk{Table: other, Rows: benchRows(0)[:10]}
			if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	rows := benchRows(0)
	c := &sink.Chunk{Table: tbl, Rows: rows}
	if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		for _, r := range rows { // every row changed: the set-based path, through the staging table
			r[2] = change.Text(strconv.Itoa(i) + ".00")
		}
		c := &sink.Chunk{Table: tbl, Rows: rows}
		if err := s.Apply(b.Context(), &sink.Batch{Stream: "b", Position: 1, Ops: []sink.Op{{Chunk: c}}}); err != nil {
			b.Fatal(err)
		}
	}
}
