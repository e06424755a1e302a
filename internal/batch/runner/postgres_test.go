package runner

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgDB creates a database of its own for a test, with the given schema, and
// returns a connection to it for checks and its runner Connection.
var dbSeq atomic.Int64

func pgDB(t *testing.T, schema string) (*pgx.Conn, *Connection) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("runner_%d_%s", dbSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())))
	name = name[:min(len(name), 63)]
	dsn, err := server.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if schema != "" {
		if _, err := conn.Exec(ctx, schema); err != nil {
			t.Fatal(err)
		}
	}
	return conn, &Connection{Name: "warehouse", Type: ConnPostgres, DSN: dsn}
}

// sessions counts the sessions tagged tag.
func sessions(t *testing.T, conn *pgx.Conn, tag, state string) int {
	t.Helper()
	var n int
	err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND ($2 = '' OR state = $2)`, tag, state).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPostgresOutputs(t *testing.T) {
	t.Parallel()
	db, conn := pgDB(t, "CREATE TABLE src(day date, n int)")
	log := NewLog(0)
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: "tidemark-outputs", Script: `
CREATE TABLE daily(day date PRIMARY KEY, total bigint);
INSERT INTO src VALUES ('2024-01-01', 2), ('2024-01-01', 3), ('2024-01-02', 4);
DO $$ BEGIN RAISE NOTICE 'loading %', 'daily'; END $$;
INSERT INTO daily SELECT day, sum(n) FROM src GROUP BY day;
SELECT count(*) AS days, sum(total) AS total, NULL::text AS absent, current_setting('application_name') AS app FROM daily;
SELECT day FROM daily WHERE false; -- no rows: the outputs stay those of the SELECT before
DELETE FROM src WHERE n = 2;
`}, log, nil)
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, log %q", res, log)
	}
	want := map[string]string{"days": "2", "total": "9", "absent": "", "app": "tidemark-outputs"}
	if !reflect.DeepEqual(res.Outputs, want) {
		t.Fatalf("outputs %q, want %q", res.Outputs, want)
	}
	for _, line := range []string{"statement 2: INSERT 0 3\n", "NOTICE: loading daily\n", "statement 5: SELECT 1\n", "statement 7: DELETE 1\n"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log %q lacks %q", log, line)
		}
	}
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM src").Scan(&n); err != nil || n != 2 {
		t.Fatalf("committed rows: %d, %v", n, err)
	}
}

func TestPostgresErrorRollsBack(t *testing.T) {
	t.Parallel()
	db, conn := pgDB(t, "CREATE TABLE t(a int)")
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: "tidemark-rollback",
		Script: "INSERT INTO t VALUES (1);\nCREATE TABLE u(b int);\nINSERT INTO missing VALUES (2);"}, nil, nil)
	if res.Err == nil || res.ExitCode != -1 {
		t.Fatalf("result %+v", res)
	}
	if msg := res.Err.Error(); !strings.Contains(msg, "statement 3 (line 3): ") || !strings.Contains(msg, "SQLSTATE 42P01") {
		t.Fatalf("error %q", msg)
	}
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after rollback: %d, %v", n, err)
	}
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM pg_class WHERE relname = 'u'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("table created by a rolled-back script: %d, %v", n, err)
	}
}

func TestPostgresScriptMayNotEndTransaction(t *testing.T) {
	t.Parallel()
	_, conn := pgDB(t, "")
	for _, script := range []string{"SELECT 1; COMMIT", "SELECT 1; ROLLBACK; SELECT 2", "COMMIT; BEGIN; SELECT 1"} {
		res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Script: script}, nil, nil)
		if res.Err == nil || !strings.Contains(res.Err.Error(), "may not use") {
			t.Errorf("%s: result %+v", script, res)
		}
	}
}

func TestPostgresTimeoutCancels(t *testing.T) {
	t.Parallel()
	db, conn := pgDB(t, "CREATE TABLE t(a int)")
	const tag = "tidemark-timeout"
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: tag, Timeout: 300 * time.Millisecond,
		Script: "INSERT INTO t VALUES (1); SELECT pg_sleep(60)"}, nil, nil)
	// Usually the server acknowledges the cancel request (SQLSTATE 57014);
	// on a loaded machine it may take longer than the shortened
	// GracePeriod, and the connection is dropped instead.
	if !errors.Is(res.Err, ErrTimeout) || !strings.HasPrefix(res.Err.Error(), "cancelled by timeout after 300ms: ") {
		t.Fatalf("result %+v", res)
	}
	// The session was closed; its backend exits right after.
	waitFor(t, "the session to end", func() bool { return sessions(t, db, tag, "") == 0 })
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after a timed-out script: %d, %v", n, err)
	}
}

func TestPostgresContextCancel(t *testing.T) {
	t.Parallel()
	db, conn := pgDB(t, "")
	const tag = "tidemark-ctx-cancel"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result)
	go func() {
		done <- Run(ctx, Spec{Type: TypeSQL, Conn: conn, Tag: tag, Script: "SELECT pg_sleep(60)"}, nil, nil)
	}()
	waitFor(t, "the query to run", func() bool { return sessions(t, db, tag, "active") == 1 })
	cancel()
	if res := <-done; !errors.Is(res.Err, ErrCancelled) {
		t.Fatalf("result %+v", res)
	}
}

func TestCancelSQLTerminatesSession(t *testing.T) {
	t.Parallel()
	db, conn := pgDB(t, "CREATE TABLE t(a int)")
	const tag = "tidemark-i123-a2"
	done := make(chan Result)
	go func() {
		done <- Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: tag,
			Script: "INSERT INTO t VALUES (1); SELECT pg_sleep(60)"}, nil, nil)
	}()
	waitFor(t, "the query to run", func() bool { return sessions(t, db, tag, "active") == 1 })
	n, err := CancelSQL(context.Background(), *conn, tag)
	if err != nil || n != 1 {
		t.Fatalf("CancelSQL = %d, %v", n, err)
	}
	if got := sessions(t, db, tag, ""); got != 0 {
		t.Fatalf("%d sessions left after CancelSQL", got)
	}
	res := <-done
	if res.Err == nil || !strings.Contains(res.Err.Error(), "57P01") {
		t.Fatalf("result %+v", res)
	}
	var rows int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("rows after a terminated script: %d, %v", rows, err)
	}
	// Nothing left to cancel.
	if n, err := CancelSQL(context.Background(), *conn, tag); err != nil || n != 0 {
		t.Fatalf("second CancelSQL = %d, %v", n, err)
	}
}

func TestPostgresTagChecked(t *testing.T) {
	t.Parallel()
	conn := &Connection{Name: "warehouse", Type: ConnPostgres, DSN: server.DSN("postgres")}
	long := strings.Repeat("x", 64)
	if res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: long, Script: "SELECT 1"}, nil, nil); res.Err == nil {
		t.Fatal("Run accepted a tag PostgreSQL would truncate")
	}
	if _, err := CancelSQL(context.Background(), *conn, ""); err == nil {
		t.Fatal("CancelSQL accepted an empty tag, which would match untagged sessions")
	}
}

// Statements with arguments run one by one with the extended protocol,
// between groups of plain statements (a DO block among them); arguments
// arrive as data, numbering and error lines follow the whole script.
func TestPostgresStatementsWithArguments(t *testing.T) {
	t.Parallel()
	db, conn := pgDB(t, "CREATE TABLE t(a int); CREATE TABLE got(v text, d date)")
	value := "'); DROP TABLE t; --\nünï"
	log := NewLog(0)
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: "tidemark-args", Statements: []Statement{
		{SQL: "DO $$ BEGIN RAISE NOTICE 'before'; END $$; INSERT INTO t VALUES (1);", Line: 1},
		{SQL: "\nINSERT INTO got VALUES ($1, $2);", Args: []string{value, "2025-01-02"}, Line: 1},
		{SQL: "\nSELECT v AS got FROM got WHERE d = $1", Args: []string{"2025-01-02"}, Line: 2},
	}}, log, nil)
	if res.Err != nil {
		t.Fatalf("result %+v, log %q", res, log)
	}
	if res.Outputs["got"] != value {
		t.Errorf("outputs %q", res.Outputs)
	}
	for _, line := range []string{"NOTICE: before\n", "statement 2: INSERT 0 1\n", "statement 3: INSERT 0 1\n", "statement 4: SELECT 1\n"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log %q lacks %q", log, line)
		}
	}
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("table t: %d, %v", n, err)
	}

	res = Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Tag: "tidemark-args-err", Statements: []Statement{
		{SQL: "SELECT 1;", Line: 1},
		{SQL: "\n\nINSERT INTO missing VALUES ($1)", Args: []string{"x"}, Line: 1},
	}}, nil, nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "statement 2 (line 3): ") {
		t.Fatalf("error %v, want statement 2 on line 3", res.Err)
	}
}
