package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

// TestSIGKILLWithSQLTaskRunning kills the daemon while a SQL task's
// statement runs on PostgreSQL. The server keeps the killed daemon's
// session (a sleeping backend does not notice its client is gone); the
// restarted daemon must terminate it — rolling its transaction back —
// before it runs the instance again.
func TestSIGKILLWithSQLTaskRunning(t *testing.T) {
	ctx := context.Background()
	dsn, err := server.CreateDatabase(ctx, "batch_sql_crash")
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `CREATE TABLE marks (d text); CREATE TABLE slow (x int); INSERT INTO slow VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath, metaPath, addr := filepath.Join(dir, "tidemark.yaml"), filepath.Join(dir, "meta.db"), freeAddr(t)
	cfg := fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "%s"}
connections: [{name: wh, type: postgres, dsn: "%s"}]
tasks:
  - name: mark
    type: sql
    connection: wh
    schedule: daily
    sql: "INSERT INTO marks VALUES ('${bizdate}'); SELECT pg_sleep(CASE WHEN EXISTS (SELECT 1 FROM slow) THEN 600 ELSE 0 END)"
`, metaPath, addr, dsn)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, addr: addr}
	c.start()
	st, err := store.Open(ctx, "sqlite://"+metaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c.waitAPI()
	id := submitBatch(t, addr, `{"task": "mark", "dates": {"from": "2025-02-01", "to": "2025-02-01"}}`)
	var tag string
	c.waitFor("the SQL to run", func() bool {
		ins, err := st.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: id, States: []string{store.InstanceRunning}})
		if err != nil || len(ins) == 0 {
			return false
		}
		tag = ins[0].SQLTag
		// In pg_sleep, not between statements: a session idle in its
		// transaction reads the socket and ends as soon as the daemon dies.
		return sleeping(t, db, tag)
	})
	c.kill()
	if n := sessions(t, db, tag); n != 1 {
		t.Fatalf("after the kill, %d session(s) with tag %s; the test needs the server to keep it", n, tag)
	}
	if _, err := db.Exec(ctx, `DELETE FROM slow`); err != nil {
		t.Fatal(err)
	}
	c.start()
	var rec store.BatchBackfill
	c.waitFor("backfill to end", func() bool {
		rec, err = st.GetBatchBackfill(ctx, id)
		return err == nil && rec.State != store.BatchRunning && rec.State != store.BatchWaiting
	})
	if rec.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s (%s), want succeeded", rec.State, rec.Error)
	}
	if n := sessions(t, db, tag); n != 0 {
		t.Errorf("the killed daemon's session %s still runs after the restart", tag)
	}
	var marks int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM marks WHERE d = '20250201'`).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if marks != 1 {
		t.Errorf("marks for the date = %d, want 1 (the interrupted transaction rolled back, the re-run committed)", marks)
	}
}

// sessions counts the server's sessions with application_name tag.
// sleeping reports whether the session tagged tag runs pg_sleep.
func sleeping(t *testing.T, db *pgx.Conn, tag string) bool {
	t.Helper()
	var n int
	err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'active' AND wait_event = 'PgSleep'`, tag).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func sessions(t *testing.T, db *pgx.Conn, tag string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, tag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
