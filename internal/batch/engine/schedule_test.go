package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/store"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func newClock(t time.Time) *fakeClock { c := &fakeClock{}; c.set(t); return c }
func mustParse(t *testing.T, spec string) calendar.Schedule {
	t.Helper()
	s, err := calendar.Parse(spec, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The recurring schedule creates each cycle's instance when it is due; a
// daily task on an hourly one waits for every hour of its day that
// tidemark scheduled, and starts once they have all succeeded.
func TestRecurringScheduleDailyOnHourly(t *testing.T) {
	clock := newClock(time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC))
	up := task(t, "up", dag.TypeNoop, "")
	up.Schedule = mustParse(t, "hourly")
	down := task(t, "down", dag.TypeNoop, "", "up")
	v := newEnv(t, []dag.Task{up, down}, envOpts{schedule: true, now: clock.now})

	clock.set(time.Date(2025, 3, 2, 0, 0, 1, 0, time.UTC))
	downs := untilScheduledSucceeds(v, "p.down")
	ups, err := v.st.ListBatchInstances(t.Context(), store.BatchInstanceFilter{Scheduled: true, Task: "p.up"})
	if err != nil {
		t.Fatal(err)
	}
	// 10:00 … 23:00 of March 1st: the cycles due since the schedule began.
	if len(ups) != 14 {
		t.Fatalf("hourly instances = %d, want 14 (10:00-23:00)", len(ups))
	}
	d := downs[0]
	if !d.BizTime.Equal(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)) || len(d.Deps) != 14 {
		t.Fatalf("daily instance %s waits for %d hours, want March 1st waiting for 14", d.BizTime, len(d.Deps))
	}
	for _, u := range ups {
		if u.State != store.InstanceSucceeded || u.FinishedAt.After(*d.StartedAt) {
			t.Errorf("hour %s: %s, finished %v; the daily instance started %v", u.BizTime, u.State, u.FinishedAt, d.StartedAt)
		}
	}
}

// After a restart, a scheduled instance whose upstream failed still waits:
// the failed upstream is not in memory any more, and must not count as
// done.
func TestScheduleRestartKeepsFailedUpstream(t *testing.T) {
	clock := newClock(time.Date(2025, 3, 1, 22, 30, 0, 0, time.UTC))
	up := task(t, "up", dag.TypeShell, "exit 1")
	up.Schedule = mustParse(t, "hourly")
	down := task(t, "down", dag.TypeNoop, "", "up")
	tick := task(t, "tick", dag.TypeNoop, "")
	tick.Schedule = mustParse(t, "hourly")
	tasks := []dag.Task{up, down, tick}
	url := "sqlite://" + t.TempDir() + "/meta.db"
	list := func(v *env, task string) []store.BatchInstance {
		ins, err := v.st.ListBatchInstances(t.Context(), store.BatchInstanceFilter{Scheduled: true, Task: task})
		if err != nil {
			t.Fatal(err)
		}
		return ins
	}
	v := newEnv(t, tasks, envOpts{schedule: true, now: clock.now, storeURL: url})
	clock.set(time.Date(2025, 3, 2, 0, 0, 1, 0, time.UTC))
	v.until("the hours to fail and the day to wait", func() bool {
		ups, downs := list(v, "p.up"), list(v, "p.down")
		return len(ups) == 2 && ups[0].State == store.InstanceFailed && ups[1].State == store.InstanceFailed &&
			len(downs) == 1 && downs[0].State == store.InstanceWaiting
	})
	v.stop()

	// Restarted an hour later: the new cycles are created and dispatched
	// together with whatever is ready, so once the new tick has succeeded,
	// the day's instance would have run if it were (wrongly) ready.
	clock.set(time.Date(2025, 3, 2, 1, 0, 1, 0, time.UTC))
	v = newEnv(t, tasks, envOpts{schedule: true, now: clock.now, storeURL: url})
	v.until("the next tick to succeed", func() bool {
		for _, in := range list(v, "p.tick") {
			if in.BizTime.Equal(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)) && in.State == store.InstanceSucceeded {
				return true
			}
		}
		return false
	})
	if downs := list(v, "p.down"); len(downs) != 1 || downs[0].State != store.InstanceWaiting {
		t.Fatalf("the day's instance = %+v, want it still waiting for its failed hours", downs)
	}

	// Marking the failed hours succeeded (they ended before this start, so
	// they are loaded and relinked) lets the day run.
	for _, u := range list(v, "p.up") {
		if u.BizTime.Before(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)) {
			if err := v.e.MarkScheduledSucceeded(t.Context(), u.ID, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	v.until("the day to run", func() bool {
		downs := list(v, "p.down")
		return len(downs) == 1 && downs[0].State == store.InstanceSucceeded
	})
}

// A scheduled instance's outputs reach the instance that depends on it:
// its dependent is claimed, and its code rendered, in the transaction
// that records its end, so the outputs must still be in memory then (the
// store has them only once that commits).
func TestScheduledOutputsReachDependents(t *testing.T) {
	clock := newClock(time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC))
	up := task(t, "up", dag.TypeShell, `echo "rows=4$TIDEMARK_BIZDATE" >> "$TIDEMARK_OUTPUT"`)
	up.Outputs = []dag.Param{{Name: "rows", Value: "none"}}
	down := task(t, "down", dag.TypeShell, `echo "got ${outputs.up.rows} for ${bizdate}"`, "up")
	v := newEnv(t, []dag.Task{up, down}, envOpts{schedule: true, now: clock.now})
	clock.set(time.Date(2025, 3, 2, 0, 0, 1, 0, time.UTC))
	downs := untilScheduledSucceeds(v, "p.down")
	log, _, err := v.st.GetInstanceLog(t.Context(), downs[0].ID, 0)
	if err != nil || !strings.Contains(log, "got 420250301 for 20250301") {
		t.Errorf("log of down = %q (%v), want up's output of the day", log, err)
	}
}

// untilScheduledSucceeds waits until task has one scheduled instance and
// it succeeded, and returns it.
func untilScheduledSucceeds(v *env, task string) []store.BatchInstance {
	v.t.Helper()
	var ins []store.BatchInstance
	v.until("the scheduled "+task+" to succeed", func() bool {
		var err error
		ins, err = v.st.ListBatchInstances(v.t.Context(), store.BatchInstanceFilter{Scheduled: true, Task: task})
		if err != nil {
			v.t.Fatal(err)
		}
		return len(ins) == 1 && ins[0].State == store.InstanceSucceeded
	})
	return ins
}
