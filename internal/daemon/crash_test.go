package daemon

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// childEnv makes the test binary run a daemon instead of the tests, so a
// test can SIGKILL a real daemon process.
const childEnv = "TIDEMARK_TEST_DAEMON_CONFIG"

var server *pgserver.Server

func TestMain(m *testing.M) {
	// A child daemon's shell tasks run under this binary as watchdog.
	runner.ServeWatchdog()
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(runChild(path))
	}
	os.Exit(pgserver.RunTests(m, &server))
}

func runChild(path string) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The child claims the store, as `tidemark run` does.
	d, err := New(context.Background(), cfg, log, stream.Options{ProbeInterval: 2 * time.Millisecond}, ClaimStore())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := d.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

const crashRows = 60_000

// TestSIGKILLDuringBackfill kills the daemon with SIGKILL at moments chosen
// from observed progress — while chunks are being read and merged, and while
// the destination has committed a position the source has not been told yet
// — restarts it each time, and checks that the backfill resumed rather than
// restarted and that the destination converged to the source.
func TestSIGKILLDuringBackfill(t *testing.T) {
	ctx := context.Background()
	srcDSN, err := server.CreateDatabase(ctx, "crash_src")
	if err != nil {
		t.Fatal(err)
	}
	dstDSN, err := server.CreateDatabase(ctx, "crash_dst")
	if err != nil {
		t.Fatal(err)
	}
	src, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	if _, err := src.Exec(ctx, fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, crashRows)); err != nil {
		t.Fatal(err)
	}
	// A long status interval widens the gap between the destination commit
	// and the confirmation to the source, so the test can kill inside it.
	c, metaPath := newCrashEnv(t, ctx, srcDSN, dstDSN, `
  - name: crash
    source: {type: postgres, dsn: "%s", status_interval: 30s}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.t"]
    backfill: {mode: manual, chunk_size: 1000, rows_per_second: 15000}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`)
	c.start()
	backfill := c.watch(metaPath)
	writes := startWriter(t, srcDSN)
	c.initiate()
	kills := 0
	// Kill 1 and 2: while chunks are being read, at 25% and 50% of the table.
	for _, frac := range []float64{0.25, 0.5} {
		c.waitFor(fmt.Sprintf("%.0f%% read", frac*100), func() bool { return backfill().RowsRead >= int64(frac*crashRows) })
		c.kill()
		kills++
		c.start()
	}
	// Kill 3: the destination committed a position the source was not told.
	start := time.Now()
	c.waitFor("destination ahead of the source's confirmed position", func() bool { return c.destAheadOfSlot() })
	t.Logf("destination ahead of the slot after %s", time.Since(start))
	c.kill()
	kills++
	c.start()
	start = time.Now()
	c.waitFor("backfill completed and loaded", func() bool {
		b := backfill()
		return b.Status == store.StatusCompleted && b.LoadedAt != nil
	})
	t.Logf("completed %s after the last restart", time.Since(start))
	n := writes()
	b := backfill()
	t.Logf("%d kills, %d concurrent writes; backfill read %d rows for a %d-row table", kills, n, b.RowsRead, crashRows)
	// The writer keeps at most 5000 rows past the initial ones.
	if limit := int64(1.3 * (crashRows + 5000)); b.RowsRead > limit {
		t.Errorf("backfill read %d rows in total, more than 1.3× the table (%d): it restarted instead of resuming", b.RowsRead, limit)
	}
	c.waitFor("destination equal to source", func() bool { return c.converged() })
	c.stop()
}

type crashEnv struct {
	t       testing.TB
	ctx     context.Context
	cfgPath string
	srcDSN  string
	dstDSN  string
	cmd     *exec.Cmd
	done    chan struct{}
	addr    string
	stream  string    // the stream initiate asks for; "" is "crash"
	object  string    // the object initiate backfills; "" is "public.t"
	env     []string  // more environment for the next start
	stderr  io.Writer // the daemon's standard error; nil: the test's
}

func (c *crashEnv) start() {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+c.cfgPath), c.env...)
	cmd.Stderr = cmp.Or[io.Writer](c.stderr, os.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd, c.done = cmd, make(chan struct{})
	done := c.done
	go func() { cmd.Wait(); close(done) }()
	c.t.Cleanup(func() { c.kill() })
}

func (c *crashEnv) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	c.cmd = nil
}

func (c *crashEnv) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.t.Error("daemon did not stop within 30s of SIGTERM")
	}
	c.cmd = nil
}

func (c *crashEnv) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-c.done:
			c.t.Fatalf("daemon exited while waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// initiate starts the backfill through the daemon's API, as a user would.
func (c *crashEnv) initiate() {
	c.t.Helper()
	body := strings.NewReader(fmt.Sprintf(`{"objects": [%q]}`, cmp.Or(c.object, "public.t")))
	resp, err := http.Post("http://"+c.addr+"/api/v1/streams/"+cmp.Or(c.stream, "crash")+"/backfills", "application/json", body)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("initiate: HTTP %d: %s", resp.StatusCode, msg)
	}
}

// watch opens the daemon's metadata store at metaPath (closed when the test
// ends), waits until the stream runs, and returns a reader of the stream's
// latest backfill (the zero Backfill before there is one).
func (c *crashEnv) watch(metaPath string) func() store.Backfill {
	c.t.Helper()
	st, err := store.Open(c.ctx, "sqlite://"+metaPath)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { st.Close() })
	name := cmp.Or(c.stream, "crash")
	c.waitFor("stream running", func() bool {
		s, err := st.GetStream(c.ctx, name)
		return err == nil && s.State == store.StateRunning
	})
	return func() store.Backfill {
		recs, err := st.ListBackfills(c.ctx, store.BackfillFilter{Stream: name})
		if err != nil || len(recs) == 0 {
			return store.Backfill{}
		}
		return recs[0]
	}
}

// allLoaded tells whether the stream has runs and every one of them is
// completed and loaded, reading the metadata store at metaPath.
func (c *crashEnv) allLoaded(metaPath string) func() bool {
	c.t.Helper()
	st, err := store.Open(c.ctx, "sqlite://"+metaPath)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { st.Close() })
	return func() bool {
		recs, err := st.ListBackfills(c.ctx, store.BackfillFilter{Stream: cmp.Or(c.stream, "crash")})
		if err != nil || len(recs) == 0 {
			return false
		}
		for _, r := range recs {
			if r.Status != store.StatusCompleted || r.LoadedAt == nil {
				return false
			}
		}
		return true
	}
}

// crashSource creates source database name on the test server, runs setup
// in it and returns its DSN and a connection closed when the test ends.
func crashSource(t testing.TB, ctx context.Context, name, setup string) (string, *pgx.Conn) {
	t.Helper()
	dsn, err := server.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("setup of %s: %v", name, err)
	}
	return dsn, conn
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (c *crashEnv) destAheadOfSlot() bool {
	conn, err := pgx.Connect(c.ctx, c.dstDSN)
	if err != nil {
		return false
	}
	defer conn.Close(c.ctx)
	var dest int64
	if err := conn.QueryRow(c.ctx, `SELECT position FROM "_tidemark"."checkpoint" WHERE stream = 'crash'`).Scan(&dest); err != nil {
		return false
	}
	sconn, err := pgx.Connect(c.ctx, c.srcDSN)
	if err != nil {
		return false
	}
	defer sconn.Close(c.ctx)
	var confirmed string
	if err := sconn.QueryRow(c.ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'tidemark_crash'`).Scan(&confirmed); err != nil {
		return false
	}
	lsn, err := change.ParseLSN(confirmed)
	return err == nil && change.LSN(dest) > lsn
}

func (c *crashEnv) converged() bool {
	return c.sameOn(`SELECT count(*) || ':' || coalesce(sum(hashtext(id::text || ':' || v::text || ':' || coalesce(note, '~'))), 0) FROM public.t`)
}

// sameOn says whether query, a digest of one text value, reads the same
// on the source and the destination (an error on either is a difference).
func (c *crashEnv) sameOn(query string) bool {
	read := func(dsn string) string {
		conn, err := pgx.Connect(c.ctx, dsn)
		if err != nil {
			return "error: " + err.Error()
		}
		defer conn.Close(c.ctx)
		var digest string
		if err := conn.QueryRow(c.ctx, query).Scan(&digest); err != nil {
			return "error: " + err.Error()
		}
		return digest
	}
	a, b := read(c.srcDSN), read(c.dstDSN)
	return a == b && !strings.HasPrefix(a, "error")
}

// startWriter changes the table until the returned function is called; it
// returns how many statements ran.
func startWriter(t testing.TB, dsn string) func() int {
	return startWriterPaced(t, dsn, time.Millisecond)
}

// startWriterPaced is startWriter running at most one statement each pace.
func startWriterPaced(t testing.TB, dsn string, pace time.Duration) func() int {
	return startWriterOver(t, dsn, pace, crashRows)
}

// startWriterOver is startWriterPaced on a table of rows rows: it updates
// and deletes rows of the table's range and upserts from its last row on.
func startWriterOver(t testing.TB, dsn string, pace time.Duration, rows int) func() int {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return paceWriter(pace, func(i int) string {
		id := (i*7919)%rows + 1
		switch i % 4 {
		case 0, 1:
			return fmt.Sprintf("UPDATE t SET v = v + 1 WHERE id = %d", id)
		case 2:
			return fmt.Sprintf("INSERT INTO t VALUES (%d, 0, 'new') ON CONFLICT (id) DO UPDATE SET v = 0", rows+i%5000)
		default:
			return fmt.Sprintf("DELETE FROM t WHERE id = %d", id)
		}
	}, func(ctx context.Context, q string) error {
		_, err := conn.Exec(ctx, q)
		return err
	}, func() { conn.Close(context.Background()) })
}

// paceWriter runs statement(i) for i = 0, 1, … through exec, at most one
// each pace (a steady load, paced so the stream is not simply outrun),
// until the returned function is called; that calls closeConn and returns
// how many statements succeeded.
func paceWriter(pace time.Duration, statement func(i int) string, exec func(ctx context.Context, q string) error, closeConn func()) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			<-tick.C
			if exec(ctx, statement(i)) == nil {
				n++
			}
		}
		closeConn()
		done <- n
	}()
	return func() int { cancel(); return <-done }
}

// TestSIGKILLDuringSnapshotLoad kills (SIGKILL) a first start's initial
// load in the new slot's exported snapshot midway, with a writer changing
// the table throughout. The snapshot dies with the process; the restart
// finds the slot, so it is no first start: the run resumes from the
// cursor its last chunk committed, on the windowed path beside the live
// stream, which brings every change since the slot's start. The
// destination converges.
func TestSIGKILLDuringSnapshotLoad(t *testing.T) {
	ctx := context.Background()
	srcDSN, _ := crashSource(t, ctx, "snapkill_src", fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, crashRows))
	dstDSN, err := server.CreateDatabase(ctx, "snapkill_dst")
	if err != nil {
		t.Fatal(err)
	}
	c, metaPath := newCrashEnv(t, ctx, srcDSN, dstDSN, `
  - name: snapkill
    source: {type: postgres, dsn: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.t"]
    backfill: {chunk_size: 1000, rows_per_second: 15000}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`)
	c.stream = "snapkill" // slots are the server's: another test's stream is "crash"
	writes := startWriter(t, srcDSN)
	c.start()
	backfill := c.watch(metaPath)
	c.waitFor("a quarter loaded", func() bool { return backfill().RowsRead >= crashRows/4 })
	if hold := c.metric(`tidemark_stream_snapshot_hold_seconds{stream="snapkill"}`); hold <= 0 {
		t.Fatalf("the first start's load holds no snapshot (tidemark_stream_snapshot_hold_seconds %v)", hold)
	}
	c.kill()
	c.start()
	c.waitResumed(backfill, writes, crashRows, "1 kill")
	if hold := c.metric(`tidemark_stream_snapshot_hold_seconds{stream="snapkill"}`); hold != 0 {
		t.Errorf("the restart holds a snapshot (%v s): only a first start has one", hold)
	}
	c.waitFor("destination equal to source", func() bool { return c.converged() })
	c.stop()
}

// metric reads one sample, named with its labels as the exposition writes
// it, from the daemon's /metrics (-1 when it is missing).
func (c *crashEnv) metric(sample string) float64 {
	c.t.Helper()
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// waitResumed waits until the latest backfill (of a table of rows rows) is
// completed and loaded, stops the writer, and fails the test when the
// backfill read more than 1.3× the table and the at most 5000 rows the
// writer adds past it: it restarted instead of resuming after the kills.
func (c *crashEnv) waitResumed(backfill func() store.Backfill, writes func() int, rows int, kills string) {
	c.t.Helper()
	c.waitFor("backfill completed and loaded", func() bool {
		b := backfill()
		return b.Status == store.StatusCompleted && b.LoadedAt != nil
	})
	n := writes()
	b := backfill()
	c.t.Logf("%s, %d concurrent writes; backfill read %d rows for a %d-row table", kills, n, b.RowsRead, rows)
	if limit := int64(1.3 * float64(rows+5000)); b.RowsRead > limit {
		c.t.Errorf("backfill read %d rows in total, more than 1.3× the table (%d): it restarted instead of resuming", b.RowsRead, limit)
	}
}
