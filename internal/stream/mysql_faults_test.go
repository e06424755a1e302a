package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/store"
)

// MySQL fault tests: a MariaDB server of the test's own (the test restarts
// it or kills its connections) with a table big in database shop, a load
// that keeps changing it, and a stream into PostgreSQL or SQLite that must
// end with the destination equal to the source row for row.

var myBig = change.TableID{Schema: "shop", Name: "big"}

// myFaultSource starts a MariaDB server of the test's own, stopped when
// the test ends, with shop.big holding rows rows, and returns it with the
// stream account's DSN.
func myFaultSource(t *testing.T, rows int) (*mysqlserver.Server, string) {
	t.Helper()
	stmts := []string{"CREATE TABLE big (id BIGINT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40))"}
	for lo := 1; lo <= rows; lo += 10_000 {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO big SELECT seq, seq, CONCAT('note ', seq) FROM seq_%d_to_%d", lo, min(lo+9_999, rows)))
	}
	// The server is stopped after the stream: its cleanup is registered first.
	return mysqlserver.ForTest(t, mysqlserver.Options{}, "shop", stmts...)
}

// myFaultEnv is a stream of shop.* on srv into dest with manual backfills
// of chunk rows at most rate rows a second (0: unlimited).
func myFaultEnv(t *testing.T, dsn, dest string, chunk, rate int) *env {
	t.Helper()
	e := mysqlEnv(t, dsn, "shop", dest)
	e.cfg.Backfill.Mode = config.BackfillManual
	e.cfg.Backfill.ChunkSize = chunk
	e.cfg.Backfill.RowsPerSecond = rate
	return e
}

// myLoad changes shop.big from a connection of its own until stopped:
// updates, inserts of new keys, deletes and key moves to anywhere in the
// table (across chunk boundaries, behind and ahead of the backfill), half
// of them at keys just past the active backfill's progress so that they
// land in the chunk being read and its window. When the server goes away
// it reconnects, at each tick, until the server is back.
type myLoad struct {
	writes atomic.Int64 // statements that succeeded
	maxID  atomic.Int64 // the highest key ever written
	stop   func() int64
}

func (e *env) myLoad(srv *mysqlserver.Server, rows int, seed uint64, pace time.Duration) *myLoad {
	l := &myLoad{}
	l.maxID.Store(int64(rows))
	r := rand.New(rand.NewPCG(seed, 11))
	var conn *client.Conn
	stop := e.paced(pace, func(ctx context.Context, i int) {
		if conn == nil {
			c, err := srv.Root(ctx)
			if err != nil {
				return // the server is restarting: try again at the next tick
			}
			if _, err := c.Execute("USE shop"); err != nil {
				c.Close()
				return
			}
			conn = c
		}
		if _, err := conn.Execute(l.statement(r, i, e.backfillProgress())); err != nil {
			conn.Close()
			conn = nil
			return
		}
		l.writes.Add(1)
	})
	l.stop = func() int64 {
		if stop() && conn != nil {
			conn.Close()
		}
		return l.writes.Load()
	}
	return l
}

// statement is the load's i-th statement; progress is the rows the active
// backfill has read.
func (l *myLoad) statement(r *rand.Rand, i, progress int) string {
	top := int(l.maxID.Load())
	id := 1 + r.IntN(top)
	if r.IntN(2) == 0 {
		id = 1 + (progress+r.IntN(800))%top
	}
	switch op := r.IntN(10); {
	case op < 5:
		return fmt.Sprintf("UPDATE big SET v = v + 1, note = 'update %d' WHERE id = %d", i, id)
	case op < 7:
		// The key is taken even if the insert's outcome is unknown.
		return fmt.Sprintf("INSERT IGNORE INTO big VALUES (%d, %d, 'new')", l.maxID.Add(1), i)
	case op < 9:
		return fmt.Sprintf("UPDATE IGNORE big SET id = %d, note = 'moved %d' WHERE id = %d", 1+r.IntN(top), i, id)
	default:
		return fmt.Sprintf("DELETE FROM big WHERE id = %d", id)
	}
}

// initiateBig initiates a backfill of shop.big and returns its id.
func (e *env) initiateBig() int64 {
	e.t.Helper()
	recs, err := e.s.Initiate(e.ctx, []change.TableID{myBig}, store.StartedByCLI, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return recs[0].ID
}

// TestMySQLBackfillAtScale backfills a 100,000-row MariaDB table into
// PostgreSQL from Initiate to Completed while a load inserts, updates,
// deletes and moves keys across chunk boundaries, into a destination the
// stream created and that was then seeded with stale, missing and extra
// rows; the destination ends equal to the source row for row.
func TestMySQLBackfillAtScale(t *testing.T) {
	const rows = 100_000
	srv, dsn := myFaultSource(t, rows)
	e := myFaultEnv(t, dsn, "postgres", 2000, 0)
	e.start()
	began := time.Now()
	// The destination starts as a full copy, then is damaged: stale values,
	// missing rows, extra rows below, inside and past the key range.
	e.execInDest(
		fmt.Sprintf(`INSERT INTO shop.big SELECT g, g, 'note ' || g FROM generate_series(1, %d) g`, rows),
		`DELETE FROM shop.big WHERE v % 10 = 3`,
		`UPDATE shop.big SET v = -1, note = 'stale' WHERE v % 10 = 5`,
		`INSERT INTO shop.big VALUES (-7, 0, 'extra'), (5000000, 0, 'extra'), (9999999, 0, 'extra')`,
	)
	load := e.myLoad(srv, rows, 1, time.Millisecond)
	id := e.initiateBig()
	e.waitFor("big completed", func() bool {
		o := e.objectOf(myBig)
		if o.Status == StatusFailed {
			t.Fatalf("backfill failed: %s", o.Reason)
		}
		return o.Status == StatusCompleted
	})
	writes := load.stop()
	e.waitLoadedID(myBig)
	e.assertConvergedMySQL(myBig)
	b := e.backfillRec(id)
	t.Logf("%d writes during the backfill, converged %s after Initiate; backfill: rows_read %d, rows_written %d, rows_removed %d, chunks %d, window conflicts %d",
		writes, time.Since(began).Round(time.Millisecond), b.RowsRead, b.RowsWritten, b.RowsRemoved, b.Chunks, b.WindowConflicts)
	if b.RowsRemoved == 0 {
		t.Error("no rows removed although the destination had extra rows")
	}
	if b.Chunks < rows/2000 {
		t.Errorf("%d chunks for %d rows with chunk_size 2000", b.Chunks, rows)
	}
	if writes == 0 || b.WindowConflicts == 0 {
		t.Errorf("%d writes, %d window conflicts: the merge was not exercised", writes, b.WindowConflicts)
	}
}

// TestMySQLFaultDuringBackfill breaks the MariaDB source in the middle of a
// backfill while the table keeps changing — a clean restart, a crash
// restart, its connections killed — and the stream retries, the backfill
// continues from its committed cursor rather than from the start, completes,
// and the destination equals the source.
func TestMySQLFaultDuringBackfill(t *testing.T) {
	restart := func(crash bool) func(e *env, srv *mysqlserver.Server) {
		return func(e *env, srv *mysqlserver.Server) {
			if err := srv.Restart(e.ctx, crash); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name, dest string
		fault      func(e *env, srv *mysqlserver.Server)
	}{
		{"clean-restart", "sqlite", restart(false)},
		{"crash-restart", "postgres", restart(true)},
		{"connections-killed", "postgres", killStreamConnections},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			faultBegin(t)
			srv, dsn := myFaultSource(t, faultRows)
			e := myFaultEnv(t, dsn, c.dest, faultChunk, faultRate)
			e.start()
			load := e.myLoad(srv, faultRows, uint64(i), faultPace)
			id := e.initiateBig()
			mid := e.waitMidBackfill(id)
			e.phase("backfill a third done")
			states := e.stateLog()
			mark := states.len()

			began := time.Now()
			c.fault(e, srv)
			e.retriedAfter(states, mark, began, mid)

			e.waitLoadedID(myBig)
			e.phase("backfill loaded")
			writes := load.stop()
			e.assertConvergedMySQL(myBig)
			e.phase("converged")

			b := e.backfillRec(id)
			if o := e.objectOf(myBig); o.BackfillID != id {
				t.Fatalf("the object's backfill is %d, want %d: the run was replaced", o.BackfillID, id)
			}
			e.checkResumed(b, mid, load.maxID.Load(), writes)
		})
	}
}

// killStreamConnections kills every connection of the stream's account
// (its binlog dump and its chunk reads) from root, as an operator would.
func killStreamConnections(e *env, srv *mysqlserver.Server) {
	e.t.Helper()
	root, err := srv.Root(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer root.Close()
	r, err := root.Execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", mysqlserver.User)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.RowNumber() == 0 {
		e.t.Fatal("the stream has no connection to kill")
	}
	for i := range r.RowNumber() {
		id, _ := r.GetInt(i, 0)
		// A connection may have ended on its own meanwhile.
		if _, err := root.Execute(fmt.Sprintf("KILL %d", id)); err != nil && !strings.Contains(err.Error(), "Unknown thread") {
			e.t.Fatalf("KILL %d: %v", id, err)
		}
	}
}
