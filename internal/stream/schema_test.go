package stream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// Schema changes on the source while streaming and while backfilling, on
// both destinations (docs/schema-changes.md).

var schemaDests = []string{"postgres", "sqlite"}

// schemaWaitColumns waits until the stream streams table with these columns.
func (e *env) schemaWaitColumns(table string, cols ...string) {
	e.t.Helper()
	var got []string
	e.waitFor(fmt.Sprintf("%s with columns %v", table, cols), func() bool {
		t := e.s.lookup(change.TableID{Schema: "public", Name: table})
		got = nil
		if t != nil {
			for _, c := range t.Columns {
				got = append(got, c.Name)
			}
		}
		return slices.Equal(got, cols)
	}, func() string { return fmt.Sprintf("columns %v", got) })
}

// schemaDestColumns lists a destination table's columns with their types as the
// destination declares them.
func (e *env) schemaDestColumns(table string) []string {
	e.t.Helper()
	return e.schemaDestColumnsOf(change.TableID{Schema: "public", Name: table})
}

// schemaDestColumnsOf is schemaDestColumns for a table of any schema (a
// MySQL source's database).
func (e *env) schemaDestColumnsOf(id change.TableID) []string {
	e.t.Helper()
	var query string
	if e.dest == "postgres" {
		query = `SELECT attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = (quote_ident('` + id.Schema + `') || '.' || quote_ident('` + id.Name + `'))::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`
	} else {
		name := id.Name
		if id.Schema != "public" {
			name = id.Schema + "." + id.Name
		}
		query = `SELECT name || ' ' || type FROM pragma_table_info('` + name + `') ORDER BY cid`
	}
	return e.schemaDestQuery(query)
}

// schemaDestQuery runs a query on the destination and returns its first column.
func (e *env) schemaDestQuery(query string) []string {
	e.t.Helper()
	var out []string
	if e.dest == "postgres" {
		conn, err := pgx.Connect(e.ctx, e.dstDSN)
		if err != nil {
			e.t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(e.ctx, query)
		if err != nil {
			e.t.Fatal(err)
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			e.t.Fatal(err)
		}
		return out
	}
	db := e.schemaSQLite()
	rows, err := db.QueryContext(e.ctx, query)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// schemaSQLite opens the SQLite destination besides the stream's connection.
func (e *env) schemaSQLite() *sql.DB {
	e.t.Helper()
	db, err := sql.Open("sqlite", e.cfg.Destination.Path+"?_busy_timeout=10000")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return db
}

// schemaWaitFailed waits until an object is failed and returns its reason.
func (e *env) schemaWaitFailed(table string) string {
	e.t.Helper()
	var o store.Object
	e.waitFor(table+" failed", func() bool {
		o = e.object(table)
		return o.Status == StatusFailed
	}, func() string { return fmt.Sprintf("status %q reason %q", o.Status, o.Reason) })
	return o.Reason
}

func schemaWantIn(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Fatalf("%s %q does not say %q", what, s, p)
		}
	}
}

// TestSchemaAddColumnStreaming: columns added on the source, with and
// without a default, reach the destination; the rows it held before get
// the default, as on the source, without a backfill.
func TestSchemaAddColumnStreaming(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE t (id int PRIMARY KEY, v text);
				INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 50) g;`})
			e.start()
			e.waitLoaded("t")
			e.exec(`ALTER TABLE t ADD COLUMN plain int`)
			e.exec(`ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7, ADD COLUMN s text DEFAULT 'it''s', ADD COLUMN f float8 DEFAULT 0.1`)
			e.exec(`INSERT INTO t VALUES (51, 'new', 5, 8, 'z', 2.5)`)
			e.exec(`UPDATE t SET plain = 1 WHERE id = 2`)
			e.exec(`DELETE FROM t WHERE id = 3`)
			e.schemaWaitColumns("t", "id", "v", "plain", "d", "s", "f")
			e.assertConverged("t")
			if o := e.object("t"); o.Status != StatusCompleted || o.BackfillID == 0 {
				t.Fatalf("object after the schema change: %+v", o)
			}
			recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "t"})
			if err != nil || len(recs) != 1 {
				t.Fatalf("backfills of t: %+v %v, want only the first one", recs, err)
			}
		})
	}
}

// TestSchemaChangesDuringBackfill: columns added (with and without a
// default), renamed and widened while a backfill copies the table; the
// backfill completes and the destination equals the source.
func TestSchemaChangesDuringBackfill(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: manual, chunk_size: 20, rows_per_second: 400}", setup: `
				CREATE TABLE t (id int PRIMARY KEY, n int, s varchar(10), old text);
				INSERT INTO t SELECT g, g, 's' || g, 'o' || g FROM generate_series(1, 1000) g;`})
			e.start()
			if _, err := e.s.Initiate(e.ctx, []change.TableID{{Schema: "public", Name: "t"}}, store.StartedByAPI, nil); err != nil {
				t.Fatal(err)
			}
			e.waitFor("a few chunks written", func() bool {
				recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "t"})
				return err == nil && len(recs) == 1 && recs[0].Chunks >= 3
			})
			if o := e.object("t"); o.Status != StatusActive {
				t.Fatalf("backfill not active when the schema changes: %+v", o)
			}
			e.exec(`ALTER TABLE t ADD COLUMN plain int, ADD COLUMN d text DEFAULT 'dflt'`)
			e.exec(`UPDATE t SET plain = id WHERE id % 100 = 0`)
			e.exec(`ALTER TABLE t RENAME COLUMN old TO new`)
			e.exec(`ALTER TABLE t ALTER COLUMN n TYPE bigint, ALTER COLUMN s TYPE text`)
			e.exec(`INSERT INTO t VALUES (1001, 1099511627776, 'a longer text than ten', 'n', 1, 'x')`)
			e.exec(`UPDATE t SET new = 'renamed' WHERE id IN (1, 999)`)
			e.waitLoaded("t")
			e.schemaWaitColumns("t", "id", "n", "s", "new", "plain", "d")
			e.assertConverged("t")
			e.schemaDestTypes("t", map[string]string{"n": "bigint", "s": "text"})
		})
	}
}

// schemaDestTypes checks destination column types (PostgreSQL: the
// source's types; SQLite: the storage class they map to).
func (e *env) schemaDestTypes(table string, want map[string]string) {
	e.t.Helper()
	cols := e.schemaDestColumns(table)
	for name, typ := range want {
		if e.dest == "sqlite" {
			typ = map[string]string{"bigint": "INTEGER", "integer": "INTEGER", "text": "TEXT", "double precision": "REAL"}[typ]
		}
		if !slices.Contains(cols, name+" "+typ) {
			e.t.Fatalf("destination columns %v: want %s %s", cols, name, typ)
		}
	}
}

// TestSchemaRenameAndWiden: a renamed column keeps its values under the
// new name; int to bigint and varchar(10) to text are widened in place.
func TestSchemaRenameAndWiden(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE w (id int PRIMARY KEY, n int, s varchar(10), old text, r real);
				INSERT INTO w SELECT g, g * 1000, 's' || g, 'o' || g, g / 10.0 FROM generate_series(1, 30) g;`})
			e.start()
			e.waitLoaded("w")
			e.exec(`ALTER TABLE w RENAME COLUMN old TO new`)
			e.exec(`UPDATE w SET new = 'after rename' WHERE id = 1`)
			e.exec(`ALTER TABLE w ALTER COLUMN n TYPE bigint`)
			e.exec(`ALTER TABLE w ALTER COLUMN s TYPE text, ALTER COLUMN r TYPE double precision`)
			e.exec(`INSERT INTO w VALUES (31, 9223372036854775807, 'much longer than ten characters', 'x', 0.1)`)
			e.schemaWaitColumns("w", "id", "n", "s", "new", "r")
			e.assertConverged("w")
			e.schemaDestTypes("w", map[string]string{"n": "bigint", "s": "text", "new": "text", "r": "double precision"})
			if slices.ContainsFunc(e.schemaDestColumns("w"), func(c string) bool { return strings.HasPrefix(c, "old ") }) {
				t.Fatalf("destination still has the old column: %v", e.schemaDestColumns("w"))
			}
		})
	}
}

// TestSchemaDropColumn: a dropped column stops the object with what to do,
// the stream goes on with the other tables, an initiate is refused until
// the destination matches, and then the backfill brings it back.
func TestSchemaDropColumn(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE a (id int PRIMARY KEY, v text, keep int);
				CREATE TABLE b (id int PRIMARY KEY);
				INSERT INTO a SELECT g, 'v' || g, g FROM generate_series(1, 20) g;`})
			e.start()
			e.waitLoaded("a")
			e.waitLoaded("b")
			e.exec(`ALTER TABLE a DROP COLUMN v`)
			e.exec(`INSERT INTO a VALUES (21, 21)`)
			reason := e.schemaWaitFailed("a")
			schemaWantIn(t, "reason", reason, `column "v" was dropped on the source`, "tidemark backfill initiate "+e.cfg.Name+" public.a")
			e.exec(`INSERT INTO b VALUES (1), (2)`)
			e.assertConverged("b")
			if st := e.s.State(); st.State != store.StateRunning {
				t.Fatalf("stream state %+v, want running", st)
			}
			ids := []change.TableID{{Schema: "public", Name: "a"}}
			_, err := e.s.Initiate(e.ctx, ids, store.StartedByAPI, nil)
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("initiate before the destination matches: %v, want refused", err)
			}
			schemaWantIn(t, "refusal", err.Error(), `destination column "v" is not in the source table`)
			e.execInDest(`ALTER TABLE a DROP COLUMN v`)
			if _, err := e.s.Initiate(e.ctx, ids, store.StartedByAPI, nil); err != nil {
				t.Fatal(err)
			}
			e.waitLoaded("a")
			e.exec(`UPDATE a SET keep = 0 WHERE id = 1`)
			e.assertConverged("a")
		})
	}
}

// TestSchemaNarrowing: a type change the destination cannot follow
// without changing values stops the object with what changed.
func TestSchemaNarrowing(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE n (id int PRIMARY KEY, big bigint, t text);
				CREATE TABLE u (id int PRIMARY KEY, t text);
				INSERT INTO n VALUES (1, 1, 'a'); INSERT INTO u VALUES (1, 'a');`})
			e.start()
			e.waitLoaded("n")
			e.waitLoaded("u")
			e.exec(`ALTER TABLE n ALTER COLUMN big TYPE int`)
			e.exec(`INSERT INTO n VALUES (2, 2, 'b')`)
			schemaWantIn(t, "reason", e.schemaWaitFailed("n"), `column "big" changed type from bigint to integer`)
			e.exec(`ALTER TABLE u ALTER COLUMN t TYPE varchar(5)`)
			e.exec(`INSERT INTO u VALUES (2, 'b')`)
			schemaWantIn(t, "reason", e.schemaWaitFailed("u"), `column "t" changed type from text to character varying(5)`)
		})
	}
}
