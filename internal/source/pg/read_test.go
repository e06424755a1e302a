package pg

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// TestPoolReset: what one use of a pooled connection leaves in its session
// (a setting, an advisory lock, a temporary table, a prepared statement)
// is gone when any connection of the pool is next acquired.
func TestPoolReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, _ := testDB(t, "CREATE TABLE d (id int PRIMARY KEY, day date)")
	src := openSource(t, dsn, ReadTimeouts{})
	conn, err := src.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	poisoned := conn.Conn().PgConn().PID()
	for _, sql := range []string{
		"SELECT set_config('DateStyle', 'SQL, DMY', false), set_config('bytea_output', 'escape', false)",
		"SELECT pg_advisory_lock(42)",
		"CREATE TEMP TABLE poison (x int)",
		"PREPARE poison AS SELECT 1",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	conn.Release()

	// Hold every connection the pool may lend at once: the poisoned one
	// is among them.
	found := false
	for range src.Pool().Config().MaxConns {
		c, err := src.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		found = found || c.Conn().PgConn().PID() == poisoned
		var dateStyle, bytea string
		var locks int
		var temp, prepared bool
		err = c.QueryRow(ctx, `SELECT current_setting('DateStyle'), current_setting('bytea_output'),
			(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::int,
			to_regclass('pg_temp.poison') IS NOT NULL,
			EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = 'poison')`).Scan(&dateStyle, &bytea, &locks, &temp, &prepared)
		if err != nil {
			t.Fatal(err)
		}
		if dateStyle != "ISO, MDY" || bytea != "hex" || locks != 0 || temp || prepared {
			t.Errorf("connection %d (poisoned: %v) holds DateStyle %q, bytea_output %q, %d advisory locks, temp table %v, prepared statement %v",
				c.Conn().PgConn().PID(), c.Conn().PgConn().PID() == poisoned, dateStyle, bytea, locks, temp, prepared)
		}
	}
	if !found {
		t.Errorf("the poisoned connection %d was not lent again: the test proves nothing", poisoned)
	}
}

// TestReadsRollBack: a read transaction ends with ROLLBACK, so what SQL
// run in it did is undone. The table's row security policy creates a large
// object for each row read, which READ ONLY does not prevent.
func TestReadsRollBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	role := fmt.Sprintf("reader%d", dbSeq.Add(1))
	dsn, conn := testDB(t, fmt.Sprintf(`
		CREATE ROLE %[1]s LOGIN;
		CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g;
		CREATE FUNCTION side_effect() RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN PERFORM lo_from_bytea(0, '\x00'); RETURN true; END $$;
		ALTER TABLE t OWNER TO %[1]s;
		ALTER TABLE t ENABLE ROW LEVEL SECURITY; ALTER TABLE t FORCE ROW LEVEL SECURITY;
		CREATE POLICY side ON t USING (side_effect())`, role))
	t.Cleanup(func() { conn.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", role)) })
	src := openSource(t, strings.Replace(dsn, "postgres@", role+"@", 1), ReadTimeouts{})
	tbl, err := src.Describe(ctx, change.TableID{Schema: "public", Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := src.ReadChunk(ctx, tbl, ReadOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunk.Rows) != 10 {
		t.Fatalf("read %d rows, want 10", len(chunk.Rows))
	}
	var objects int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&objects); err != nil {
		t.Fatal(err)
	}
	if objects != 0 {
		t.Errorf("the chunk read left %d large objects: its transaction was committed", objects)
	}
}

// TestStatementTimeout: a read the source cancels for its statement
// timeout is a StatementTimeoutError naming the timeout, and the lock and
// statement timeouts are those configured.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	role := fmt.Sprintf("slow%d", dbSeq.Add(1))
	dsn, conn := testDB(t, fmt.Sprintf(`
		CREATE ROLE %[1]s LOGIN;
		CREATE TABLE t (id int PRIMARY KEY);
		INSERT INTO t VALUES (1);
		CREATE FUNCTION slow() RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(60); RETURN true; END $$;
		ALTER TABLE t OWNER TO %[1]s;
		ALTER TABLE t ENABLE ROW LEVEL SECURITY; ALTER TABLE t FORCE ROW LEVEL SECURITY;
		CREATE POLICY slow ON t USING (slow())`, role))
	t.Cleanup(func() { conn.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", role)) })
	timeouts := ReadTimeouts{Statement: 200 * time.Millisecond, Lock: 150 * time.Millisecond, IdleInTransaction: 7 * time.Second}
	src := openSource(t, strings.Replace(dsn, "postgres@", role+"@", 1), timeouts)
	tbl, err := src.Describe(ctx, change.TableID{Schema: "public", Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = src.ReadChunk(ctx, tbl, ReadOptions{Limit: 10})
	if !IsStatementTimeout(err) || IsPermanent(err) || !strings.Contains(err.Error(), "statement timeout, 200ms") {
		t.Fatalf("read: %v, want a statement timeout of 200ms", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the read took %s", d)
	}

	var settings string
	err = src.readAt(ctx, repeatableRead, func(tx *readTx) error {
		return tx.QueryRow(ctx, `SELECT concat_ws(' ', current_setting('statement_timeout'), current_setting('lock_timeout'),
			current_setting('idle_in_transaction_session_timeout'), current_setting('transaction_read_only'),
			current_setting('transaction_isolation'))`).Scan(&settings)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "200ms 150ms 7s on repeatable read"; settings != want {
		t.Errorf("a read transaction has %q, want %q", settings, want)
	}
}
