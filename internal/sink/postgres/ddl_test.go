package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// collatedTable is a table keyed by a text under a MariaDB collation the
// sink compares through a sort key.
func collatedTable(name string) *change.Table {
	return &change.Table{ID: change.TableID{Schema: "app", Name: name}, Key: []int{0},
		Columns: []change.Column{
			{Name: "k", Type: "character varying(20)", TypeOID: 1043, BaseOID: 1043, Native: "varchar(20)", Collation: "utf8mb4_general_ci"},
			{Name: "v", Type: "integer", TypeOID: 23, BaseOID: 23},
		}}
}

// TestCreateWaitsOutARival: when another session has created the same
// table, schema, sort key index or function in a transaction not yet
// committed,
// the sink's CREATE waits for it and then fails with a unique violation of
// a catalog (not duplicate_table); the sink takes that as the object made
// meanwhile, as it does duplicate_table.
func TestCreateWaitsOutARival(t *testing.T) {
	t.Parallel()
	createItems := func(ctx context.Context, s *Sink) error {
		tbl := collatedTable("items")
		tbl.Columns[0].Native, tbl.Columns[0].Collation = "", "C"
		ts, err := s.table(tbl)
		if err != nil {
			return err
		}
		created, err := s.createTable(ctx, tbl, ts)
		if err == nil && created {
			return errors.New("createTable reports it created a table the rival made")
		}
		return err
	}
	cases := []struct {
		name          string
		before, rival string
		create        func(ctx context.Context, s *Sink) error
		wantErr       string // the create fails with this: not the object the rival made
	}{
		{"table", `CREATE SCHEMA app`, `CREATE TABLE app.items (k varchar(20) PRIMARY KEY, v int)`, createItems, ""},
		// A type of the table's name is no table: the create's error stands.
		{"type of the table's name", `CREATE SCHEMA app`, `CREATE TYPE app.items AS (a int)`, createItems, "pg_type_typname_nsp_index"},
		{"schema", ``, `CREATE SCHEMA app`, func(ctx context.Context, s *Sink) error { return s.ensureSchema(ctx, "app") }, ""},
		{"sort key index", `CREATE SCHEMA app; CREATE TABLE app.items (k varchar(20) PRIMARY KEY, v int)`,
			`CREATE UNIQUE INDEX ` + quote((&tableSQL{id: change.TableID{Schema: "app", Name: "items"}}).sortKeyIndexName()) + ` ON app.items (k)`,
			func(ctx context.Context, s *Sink) error {
				tbl := collatedTable("items")
				ts, err := s.table(tbl)
				if err != nil {
					return err
				}
				if err := s.ensureSortKeys(ctx, tbl); err != nil {
					return err
				}
				return s.createSortKeyIndex(ctx, ts)
			}, ""},
		{"sort key function", ``, `CREATE FUNCTION _tidemark."sortkey_utf8mb4_general_ci"(text) RETURNS text LANGUAGE sql IMMUTABLE RETURN $1`,
			func(ctx context.Context, s *Sink) error { return s.ensureSortKeys(ctx, collatedTable("items")) }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dsn := newDB(t)
			s := open(t, dsn)
			defer s.Close()
			if err := s.ensureConn(ctx); err != nil {
				t.Fatal(err)
			}
			pid := s.conn.PgConn().PID()
			rival, watch := connect(t, dsn), connect(t, dsn)
			if c.before != "" {
				if _, err := rival.Exec(ctx, c.before); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := rival.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, c.rival); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.create(ctx, s) }()
			// Commit only once the sink's CREATE waits for the rival's lock,
			// so that it sees the object only as a catalog row being added.
			deadline := time.After(2 * time.Minute)
			for waiting := false; !waiting; {
				select {
				case err := <-done:
					t.Fatalf("the sink's create ended before the rival committed: %v", err)
				case <-deadline:
					t.Fatal("the sink's create never waited for the rival's transaction")
				case <-time.After(5 * time.Millisecond):
				}
				if err := watch.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock' AND wait_event = 'transactionid', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-done
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("create after a rival's commit: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("create after a rival's commit of another object of its name: %v, want an error naming %s", err, c.wantErr)
			}
		})
	}
}

// TestSortKeyIndexRecreated: a table that exists without its sort key
// index (dropped here; an EnsureTable that failed between the table and
// the index leaves the same) gets it from the next EnsureTable; rows the
// source's collation calls equal make that fail with an error that says
// what to do.
func TestSortKeyIndexRecreated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := newDB(t)
	conn := connect(t, dsn)
	s := open(t, dsn)
	defer s.Close()
	tbl := collatedTable("items")
	indexes := func() string {
		return strings.Join(query(t, conn, `SELECT indexname FROM pg_indexes WHERE schemaname = 'app' AND indexname LIKE '\_tidemark\_key\_%'`), ",")
	}
	if err := s.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	made := indexes()
	if made == "" {
		t.Fatal("EnsureTable made no sort key index")
	}
	if _, err := conn.Exec(ctx, `DROP INDEX app.`+quote(made)+`; DROP FUNCTION _tidemark."sortkey_utf8mb4_general_ci"`); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	if got := indexes(); got != made {
		t.Fatalf("sort key index after EnsureTable of the table without it: %q, want %q", got, made)
	}
	// The index makes keys the source calls equal one row: an upsert of
	// "A" over "a" finds it.
	if _, err := conn.Exec(ctx, `INSERT INTO app.items VALUES ('a', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO app.items VALUES ('A', 2)`); err == nil {
		t.Fatal(`"A" went in beside "a": the index does not compare as the source does`)
	}

	if _, err := conn.Exec(ctx, `DROP INDEX app.`+quote(made)+`; INSERT INTO app.items VALUES ('A', 2)`); err != nil {
		t.Fatal(err)
	}
	err := s.EnsureTable(ctx, tbl)
	if err == nil || !strings.Contains(err.Error(), "calls equal") || !strings.Contains(err.Error(), "keep one row of each") || !strings.Contains(err.Error(), "is duplicated") {
		t.Fatalf("EnsureTable over rows the collation calls equal: %v; want an error that says what to do", err)
	}
}

// TestEnsureTableRefusesOtherRelations: a view, materialized view,
// composite type, sequence, index or enum type of the table's name in the
// destination is refused by EnsureTable with an error that names what it
// is and what to do, and no table is made; a table of that name, plain or
// partitioned, is taken.
func TestEnsureTableRefusesOtherRelations(t *testing.T) {
	t.Parallel()
	cases := []struct{ what, ddl string }{
		{"a view", `CREATE TABLE app.other (k varchar(20) PRIMARY KEY, v int); CREATE VIEW app.items AS SELECT * FROM app.other`},
		{"a materialized view", `CREATE MATERIALIZED VIEW app.items AS SELECT 'a'::varchar(20) AS k, 1 AS v`},
		{"a composite type", `CREATE TYPE app.items AS (k varchar(20), v int)`},
		{"a sequence", `CREATE SEQUENCE app.items`},
		{"an index", `CREATE TABLE app.other (k varchar(20) PRIMARY KEY, v int); CREATE INDEX items ON app.other (v)`},
		{"the name of a type", `CREATE TYPE app.items AS ENUM ('a')`},
		{"", `CREATE TABLE app.items (k varchar(20) PRIMARY KEY, v int)`},
		// The name PostgreSQL would give the table's primary key index
		// is taken: it picks another.
		{"", `CREATE TABLE app.other (k int PRIMARY KEY, v int); CREATE INDEX items_pkey ON app.other (v)`},
		{"", `CREATE TABLE app.items (k varchar(20) PRIMARY KEY, v int) PARTITION BY RANGE (k);
			CREATE TABLE app.items_all PARTITION OF app.items DEFAULT`},
	}
	for i, c := range cases {
		t.Run(cmp.Or(c.what, fmt.Sprint("a table ", i)), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dsn := newDB(t)
			conn := connect(t, dsn)
			if _, err := conn.Exec(ctx, "CREATE SCHEMA app; "+c.ddl); err != nil {
				t.Fatal(err)
			}
			s := open(t, dsn)
			defer s.Close()
			tbl := collatedTable("items")
			tbl.Columns[0].Native, tbl.Columns[0].Collation = "", "C"
			err := s.EnsureTable(ctx, tbl)
			if c.what == "" {
				if err != nil {
					t.Fatalf("EnsureTable of an existing table: %v", err)
				}
				return
			}
			want := "app.items in the destination is " + c.what + ", not a table"
			if !errors.Is(err, sink.ErrTableName) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "drop or rename it") {
				t.Fatalf("EnsureTable over %s: %v; want an error saying %q and what to do", c.what, err, want)
			}
			var tables int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'items' AND relkind IN ('r', 'p')`).Scan(&tables); err != nil || tables != 0 {
				t.Errorf("after the refusal %d tables are named items (%v)", tables, err)
			}
		})
	}
}
