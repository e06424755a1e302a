package engine_test

import (
	"database/sql"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/store"
)

// A diamond DAG over five dates in two groups: every instance succeeds,
// none starts before what it waits for has finished, and a group's date
// starts only when its previous date has finished.
func TestDiamondGroupsRunInOrder(t *testing.T) {
	tasks := []dag.Task{
		task(t, "a", dag.TypeShell, "true"),
		task(t, "b", dag.TypeShell, "true", "a"),
		task(t, "c", dag.TypeNoop, "", "a"),
		task(t, "d", dag.TypeShell, "true", "b", "c"),
	}
	v := newEnv(t, tasks, envOpts{groups: map[string]int{"default": 8}})
	req := rangeReq("a", "2025-01-11", "2025-01-15")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels}
	req.Groups = 2
	rec := v.submit(req)
	got := v.wait(rec.ID)
	if got.State != store.BatchSucceeded || got.States[store.InstanceSucceeded] != 20 {
		t.Fatalf("backfill = %s %v, want succeeded with 20 succeeded instances", got.State, got.States)
	}
	ins := v.instances(rec.ID)
	byID := map[int64]store.BatchInstance{}
	for _, in := range ins {
		byID[in.ID] = in
	}
	for _, in := range ins {
		for _, dep := range in.Deps {
			if d := byID[dep]; d.FinishedAt.After(*in.StartedAt) {
				t.Errorf("%s %s started at %s before its upstream %s finished at %s", in.Task, in.BizTime, in.StartedAt, d.Task, d.FinishedAt)
			}
		}
		if in.Task == "p.d" && len(in.Deps) != 2 {
			t.Errorf("d waits for %d instances, want b and c of its date", len(in.Deps))
		}
	}
	// Gates: in each group, every instance of seq k finished before any of
	// seq k+1 started.
	for _, a := range ins {
		for _, b := range ins {
			if a.Group == b.Group && b.Seq == a.Seq+1 && a.FinishedAt.After(*b.StartedAt) {
				t.Errorf("group %d: %s of date %d finished after %s of the next date started", a.Group, a.Task, a.Seq, b.Task)
			}
		}
	}
	groups := map[int]map[string]bool{}
	for _, in := range ins {
		if groups[in.Group] == nil {
			groups[in.Group] = map[string]bool{}
		}
		groups[in.Group][in.BizTime.Format("01-02")] = true
	}
	if len(groups[1]) != 3 || len(groups[2]) != 2 || !groups[1]["01-11"] || !groups[2]["01-15"] {
		t.Errorf("groups = %v, want 11,12,13 and 14,15", groups)
	}
}

// A failure halts the later dates of its group and what depends on it;
// the other group goes on. Re-running the failed instance, now fixed,
// finishes the backfill.
func TestFailureHaltsGroupAndRerunFinishes(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "broken")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := `if [ "$TIDEMARK_BIZDATE" = 20250112 ] && [ -e ` + flag + ` ]; then echo "bad input for $TIDEMARK_BIZDATE" >&2; exit 3; fi; echo ok`
	tasks := []dag.Task{task(t, "a", dag.TypeShell, cmd), task(t, "b", dag.TypeShell, "echo b", "a")}
	v := newEnv(t, tasks, envOpts{})
	req := rangeReq("a", "2025-01-11", "2025-01-14")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	req.Groups = 2
	rec := v.submit(req)
	got := v.wait(rec.ID)
	if got.State != store.BatchFailed {
		t.Fatalf("state = %s, want failed", got.State)
	}
	m := byTaskDate(v.instances(rec.ID))
	want := map[string]string{
		"p.a 2025-01-11": store.InstanceSucceeded, "p.b 2025-01-11": store.InstanceSucceeded,
		"p.a 2025-01-12": store.InstanceFailed, "p.b 2025-01-12": store.InstanceWaiting,
		"p.a 2025-01-13": store.InstanceSucceeded, "p.b 2025-01-13": store.InstanceSucceeded, // group 2
		"p.a 2025-01-14": store.InstanceSucceeded, "p.b 2025-01-14": store.InstanceSucceeded,
	}
	for k, st := range want {
		if m[k].State != st {
			t.Errorf("%s = %s, want %s", k, m[k].State, st)
		}
	}
	failed := m["p.a 2025-01-12"]
	log, _, err := v.st.GetInstanceLog(t.Context(), failed.ID, 0)
	if err != nil || !strings.Contains(log, "bad input for 20250112") {
		t.Errorf("log of the failed instance = %q, %v; want its stderr", log, err)
	}
	if !strings.Contains(failed.Error, "exit") {
		t.Errorf("error = %q, want the exit status", failed.Error)
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Rerun(t.Context(), rec.ID, nil, "test"); err != nil {
		t.Fatal(err)
	}
	got = v.wait(rec.ID)
	if got.State != store.BatchSucceeded || got.States[store.InstanceSucceeded] != 8 {
		t.Fatalf("after re-run: %s %v, want all 8 succeeded", got.State, got.States)
	}
	if a := byTaskDate(v.instances(rec.ID))["p.a 2025-01-12"]; a.Attempt != 2 {
		t.Errorf("re-run instance attempt = %d, want 2", a.Attempt)
	}
}

// Two backfills of the same task and dates never run one task date twice
// at once: each run takes a directory lock that would fail if held.
func TestSameTaskDateNeverRunsTwiceAtOnce(t *testing.T) {
	dir := t.TempDir()
	cmd := `mkdir "` + dir + `/lock-$TIDEMARK_BIZDATE" || { echo "already running" >&2; exit 1; }; sleep 0.05; rmdir "` + dir + `/lock-$TIDEMARK_BIZDATE"`
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeShell, cmd)}, envOpts{groups: map[string]int{"default": 8}})
	req := rangeReq("a", "2025-03-01", "2025-03-04")
	req.Groups = 4
	r1, r2 := v.submit(req), v.submit(req)
	for _, id := range []int64{r1.ID, r2.ID} {
		if got := v.wait(id); got.State != store.BatchSucceeded {
			t.Errorf("backfill %d = %s %v, want succeeded (a failure means two runs overlapped)", id, got.State, got.States)
		}
	}
}

// A failing attempt is retried with backoff and the retry's success ends
// the instance.
func TestRetryAfterFailure(t *testing.T) {
	cmd := `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 2 ]`
	tk := task(t, "a", dag.TypeShell, cmd)
	tk.Retries, tk.RetryBackoff = 2, 10*time.Millisecond
	v := newEnv(t, []dag.Task{tk}, envOpts{})
	rec := v.submit(rangeReq("a", "2025-03-01", "2025-03-01"))
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("state = %s, want succeeded after a retry", got.State)
	}
	in := v.instances(rec.ID)[0]
	if in.Attempt != 2 {
		t.Errorf("attempts = %d, want 2", in.Attempt)
	}
	first, _, err := v.st.GetInstanceLog(t.Context(), in.ID, 1)
	if err != nil || !strings.Contains(first, "attempt 1 ended: failed") {
		t.Errorf("log of attempt 1 = %q (%v), want its failure", first, err)
	}
}

// Stopping a backfill ends its running shell process group and leaves the
// rest unrun.
func TestStopBackfillEndsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	cmd := `sleep 300 & echo $! > ` + pidFile + `; wait`
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeShell, cmd)}, envOpts{groups: map[string]int{"default": 1}})
	rec := v.submit(rangeReq("a", "2025-03-01", "2025-03-03"))
	v.waitFor(rec.ID, func(b store.BatchBackfill) bool { return b.States[store.InstanceRunning] == 1 && fileHasPID(pidFile) })
	if err := v.e.StopBackfill(t.Context(), rec.ID, "test"); err != nil {
		t.Fatal(err)
	}
	got := v.wait(rec.ID)
	if got.State != store.BatchStopped || got.States[store.InstanceStopped] != 3 {
		t.Fatalf("backfill = %s %v, want stopped with 3 stopped instances", got.State, got.States)
	}
	pid := readPID(t, pidFile)
	if alive(pid) {
		t.Errorf("the task's child process %d still runs after stop", pid)
	}
}

// Marking a failed instance succeeded lets what waits for it proceed.
func TestMarkSucceeded(t *testing.T) {
	tasks := []dag.Task{task(t, "a", dag.TypeShell, "exit 1"), task(t, "b", dag.TypeShell, "true", "a")}
	v := newEnv(t, tasks, envOpts{})
	req := rangeReq("a", "2025-03-01", "2025-03-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	rec := v.submit(req)
	if got := v.wait(rec.ID); got.State != store.BatchFailed {
		t.Fatalf("state = %s, want failed", got.State)
	}
	m := byTaskDate(v.instances(rec.ID))
	if err := v.e.MarkSucceeded(t.Context(), rec.ID, m["p.a 2025-03-01"].ID, "test"); err != nil {
		t.Fatal(err)
	}
	got := v.wait(rec.ID)
	if got.State != store.BatchSucceeded {
		t.Fatalf("state = %s %v, want succeeded", got.State, got.States)
	}
	if b := byTaskDate(v.instances(rec.ID))["p.b 2025-03-01"]; b.State != store.InstanceSucceeded {
		t.Errorf("b = %s, want succeeded after a was marked", b.State)
	}
}

// Outputs flow from an upstream instance in the backfill; an upstream
// outside it gives its latest successful run's outputs, else the default.
func TestOutputParameters(t *testing.T) {
	up := task(t, "up", dag.TypeShell, `echo "rows=4$TIDEMARK_BIZDATE" >> "$TIDEMARK_OUTPUT"`)
	up.Outputs = []dag.Param{{Name: "rows", Value: "none"}}
	down := task(t, "down", dag.TypeShell, `echo "got ${outputs.up.rows} for ${bizdate}"`, "up")
	v := newEnv(t, []dag.Task{up, down}, envOpts{})

	// down alone: up has never run, so the default.
	rec := v.submit(rangeReq("down", "2025-03-01", "2025-03-01"))
	v.wait(rec.ID)
	assertLog(t, v, rec.ID, "p.down", "got none for 20250301")

	req := rangeReq("up", "2025-03-02", "2025-03-02")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	rec = v.submit(req)
	v.wait(rec.ID)
	assertLog(t, v, rec.ID, "p.down", "got 420250302 for 20250302")

	// down alone again: the latest successful run of up counts.
	rec = v.submit(rangeReq("down", "2025-03-05", "2025-03-05"))
	v.wait(rec.ID)
	assertLog(t, v, rec.ID, "p.down", "got 420250302 for 20250305")
}

func assertLog(t *testing.T, v *env, bf int64, task, want string) {
	t.Helper()
	for _, in := range v.instances(bf) {
		if in.Task != task {
			continue
		}
		log, _, err := v.st.GetInstanceLog(t.Context(), in.ID, 0)
		if err != nil || !strings.Contains(log, want) {
			t.Errorf("log of %s = %q (%v), want %q", task, log, err, want)
		}
		if !strings.Contains(in.Rendered, strings.TrimPrefix(want, "got ")[:3]) {
			t.Errorf("rendered code %q does not show the rendered value", in.Rendered)
		}
		return
	}
	t.Errorf("no instance of %s", task)
}

// Excluded tasks between selected ones dry-run; a paused task under the
// block policy blocks the backfill.
func TestDryRunAndBlocked(t *testing.T) {
	dir := t.TempDir()
	mark := func(name string) string { return "touch " + filepath.Join(dir, name+"-$TIDEMARK_BIZDATE") }
	b := task(t, "b", dag.TypeShell, mark("b"), "a")
	tasks := []dag.Task{task(t, "a", dag.TypeShell, mark("a")), b, task(t, "c", dag.TypeShell, mark("c"), "b")}
	v := newEnv(t, tasks, envOpts{})
	req := rangeReq("a", "2025-03-01", "2025-03-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels, ExcludeTasks: []string{"b"}}
	rec := v.submit(req)
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded || got.States[store.InstanceDryRun] != 1 {
		t.Fatalf("backfill = %s %v, want succeeded with one dry-run", got.State, got.States)
	}
	for name, want := range map[string]bool{"a": true, "b": false, "c": true} {
		_, err := os.Stat(filepath.Join(dir, name+"-20250301"))
		if (err == nil) != want {
			t.Errorf("task %s ran = %v, want %v", name, err == nil, want)
		}
	}

	paused := tasks
	paused[1].Paused = true
	v2 := newEnv(t, paused, envOpts{})
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels, KeepPaused: true}
	rec = v2.submit(req)
	if got := v2.wait(rec.ID); got.State != store.BatchBlocked {
		t.Fatalf("backfill with a paused task = %s %v, want blocked", got.State, got.States)
	}
}

func fileHasPID(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) != ""
}

// A dry-run instance released while a sibling is being claimed must not end
// the backfill early.
func TestDryRunBesideRunningInstance(t *testing.T) {
	tasks := []dag.Task{
		task(t, "r", dag.TypeNoop, ""),
		task(t, "d", dag.TypeNoop, "", "r"),
		task(t, "s", dag.TypeShell, "sleep 0.2", "r"),
		task(t, "x", dag.TypeNoop, "", "d", "s"),
	}
	v := newEnv(t, tasks, envOpts{})
	req := rangeReq("r", "2025-03-01", "2025-03-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels, ExcludeTasks: []string{"d"}}
	rec := v.submit(req)
	got := v.wait(rec.ID)
	if got.State != store.BatchSucceeded || got.States[store.InstanceSucceeded] != 3 || got.States[store.InstanceDryRun] != 1 {
		t.Fatalf("backfill = %s %v (%s), want succeeded with 3 succeeded and 1 dry-run", got.State, got.States, got.Error)
	}
}

// A backfill recorded as running whose instances have all ended (the
// daemon died between the last end and the backfill's) ends at the next
// start.
func TestRestartEndsFinishedBackfill(t *testing.T) {
	biz := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	insts := []store.BatchInstance{{Task: "p.a", BizTime: biz, BizEnd: biz, Scheduled: biz.AddDate(0, 0, 1), Mode: plan.ModeRun, ResourceGroup: "default", State: store.InstanceSucceeded}}
	url, rec := recordRunning(t, biz, insts, [][]int{nil})
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeNoop, "")}, envOpts{storeURL: url})
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s, want succeeded", got.State)
	}
}

// A restarted engine reads a backfill larger than a page, page by page
// while it builds the nodes of the last: every page's waiting instance
// runs, in the order of the dependencies that cross the pages, and the
// backfill succeeds with all of them.
func TestRestartLoadsEveryPage(t *testing.T) {
	// packed: the backfill's instances unpacked from its packed value
	// (store.ReadBatchBackfillInstances). rows: recorded with an instance
	// that had run, it has none, and its rows are read, in two halves.
	// damaged: its packed value cut short (its checksum then differs), and
	// its rows are read instead.
	for _, variant := range []string{"packed", "rows", "damaged"} {
		t.Run(variant, func(t *testing.T) { testRestartLoadsEveryPage(t, variant) })
	}
}

func testRestartLoadsEveryPage(t *testing.T, variant string) {
	biz := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 2*engine.LoadPageSize + 500
	waiting := []int{engine.LoadPageSize - 1, 2*engine.LoadPageSize - 1, n - 1} // the last of each page
	insts := make([]store.BatchInstance, n)
	deps := make([][]int, n)
	for i := range insts {
		d := biz.AddDate(0, 0, i)
		insts[i] = store.BatchInstance{Task: "p.a", BizTime: d, BizEnd: d, Scheduled: d.AddDate(0, 0, 1), Seq: i,
			Mode: plan.ModeRun, ResourceGroup: "default", State: store.InstanceSucceeded}
	}
	prev := 0
	for _, w := range waiting {
		insts[w].State = store.InstanceWaiting
		deps[w] = []int{prev}
		prev = w
	}
	if variant == "rows" {
		insts[0].Attempt, insts[0].FinishedAt = 1, &biz
	}
	url, rec := recordRunning(t, biz, insts, deps)
	if variant == "damaged" {
		db, err := sql.Open("sqlite", strings.TrimPrefix(url, "sqlite://"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := db.Exec(`UPDATE "batch_backfill_packed" SET "value" = substr("value", 1, length("value") - 7) WHERE "backfill_id" = ?`, rec.ID)
		if n, _ := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("damage the packed value: %d rows, %v", n, err)
		}
		db.Close()
	}
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeNoop, "")}, envOpts{storeURL: url})
	got := v.wait(rec.ID)
	if got.State != store.BatchSucceeded || got.States[store.InstanceSucceeded] != n {
		t.Fatalf("backfill = %s %v (%s), want succeeded with %d succeeded", got.State, got.States, got.Error, n)
	}
	var ends []time.Time
	for _, w := range waiting {
		in, err := v.st.GetBatchInstance(t.Context(), insts[w].ID)
		if err != nil {
			t.Fatal(err)
		}
		if in.FinishedAt == nil {
			t.Fatalf("instance %d has no end", w)
		}
		ends = append(ends, *in.FinishedAt)
	}
	if !slices.IsSortedFunc(ends, time.Time.Compare) {
		t.Errorf("the waiting instances ended at %v, not in the order of their dependencies", ends)
	}
}

// A restarted engine keeps what the stored instances carry beyond their
// plan: the outputs of an upstream that succeeded before the restart
// reach its downstream's code, and a retry already used counts.
func TestRestartKeepsAttempts(t *testing.T) {
	biz := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	started, ended := biz.Add(time.Hour), biz.Add(2*time.Hour)
	plain := func(task string, st string) store.BatchInstance {
		return store.BatchInstance{Task: task, BizTime: biz, BizEnd: biz, Scheduled: biz.AddDate(0, 0, 1), Mode: plan.ModeRun,
			ResourceGroup: "default", State: st}
	}
	up := plain("p.up", store.InstanceSucceeded)
	up.Attempt, up.StartedAt, up.FinishedAt = 1, &started, &ended
	up.Rendered, up.Outputs = "echo rows=4242", map[string]string{"rows": "4242"}
	down := plain("p.down", store.InstanceWaiting)
	retried := plain("p.flaky", store.InstanceWaiting)
	retried.Attempt, retried.StartedAt, retried.NextTry = 1, &started, &ended
	retried.Error = "attempt 1 failed"
	insts := []store.BatchInstance{up, down, retried}
	url, rec := recordRunning(t, biz, insts, [][]int{nil, {0}, nil})

	upTask := task(t, "up", dag.TypeShell, "exit 3") // never run again
	upTask.Outputs = []dag.Param{{Name: "rows", Value: "none"}}
	flaky := task(t, "flaky", dag.TypeShell, "exit 3")
	flaky.Retries, flaky.RetryBackoff = 1, time.Hour // a retry granted again would wait an hour
	v := newEnv(t, []dag.Task{upTask, task(t, "down", dag.TypeShell, `echo "got ${outputs.up.rows}"`, "up"), flaky},
		envOpts{storeURL: url})
	got := v.wait(rec.ID)
	if got.State != store.BatchFailed {
		t.Fatalf("backfill = %s %v (%s), want failed: flaky's one retry was used before the restart", got.State, got.States, got.Error)
	}
	assertLog(t, v, rec.ID, "p.down", "got 4242")
	in, err := v.st.GetBatchInstance(t.Context(), insts[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.State != store.InstanceFailed || in.Attempt != 2 {
		t.Errorf("flaky = %s after %d attempts, want failed after 2", in.State, in.Attempt)
	}
}

// recordRunning records, in a new SQLite store, a running backfill of task
// p.a made of insts (with deps), as a daemon that died would have left
// it, and returns the store's URL and the backfill.
func recordRunning(t *testing.T, runAt time.Time, insts []store.BatchInstance, deps [][]int) (string, store.BatchBackfill) {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "meta.db")
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := store.BatchBackfill{Name: "x", Task: "p.a", StartedBy: "test", Request: []byte(`{"task":"p.a"}`), State: store.BatchRunning, RunAt: runAt}
	if err := st.CreateBatchBackfill(t.Context(), &rec, insts, deps); err != nil {
		t.Fatal(err)
	}
	return url, rec
}

// TestEndsShareTheirDependentsClaim: a chain of five no-op tasks over one
// day takes a write transaction a step: the first claim alone, then each
// end with the claim of what it released, then the last end. Each is
// recorded in order (an instance's end no later than its dependent's
// claim), and the backfill succeeds.
func TestEndsShareTheirDependentsClaim(t *testing.T) {
	tasks := []dag.Task{task(t, "t1", dag.TypeNoop, "")}
	for i := 2; i <= 5; i++ {
		tasks = append(tasks, task(t, fmt.Sprintf("t%d", i), dag.TypeNoop, "", fmt.Sprintf("t%d", i-1)))
	}
	v := newEnv(t, tasks, envOpts{})
	var mu sync.Mutex
	writes := 0
	v.st.Observe(func(op string, _ time.Duration) {
		if op == "tx batch_write" {
			mu.Lock()
			writes++
			mu.Unlock()
		}
	})
	req := rangeReq("t1", "2025-01-11", "2025-01-11")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels}
	rec := v.submit(req)
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded || got.States[store.InstanceSucceeded] != 5 {
		t.Fatalf("backfill = %s %v, want succeeded with 5 succeeded instances", got.State, got.States)
	}
	v.stop()
	mu.Lock()
	defer mu.Unlock()
	// Two to submit the backfill and one to end it; the first claim, four
	// ends each with the next claim, the last end (without sharing, 13:
	// five claims and five ends).
	if writes != 9 {
		t.Errorf("%d batch write transactions, want 9", writes)
	}
	for _, in := range v.instances(rec.ID) {
		for _, dep := range in.Deps {
			for _, up := range v.instances(rec.ID) {
				if up.ID == dep && up.FinishedAt.After(*in.StartedAt) {
					t.Errorf("%s started at %s before %s finished at %s", in.Task, in.StartedAt, up.Task, up.FinishedAt)
				}
			}
		}
	}
}

// A succeeded instance's node keeps no more of its attempt than its
// outputs, which what waits for it reads, while its row keeps the rest,
// also after a restart; the instance that waits runs with those outputs.
func TestSucceededKeepsOnlyOutputs(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	up := task(t, "up", dag.TypeShell, `echo "rows=7" >> "$TIDEMARK_OUTPUT"`)
	up.Outputs = []dag.Param{{Name: "rows", Value: "none"}}
	plain := task(t, "plain", dag.TypeShell, "true", "up")
	// last holds the backfill open (and its nodes in memory) until the
	// test has looked.
	last := task(t, "last", dag.TypeShell, `while [ ! -e "`+gate+`" ]; do sleep 0.05; done; echo "got ${outputs.up.rows} rows"`, "plain", "up")
	v := newEnv(t, []dag.Task{up, plain, last}, envOpts{})
	req := rangeReq("up", "2025-03-01", "2025-03-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 2}
	rec := v.submit(req)
	ids := map[string]int64{}
	v.until("up and plain to succeed", func() bool {
		done := 0
		for _, in := range v.instances(rec.ID) {
			ids[in.Task] = in.ID
			if in.State == store.InstanceSucceeded {
				done++
			}
		}
		return done == 2
	})
	assertKept(t, v, ids)
	// A restart reads them back as little.
	v.stop()
	v = newEnv(t, []dag.Task{up, plain, last}, envOpts{storeURL: "sqlite://" + filepath.Join(v.dir, "meta.db")})
	assertKept(t, v, ids)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s %v (%s), want succeeded", got.State, got.States, got.Error)
	}
	assertLog(t, v, rec.ID, "p.last", "got 7 rows")
	for task, id := range ids {
		if in, err := v.st.GetBatchInstance(t.Context(), id); err != nil || in.Rendered == "" || in.StartedAt == nil {
			t.Errorf("%s's row after the backfill: %+v (%v), want its attempt kept", task, in, err)
		}
	}
}

// assertKept checks that the nodes of the succeeded p.up and p.plain keep
// p.up's outputs alone, and their rows all of their attempts.
func assertKept(t *testing.T, v *env, ids map[string]int64) {
	t.Helper()
	for task, want := range map[string]map[string]string{"p.up": {"rows": "7"}, "p.plain": nil} {
		k, err := engine.KeptOf(t.Context(), v.e, ids[task])
		if err != nil {
			t.Fatal(err)
		}
		if !k.Found || k.Rendered != "" || k.Tag != "" || k.Started || !maps.Equal(k.Outputs, want) || k.Record != (want != nil) {
			t.Errorf("%s succeeded, its node keeps %+v; want its outputs %v alone", task, k, want)
		}
		in, err := v.st.GetBatchInstance(t.Context(), ids[task])
		if err != nil {
			t.Fatal(err)
		}
		if in.Rendered == "" || in.SQLTag == "" || in.StartedAt == nil {
			t.Errorf("%s's row lost its attempt: rendered %q, tag %q, started %v", task, in.Rendered, in.SQLTag, in.StartedAt)
		}
	}
}

// A backfill that the engine read on its own before Submit handed it over
// (recorded while the engine started, or named by a command meanwhile) is
// not adopted a second time: each instance runs once and the backfill
// ends.
func TestSubmitAdoptsOnce(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	biz := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	var insts []store.BatchInstance
	for d := range 3 {
		b := biz.AddDate(0, 0, d)
		insts = append(insts, store.BatchInstance{Task: "p.a", BizTime: b, BizEnd: b, Scheduled: b.AddDate(0, 0, 1),
			Mode: plan.ModeRun, ResourceGroup: "default", State: store.InstanceWaiting})
	}
	url, rec := recordRunning(t, biz, insts, [][]int{nil, nil, nil})
	// As Submit leaves it: waiting for its start, which is due.
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetBatchBackfillState(t.Context(), rec.ID, store.BatchWaiting, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	rec.State = store.BatchWaiting
	runs := filepath.Join(t.TempDir(), "runs")
	a := task(t, "a", dag.TypeShell, `echo "$TIDEMARK_BIZDATE" >> "`+runs+`"; while [ ! -e "`+gate+`" ]; do sleep 0.05; done`)
	// One at a time: the first runs, the others wait.
	v := newEnv(t, []dag.Task{a}, envOpts{storeURL: url, groups: map[string]int{"default": 1}}) // its start-up reads the backfill
	v.until("the first instance to start", func() bool {
		running := 0
		for _, in := range v.instances(rec.ID) {
			if in.State == store.InstanceRunning {
				running++
			}
		}
		return running == 1
	})
	if err := engine.AdoptRecorded(t.Context(), v.e, rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s %v (%s), want succeeded", got.State, got.States, got.Error)
	}
	for _, in := range v.instances(rec.ID) {
		if in.State != store.InstanceSucceeded || in.Attempt != 1 {
			t.Errorf("instance %d: %s after %d attempts, want succeeded after 1", in.ID, in.State, in.Attempt)
		}
	}
	// Both copies' attempts would count 1: what ran is the truth.
	ran, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(ran)); len(got) != len(insts) {
		t.Errorf("the task ran for %v, want each of the %d dates once", got, len(insts))
	}
}

// A backfill recorded but not yet in memory (Submit has not handed it
// over, or could not) can be stopped: the command reads it.
func TestStopBeforeHandOver(t *testing.T) {
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeShell, "true")}, envOpts{})
	biz := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	rec := store.BatchBackfill{Name: "x", Task: "p.a", StartedBy: "test", Request: []byte(`{"task":"p.a"}`),
		State: store.BatchWaiting, RunAt: time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)}
	insts := []store.BatchInstance{{Task: "p.a", BizTime: biz, BizEnd: biz, Scheduled: biz.AddDate(0, 0, 1),
		Mode: plan.ModeRun, ResourceGroup: "default", State: store.InstanceWaiting}}
	if err := v.st.CreateBatchBackfill(t.Context(), &rec, insts, [][]int{nil}); err != nil {
		t.Fatal(err)
	}
	if err := v.e.StopBackfill(t.Context(), rec.ID, "test"); err != nil {
		t.Fatalf("stop a backfill not yet handed over: %v", err)
	}
	if got := v.wait(rec.ID); got.State != store.BatchStopped || got.States[store.InstanceStopped] != 1 {
		t.Fatalf("backfill = %s %v, want stopped with its instance", got.State, got.States)
	}
}
