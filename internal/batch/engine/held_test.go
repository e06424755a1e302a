package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/store"
)

// An instance blocked by a pause holds back what depends on it and the
// later dates of its group, and they say so; marking it succeeded lets
// them run.
func TestHeldByABlockedInstance(t *testing.T) {
	b := task(t, "b", dag.TypeNoop, "", "a")
	b.Paused = true
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeNoop, ""), b, task(t, "c", dag.TypeNoop, "", "b")}, envOpts{})
	req := rangeReq("a", "2025-03-01", "2025-03-02")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels, KeepPaused: true}
	rec := v.submit(req)
	if got := v.wait(rec.ID); got.State != store.BatchBlocked {
		t.Fatalf("backfill = %s %v, want blocked", got.State, got.States)
	}
	ins := byTaskDate(v.instances(rec.ID))
	blocked, second := ins["p.b 2025-03-01"], ins["p.b 2025-03-02"]
	want := map[string]string{
		"p.c 2025-03-01": "held: upstream p.b 2025-03-01 is blocked (a paused task) (instance " + itoa(blocked.ID) + ")",
		"p.a 2025-03-02": "held: 2025-03-01 is blocked (a paused task) in group 1 (instance " + itoa(blocked.ID) + ")",
		"p.c 2025-03-02": "held: upstream p.b 2025-03-02 is blocked (a paused task) (instance " + itoa(second.ID) + ")",
	}
	for key, reason := range want {
		if in := ins[key]; in.State != store.InstanceWaiting || in.Reason != reason {
			t.Errorf("%s: %s %q, want waiting %q", key, in.State, in.Reason, reason)
		}
	}
	if in := second; in.State != store.InstanceBlocked || in.Reason == "" || strings.HasPrefix(in.Reason, "held: ") {
		t.Errorf("a blocked instance keeps the reason it is blocked: %+v", in)
	}

	// Marking the blocked instance succeeded releases the first date; the
	// second is still held by its own blocked instance, and says so.
	if err := v.e.MarkSucceeded(t.Context(), rec.ID, blocked.ID, "test"); err != nil {
		t.Fatal(err)
	}
	v.waitFor(rec.ID, func(b store.BatchBackfill) bool {
		return b.States[store.InstanceSucceeded] == 4 && b.State == store.BatchBlocked
	})
	ins = byTaskDate(v.instances(rec.ID))
	if in := ins["p.c 2025-03-02"]; in.Reason != "held: upstream p.b 2025-03-02 is blocked (a paused task) (instance "+itoa(second.ID)+")" {
		t.Errorf("p.c 2025-03-02 after the first date was released: %s %q", in.State, in.Reason)
	}
}

func itoa(n int64) string { return fmt.Sprint(n) }

// In the recurring schedule too, an instance whose upstream failed says
// so, and marking the upstream succeeded clears it.
func TestScheduledInstanceHeldByAFailure(t *testing.T) {
	clock := newClock(time.Date(2025, 3, 1, 22, 30, 0, 0, time.UTC))
	up := task(t, "up", dag.TypeShell, "exit 1")
	up.Schedule = mustParse(t, "hourly")
	down := task(t, "down", dag.TypeNoop, "", "up")
	v := newEnv(t, []dag.Task{up, down}, envOpts{schedule: true, now: clock.now})
	list := func(task string) []store.BatchInstance {
		ins, err := v.st.ListBatchInstances(t.Context(), store.BatchInstanceFilter{Scheduled: true, Task: task})
		if err != nil {
			t.Fatal(err)
		}
		return ins
	}
	clock.set(time.Date(2025, 3, 2, 0, 0, 1, 0, time.UTC))
	var ups []store.BatchInstance
	v.until("the hours to fail and the day to say why it waits", func() bool {
		ups = list("p.up")
		downs := list("p.down")
		return len(ups) == 2 && ups[0].State == store.InstanceFailed && ups[1].State == store.InstanceFailed &&
			len(downs) == 1 && strings.HasPrefix(downs[0].Reason, "held: ")
	})
	if d := list("p.down")[0]; d.State != store.InstanceWaiting ||
		(d.Reason != "held: upstream p.up 2025-03-01 22:00 failed (instance "+itoa(ups[0].ID)+")" &&
			d.Reason != "held: upstream p.up 2025-03-01 23:00 failed (instance "+itoa(ups[1].ID)+")") {
		t.Errorf("the day's instance: %s %q", d.State, d.Reason)
	}
	// Marking the first hour succeeded leaves the second to hold the day.
	if err := v.e.MarkScheduledSucceeded(t.Context(), ups[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	if d := list("p.down")[0]; d.Reason != "held: upstream p.up 2025-03-01 23:00 failed (instance "+itoa(ups[1].ID)+")" {
		t.Errorf("the day's instance after the first hour was marked: %s %q", d.State, d.Reason)
	}
	if err := v.e.MarkScheduledSucceeded(t.Context(), ups[1].ID, "test"); err != nil {
		t.Fatal(err)
	}
	v.until("the day to run", func() bool {
		downs := list("p.down")
		return len(downs) == 1 && downs[0].State == store.InstanceSucceeded
	})
}
