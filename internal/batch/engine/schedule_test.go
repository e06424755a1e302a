package engine_test

import (
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
	var downs []store.BatchInstance
	v.until("the daily instance to succeed", func() bool {
		var err error
		downs, err = v.st.ListBatchInstances(t.Context(), store.BatchInstanceFilter{Scheduled: true, Task: "p.down"})
		if err != nil {
			t.Fatal(err)
		}
		return len(downs) == 1 && downs[0].State == store.InstanceSucceeded
	})
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
