package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

const bigRows = 50_000

// bigSetup makes a table whose blob column is stored out of line
// (STORAGE EXTERNAL, values over the TOAST threshold), so updates that do
// not touch it carry the unchanged-TOAST marker.
func bigSetup(keyType string) string {
	return fmt.Sprintf(`
CREATE TABLE big (id %s PRIMARY KEY, v int NOT NULL, note text, blob text);
ALTER TABLE big ALTER COLUMN blob SET STORAGE EXTERNAL;
INSERT INTO big SELECT %s, g, 'note ' || g, CASE WHEN g %% 50 = 0 THEN repeat(md5(g::text), 100) END
FROM generate_series(1, %d) g;`, keyType, keyExpr(keyType, "g"), bigRows)
}

func keyExpr(keyType, n string) string {
	if keyType == "bigint" {
		return n
	}
	// text keys whose order under a linguistic collation differs from bytes
	return fmt.Sprintf("(CASE WHEN %[1]s %% 3 = 0 THEN 'A' WHEN %[1]s %% 3 = 1 THEN 'b' ELSE 'É' END) || lpad(%[1]s::text, 7, '0')", n)
}

// seedStale damages the destination: stale values, missing rows and extra
// rows (below the first key, inside the key range and past the last key).
func (e *env) seedStale(keyType string) {
	e.t.Helper()
	stmts := []string{
		"DELETE FROM big WHERE v % 10 = 3",
		"UPDATE big SET v = -1, note = 'stale' WHERE v % 10 = 5",
	}
	k := func(n string) string { return keyExpr(keyType, n) }
	if keyType == "bigint" {
		stmts = append(stmts, "INSERT INTO big (id, v, note) VALUES (-7, 0, 'extra'), (5000000, 0, 'extra'), (9999999, 0, 'extra')")
	} else {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO big (id, v, note) VALUES (%s || 'x', 0, 'extra'), ('0', 0, 'extra'), ('zzz', 0, 'extra')", k("7")))
	}
	// The destination starts as a full copy, then is damaged.
	if e.dest == "postgres" {
		e.execInDest(fmt.Sprintf("INSERT INTO big SELECT %s, g, 'note ' || g, CASE WHEN g %% 50 = 0 THEN repeat(md5(g::text), 100) END FROM generate_series(1, %d) g", k("g"), bigRows))
	} else {
		e.execInDest(fmt.Sprintf("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM g WHERE n < %d) INSERT INTO big SELECT n, n, 'note ' || n, NULL FROM g", bigRows))
	}
	e.execInDest(stmts...)
}

// writerLimit bounds the changes of a test's writer: one that never stops
// may outrun a stream slowed by a loaded machine, and the backfill it
// writes beside then need not end. Paced at one a millisecond, the limit
// is 20 s of changes or more.
const writerLimit = 20000

// writer changes the table from Initiate until stopped or writerLimit
// changes: inserts, updates that leave the out-of-line column unchanged,
// updates of it, primary-key updates across chunk boundaries, and deletes.
func (e *env) writer(ctx context.Context, keyType string, seed uint64) (stop func() int) {
	conn, err := pgx.Connect(e.ctx, e.srcDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	var wg sync.WaitGroup
	var n int
	wctx, cancel := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 1))
		k := func(n int) string { return keyExpr(keyType, fmt.Sprint(n)) }
		// A steady load (at most one statement a millisecond) that the
		// stream can follow even under the race detector.
		pace := time.NewTicker(time.Millisecond)
		defer pace.Stop()
		for i := 0; wctx.Err() == nil && i < writerLimit; i++ {
			<-pace.C
			id := 1 + r.IntN(bigRows)
			if r.IntN(3) > 0 {
				id = e.nearCursor(keyType, r.IntN(1500))
			}
			var q string
			switch op := r.IntN(10); {
			case op < 3:
				q = fmt.Sprintf("UPDATE big SET v = v + 1 WHERE id = %s", k(id))
			case op < 4:
				q = fmt.Sprintf("UPDATE big SET blob = repeat(md5(random()::text), 100) WHERE id = %s", k(id))
			case op < 6:
				q = fmt.Sprintf("INSERT INTO big VALUES (%s, %d, 'new', NULL) ON CONFLICT (id) DO UPDATE SET note = 'reinserted'", k(bigRows+r.IntN(bigRows)), i)
			case op < 7:
				// move a run of rows to far keys, across many chunks
				q = fmt.Sprintf("UPDATE big SET id = %s, note = 'moved' WHERE id = %s", k(2*bigRows+i), k(id))
			case op < 8 && keyType == "bigint":
				q = fmt.Sprintf("UPDATE big SET id = id + 1 WHERE id BETWEEN %d AND %d AND NOT EXISTS (SELECT 1 FROM big b2 WHERE b2.id = %d + 1)", id, id, id)
			default:
				q = fmt.Sprintf("DELETE FROM big WHERE id = %s", k(id))
			}
			if _, err := conn.Exec(wctx, q); err == nil {
				n++
			}
		}
	}()
	return func() int {
		cancel()
		wg.Wait()
		conn.Close(context.Background())
		return n
	}
}

// nearCursor returns a source id just past the active backfill's progress,
// so that writes land in the chunk being read and its window.
func (e *env) nearCursor(keyType string, ahead int) int {
	e.s.bf.mu.Lock()
	var read int64
	for _, r := range e.s.bf.active {
		r.mu.Lock()
		read = r.rec.RowsRead
		r.mu.Unlock()
	}
	e.s.bf.mu.Unlock()
	pos := int(read) + ahead
	if keyType == "bigint" {
		return 1 + pos%bigRows
	}
	// text keys sort by group ('A' ids ≡ 0, 'b' ≡ 1, 'É' ≡ 2 mod 3), then by id
	third := bigRows / 3
	group, within := pos/third, pos%third
	return 3*within + group%3
}

func TestBackfillWhileWriting(t *testing.T) {
	cases := []struct{ name, dest, keyType, pace string }{
		{"postgres-bigint", "postgres", "bigint", ""},
		// Chunks of chunk_size rows, not paced: under the race detector
		// SQLite writes a row so slowly that pacing cut every chunk to its
		// floor, a tenth (500 chunks, 35-55 s).
		{"sqlite-bigint", "sqlite", "bigint", ", chunk_write_target: 0"},
		{"postgres-text-collated", "postgres", `text COLLATE "en-x-icu"`, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: c.dest, setup: bigSetup(c.keyType), yaml: "backfill: {mode: manual, chunk_size: 1000" + c.pace + "}"})
			e.start()
			e.seedStale(c.keyType)
			stop := e.writer(e.ctx, c.keyType, uint64(i))
			id := change.TableID{Schema: "public", Name: "big"}
			if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByCLI, nil); err != nil {
				t.Fatal(err)
			}
			// The writer keeps the backfill's windows busy: on a loaded
			// machine (the whole suite runs beside it) the backfill takes
			// minutes, not the usual one.
			e.waitForWithin(8*time.Minute, "big completed", func() bool {
				st := e.object("big").Status
				if st == StatusFailed {
					t.Fatalf("backfill failed: %s", e.object("big").Reason)
				}
				return st == StatusCompleted
			})
			writes := stop()
			e.waitLoaded("big")
			e.assertConverged("big")
			recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
			if err != nil {
				t.Fatal(err)
			}
			b := recs[0]
			t.Logf("%d writes during the backfill; backfill %+v", writes, b)
			if b.WindowConflicts == 0 {
				t.Errorf("no window conflicts with %d concurrent writes: the merge was not exercised", writes)
			}
			if b.RowsRemoved == 0 {
				t.Errorf("no rows removed although the destination had extra rows")
			}
			if b.Chunks < bigRows/1000 {
				t.Errorf("%d chunks for %d rows with chunk_size 1000", b.Chunks, bigRows)
			}
		})
	}
}

// TestBackfillCompositeKey backfills a table keyed by (tenant, id) in chunks
// that end in the middle of a tenant, while rows move between tenants.
func TestBackfillCompositeKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, chunk_size: 300}", setup: `
		CREATE TABLE lines (tenant text COLLATE "C", id int, qty int, PRIMARY KEY (tenant, id));
		INSERT INTO lines SELECT 't' || (g % 7), g, g FROM generate_series(1, 20000) g;`})
	e.start()
	conn, err := pgx.Connect(e.ctx, e.srcDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(e.ctx)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	// The writer ends before its connection closes, also when a wait
	// below fails the test.
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		pace := time.NewTicker(time.Millisecond)
		defer pace.Stop()
		// A quiet run's backfill takes about 3 s of the writer's 20
		// (a whole-suite run without the limit timed out after 2
		// minutes).
		for i := 0; ctx.Err() == nil && i < writerLimit; i++ {
			<-pace.C
			g := 1 + (i*7919)%20000
			switch i % 4 {
			case 0:
				_, _ = conn.Exec(ctx, "UPDATE lines SET qty = qty + 1 WHERE id = $1", g)
			case 1: // move a row to another tenant: a key update across chunks
				_, _ = conn.Exec(ctx, "UPDATE lines SET tenant = 't' || ((substr(tenant, 2)::int + 3) % 7) WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM lines l2 WHERE l2.id = $1 AND l2.tenant <> lines.tenant)", g)
			case 2:
				_, _ = conn.Exec(ctx, "DELETE FROM lines WHERE id = $1", g)
			case 3:
				_, _ = conn.Exec(ctx, "INSERT INTO lines VALUES ('t' || ($1 % 5), $1, 0) ON CONFLICT DO NOTHING", g)
			}
		}
	}()
	if _, err := e.s.Initiate(e.ctx, []change.TableID{{Schema: "public", Name: "lines"}}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	// Its work grows with the machine's load: paced chunks under a writer.
	e.waitForWithin(5*time.Minute, "lines completed", func() bool { return e.object("lines").Status == StatusCompleted },
		func() string { return fmt.Sprintf("object %+v", e.object("lines")) })
	cancel()
	<-done
	e.waitLoaded("lines")
	e.assertConverged("lines")
}
