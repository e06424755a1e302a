package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

// TestSIGKILLWhileChangesWait kills the daemon while live changes wait
// for a chunk whose write cannot commit (a row of its range locked in the
// destination): a change outside the chunk's range committed beside it on
// the other connection, then a source transaction of a key in the range
// and of a row of another table, which waits. After the restart both
// tables equal the source: the position the destination committed is the
// change beside the chunk's, so the waiting transaction is streamed again
// (u has no backfill that would bring its row back otherwise), and the
// chunk, not committed, is read again.
func TestSIGKILLWhileChangesWait(t *testing.T) {
	ctx := context.Background()
	srcDSN, src := crashSource(t, ctx, "held_src", `
		CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, 2000) g;
		CREATE TABLE u (id bigint PRIMARY KEY, v int);
		INSERT INTO u SELECT g, g FROM generate_series(1, 10) g;`)
	dstDSN, err := server.CreateDatabase(ctx, "held_dst")
	if err != nil {
		t.Fatal(err)
	}
	c, metaPath := newCrashEnv(t, ctx, srcDSN, dstDSN, `
  - name: held
    source: {type: postgres, dsn: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.t", "public.u"]
    backfill: {mode: manual, chunk_size: 100, verify: false}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`)
	c.stream = "held" // its own replication slot: another test's may remain
	c.start()
	backfill := c.watch(metaPath)
	loaded := func() bool { b := backfill(); return b.Status == store.StatusCompleted && b.LoadedAt != nil }
	resp, err := http.Post("http://"+c.addr+"/api/v1/streams/held/backfills", "application/json",
		strings.NewReader(`{"objects": ["public.t", "public.u"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("initiate: HTTP %d", resp.StatusCode)
	}
	// Completed as well as equal: t's next backfill is refused while its
	// first is still active.
	allLoaded := c.allLoaded(metaPath)
	c.waitFor("both tables loaded", func() bool { return c.converged() && sameU(c) && allLoaded() })

	dst, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(ctx)
	// Every range of t now differs, so t's next backfill writes each; its
	// first chunk's write waits for row 50.
	if _, err := dst.Exec(ctx, `UPDATE t SET note = 'stale'`); err != nil {
		t.Fatal(err)
	}
	lock, err := dst.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM t WHERE id = 50 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	c.initiate()
	probe, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	query := func(sql string) (v int) {
		if err := probe.QueryRow(ctx, sql).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	c.waitFor("the first chunk's write waiting for the locked row", func() bool {
		return query(`SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
	if _, err := src.Exec(ctx, `UPDATE t SET v = -2 WHERE id = 900`); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the change outside the chunk's range committed beside it", func() bool {
		return query(`SELECT v FROM t WHERE id = 900`) == -2
	})
	if _, err := src.Exec(ctx, `BEGIN; UPDATE t SET v = -1 WHERE id = 60; UPDATE u SET v = -1 WHERE id = 5; COMMIT`); err != nil {
		t.Fatal(err)
	}
	c.kill()
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	c.start()
	c.waitFor("t's backfill completed and loaded after the restart", loaded)
	c.waitFor("both tables equal to the source", func() bool { return c.converged() && sameU(c) })
	c.stop()
}

// sameU says whether u holds the same rows on both sides.
func sameU(c *crashEnv) bool {
	return c.sameOn(`SELECT coalesce(string_agg(id || '=' || v, ',' ORDER BY id), '') FROM public.u`)
}

// newCrashEnv writes a daemon's configuration in a directory of the test's
// own: its metadata store and API, and the streams of streams (a YAML list
// whose two %s are the source's and the destination's DSNs). It returns
// the env, not started, and the metadata store's path.
func newCrashEnv(t *testing.T, ctx context.Context, srcDSN, dstDSN, streams string) (*crashEnv, string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath, metaPath, addr := filepath.Join(dir, "tidemark.yaml"), filepath.Join(dir, "meta.db"), freeAddr(t)
	cfg := fmt.Sprintf("metadata: sqlite://%s\napi: {listen: %q}\nstreams:", metaPath, addr) + fmt.Sprintf(streams, srcDSN, dstDSN)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, srcDSN: srcDSN, dstDSN: dstDSN, addr: addr}, metaPath
}
