package stream

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// TestLiveChangesOvertakeAChunk: while a chunk's write into PostgreSQL
// waits (a row of its range locked in the destination), a live change
// outside its range is committed (on the stream's other connection), and
// a later one inside it waits for the chunk; once the lock goes, the
// backfill ends and the destination equals the source, the change inside
// the range included. With chunks and
// live changes on one connection, the change outside would wait too.
func TestLiveChangesOvertakeAChunk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres",
		setup: `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 1000) g;`,
		yaml:  "backfill: {mode: manual, chunk_size: 100, verify: false}"})
	e.start()
	e.backfill(change.TableID{Schema: "public", Name: "t"})
	// Every range now differs, so the next backfill writes each.
	e.execInDest(`UPDATE t SET v = 'stale'`)
	dst := e.connectDest()
	lock, err := dst.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(e.ctx)
	if _, err := lock.Exec(e.ctx, `SELECT 1 FROM t WHERE id = 50 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	bf := e.initiateT()
	probe := e.connectDest()
	e.waitFor("the first chunk's write waiting for the locked row", func() bool {
		var n int
		err := probe.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	e.exec(`UPDATE t SET v = 'live' WHERE id = 900`)
	e.waitForWithin(30*time.Second, "the live change outside the chunk's range in the destination", func() bool {
		var v string
		if err := probe.QueryRow(e.ctx, `SELECT v FROM t WHERE id = 900`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v == "live"
	})
	rec, err := e.st.GetBackfill(e.ctx, bf)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LoadedAt != nil {
		t.Fatalf("the backfill loaded while its first chunk's row was locked: %+v", rec)
	}
	// A change of the chunk's range waits for it (and every change after
	// it): committed before the chunk, it would be overwritten by the
	// chunk's row as of its merge point, and the end would differ.
	e.exec(`UPDATE t SET v = 'waits' WHERE id = 60`)
	e.exec(`UPDATE t SET v = 'after' WHERE id = 901`)
	if err := lock.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the backfill loaded", func() bool {
		rec, err := e.st.GetBackfill(e.ctx, bf)
		if err != nil {
			t.Fatal(err)
		}
		return rec.LoadedAt != nil
	})
	e.assertConverged("t")
}
