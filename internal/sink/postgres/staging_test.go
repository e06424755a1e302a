package postgres

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// TestStagingTablesBounded checks that backfilling many tables one after
// another leaves at most maxStaging staging tables on the sink's session:
// PostgreSQL empties every one of them at each chunk commit, so a chunk
// commit would otherwise cost more with every table done. A table whose
// staging table was dropped gets a new one, and a rolled-back batch leaves
// the sink's record of them true.
func TestStagingTablesBounded(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var pid int
	if err := s.conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	staging := func() int { return countStaging(t, conn) }
	tables := make([]*change.Table, 3*maxStaging)
	for i := range tables {
		tables[i] = &change.Table{
			ID:      change.TableID{Schema: "public", Name: fmt.Sprintf("t%02d", i)},
			Columns: []change.Column{{Name: "id", Type: "integer"}, {Name: "v", Type: "text"}},
			Key:     []int{0},
		}
		if err := s.EnsureTable(t.Context(), tables[i]); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(v string) []change.Row {
		var out []change.Row
		for id := 1; id <= 50; id++ {
			out = append(out, change.Row{change.Text(strconv.Itoa(id)), change.Text(v)})
		}
		return out
	}
	apply := func(tbl *change.Table, v string) error {
		// Twice: the second chunk finds its range filled and goes
		// through the staging table.
		for range 2 {
			b := &sink.Batch{Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: rows(v)}}}}
			if err := s.Apply(t.Context(), b); err != nil {
				return err
			}
			v += "'"
		}
		return nil
	}
	for i, tbl := range tables {
		if err := apply(tbl, "a"); err != nil {
			t.Fatal(err)
		}
		if n, want := staging(), min(i+1, maxStaging); n != want {
			t.Fatalf("after %d tables: %d staging tables on the session, want %d", i+1, n, want)
		}
	}
	// The first table's staging table was dropped long ago: it comes back.
	if err := apply(tables[0], "b"); err != nil {
		t.Fatal(err)
	}
	if got := query(t, conn, `SELECT DISTINCT v FROM t00`); len(got) != 1 || got[0] != "b'" {
		t.Errorf("t00 holds %q after a chunk through a re-created staging table, want b'", got)
	}
	// A batch that creates a staging table (dropping another) and then
	// fails rolls both back; the sink's record must follow, or it would
	// skip creating a table it believes exists.
	bad := &sink.Batch{Ops: []sink.Op{
		{Chunk: &sink.Chunk{Table: tables[1], Rows: rows("c")}},
		{Chunk: &sink.Chunk{Table: tables[1], Rows: []change.Row{{change.Text("x"), change.Text("c")}}}},
	}}
	if err := s.Apply(t.Context(), bad); err == nil {
		t.Fatal("a chunk with a non-integer key was applied")
	}
	// Again with a filtered chunk first, which reads nothing before it
	// makes its staging table. The creations and drops were in the
	// batches' transactions (which open with their first round trip, not
	// before): the session holds what the sink records.
	bad.Ops[0].Chunk = &sink.Chunk{Table: tables[2], Rows: rows("c"), Keep: true}
	if err := s.Apply(t.Context(), bad); err == nil {
		t.Fatal("a chunk with a non-integer key was applied")
	}
	if held, recorded := stagingNames(t, conn), recordedStaging(s); !slices.Equal(held, recorded) {
		t.Errorf("after a rolled-back batch the session holds staging tables %q, the sink records %q", held, recorded)
	}
	for _, tbl := range tables[:maxStaging+2] {
		if err := apply(tbl, "d"); err != nil {
			t.Fatalf("after a rolled-back batch: %v", err)
		}
	}
	if n := staging(); n != maxStaging {
		t.Errorf("%d staging tables on the session after the rollback, want %d", n, maxStaging)
	}
}

// recordedStaging are the staging tables the sink records, sorted.
func recordedStaging(s *Sink) []string {
	var names []string
	for _, id := range s.staging.order {
		names = append(names, stagingName(id))
	}
	slices.Sort(names)
	return names
}

// stagingNames are the staging tables of every temporary schema, sorted,
// as stagingName names them.
func stagingNames(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	return query(t, conn, `SELECT 'pg_temp."' || c.relname || '"' FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relpersistence = 't' AND n.nspname LIKE 'pg_temp_%' AND c.relname LIKE '\_tidemark\_chunk\_%' ORDER BY 1`)
}

// countStaging counts the staging tables of every temporary schema. The
// sink session's own is pg_temp_N with N its backend's proc number, which
// another session cannot name; the sink is the only session making them.
func countStaging(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	n, err := strconv.Atoi(query(t, conn, `SELECT count(*)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relpersistence = 't' AND n.nspname LIKE 'pg_temp_%' AND c.relname LIKE '\_tidemark\_chunk\_%'`)[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFirstChunkNeedsNoStaging: a chunk into an empty range is COPYed
// straight into the table, with no staging table made for it (in a stream
// of many small tables, making one and evicting another was most of a
// table's write); a chunk over rows that all differ goes through one.
func TestFirstChunkNeedsNoStaging(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	tbl := &change.Table{
		ID:      change.TableID{Schema: "public", Name: "small"},
		Columns: []change.Column{{Name: "id", Type: "integer"}, {Name: "v", Type: "text"}},
		Key:     []int{0},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	apply := func(v string) {
		t.Helper()
		var rows []change.Row
		for id := 1; id <= 100; id++ {
			rows = append(rows, change.Row{change.Text(strconv.Itoa(id)), change.Text(v)})
		}
		if err := s.Apply(t.Context(), &sink.Batch{Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: rows}}}}); err != nil {
			t.Fatal(err)
		}
		if got := query(t, conn, `SELECT count(*)::text || ' ' || min(v) || ' ' || max(v) FROM public.small`)[0]; got != "100 "+v+" "+v {
			t.Fatalf("after a chunk of 100 rows of %q: %s", v, got)
		}
	}
	apply("first")
	if n := countStaging(t, conn); n != 0 {
		t.Fatalf("%d staging tables after a chunk into an empty table, want none", n)
	}
	apply("second")
	if n := countStaging(t, conn); n != 1 {
		t.Fatalf("%d staging tables after a chunk over 100 differing rows, want 1", n)
	}
}

// TestStagingJournal: what a rolled-back transaction did to the staging
// tables is undone in the bookkeeping, and only that.
func TestStagingJournal(t *testing.T) {
	a, b, c := change.TableID{Name: "a"}, change.TableID{Name: "b"}, change.TableID{Name: "c"}
	create := func(st *stagingTables, id change.TableID) {
		st.order, st.created = append(st.order, id), append(st.created, id)
	}
	var st stagingTables
	create(&st, a)
	st.committed()
	// Created, then evicted in the same transaction: gone after a rollback.
	create(&st, b)
	st.drop(b)
	// Made again (dropped, then created): still there after a rollback.
	st.drop(a)
	create(&st, a)
	create(&st, c)
	st.rolledBack()
	if fmt.Sprint(st.order) != fmt.Sprint([]change.TableID{a}) {
		t.Errorf("after the rollback the session holds %v, want [%v]", st.order, a)
	}
	// Committed: the evicted one stays gone.
	create(&st, b)
	st.drop(a)
	st.committed()
	if st.has(a) || !st.has(b) {
		t.Errorf("after the commit the session holds %v, want [%v]", st.order, b)
	}
}
