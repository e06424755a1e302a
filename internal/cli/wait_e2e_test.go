package cli_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/testutil"
)

// backfill wait follows a backfill started by another command through a
// kill and restart of the daemon to its end and its verify; without a
// daemon for longer than --reconnect it exits 1 saying so.
func TestWaitSurvivesRestart(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 80)`)
	d, cfg, port := daemonWith(t, func(dir string, port int) string {
		return fmt.Sprintf(`
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:%d"}
streams:
  - name: s
    source: {dsn: "%s", status_interval: 1s}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: {mode: manual, chunk_size: 5, rows_per_second: 10}
    retry: {initial: 50ms, max: 1s}
`, filepath.Join(dir, "meta.db"), port, dsn, filepath.Join(dir, "dest.db"))
	})
	addr := []string{"--addr", fmt.Sprintf("127.0.0.1:%d", port)}
	cli := func(args ...string) result { t.Helper(); return tidemark(t, append(args, addr...)...) }
	poll(t, d, "the object", func() bool { return strings.Contains(cli("objects", "s").stdout, "public.t") })
	expect(t, 4, []string{"no backfill of public.t in stream s to wait for", "tidemark backfill initiate s public.t"}, append([]string{"backfill", "wait", "s", "public.t"}, addr...)...)
	if r := cli("backfill", "initiate", "s", "public.t"); r.code != 0 {
		t.Fatalf("initiate: %s", r)
	}
	// rowsRead is backfill id's rows read so far.
	rowsRead := func(id int64) int64 {
		var b store.Backfill
		if r := cli("backfill", "list", "--stream", "s", "--json"); r.code == 0 {
			var list []store.Backfill
			if json.Unmarshal([]byte(r.stdout), &list) == nil {
				for _, x := range list {
					if x.ID == id {
						b = x
					}
				}
			}
		}
		return b.RowsRead
	}
	poll(t, d, "rows read", func() bool { return rowsRead(1) > 0 })

	wait := exec.Command(bin, append([]string{"backfill", "wait", "s", "public.t"}, addr...)...)
	wait.Env = environ()
	var stdout, stderr testutil.LockedBuffer
	wait.Stdout, wait.Stderr = &stdout, &stderr
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- wait.Wait() }()
	t.Cleanup(func() { _ = wait.Process.Kill() })

	// Killed mid-backfill, then started again: the backfill resumes from
	// its cursor, and wait follows it there. The daemon is killed only once
	// wait follows backfill 1 (its first line), not while wait is still
	// starting: a daemon not there at all is another answer.
	poll(t, d, "backfill wait to follow backfill 1", func() bool {
		select {
		case err := <-waited:
			t.Fatalf("backfill wait ended before the daemon was killed: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
		default:
		}
		return strings.Contains(stdout.String(), "backfill 1 of public.t")
	})
	poll(t, d, "more rows read", func() bool { return rowsRead(1) >= 15 })
	if n := rowsRead(1); n >= 80 {
		t.Fatalf("backfill 1 read all %d rows before the daemon was killed: the test needs a slower backfill", n)
	}
	_ = d.cmd.Process.Kill()
	<-d.done
	d = startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon2.log"))
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("backfill wait: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("backfill wait did not end\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	}
	for _, want := range []string{"backfill 1 of public.t: completed", "backfill 1 of public.t: verify match, 80 source rows, 80 destination rows"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("backfill wait's output lacks %q:\n%s", want, &stdout)
		}
	}
	if !strings.Contains(stderr.String(), "stopped answering; trying again for up to 1m0s") {
		t.Errorf("backfill wait's errors:\n%s", &stderr)
	}

	// No daemon for longer than --reconnect: exit 1, saying so.
	poll(t, d, "the daemon again", func() bool { return cli("streams").code == 0 })
	if r := cli("backfill", "initiate", "s", "public.t"); r.code != 0 {
		t.Fatalf("initiate again: %s", r)
	}
	// --json prints backfill 2's record once wait follows it: the daemon is
	// killed only then, not while wait is still starting.
	wait = exec.Command(bin, append([]string{"backfill", "wait", "s", "public.t", "--reconnect", "1s", "--json"}, addr...)...)
	wait.Env = environ()
	var followed testutil.LockedBuffer
	stderr.Reset()
	wait.Stdout, wait.Stderr = &followed, &stderr
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { waited <- wait.Wait() }()
	poll(t, d, "backfill wait to follow backfill 2", func() bool { return strings.Contains(followed.String(), `"id":2,`) })
	poll(t, d, "backfill 2's rows", func() bool { return rowsRead(2) > 0 })
	_ = d.cmd.Process.Kill()
	<-d.done
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatalf("backfill wait did not give up\nstdout:\n%s\nstderr:\n%s", followed.String(), &stderr)
	}
	if wait.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "has been unreachable for 1s (--reconnect)") ||
		!strings.Contains(stderr.String(), "tidemark backfill wait s public.t") {
		t.Errorf("backfill wait without a daemon: exit %d\nstderr:\n%s", wait.ProcessState.ExitCode(), &stderr)
	}
}
