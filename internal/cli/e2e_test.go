package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// daemon is a `tidemark run` subprocess.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// startDaemon starts `tidemark run -c cfg`, logging to logPath. It is
// killed by PID when the test ends, if it is still running then.
func startDaemon(t *testing.T, cfg, logPath string) *daemon {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Env = environ()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If this test process dies, the kernel kills the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		logFile.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("daemon log:\n%s", log)
		}
	})
	return d
}

// shopSource starts a throwaway PostgreSQL server for the test with a
// database "shop" in which setup has run; it returns the server and the
// database's DSN.
func shopSource(t *testing.T, setup string) (*pgserver.Server, string) {
	t.Helper()
	ctx := context.Background()
	srv, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dsn, err := srv.CreateDatabase(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return srv, dsn
}

// poll checks cond until it holds, at most every 50ms, failing the test after
// two minutes or when the daemon exits.
func poll(t *testing.T, d *daemon, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-d.done:
			t.Fatalf("the daemon exited (%v) while waiting for %s", d.err, what)
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// daemonWith starts a daemon on the configuration conf returns for a
// fresh directory and a free port (for api.listen); it returns the daemon,
// the configuration file and the port.
func daemonWith(t *testing.T, conf func(dir string, port int) string) (*daemon, string, int) {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, []byte(conf(dir, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, cfg, filepath.Join(dir, "daemon.log")), cfg, port
}

// sqliteDaemon starts a daemon with one stream, s, of dsn's public tables
// into a SQLite file, with the given backfill settings. It returns the
// daemon, the destination file and the CLI's --addr flag.
func sqliteDaemon(t *testing.T, dsn, backfill string) (*daemon, string, []string) {
	t.Helper()
	cfg, dest, addr := sqliteConfig(t, fmt.Sprintf(`{dsn: "%s", status_interval: 1s}`, dsn), backfill)
	d := startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon.log"))
	return d, dest, addr
}

// sqliteConfig writes, in a directory of its own, the configuration of a
// daemon with one stream, s, from source (a flow-style mapping) into a
// SQLite file, with the given backfill settings. It returns the file, the
// destination and the CLI's --addr flag.
func sqliteConfig(t *testing.T, source, backfill string) (cfg, dest string, addr []string) {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	dest = filepath.Join(dir, "dest.db")
	cfg = filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:%d"}
log: {level: info, format: json}
streams:
  - name: s
    source: %s
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: %s
    batch: {max_delay: 20ms}
    retry: {initial: 50ms, max: 1s}
`, filepath.Join(dir, "meta.db"), port, source, dest, backfill), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, dest, []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// theStream is the daemon's one stream as `streams --json` shows it, or
// the zero view while the daemon does not answer.
func theStream(t *testing.T, addr []string) api.StreamView {
	t.Helper()
	r := tidemark(t, append(addr, "streams", "--json")...)
	var streams []api.StreamView
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &streams) != nil || len(streams) != 1 {
		return api.StreamView{}
	}
	return streams[0]
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dsn := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 30) g`)

	// 30 rows in chunks of 5 at 10 rows a second: the backfill of t stays
	// Active for about 3 seconds, long enough for a second initiate to be
	// refused.
	d, dest, addr := sqliteDaemon(t, dsn, "{mode: manual, chunk_size: 5, rows_per_second: 10}")
	cli := func(args ...string) result { t.Helper(); return tidemark(t, append(addr, args...)...) }
	cliJSON := func(out any, args ...string) {
		t.Helper()
		r := cli(append(args, "--json")...)
		if r.code != 0 {
			t.Fatalf("tidemark %s: %s", strings.Join(args, " "), r)
		}
		if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
			t.Fatalf("tidemark %s --json: %v in %q", strings.Join(args, " "), err, r.stdout)
		}
	}

	poll(t, d, "stream s running", func() bool {
		r := cli("streams", "--json")
		if r.code != 0 {
			return false
		}
		var streams []api.StreamView
		if err := json.Unmarshal([]byte(r.stdout), &streams); err != nil {
			t.Fatalf("streams --json: %v in %q", err, r.stdout)
		}
		return len(streams) == 1 && streams[0].Name == "s" && streams[0].State == store.StateRunning
	})
	if r := cli("streams"); r.code != 0 || !strings.Contains(r.stdout, "STREAM") || !strings.Contains(r.stdout, "running") ||
		!strings.Contains(r.stdout, "postgres") || !strings.Contains(r.stdout, "sqlite") {
		t.Errorf("streams: %s", r)
	}
	// Where the stream reads and writes, with what the destination can do.
	var views []api.StreamView
	cliJSON(&views, "streams")
	if v := views[0]; v.Source.Type != "postgres" || v.Source.Where == "" || v.Destination.Type != "sqlite" || v.Destination.Where != dest ||
		!slices.Contains(v.Destination.Capabilities, "replace key ranges") {
		t.Errorf("streams --json shows source %+v, destination %+v", v.Source, v.Destination)
	}
	object := func() api.ObjectView {
		t.Helper()
		var objs []api.ObjectView
		cliJSON(&objs, "objects", "s")
		if len(objs) != 1 || objs[0].Object != "public.t" {
			t.Fatalf("objects: %+v", objs)
		}
		return objs[0]
	}
	if o := object(); o.Status != "-" || o.Reason != stream.ReasonManual {
		t.Fatalf("public.t before a backfill: %+v", o)
	}

	expect(t, 0, []string{"backfill 1 of public.t: pending"}, append(addr, "backfill", "initiate", "s", "public.t")...)
	r := expect(t, 4, []string{"cannot initiate a backfill of public.t"}, append(addr, "backfill", "initiate", "s", "public.t")...)
	// The 30 rows may be done by the time the objects are read: a
	// completed object is consistent with the refusal too (that no second
	// backfill was recorded is checked below).
	if o := object(); o.Status != stream.StatusPending && o.Status != stream.StatusActive && o.Status != stream.StatusCompleted {
		t.Fatalf("the second initiate (%s) was refused, but public.t is %q", r, o.Status)
	}
	poll(t, d, "public.t completed and loaded", func() bool {
		o := object()
		if o.Status == stream.StatusFailed {
			t.Fatalf("backfill failed: %+v", o)
		}
		return o.Status == stream.StatusCompleted && o.Loaded
	})
	// The commit that loaded the rows recorded their counters before it
	// told of the load.
	if o := object(); o.Events7d < 30 || o.Loaded7d < 30 || o.Bytes30d <= 0 {
		t.Errorf("objects --json after the 30 rows loaded: events %d, loaded %d, bytes %d; want at least 30, 30 and some", o.Events7d, o.Loaded7d, o.Bytes30d)
	}
	if r := cli("objects", "s"); r.code != 0 || !strings.Contains(r.stdout, "public.t") || !strings.Contains(r.stdout, "completed") {
		t.Errorf("objects: %s", r)
	}
	expect(t, 4, []string{"already completed"}, append(addr, "backfill", "stop", "s", "public.t")...)
	var recs []store.Backfill
	cliJSON(&recs, "backfill", "list", "--stream", "s", "--started-by", "cli")
	if len(recs) != 1 || recs[0].Status != stream.StatusCompleted || recs[0].RowsRead != 30 || recs[0].StartedBy != store.StartedByCLI {
		t.Errorf("backfill list: %+v", recs)
	}
	// The verify the backfill ended with, ranges of chunk_size rows
	// compared as the chunks loaded, is on its record.
	poll(t, d, "the backfill's verify to end", func() bool {
		cliJSON(&recs, "backfill", "list", "--stream", "s")
		return len(recs) == 1 && recs[0].Verify != nil && recs[0].Verify.FinishedAt != nil
	})
	if v := recs[0].Verify; v.Status != "match" || v.SourceRows != 30 || v.DestRows != 30 || v.Ranges < 6 || v.DifferingRanges != 0 {
		t.Errorf("backfill list --json: verify %+v, want a match of 30 rows in at least 6 ranges", v)
	}
	expect(t, 0, []string{"public.t", "ok", "30"}, append(addr, "verify", "s")...)
	// --json says how each range was compared: a SQLite destination
	// cannot sum one, so by its rows.
	var checks []api.CheckView
	cliJSON(&checks, "verify", "s")
	if len(checks) != 1 || len(checks[0].Ranges) == 0 || checks[0].Ranges[0].ComparedBy != "rows" {
		t.Errorf("verify --json: %+v", checks)
	}
	// The estimate counts the rows and measures the rate from the run above.
	expect(t, 0, []string{"public.t  30 ", "rate: ", "measured"}, append(addr, "backfill", "estimate", "s", "public.t")...)
	// A sample of 10 rows, and bad options refused with the usage code.
	var sampled []store.Backfill
	cliJSON(&sampled, "backfill", "initiate", "s", "public.t", "--sample", "10", "--rows-per-second", "1000")
	if len(sampled) != 1 || sampled[0].Options["sample_rows"] != float64(10) || sampled[0].Options["rows_per_second"] != float64(1000) {
		t.Errorf("initiate --sample: %+v", sampled)
	}
	poll(t, d, "sample completed", func() bool {
		var runs []store.Backfill
		cliJSON(&runs, "backfill", "list", "--stream", "s")
		return len(runs) > 0 && runs[0].ID == sampled[0].ID && runs[0].Status == store.StatusCompleted && runs[0].LoadedAt != nil
	})
	expect(t, 2, []string{"--at \"soon\" is not a time"}, append(addr, "backfill", "initiate", "s", "public.t", "--at", "soon")...)
	expect(t, 2, []string{"function pg_sleep is not allowed"}, append(addr, "backfill", "initiate", "s", "public.t", "--filter", "pg_sleep(60) IS NULL")...)
	expect(t, 2, []string{"ROWS_PER_SECOND"}, append(addr, "backfill", "set-rate", "1", "fast")...)
	expect(t, 4, []string{"cannot change the rate of backfill 1"}, append(addr, "backfill", "set-rate", "1", "5")...)

	db, err := sql.Open("sqlite", "file:"+dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM "t" WHERE "id" = 17`); err != nil {
		t.Fatal(err)
	}
	r = expect(t, 3, []string{"source and destination differ"}, append(addr, "verify", "s", "public.t")...)
	if !strings.Contains(r.stdout, "DIFFERS") || !strings.Contains(r.stdout, "17") {
		t.Errorf("verify after a destination row was deleted: %s", r)
	}

	// --wait follows a backfill until it is completed and loaded, with a
	// line per status change off a terminal.
	r = expect(t, 0, []string{"backfill 3 of public.t: pending", "backfill 3 of public.t: active",
		"backfill 3 of public.t: completed, 30/30 rows read (100%), 30 written, "}, append(addr, "backfill", "initiate", "s", "public.t", "--wait")...)
	if strings.Contains(r.stdout, "\033") {
		t.Errorf("escape sequences off a terminal: %q", r.stdout)
	}
	// With --json: the record as a JSON line at each change, the last one
	// completed.
	r = cli("backfill", "initiate", "s", "public.t", "--wait", "--json")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) < 2 {
		t.Fatalf("initiate --wait --json: %s", r)
	}
	var last store.Backfill
	for i, line := range lines {
		last = store.Backfill{}
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Fatalf("initiate --wait --json line %d: %v in %q", i, err, line)
		}
		if last.ID != 4 || (i == 0 && last.Status != stream.StatusPending) {
			t.Errorf("initiate --wait --json line %d: %+v", i, last)
		}
	}
	if last.Status != stream.StatusCompleted || last.LoadedAt == nil || last.RowsRead != 30 {
		t.Errorf("initiate --wait --json ends with %+v", last)
	}
	// A backfill stopped while followed: exit 1, saying which.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	wait := exec.CommandContext(ctx, bin, append(addr, "backfill", "initiate", "s", "public.t", "--wait")...)
	wait.Env = environ()
	var waitOut, waitErr strings.Builder
	wait.Stdout, wait.Stderr = &waitOut, &waitErr
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	poll(t, d, "backfill 5 initiated", func() bool { return object().BackfillID == 5 })
	expect(t, 0, []string{"stopped 1 object(s)"}, append(addr, "backfill", "stop", "s", "public.t")...)
	err = wait.Wait()
	if code := wait.ProcessState.ExitCode(); code != 1 || !strings.Contains(waitErr.String(), "backfill 5 of public.t stopped") ||
		!strings.Contains(waitOut.String(), "backfill 5 of public.t: stopped") {
		t.Errorf("initiate --wait of a stopped backfill: %v, exit %d, stdout %q, stderr %q", err, code, waitOut.String(), waitErr.String())
	}

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
		if d.err != nil {
			t.Fatalf("daemon after SIGTERM: %v", d.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not exit within 10s of SIGTERM")
	}
}
