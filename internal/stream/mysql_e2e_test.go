package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// TestMySQLBackfillWhileWriting streams a MariaDB database into SQLite and
// PostgreSQL through the source registry: the first start's backfill of a
// table runs in chunks while a writer inserts, updates, deletes and moves
// keys across chunk boundaries; the object goes from Active to Completed,
// and the destination then equals the source row for row.
func TestMySQLBackfillWhileWriting(t *testing.T) {
	ctx := context.Background()
	srv, err := mysqlserver.Start(ctx, mysqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	for i, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			db := fmt.Sprintf("shop%d", i)
			dsn, err := srv.CreateDatabase(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			root, err := srv.Root(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := root.Execute(q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec("USE " + mysqlserver.QuoteIdent(db))
			exec("CREATE TABLE orders (id BIGINT PRIMARY KEY, note VARCHAR(40) NOT NULL, amount DECIMAL(12,2), qty INT UNSIGNED)")
			const rows = 3000
			for lo := 1; lo <= rows; lo += 500 {
				exec(fmt.Sprintf("INSERT INTO orders SELECT seq, CONCAT('n', seq), seq * 1.25, seq %% 7 FROM seq_%d_to_%d", lo, lo+499))
			}
			// Text keys: a binary collation orders like the destination; a
			// UCA one (expansions, ignorables) cannot be matched by the
			// destination, so that table alone fails, with the fix (the
			// server's default, utf8mb4_general_ci, is reproduced: see
			// TestMySQLCollatedKeys).
			exec("CREATE TABLE codes (code VARCHAR(20) COLLATE utf8mb4_bin PRIMARY KEY, n INT)")
			exec("INSERT INTO codes VALUES ('a', 1), ('B', 2), ('b', 3), ('é', 4), ('😀', 5)")
			exec("CREATE TABLE tags (name VARCHAR(20) COLLATE utf8mb4_german2_ci PRIMARY KEY)")
			exec("INSERT INTO tags VALUES ('x'), ('Y')")
			e := mysqlEnv(t, dsn, db, dest)
			e.start()
			id := change.TableID{Schema: db, Name: "orders"}

			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := srv.Root(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				defer w.Close()
				r := rand.New(rand.NewPCG(7, uint64(i)))
				w.Execute("USE " + mysqlserver.QuoteIdent(db))
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					k := 1 + r.IntN(rows)
					var q string
					switch r.IntN(4) {
					case 0:
						q = fmt.Sprintf("UPDATE orders SET note = 'u%d', amount = amount + 1 WHERE id = %d", n, k)
					case 1:
						q = fmt.Sprintf("DELETE FROM orders WHERE id = %d", k)
					case 2:
						q = fmt.Sprintf("INSERT IGNORE INTO orders VALUES (%d, 'i%d', NULL, 3)", rows+1+r.IntN(rows), n)
					default: // a key move across chunks
						q = fmt.Sprintf("UPDATE IGNORE orders SET id = %d WHERE id = %d", 1+r.IntN(2*rows), k)
					}
					if _, err := w.Execute(q); err != nil {
						t.Errorf("%s: %v", q, err)
						return
					}
				}
			}()
			e.waitFor("orders active", func() bool { return e.objectOf(id).Status == StatusActive || e.objectOf(id).Loaded })
			e.waitLoadedID(id)
			close(stop)
			wg.Wait()
			e.assertConvergedMySQL(id)
			if o := e.objectOf(id); o.Status != StatusCompleted {
				t.Fatalf("orders status %s (%s), want completed", o.Status, o.Reason)
			}
			codes := change.TableID{Schema: db, Name: "codes"}
			e.waitLoadedID(codes)
			e.assertConvergedMySQL(codes)
			tags := e.objectOf(change.TableID{Schema: db, Name: "tags"})
			if tags.Status != StatusFailed || !strings.Contains(tags.Reason, "collation") {
				t.Fatalf("tags: status %s (%s), want failed naming the collation", tags.Status, tags.Reason)
			}
		})
	}
}

// mysqlEnv is an env whose source is a MySQL database.
func mysqlEnv(t *testing.T, dsn, db, dest string) *env {
	t.Helper()
	return mysqlEnvWith(t, dsn, db, envOptions{dest: dest})
}

// mysqlEnvWith is mysqlEnv with the destination and its extra keys of o.
func mysqlEnvWith(t *testing.T, dsn, db string, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := dbSeq.Add(1)
	dir := t.TempDir()
	e := &env{t: t, ctx: ctx, dest: o.dest}
	destYAML := e.destYAML(server, dir, n, o.destKeys)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
streams:
  - name: s%d
    source: {type: mysql, dsn: "%s"}
    destination: %s
    include: ["%s.*"]
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 200ms}
    backfill: {chunk_size: 250}
`, n, dsn, destYAML, db)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg.Streams[0]
	if e.st, err = store.Open(ctx, "sqlite://"+filepath.Join(dir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	return e
}

// assertConvergedMySQL waits until the destination equals the source, the
// source read in one consistent snapshot through the registry.
func (e *env) assertConvergedMySQL(id change.TableID) {
	e.t.Helper()
	e.convergedMySQL(id, diffRows)
}

// convergedMySQL waits until diff finds no difference between the source's
// rows, read in one consistent snapshot through the registry, and the
// destination's, and fails with the last difference after the wait's
// timeout.
func (e *env) convergedMySQL(id change.TableID, diff func(t *change.Table, want map[string]change.Row, got []change.Row) string) {
	e.t.Helper()
	src, err := source.Open(e.ctx, e.cfg.Source, source.Options{}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer src.Close()
	e.convergedTo(id, func(t *change.Table) map[string]change.Row { return e.readSource(src, t) }, diff)
}

// streamed is the stream's shape of table id; the test fails, saying why,
// when the stream does not stream it.
func (e *env) streamed(id change.TableID) *change.Table {
	e.t.Helper()
	t := e.s.lookup(id)
	if t == nil {
		e.t.Fatalf("table %s is not streamed (%s)", id, e.s.whyNotStreamed(id))
	}
	return t
}

// readSource is a source table's rows, read in one consistent snapshot, by
// encoded key.
func (e *env) readSource(src source.Source, t *change.Table) map[string]change.Row {
	e.t.Helper()
	chunk, err := src.ReadChunk(e.ctx, t, source.ReadOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rows := map[string]change.Row{}
	for _, r := range chunk.Rows {
		rows[t.RowKey(r).Encode()] = r
	}
	return rows
}

// convergedTo waits until diff finds no difference between the rows want
// gives and the destination's, and fails with the last difference after
// the wait's timeout.
func (e *env) convergedTo(id change.TableID, want func(t *change.Table) map[string]change.Row, diff func(t *change.Table, want map[string]change.Row, got []change.Row) string) {
	e.t.Helper()
	t := e.streamed(id)
	snk := e.openDest()
	var last string
	e.waitFor("destination equal to source for "+id.String(), throttled(func() bool {
		w := want(t)
		got, err := snk.ReadRange(e.ctx, t, nil, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		last = diff(t, w, got)
		return last == ""
	}), func() string { return last })
}

// TestMySQLBinlogPurged: a stream stopped while the server purged the
// binlog file its checkpoint is in fails with the way out instead of
// reading on from a later file; `stream reset` then starts from the
// current position and backfills every object, and the destination equals
// the source again — the rows written while it was stopped included.
func TestMySQLBinlogPurged(t *testing.T) {
	ctx := context.Background()
	srv, err := mysqlserver.Start(ctx, mysqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dsn, err := srv.CreateDatabase(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	root, err := srv.Root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := root.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("USE shop")
	exec("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(10))")
	exec("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
	e := mysqlEnv(t, dsn, "shop", "sqlite")
	e.start()
	id := change.TableID{Schema: "shop", Name: "items"}
	e.waitLoadedID(id)
	exec("INSERT INTO items VALUES (3, 'c')")
	e.assertConvergedMySQL(id)
	e.stop()

	exec("INSERT INTO items VALUES (4, 'd')")
	exec("UPDATE items SET v = 'z' WHERE id = 1")
	exec("FLUSH BINARY LOGS")
	r, err := root.Execute("SHOW MASTER STATUS")
	if err != nil {
		t.Fatal(err)
	}
	current, _ := r.GetString(0, 0)
	// The stopped stream's binlog dump thread may linger a moment, and
	// the server does not purge a file a reader has open.
	e.waitFor("the stream's binlog reader gone", func() bool {
		r, err := root.Execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := r.GetInt(0, 0)
		return n == 0
	})
	// MariaDB keeps a file until its binlog checkpoint (InnoDB's flush of
	// the file's transactions) is done: purge until the old file is gone.
	e.waitFor("the old binlog file purged", func() bool {
		exec("PURGE BINARY LOGS TO '" + current + "'")
		r, err := root.Execute("SHOW BINARY LOGS")
		if err != nil {
			t.Fatal(err)
		}
		return r.RowNumber() == 1
	})

	e.s = New(e.cfg, e.st, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Options{ProbeInterval: 2 * time.Millisecond, SlotCheckInterval: 200 * time.Millisecond, LagCheckInterval: 10 * time.Millisecond})
	runCtx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.s.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.waitState(store.StateFailed)
	if reason := e.s.State().Reason; !strings.Contains(reason, "purged") || !strings.Contains(reason, "tidemark stream reset") ||
		strings.Contains(reason, "slot") {
		t.Fatalf("reason %q, want it to say the binlog was purged and to run tidemark stream reset (no slot: MySQL has none)", reason)
	}
	e.s.Reset()
	e.waitState(store.StateRunning)
	e.waitLoadedID(id)
	e.assertConvergedMySQL(id)
}

// TestMySQLFilteredBackfill initiates backfills of a MariaDB table narrowed
// by a row filter and by a column subset, through the stream's initiate
// path. The source checks the filter first (a text column compared with a
// number is refused before anything starts); the filter selects the rows
// the server's own comparison selects (under utf8mb4_general_ci, region =
// 'eu' matches 'EU' and LIKE 'N%' matches 'n…'), and only those rows are
// rewritten; the column subset rewrites the named column only.
func TestMySQLFilteredBackfill(t *testing.T) {
	const db = "shop"
	srv, dsn := myFaultSource(t, 0)
	root, err := srv.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{"USE " + db,
		"CREATE TABLE orders (id BIGINT PRIMARY KEY, region VARCHAR(10) COLLATE utf8mb4_general_ci, amount INT, note VARCHAR(40))",
		"INSERT INTO orders SELECT seq, ELT(1 + seq % 3, 'eu', 'EU', 'us'), seq, CONCAT('n', seq) FROM seq_1_to_900",
	} {
		if _, err := root.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	e := mysqlEnv(t, dsn, db, "sqlite")
	e.start()
	id := change.TableID{Schema: db, Name: "orders"}
	e.waitVerified(e.waitLoadedID(id).BackfillID)
	destRows := func() map[string]change.Row {
		rows, err := e.openDest().ReadRange(e.ctx, e.s.lookup(id), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]change.Row{}
		for _, r := range rows {
			out[r[0].Text] = r
		}
		return out
	}

	_, err = e.s.InitiateWith(e.ctx, []change.TableID{id}, store.StartedByCLI, BackfillOptions{Filter: "region = 1"})
	var invalid *InvalidError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "column region is text and 1 is not") {
		t.Fatalf("filter region = 1: %v; want refused, saying to quote the value", err)
	}

	e.execInDest(`UPDATE "shop.orders" SET amount = -1, note = 'stale'`)
	recs, err := e.s.InitiateWith(e.ctx, []change.TableID{id}, store.StartedByCLI, BackfillOptions{Filter: "region = 'eu' AND note LIKE 'N%'"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitLoadedID(id)
	if run := e.waitVerified(recs[0].ID); run.RowsRead != 600 {
		t.Errorf("the filtered run read %d rows, want 600 (region eu or EU)", run.RowsRead)
	}
	got := destRows()
	for i := 1; i <= 900; i++ {
		r, want := got[fmt.Sprint(i)], "-1"
		if i%3 != 2 {
			want = fmt.Sprint(i)
		}
		if r == nil || r[2].Text != want {
			t.Fatalf("destination row %d after the filtered backfill: %v, want amount %s", i, r, want)
		}
	}

	e.execInDest(`UPDATE "shop.orders" SET amount = -2, note = 'stale'`)
	recs, err = e.s.InitiateWith(e.ctx, []change.TableID{id}, store.StartedByCLI, BackfillOptions{Columns: []string{"note"}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitLoadedID(id)
	e.waitVerified(recs[0].ID)
	got = destRows()
	for i := 1; i <= 900; i++ {
		if r := got[fmt.Sprint(i)]; r == nil || r[2].Text != "-2" || r[3].Text != fmt.Sprintf("n%d", i) {
			t.Fatalf("destination row %d after the column backfill: %v, want amount -2 (not named) and note n%d", i, r, i)
		}
	}
}
