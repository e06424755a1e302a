package runner

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplitSQLite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		want   []sqliteStmt
	}{
		{"", nil},
		{" ;; -- nothing\n", nil},
		{"SELECT 1", []sqliteStmt{{"SELECT 1", 1}}},
		{"SELECT 1;\n\nSELECT 2;", []sqliteStmt{{"SELECT 1", 1}, {"SELECT 2", 3}}},
		{"SELECT ';', \"a;b\", [c;d], `e;f` -- g;\n; /* h;\n */ SELECT 'it''s;'",
			[]sqliteStmt{{"SELECT ';', \"a;b\", [c;d], `e;f` -- g;", 1}, {"/* h;\n */ SELECT 'it''s;'", 3}}},
		{"CREATE TEMP TRIGGER t AFTER INSERT ON x BEGIN\n  UPDATE y SET n = n + 1;\n  DELETE FROM z;\nEND;\nSELECT 1",
			[]sqliteStmt{{"CREATE TEMP TRIGGER t AFTER INSERT ON x BEGIN\n  UPDATE y SET n = n + 1;\n  DELETE FROM z;\nEND", 1}, {"SELECT 1", 5}}},
		// END closes a trigger only right after a ';'.
		{"create trigger t after insert on x begin select case when 1 then 2 end; end; select 3",
			[]sqliteStmt{{"create trigger t after insert on x begin select case when 1 then 2 end; end", 1}, {"select 3", 1}}},
		// CREATE TABLE end(…) is no trigger.
		{"CREATE TABLE trig(a); SELECT 1", []sqliteStmt{{"CREATE TABLE trig(a)", 1}, {"SELECT 1", 1}}},
		{"SELECT 'unterminated;", []sqliteStmt{{"SELECT 'unterminated;", 1}}},
	} {
		if got := splitSQLite(tc.script); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitSQLite(%q) = %+v, want %+v", tc.script, got, tc.want)
		}
	}
}

func FuzzSplitSQLite(f *testing.F) {
	f.Add("SELECT 1; SELECT 'a;b'; CREATE TRIGGER t BEGIN SELECT 1; END; -- x")
	f.Fuzz(func(t *testing.T, script string) {
		for _, st := range splitSQLite(script) {
			if st.text == "" || !strings.Contains(script, st.text) || st.line < 1 {
				t.Fatalf("statement %+v of %q", st, script)
			}
		}
	})
}

// sqliteDB creates an empty database file with the given schema.
func sqliteDB(t *testing.T, schema string) (*sql.DB, *Connection) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	return db, &Connection{Name: "local", Type: ConnSQLite, DSN: path}
}

func TestSQLiteOutputs(t *testing.T) {
	t.Parallel()
	db, conn := sqliteDB(t, "CREATE TABLE src(day TEXT, n INTEGER)")
	log := NewLog(0)
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Script: `
CREATE TABLE daily(day TEXT PRIMARY KEY, total INTEGER);
INSERT INTO src VALUES ('2024-01-01', 2), ('2024-01-01', 3), ('2024-01-02', 4);
INSERT INTO daily SELECT day, sum(n) FROM src GROUP BY day;
SELECT count(*) AS days, sum(total) AS total, NULL AS absent FROM daily;
SELECT day FROM daily WHERE 0; -- no rows: the outputs stay those of the SELECT before
DELETE FROM src WHERE n = 2;
`}, log, nil)
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, log %q", res, log)
	}
	want := map[string]string{"days": "2", "total": "9", "absent": ""}
	if !reflect.DeepEqual(res.Outputs, want) {
		t.Fatalf("outputs %q, want %q", res.Outputs, want)
	}
	for _, line := range []string{"statement 2: 3 rows changed\n", "statement 4: 1 rows returned\n", "statement 6: 1 rows changed\n"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log %q lacks %q", log, line)
		}
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM src").Scan(&n); err != nil || n != 2 {
		t.Fatalf("committed rows: %d, %v", n, err)
	}
}

func TestSQLiteErrorRollsBack(t *testing.T) {
	t.Parallel()
	db, conn := sqliteDB(t, "CREATE TABLE t(a INTEGER)")
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Script: "INSERT INTO t VALUES (1);\nCREATE TABLE u(b);\nINSERT INTO missing VALUES (2);"}, nil, nil)
	if res.Err == nil || res.ExitCode != -1 || !strings.Contains(res.Err.Error(), "statement 3 (line 3): ") ||
		!strings.Contains(res.Err.Error(), "no such table: missing") {
		t.Fatalf("result %+v", res)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after rollback: %d, %v", n, err)
	}
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'u'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("table created by a rolled-back script: %d, %v", n, err)
	}
}

func TestSQLiteTrigger(t *testing.T) {
	t.Parallel()
	_, conn := sqliteDB(t, "CREATE TABLE t(a); CREATE TABLE audit(n)")
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Script: `
CREATE TRIGGER count_t AFTER INSERT ON t BEGIN
  INSERT INTO audit VALUES (NEW.a);
END;
INSERT INTO t VALUES (1), (2);
SELECT count(*) AS audited FROM audit`}, nil, nil)
	if res.Err != nil || res.Outputs["audited"] != "2" {
		t.Fatalf("result %+v", res)
	}
}

func TestSQLiteTimeout(t *testing.T) {
	t.Parallel()
	_, conn := sqliteDB(t, "CREATE TABLE t(a)")
	res := Run(context.Background(), Spec{Type: TypeSQL, Conn: conn, Timeout: 200 * time.Millisecond, Script: `
INSERT INTO t VALUES (1);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`}, nil, nil)
	if !errors.Is(res.Err, ErrTimeout) || !strings.HasPrefix(res.Err.Error(), "cancelled by timeout after 200ms") {
		t.Fatalf("result %+v", res)
	}
}

func TestSQLiteNeedsExistingFile(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{filepath.Join(t.TempDir(), "typo.sqlite"), "", "file:x.db?mode=ro"} {
		res := Run(context.Background(), Spec{Type: TypeSQL, Conn: &Connection{Name: "local", Type: ConnSQLite, DSN: dsn}, Script: "SELECT 1"}, nil, nil)
		if res.Err == nil {
			t.Errorf("DSN %q accepted", dsn)
		}
	}
}

func TestCancelSQLiteIsNoop(t *testing.T) {
	t.Parallel()
	n, err := CancelSQL(context.Background(), Connection{Type: ConnSQLite, DSN: "x"}, "tidemark-x")
	if n != 0 || err != nil {
		t.Fatalf("CancelSQL = %d, %v", n, err)
	}
}
