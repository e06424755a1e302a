package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/store"
)

// Schema changes on a MariaDB source, followed from the binlog's table maps
// and DDL statements, into PostgreSQL and SQLite (docs/schema-changes.md,
// MySQL).

// mysqlSchemaEnv starts one MariaDB for a test's subtests and returns, per
// destination, a database made by setup and a stream env on it (not
// started).
func mysqlSchemaEnv(t *testing.T) func(t *testing.T, i int, dest string, setup ...string) (*env, func(...string), string) {
	_, newDB := mysqlSchemaServer(t)
	return newDB
}

// mysqlSchemaServer is mysqlSchemaEnv that also returns the server.
func mysqlSchemaServer(t *testing.T) (*mysqlserver.Server, func(t *testing.T, i int, dest string, setup ...string) (*env, func(...string), string)) {
	ctx := context.Background()
	srv, err := mysqlserver.Start(ctx, mysqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv, func(t *testing.T, i int, dest string, setup ...string) (*env, func(...string), string) {
		db := fmt.Sprintf("ddl%d", i)
		dsn, err := srv.CreateDatabase(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		root, err := srv.Root(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		exec := mysqlExec(t, root)
		exec("USE " + mysqlserver.QuoteIdent(db))
		exec(setup...)
		return mysqlEnv(t, dsn, db, dest), exec, db
	}
}

func mysqlExec(t *testing.T, c *client.Conn) func(...string) {
	return func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// waitColumnsOf waits until the stream streams a table with these columns,
// in any order (a stream restarted after an ADD COLUMN … FIRST has them in
// the source's order, one that followed it live in the order added).
func (e *env) waitColumnsOf(id change.TableID, cols ...string) {
	e.t.Helper()
	var got []string
	cols = slices.Sorted(slices.Values(cols))
	e.waitFor(fmt.Sprintf("%s with columns %v", id, cols), func() bool {
		got = nil
		if t := e.s.lookup(id); t != nil {
			for _, c := range t.Columns {
				got = append(got, c.Name)
			}
		}
		slices.Sort(got)
		return slices.Equal(got, cols)
	}, func() string { return fmt.Sprintf("columns %v", got) })
}

// wantDestColumns checks that the destination table has every column of
// want ("name type" on PostgreSQL, the name alone on SQLite, whose storage
// classes these changes keep) and none named in gone.
func (e *env) wantDestColumns(id change.TableID, want []string, gone ...string) {
	e.t.Helper()
	cols := e.schemaDestColumnsOf(id)
	for _, w := range want {
		if e.dest == "sqlite" {
			w, _, _ = strings.Cut(w, " ")
		}
		if !slices.ContainsFunc(cols, func(c string) bool { return c == w || strings.HasPrefix(c, w+" ") && e.dest == "sqlite" }) {
			e.t.Fatalf("destination columns of %s %v: want %s", id, cols, w)
		}
	}
	for _, g := range gone {
		if slices.ContainsFunc(cols, func(c string) bool { return strings.HasPrefix(c, g+" ") }) {
			e.t.Fatalf("destination columns of %s %v: still %s", id, cols, g)
		}
	}
}

// TestMySQLSchemaChanges: columns added at the end, FIRST and AFTER
// another, a column renamed and columns widened (INT to BIGINT,
// VARCHAR(10) to VARCHAR(50)) on a MariaDB source while the stream runs
// reach the destination at their point of the binlog, without a backfill;
// a dropped column fails that object alone, with what to do, while another
// table goes on streaming.
func TestMySQLSchemaChanges(t *testing.T) {
	newDB := mysqlSchemaEnv(t)
	for i, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			e, exec, db := newDB(t, i, dest,
				"CREATE TABLE w (id INT PRIMARY KEY, n INT, s VARCHAR(10), old VARCHAR(20))",
				"INSERT INTO w SELECT seq, seq * 1000, CONCAT('s', seq), CONCAT('o', seq) FROM seq_1_to_30",
				"CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10), keep INT)",
				"INSERT INTO a SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_20",
				"CREATE TABLE b (id INT PRIMARY KEY)")
			w, a, b := change.TableID{Schema: db, Name: "w"}, change.TableID{Schema: db, Name: "a"}, change.TableID{Schema: db, Name: "b"}
			e.start()
			e.waitLoadedID(w)
			e.waitLoadedID(a)
			e.waitLoadedID(b)
			exec("ALTER TABLE w ADD COLUMN tail INT",
				"ALTER TABLE w ADD COLUMN head INT FIRST, ADD COLUMN mid VARCHAR(5) AFTER n",
				"INSERT INTO w (id, n, s, old, tail, head, mid) VALUES (31, 31, 's31', 'o31', 1, 2, 'm')",
				"UPDATE w SET tail = id, head = -id, mid = 'x' WHERE id <= 3",
				"ALTER TABLE w RENAME COLUMN old TO new",
				"UPDATE w SET new = 'after rename' WHERE id = 1",
				"ALTER TABLE w MODIFY n BIGINT, MODIFY s VARCHAR(50)",
				"INSERT INTO w (id, n, s, new) VALUES (32, 9223372036854775807, 'much longer than ten characters', 'x')",
				"DELETE FROM w WHERE id = 4")
			exec("ALTER TABLE a DROP COLUMN v", "INSERT INTO a VALUES (21, 21)")
			e.waitFailed(a, `column "v" was dropped on the source`, "tidemark backfill initiate "+e.cfg.Name+" "+a.String())
			exec("INSERT INTO b VALUES (1), (2)")
			e.assertConvergedMySQL(b)
			if st := e.s.State(); st.State != store.StateRunning {
				t.Fatalf("stream state %+v, want running", st)
			}
			e.waitColumnsOf(w, "id", "n", "s", "new", "tail", "head", "mid")
			e.assertConvergedMySQL(w)
			e.wantDestColumns(w, []string{"n bigint", "s character varying(50)", "new character varying(20)", "tail integer", "head integer", "mid character varying(5)"}, "old")
			if o := e.objectOf(w); o.Status != StatusCompleted {
				t.Fatalf("w after the schema changes: %+v", o)
			}
			recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "w"})
			if err != nil || len(recs) != 1 {
				t.Fatalf("backfills of w: %+v %v, want only the first one", recs, err)
			}
		})
	}
}

// TestMySQLRestartAcrossDDL: a stream stopped before rows, an ALTER TABLE
// (a column added FIRST, one widened) and more rows restarts from its
// checkpoint before them: the rows written before the ALTER are decoded
// with the columns the binlog's table map gives them, not the catalog's
// now; the destination gets the ALTER and equals the source.
func TestMySQLRestartAcrossDDL(t *testing.T) {
	newDB := mysqlSchemaEnv(t)
	for i, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			e, exec, db := newDB(t, i, dest,
				"CREATE TABLE r (id INT PRIMARY KEY, n INT, s VARCHAR(10))",
				"INSERT INTO r SELECT seq, seq, CONCAT('s', seq) FROM seq_1_to_20")
			r := change.TableID{Schema: db, Name: "r"}
			e.start()
			e.waitLoadedID(r)
			exec("INSERT INTO r VALUES (21, 21, 'live')")
			e.assertConvergedMySQL(r)
			e.stop()

			exec("INSERT INTO r VALUES (22, 22, 'before')",
				"UPDATE r SET s = 'upd', n = -1 WHERE id = 1",
				"ALTER TABLE r ADD COLUMN c INT FIRST, MODIFY n BIGINT",
				"INSERT INTO r (c, id, n, s) VALUES (7, 23, 9223372036854775807, 'after')",
				"UPDATE r SET c = 5, n = n * 1000000000 WHERE id = 2",
				"DELETE FROM r WHERE id = 3")
			e.start()
			e.waitColumnsOf(r, "c", "id", "n", "s")
			e.assertConvergedMySQL(r)
			e.wantDestColumns(r, []string{"c integer", "n bigint", "s character varying(10)"})
			if o := e.objectOf(r); o.Status != StatusCompleted {
				t.Fatalf("r after the restart: %+v", o)
			}
		})
	}
}

// TestMySQLAddColumnDuringBackfill: a column added (and set on some rows)
// while a backfill copies the table; the backfill completes and the
// destination, which got the column, equals the source.
func TestMySQLAddColumnDuringBackfill(t *testing.T) {
	newDB := mysqlSchemaEnv(t)
	for i, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			e, exec, db := newDB(t, i, dest,
				"CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR(10))",
				"INSERT INTO t SELECT seq, seq, CONCAT('s', seq) FROM seq_1_to_1000")
			id := change.TableID{Schema: db, Name: "t"}
			e.cfg.Backfill.Mode, e.cfg.Backfill.ChunkSize, e.cfg.Backfill.RowsPerSecond = "manual", 20, 400
			e.start()
			if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByAPI, nil); err != nil {
				t.Fatal(err)
			}
			e.waitFor("a few chunks written", func() bool {
				recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "t"})
				return err == nil && len(recs) == 1 && recs[0].Chunks >= 3
			})
			if o := e.objectOf(id); o.Status != StatusActive {
				t.Fatalf("backfill not active when the schema changes: %+v", o)
			}
			exec("ALTER TABLE t ADD COLUMN plain INT AFTER id",
				"UPDATE t SET plain = id WHERE id % 100 = 0",
				"INSERT INTO t VALUES (1001, 1, 1001, 'new')",
				"UPDATE t SET s = 'late', plain = 0 WHERE id IN (2, 999)")
			e.waitLoadedID(id)
			e.waitColumnsOf(id, "id", "n", "s", "plain")
			e.assertConvergedMySQL(id)
			e.wantDestColumns(id, []string{"plain integer"})
		})
	}
}
