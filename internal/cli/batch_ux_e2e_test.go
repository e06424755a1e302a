package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// holdTask is a task that runs until released: its script (a format
// whose %[1]s is a FIFO's path, "read line < %[1]s" by default) reads a line
// from a FIFO, which ends when a writer closes it (release) or a signal
// ends it. extra adds YAML keys to the task.
func holdTask(t *testing.T, dir, name, extra, script string) (yaml string, release func()) {
	t.Helper()
	fifo := filepath.Join(dir, name+".fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if script == "" {
		script = "read line < %[1]s"
	}
	yaml = fmt.Sprintf("  - {name: %s, project: ops, type: shell, schedule: daily%s, command: %q}\n", name, extra, fmt.Sprintf(script, fifo))
	return yaml, func() {
		t.Helper()
		// Opening for writing waits for the task's read end; each release
		// ends one attempt. A minute without a reader fails the test.
		opened := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString("go\n")
				f.Close()
			}
			opened <- err
		}()
		select {
		case err := <-opened:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			// Unblock the open, then fail.
			if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				<-opened
				f.Close()
			}
			t.Fatalf("no attempt of %s read its FIFO within a minute", name)
		}
	}
}

// stop-instance of a running instance prints the state the stop leaves it
// in (stopped), not the running it had when the stop was asked.
func TestBatchStopInstancePrintsTheStateReached(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hold, _ := holdTask(t, dir, "hold", "", "")
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

// One task and business time never runs twice at once, also when one of
// the runs is a single instance covering a range of dates: a backfill of
// 2025-01-07 waits, saying for what, while a single instance over
// 2025-01-05..09 runs. Each run takes a directory lock and notes an
// overlap if it is held. Afterwards the succeeded policies count every date
// the single instance covered as done.
func TestBatchSingleInstanceRangeNeverOverlaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock, overlaps := filepath.Join(dir, "lock"), filepath.Join(dir, "overlaps")
	script := fmt.Sprintf("mkdir %s || echo overlap $TIDEMARK_BIZDATE >> %s; read line < %%[1]s; rmdir %s", lock, overlaps, lock)
	span, release := holdTask(t, dir, "span", ", single_instance: true", script)
	e := startBatchDaemon(t, span)

	e.expect(0, []string{"backfill 1", "1 instance(s)"}, "batch", "backfill", "span", "--from", "2025-01-05", "--to", "2025-01-09", "--single-instance")
	e.instance(1, "the single instance to run", func(in store.BatchInstance) bool { return in.State == store.InstanceRunning })
	e.expect(0, []string{"backfill 2", "1 instance(s)"}, "batch", "backfill", "span", "--from", "2025-01-07")
	in := e.instance(2, "the 2025-01-07 instance to wait for the single one, or run", func(in store.BatchInstance) bool {
		return in.State != store.InstanceWaiting || strings.Contains(in.Reason, "waits for instance")
	})
	if in.State != store.InstanceWaiting || !strings.Contains(in.Reason, "waits for instance 1 of backfill 1, a single instance covering 2025-01-05T00:00:00Z to 2025-01-09T00:00:00Z") {
		t.Errorf("while the single instance over 2025-01-05..09 runs, the 2025-01-07 instance is %s (%q), want waiting for it", in.State, in.Reason)
	}
	if r := e.cli("batch", "instances", "2"); !strings.Contains(r.stdout, "waits for instance 1") {
		t.Errorf("batch instances 2 does not say what the instance waits for: %s", r)
	}
	// Released one after the other: a second writer could reach the
	// first reader before it has closed the FIFO.
	for _, id := range []string{"1", "2"} {
		release()
		poll(t, e.d, "backfill "+id+" to succeed", func() bool {
			return strings.Contains(e.cli("batch", "show", id).stdout, ": succeeded")
		})
	}
	if data, err := os.ReadFile(overlaps); err == nil || !os.IsNotExist(err) {
		t.Errorf("runs of one task date overlapped: %q (%v)", data, err)
	}

	// Every date of 2025-01-05..09 ran (inside the single instance): with
	// --succeeded skip only 2025-01-10 is left to run.
	r := e.expect(0, []string{"1 instance(s)", "left out by the succeeded/running policies: 5", "2025-01-10 00:00"},
		"batch", "preview", "span", "--from", "2025-01-05", "--to", "2025-01-10", "--succeeded", "skip")
	for _, d := range []string{"2025-01-06 00:00", "2025-01-08 00:00", "2025-01-09 00:00"} {
		if strings.Contains(r.stdout, "BIZ") && strings.Contains(r.stdout, "  "+d+" ") {
			t.Errorf("--succeeded skip plans %s again, which the single instance ran: %s", d, r.stdout)
		}
	}
	e.expect(2, []string{"leave out every task date"}, "batch", "backfill", "span", "--from", "2025-01-06", "--to", "2025-01-09", "--succeeded", "skip")
}

// Instances a failure holds back say why — an upstream instance that
// failed, or an earlier date of their group — and the failure names the
// instance that failed and the command to read its log. A re-run that
// succeeds clears the reasons.
func TestBatchHeldInstancesSayWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fixed := filepath.Join(dir, "fixed")
	e := startBatchDaemon(t, fmt.Sprintf(`  - {name: a, project: sales, type: shell, schedule: daily, command: "[ ${bizdate} != 20250102 ] || [ -e %[1]s ]"}
  - {name: b, project: sales, type: shell, schedule: daily, depends_on: [a], command: "echo b"}
`, fixed))
	r := e.expect(1, []string{"backfill 1 failed", "1 instance(s) failed: 3 (sales.a 2025-01-02)", "`tidemark batch log 3`", "`tidemark batch rerun 1`"},
		"batch", "backfill", "a", "--from", "2025-01-01", "--to", "2025-01-03", "--downstream", "all", "--wait")
	if !strings.Contains(r.stdout, "instance 3 sales.a: failed") {
		t.Errorf("backfill --wait: %s", r)
	}
	want := map[string]string{
		"sales.b 2025-01-02": "held: upstream sales.a 2025-01-02 failed (instance 3)",
		"sales.a 2025-01-03": "held: 2025-01-02 failed in group 1 (instance 3)",
		"sales.b 2025-01-03": "held: 2025-01-02 failed in group 1 (instance 3)",
	}
	for _, in := range e.instances(1) {
		key := in.Task + " " + in.BizTime.Format("2006-01-02")
		if w, held := want[key]; held && (in.State != store.InstanceWaiting || in.Reason != w) {
			t.Errorf("%s: %s %q, want waiting %q", key, in.State, in.Reason, w)
		}
	}
	if r := e.cli("batch", "instances", "1", "--state", "waiting"); strings.Count(r.stdout, "held: ") != 3 {
		t.Errorf("batch instances does not show why the instances wait: %s", r)
	}

	if err := os.WriteFile(fixed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.expect(0, []string{"backfill 1: running"}, "batch", "rerun", "1")
	poll(t, e.d, "the re-run backfill to succeed", func() bool {
		return strings.Contains(e.cli("batch", "show", "1").stdout, ": succeeded")
	})
	for _, in := range e.instances(1) {
		if strings.HasPrefix(in.Reason, "held: ") {
			t.Errorf("after the re-run %s %s still says %q", in.Task, in.BizTime, in.Reason)
		}
	}
}

// The preview numbers its instances once, by date (the groups run Jan 11
// and Jan 13 first, but the list reads Jan 11, 12, 13), its waits point at
// those numbers, and a zone the same as the tasks' is not a second column.
func TestBatchPreviewByDate(t *testing.T) {
	t.Parallel()
	e := startBatchDaemon(t, `  - {name: extract, project: sales, type: shell, schedule: daily, command: "true"}
  - {name: load, project: sales, type: shell, schedule: daily, depends_on: [extract], command: "true"}
`)
	r := e.expect(0, []string{"6 instance(s)"}, "batch", "preview", "extract", "--from", "2025-01-11", "--to", "2025-01-13",
		"--downstream", "all", "--groups", "2", "--tz", "UTC")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var head []string
	var rows [][]string
	for _, l := range lines {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "#":
			head = f
		case head != nil:
			rows = append(rows, f)
		}
	}
	if strings.Join(head, " ") != "# GROUP TASK BIZ TIME SCHEDULED MODE WAITS FOR" {
		t.Errorf("preview header %q: want one number column and one scheduled column when the zones agree", head)
	}
	want := []string{"0 sales.extract 2025-01-11 -", "1 sales.load 2025-01-11 #0", "2 sales.extract 2025-01-12 group",
		"3 sales.load 2025-01-12 #2", "4 sales.extract 2025-01-13 -", "5 sales.load 2025-01-13 #4"}
	if len(rows) != len(want) {
		t.Fatalf("preview rows %q, want %d", rows, len(want))
	}
	for i, f := range rows {
		// #, group, task, date, time, zone, scheduled date, time, zone, mode, waits…
		if got := strings.Join([]string{f[0], f[2], f[3], f[10]}, " "); got != want[i] {
			t.Errorf("preview row %d = %q, want %q", i, got, want[i])
		}
	}
	e.expect(0, []string{"SCHEDULED (Asia/Tokyo)", "2025-01-12 09:00 JST"},
		"batch", "preview", "extract", "--from", "2025-01-11", "--tz", "Asia/Tokyo")
}

// The node export marks a task that was excluded and only dry-ran so that
// what is below it proceeds: it is not one of the selected tasks.
func TestBatchExportMarksExcludedTasks(t *testing.T) {
	t.Parallel()
	e := startBatchDaemon(t, `  - {name: a, project: sales, type: shell, schedule: daily, command: "true"}
  - {name: x, project: sales, type: shell, schedule: daily, depends_on: [a], command: "true"}
  - {name: b, project: sales, type: shell, schedule: daily, depends_on: [x], command: "true"}
  - {name: quiet, project: sales, type: shell, schedule: daily, dry_run: true, depends_on: [b], command: "true"}
`)
	e.expect(0, []string{"backfill 1 succeeded"}, "batch", "backfill", "a", "--from", "2025-01-11", "--to", "2025-01-12",
		"--downstream", "all", "--exclude-task", "x", "--wait")
	r := e.expect(0, nil, "batch", "export", "1")
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil || len(rows) != 5 {
		t.Fatalf("export: %v in %s", err, r)
	}
	if got := strings.Join(rows[0], ","); got != "id,name,project,owner,output,type,schedule,instances,selected,note" {
		t.Errorf("export header %q", got)
	}
	want := map[string]string{
		"sales.a":     "2,yes,",
		"sales.x":     "2,no,dry_run: excluded; dry-run so that downstream proceeds",
		"sales.b":     "2,yes,",
		"sales.quiet": "2,yes,dry_run: task is a dry-run task (dry_run=dry_run): succeeds without running",
	}
	for _, row := range rows[1:] {
		if got := strings.Join(row[7:], ","); got != want[row[0]] {
			t.Errorf("export of %s: %q, want %q", row[0], got, want[row[0]])
		}
	}
}

// batch wait attaches to a backfill started elsewhere and follows it to its
// end: exit 0 when it succeeded, 1 when it failed; one that already ended
// is shown as it ended; an unknown id is a usage error.
func TestBatchWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hold, release := holdTask(t, dir, "hold", "", "")
	e := startBatchDaemon(t, hold+`  - {name: broken, project: ops, type: shell, schedule: daily, command: "exit 3"}
`)
	e.expect(0, []string{"backfill 1"}, "batch", "backfill", "hold", "--from", "2025-01-11")
	in := e.instance(1, "the instance to run", func(in store.BatchInstance) bool { return in.State == store.InstanceRunning })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(e.args, "batch", "wait", "1")...)
	cmd.Env = environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	first, err := out.ReadString('\n') // printed once attached
	if err != nil || !strings.Contains(first, "backfill 1") || !strings.Contains(first, "running 1") {
		t.Fatalf("batch wait's first line %q (%v)", first, err)
	}
	release()
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil || !strings.Contains(string(rest), fmt.Sprintf("instance %d ops.hold: succeeded", in.ID)) ||
		!strings.Contains(string(rest), "backfill 1 succeeded") {
		t.Errorf("batch wait 1: %v, stdout %q, stderr %q", err, first+string(rest), stderr.String())
	}

	e.expect(0, []string{"backfill 1 succeeded"}, "batch", "wait", "1")
	e.expect(0, nil, "batch", "backfill", "broken", "--from", "2025-01-11")
	e.expect(1, []string{"backfill 2 failed", "`tidemark batch log"}, "batch", "wait", "2")
	e.expect(2, []string{"99"}, "batch", "wait", "99")
}
