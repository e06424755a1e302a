package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"database/sql"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// A SQL task against a SQLite connection runs its rendered statements in
// one transaction, and its outputs reach the downstream task.
func TestSQLTaskOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wh.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE daily (d TEXT PRIMARY KEY, n INT)`); err != nil {
		t.Fatal(err)
	}
	fill := task(t, "fill", dag.TypeSQL, "")
	fill.Connection = "wh"
	fill.SQL = `INSERT OR REPLACE INTO daily VALUES ('${bizdate}', 3); SELECT count(*) AS days FROM daily`
	fill.Outputs = []dag.Param{{Name: "days", Value: "0"}}
	report := task(t, "report", dag.TypeShell, `echo "days so far: ${outputs.fill.days}"`, "fill")
	v := newEnv(t, []dag.Task{fill, report}, envOpts{conns: map[string]runner.Connection{"wh": {Name: "wh", Type: "sqlite", DSN: path}}})
	req := rangeReq("fill", "2025-04-01", "2025-04-03")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	rec := v.submit(req)
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s (%s)", got.State, got.Error)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM daily WHERE d BETWEEN '20250401' AND '20250403'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows written = %d (%v), want 3", n, err)
	}
	m := byTaskDate(v.instances(rec.ID))
	if got := m["p.fill 2025-04-03"].Outputs["days"]; got != "3" {
		t.Errorf("output days of the last date = %q, want 3", got)
	}
	log, _, err := v.st.GetInstanceLog(t.Context(), m["p.report 2025-04-03"].ID, 0)
	if err != nil || !strings.Contains(log, "days so far: 3") {
		t.Errorf("report log = %q (%v)", log, err)
	}
}

// A self-dependent task's dates run one after the other, in order.
func TestSelfDependentRunsInOrder(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	tk := task(t, "a", dag.TypeShell, `echo $TIDEMARK_BIZDATE >> `+journal)
	tk.SelfDependent = true
	v := newEnv(t, []dag.Task{tk}, envOpts{groups: map[string]int{"default": 8}})
	rec := v.submit(rangeReq("a", "2025-02-25", "2025-03-02"))
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s", got.State)
	}
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	want := "20250225 20250226 20250227 20250228 20250301 20250302"
	if got := strings.Join(strings.Fields(string(b)), " "); got != want {
		t.Errorf("run order = %s, want %s", got, want)
	}
}

// With stop_on_failure the first failure stops the whole backfill: the
// other group's later dates do not run.
func TestStopOnFailure(t *testing.T) {
	cmd := `[ "$TIDEMARK_BIZDATE" != 20250301 ]`
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeShell, cmd)}, envOpts{groups: map[string]int{"default": 1}})
	req := rangeReq("a", "2025-03-01", "2025-03-06")
	req.StopOnFailure = true
	rec := v.submit(req)
	got := v.wait(rec.ID)
	if got.State != store.BatchStopped || got.States[store.InstanceFailed] != 1 || got.States[store.InstanceStopped] != 5 {
		t.Fatalf("backfill = %s %v, want stopped: 1 failed, 5 stopped", got.State, got.States)
	}
	if !strings.Contains(got.Error, "first failure") {
		t.Errorf("error = %q, want it to name the first failure", got.Error)
	}
}

// A backfill with a run time in the future waits for it; with
// wait_scheduled each instance also waits for its scheduled time.
func TestRunAtAndWaitScheduled(t *testing.T) {
	clock := newClock(time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC))
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeNoop, "")}, envOpts{now: clock.now})
	runAt := time.Date(2025, 3, 10, 13, 0, 0, 0, time.UTC)
	// Data timestamps may go up to the run date: March 10th is scheduled
	// at midnight, after the run time.
	req := rangeReq("a", "2025-03-01", "2025-03-10")
	req.RunAt = &runAt
	req.WaitScheduled = true
	rec := v.submit(req)
	if rec.State != store.BatchWaiting {
		t.Fatalf("state = %s, want waiting for its run time", rec.State)
	}
	clock.set(runAt.Add(time.Second))
	// Started: the nine dates scheduled before 13:00 run; March 10th is
	// scheduled at midnight of the 11th and waits.
	got := v.waitFor(rec.ID, func(b store.BatchBackfill) bool { return b.States[store.InstanceSucceeded] == 9 })
	if got.State != store.BatchRunning || got.States[store.InstanceWaiting] != 1 {
		t.Fatalf("backfill = %s %v, want running with March 10th waiting", got.State, got.States)
	}
	clock.set(time.Date(2025, 3, 11, 0, 0, 1, 0, time.UTC))
	if got := v.wait(rec.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s, want succeeded once March 10th was due", got.State)
	}
}
