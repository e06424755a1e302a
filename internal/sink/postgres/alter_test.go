package postgres

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

func TestAlter(t *testing.T) {
	sinktest.RunAlter(t, func(t *testing.T) sink.Sink { return open(t, newDB(t)) })
}

// queryCount counts the statements a connection sends.
type queryCount struct{ n atomic.Int64 }

func (q *queryCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestCheckOfJustCreatedTable: the check that follows EnsureTable's
// creation of a table, from the same shape, asks the destination nothing;
// any other check asks, including the next one of that table.
func TestCheckOfJustCreatedTable(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	count := &queryCount{}
	s.cfg.Tracer = count
	s.conn.Close(t.Context()) // the next statement reconnects, traced
	tbl := table()
	tbl.Columns[4].Type, tbl.Columns[5].Type = "text", "integer" // no types of the test's own
	check := func(what string, tb *change.Table, wantQueries bool) {
		t.Helper()
		before := count.n.Load()
		c, err := s.CheckTable(t.Context(), tb)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Exists || len(c.Steps) != 0 || len(c.Problems) != 0 {
			t.Errorf("%s: %+v", what, c)
		}
		if asked := count.n.Load() > before; asked != wantQueries {
			t.Errorf("%s: asked the destination %v, want %v", what, asked, wantQueries)
		}
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	check("the check right after the create", tbl, false)
	check("the next check", tbl, true)
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	check("a check after an EnsureTable that found the table", tbl, true)

	// A table another session made between the look and the create is
	// not the sink's own: it is checked.
	other := *tbl
	other.ID.Name = "made_elsewhere"
	ts, err := s.table(&other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, dsn).Exec(t.Context(), `CREATE TABLE app.made_elsewhere (id int)`); err != nil {
		t.Fatal(err)
	}
	if created, err := s.createTable(t.Context(), &other, ts); err != nil || created {
		t.Errorf("create of a table made elsewhere: created %v, error %v; want false, none", created, err)
	}
}
