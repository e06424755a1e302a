package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// batchEnv is a daemon with recurring tasks and the CLI pointed at it.
type batchEnv struct {
	t   *testing.T
	d   *daemon
	dir string
	cli func(args ...string) result
	// args are the flags every call passes (--addr).
	args []string
}

// startBatchDaemon starts a daemon on a SQLite store with the tasks of
// tasksYAML (the body of tasks:, indented by two spaces) and waits for its
// API.
func startBatchDaemon(t *testing.T, tasksYAML string) *batchEnv {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "metadata: \"sqlite://%s\"\napi: {listen: \"127.0.0.1:%d\"}\ntasks:\n%s",
		filepath.Join(dir, "meta.db"), port, tasksYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &batchEnv{t: t, dir: dir, args: []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", port)}}
	e.d = startDaemon(t, cfg, filepath.Join(dir, "daemon.log"))
	e.cli = func(args ...string) result { t.Helper(); return tidemark(t, append(e.args, args...)...) }
	poll(t, e.d, "the API", func() bool { return e.cli("tasks").code == 0 })
	return e
}

// expect runs the CLI against the daemon, as the package's expect does.
func (e *batchEnv) expect(code int, want []string, args ...string) result {
	e.t.Helper()
	return expect(e.t, code, want, append(e.args, args...)...)
}

// instances lists backfill id's instances.
func (e *batchEnv) instances(id int64) []store.BatchInstance {
	e.t.Helper()
	r := e.cli("batch", "instances", fmt.Sprint(id), "--json")
	var ins []store.BatchInstance
	if err := json.Unmarshal([]byte(r.stdout), &ins); err != nil {
		e.t.Fatalf("batch instances %d --json: %v in %s", id, err, r)
	}
	return ins
}

// instance returns backfill id's only instance once cond holds for it.
func (e *batchEnv) instance(id int64, what string, cond func(store.BatchInstance) bool) store.BatchInstance {
	e.t.Helper()
	var in store.BatchInstance
	poll(e.t, e.d, what, func() bool {
		ins := e.instances(id)
		if len(ins) != 1 {
			e.t.Fatalf("backfill %d has %d instances, want 1: %+v", id, len(ins), ins)
		}
		in = ins[0]
		return cond(in)
	})
	return in
}

// Custom dates (--dates) plan and run exactly the dates listed, through the
// CLI, in preview and backfill; --groups outside 1-12 is refused before
// anything is sent.
func TestBatchCustomDatesAndGroups(t *testing.T) {
	t.Parallel()
	e := startBatchDaemon(t, `  - {name: extract, project: sales, type: shell, schedule: daily, command: "echo extracting ${bizdate}"}
`)
	e.expect(0, []string{"2 instance(s)", "2 date(s)", "group 1: 2025-01-11, 2025-01-13\n"},
		"batch", "preview", "extract", "--dates", "2025-01-13, 2025-01-11")
	e.expect(0, []string{"2 instance(s)", "backfill 1 succeeded"},
		"batch", "backfill", "extract", "--dates", "2025-01-11,2025-01-13", "--wait")
	var days []string
	for _, in := range e.instances(1) {
		days = append(days, in.BizTime.Format("2006-01-02"))
	}
	if strings.Join(days, ",") != "2025-01-11,2025-01-13" {
		t.Errorf("backfill of --dates 2025-01-11,2025-01-13 ran %v", days)
	}
	e.expect(2, []string{"--dates", "month 13"}, "batch", "preview", "extract", "--dates", "2025-01-11,2025-13-01")

	for _, n := range []string{"0", "13", "-1"} {
		for _, verb := range []string{"preview", "backfill"} {
			e.expect(2, []string{"--groups " + n, "1 to 12"}, "batch", verb, "extract", "--from", "2025-01-11", "--groups", n)
		}
	}
	if r := e.cli("batch", "list", "--json"); strings.Count(r.stdout, `"id":`) != 1 {
		t.Errorf("a refused --groups recorded a backfill: %s", r)
	}
}

// holdTask is a task that runs until released: it reads a line from a FIFO
// and ends when a writer closes it (release) or a signal ends it.
func holdTask(t *testing.T, dir, name, extra string) (yaml string, release func()) {
	t.Helper()
	fifo := filepath.Join(dir, name+".fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	yaml = fmt.Sprintf("  - {name: %s, project: ops, type: shell, schedule: daily%s, command: \"read line < %s; echo released\"}\n", name, extra, fifo)
	return yaml, func() {
		t.Helper()
		// Opening for writing waits for the task's read end; each release
		// ends one attempt.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// stop-instance of a running instance prints the state the stop leaves it
// in (stopped), not the running it had when the stop was asked.
func TestBatchStopInstancePrintsTheStateReached(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hold, _ := holdTask(t, dir, "hold", "")
	e := startBatchDaemon(t, hold)
	e.expect(0, []string{"backfill 1"}, "batch", "backfill", "hold", "--from", "2025-01-11")
	in := e.instance(1, "the instance to run", func(in store.BatchInstance) bool { return in.State == store.InstanceRunning })
	r := e.expect(0, nil, "batch", "stop-instance", fmt.Sprint(in.ID))
	if want := fmt.Sprintf("instance %d (ops.hold 2025-01-11T00:00:00Z): stopped\n", in.ID); r.stdout != want {
		t.Errorf("stop-instance printed %q, want %q", r.stdout, want)
	}
	if in := e.instances(1)[0]; in.State != store.InstanceStopped {
		t.Errorf("after stop-instance the instance is %s", in.State)
	}
}
