package pg

import (
	"context"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// BenchmarkChunkFixedCost reads a one-row chunk: what a chunk read costs
// whatever its rows (the transaction, the lock, the snapshot and the
// table's columns), as each of a thousand small tables pays it.
func BenchmarkChunkFixedCost(b *testing.B) {
	src, tbl := benchSource(b, 1)
	ctx := context.Background()
	for b.Loop() {
		if _, err := src.ReadChunk(ctx, tbl, ReadOptions{Limit: 10_000}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSumRange sums a range of 10,000 rows as a verify does: found by
// its size (the search for its last key first), or bounded by a chunk's
// high key as a trailing verify's is.
func BenchmarkSumRange(b *testing.B) {
	src, tbl := benchSource(b, 20_000)
	ctx := context.Background()
	after, upto := change.Key{change.Text("5000")}, change.Key{change.Text("15000")}
	for _, bc := range []struct {
		name string
		opt  ReadOptions
	}{
		{"by size", ReadOptions{After: after, Limit: 10_000}},
		{"bounded", ReadOptions{After: after, Upto: upto}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				c, err := src.SumRange(ctx, tbl, bc.opt)
				if err != nil || c.Sum.Rows != 10_000 {
					b.Fatalf("%+v, %v", c.Sum, err)
				}
			}
		})
	}
}

// benchSource is a source on a table of the backfill benchmark's shape
// with rows rows.
func benchSource(b testing.TB, rows int) (*Source, *change.Table) {
	b.Helper()
	dsn, conn := testDB(b, `CREATE TABLE o (id bigint PRIMARY KEY, customer_id int, status text,
		amount numeric(12,2), note text, payload jsonb, created_at timestamptz, updated_at timestamptz)`)
	if _, err := conn.Exec(context.Background(), `INSERT INTO o SELECT g, g % 5000, 'paid', g / 100.0, 'order ' || g,
		jsonb_build_object('qty', g % 9), now(), now() FROM generate_series(1, $1::int) g`, rows); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "VACUUM (FREEZE, ANALYZE) o"); err != nil {
		b.Fatal(err)
	}
	src := openSource(b, dsn, ReadTimeouts{})
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: "public", Name: "o"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return src, tbl
}
