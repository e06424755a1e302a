package storetest

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

func testBatchInstanceFilters(t *testing.T, s *store.Store) {
	ctx := t.Context()
	var insts []store.BatchInstance
	for d := 1; d <= 4; d++ {
		insts = append(insts, batchInst("if_a", d), batchInst("if_b", d))
	}
	insts[0].State, insts[1].State, insts[2].State = store.InstanceSucceeded, store.InstanceFailed, store.InstanceBlocked
	deps := make([][]int, len(insts))
	for i := 2; i < len(insts); i++ {
		deps[i] = []int{i - 2, i - 1}
	}
	b := &store.BatchBackfill{Name: "if", Task: "if_a"}
	createBatchBackfill(t, s, b, insts, deps)
	other := &store.BatchBackfill{Name: "if-other", Task: "if_a"}
	otherInsts := []store.BatchInstance{batchInst("if_a", 9)}
	createBatchBackfill(t, s, other, otherInsts, nil)
	schedID, _, err := s.EnsureScheduledInstance(ctx, batchInst("if_a", 1), []int64{insts[0].ID, insts[1].ID})
	mustNil(t, err)

	wantDeps := func(in store.BatchInstance) []int64 {
		switch {
		case in.ID == schedID:
			return []int64{insts[0].ID, insts[1].ID}
		case in.BackfillID == b.ID:
			return insts[slices.IndexFunc(insts, func(x store.BatchInstance) bool { return x.ID == in.ID })].Deps
		}
		return nil
	}
	idsOf := func(idx ...int) []int64 {
		out := []int64{}
		for _, i := range idx {
			out = append(out, insts[i].ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.BatchInstanceFilter
		want []int64
	}{
		{"backfill", store.BatchInstanceFilter{BackfillID: b.ID}, idsOf(0, 1, 2, 3, 4, 5, 6, 7)},
		{"backfill task", store.BatchInstanceFilter{BackfillID: b.ID, Task: "if_b"}, idsOf(1, 3, 5, 7)},
		{"states", store.BatchInstanceFilter{BackfillID: b.ID, States: []string{store.InstanceFailed, store.InstanceBlocked}}, idsOf(1, 2)},
		{"after", store.BatchInstanceFilter{BackfillID: b.ID, AfterID: insts[5].ID}, idsOf(6, 7)},
		{"limit", store.BatchInstanceFilter{BackfillID: b.ID, AfterID: insts[1].ID, Limit: 3}, idsOf(2, 3, 4)},
		{"through", store.BatchInstanceFilter{BackfillID: b.ID, ThroughID: insts[2].ID}, idsOf(0, 1, 2)},
		{"after and through", store.BatchInstanceFilter{BackfillID: b.ID, AfterID: insts[2].ID, ThroughID: insts[4].ID}, idsOf(3, 4)},
		{"task everywhere", store.BatchInstanceFilter{Task: "if_a", States: []string{store.InstanceWaiting}, AfterID: insts[4].ID},
			append(idsOf(6), otherInsts[0].ID, schedID)},
		{"scheduled", store.BatchInstanceFilter{Scheduled: true, Task: "if_a"}, []int64{schedID}},
		{"other backfill", store.BatchInstanceFilter{BackfillID: other.ID}, []int64{otherInsts[0].ID}},
		{"unknown backfill", store.BatchInstanceFilter{BackfillID: 99999}, []int64{}},
	} {
		if got := listBatchInstanceIDs(t, s, tc.f, wantDeps); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ids = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		id     int64
		lo, hi int64
	}{{b.ID, insts[0].ID, insts[7].ID}, {other.ID, otherInsts[0].ID, otherInsts[0].ID}, {99999, 0, 0}} {
		if lo, hi, err := s.BatchInstanceIDRange(ctx, tc.id); err != nil || lo != tc.lo || hi != tc.hi {
			t.Errorf("BatchInstanceIDRange(%d) = %d, %d, %v; want %d, %d", tc.id, lo, hi, err, tc.lo, tc.hi)
		}
	}
	// Whole rows come back as GetBatchInstance returns them.
	list, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: b.ID, Limit: 1})
	mustNil(t, err)
	if len(list) != 1 || !reflect.DeepEqual(list[0], utcBatchInst(insts[0])) {
		t.Errorf("ListBatchInstances first = %+v, want %+v", list, utcBatchInst(insts[0]))
	}
}

// listBatchInstanceIDs returns the ids of the instances f selects, and
// checks that each comes with the Deps wantDeps gives it.
func listBatchInstanceIDs(t *testing.T, s *store.Store, f store.BatchInstanceFilter, wantDeps func(store.BatchInstance) []int64) []int64 {
	t.Helper()
	list, err := s.ListBatchInstances(t.Context(), f)
	mustNil(t, err)
	out := []int64{}
	for _, in := range list {
		out = append(out, in.ID)
		if want := wantDeps(in); !reflect.DeepEqual(in.Deps, want) {
			t.Errorf("ListBatchInstances(%+v): instance %d Deps %v, want %v", f, in.ID, in.Deps, want)
		}
	}
	return out
}

func testBatchUpdateInstances(t *testing.T, s *store.Store) {
	ctx := t.Context()
	insts := []store.BatchInstance{batchInst("up_a", 1), batchInst("up_a", 2), batchInst("up_b", 1)}
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "up", Task: "up_a"}, insts, [][]int{nil, {0}})
	mustNil(t, s.UpdateBatchInstances(ctx, nil))

	// Every mutable field changes; the rest are ignored.
	u := insts[1]
	u.State, u.Reason, u.Attempt = store.InstanceRunning, "", 3
	u.NextTry, u.StartedAt = batchTP(at(2)), batchTP(at(3))
	u.PID, u.PGID, u.ProcStart, u.SQLTag = 99, 98, 1<<64-1, "tag"
	u.Rendered, u.Outputs, u.Error = "echo hi", map[string]string{"a": "b"}, "was: timeout"
	moved := u
	moved.Task, moved.BizTime, moved.Group, moved.Mode, moved.Deps = "elsewhere", batchDay(20, 0), 77, store.InstanceModeBlocked, nil
	w := insts[2]
	w.State, w.Reason = store.InstanceStopped, "stopped by ops"
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{moved, w}))
	checkBatchInstance(t, s, u)
	checkBatchInstance(t, s, w)

	// Times and outputs can be cleared.
	u.State, u.NextTry, u.StartedAt, u.FinishedAt, u.Outputs = store.InstanceSucceeded, nil, batchTP(at(3)), batchTP(at(4)), nil
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{u}))
	checkBatchInstance(t, s, u)
	u.StartedAt, u.FinishedAt = nil, nil
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{u}))
	checkBatchInstance(t, s, u)

	// All or nothing: an unknown id or a bad state changes nothing.
	x := insts[0]
	x.State = store.InstanceFailed
	missing := x
	missing.ID = 99999
	err := s.UpdateBatchInstances(ctx, []store.BatchInstance{x, missing})
	wantNotFound(t, "UpdateBatchInstances(unknown id)", err)
	bad := x
	bad.State = "sleeping"
	if err := s.UpdateBatchInstances(ctx, []store.BatchInstance{x, bad}); err == nil {
		t.Error("UpdateBatchInstances(bad state): no error")
	}
	checkBatchInstance(t, s, insts[0])
}

func testBatchRunningUnique(t *testing.T, s *store.Store) {
	ctx := t.Context()
	sched := batchInst("ru", 1)
	sid, created, err := s.EnsureScheduledInstance(ctx, sched, nil)
	mustNil(t, err)
	if !created {
		t.Fatal("EnsureScheduledInstance: not created")
	}
	sched.ID = sid
	insts := []store.BatchInstance{batchInst("ru", 1), batchInst("ru", 2), batchInst("ru_other", 1)}
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "ru", Task: "ru"}, insts, nil)

	run := func(b store.BatchInstance) store.BatchInstance {
		b.State, b.StartedAt, b.PID = store.InstanceRunning, batchTP(at(2)), 1234
		return b
	}
	sched = run(sched)
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{sched}))
	// Other cycles and tasks may run alongside.
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{run(insts[1]), run(insts[2])}))
	// The same task and business time may not, here from a backfill.
	err = s.UpdateBatchInstances(ctx, []store.BatchInstance{run(insts[0])})
	if !errors.Is(err, store.ErrTaskTimeBusy) {
		t.Fatalf("second running instance of ru@1: err = %v, want ErrTaskTimeBusy", err)
	}
	if errors.Is(err, store.ErrNotFound) {
		t.Errorf("busy error is also ErrNotFound: %v", err)
	}
	checkBatchInstance(t, s, insts[0])
	// Nor can a new backfill bring one in running.
	running := run(batchInst("ru", 1))
	err = s.CreateBatchBackfill(ctx, &store.BatchBackfill{Name: "ru-2", Task: "ru", StartedBy: "cli"}, []store.BatchInstance{running}, nil)
	if !errors.Is(err, store.ErrTaskTimeBusy) {
		t.Errorf("creating a running instance of a running cycle: err = %v, want ErrTaskTimeBusy", err)
	}
	// One batch can hand the cycle over, whatever its order.
	done := sched
	done.State, done.FinishedAt = store.InstanceSucceeded, batchTP(at(3))
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{run(insts[0]), done}))
	checkBatchInstance(t, s, run(insts[0]))
	checkBatchInstance(t, s, done)
	// And the schedule's instance is now the one refused.
	if err := s.UpdateBatchInstances(ctx, []store.BatchInstance{run(sched)}); !errors.Is(err, store.ErrTaskTimeBusy) {
		t.Errorf("schedule instance while a backfill's runs: err = %v, want ErrTaskTimeBusy", err)
	}
}

func testBatchOpenInstances(t *testing.T, s *store.Store) {
	ctx := t.Context()
	// Backfill X runs: a succeeded, b waits for a, c for b; d failed.
	x := []store.BatchInstance{batchInst("open_a", 1), batchInst("open_b", 1), batchInst("open_c", 1), batchInst("open_d", 1)}
	x[0].State, x[0].FinishedAt = store.InstanceSucceeded, batchTP(at(1))
	x[3].State = store.InstanceFailed
	bx := &store.BatchBackfill{Name: "open-x", Task: "open_a", State: store.BatchRunning}
	createBatchBackfill(t, s, bx, x, [][]int{nil, {0}, {1}, {0}})
	// Backfill Y was stopped: its waiting instance is not open.
	y := []store.BatchInstance{batchInst("open_y", 1)}
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "open-y", Task: "open_y", State: store.BatchStopped}, y, nil)
	// Backfill Z waits for its run time; one instance runs (left by a crash).
	z := []store.BatchInstance{batchInst("open_z", 1), batchInst("open_z", 2)}
	z[0].State, z[0].PID = store.InstanceRunning, 77
	bz := &store.BatchBackfill{Name: "open-z", Task: "open_z"}
	createBatchBackfill(t, s, bz, z, [][]int{nil, {0}})
	// A finished backfill's instances are not open even if waiting.
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "open-w", Task: "open_w", State: store.BatchSucceeded}, []store.BatchInstance{batchInst("open_w", 1)}, nil)
	// The schedule's instance waits for x's a and for y's stopped instance.
	sid, _, err := s.EnsureScheduledInstance(ctx, batchInst("open_s", 1), []int64{x[0].ID, y[0].ID})
	mustNil(t, err)
	sdone, _, err := s.EnsureScheduledInstance(ctx, store.BatchInstance{Task: "open_s", BizTime: batchDay(0, 0), State: store.InstanceSucceeded}, nil)
	mustNil(t, err)

	open, done, err := s.LoadOpenInstances(ctx)
	mustNil(t, err)
	var got []store.BatchInstance
	for _, in := range open {
		if strings.HasPrefix(in.Task, "open_") {
			got = append(got, in)
		}
	}
	sched, err := s.GetBatchInstance(ctx, sid)
	mustNil(t, err)
	want := []store.BatchInstance{utcBatchInst(x[1]), utcBatchInst(x[2]), utcBatchInst(z[0]), utcBatchInst(z[1]), sched}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadOpenInstances =\n%+v\nwant\n%+v", got, want)
	}
	if !slices.IsSortedFunc(open, func(a, b store.BatchInstance) int { return int(a.ID - b.ID) }) {
		t.Error("LoadOpenInstances not ordered by id")
	}
	for id, st := range map[int64]string{x[0].ID: store.InstanceSucceeded, y[0].ID: store.InstanceWaiting} {
		if done[id] != st {
			t.Errorf("doneStates[%d] = %q, want %q", id, done[id], st)
		}
	}
	for _, id := range []int64{x[1].ID, x[2].ID, x[3].ID, z[0].ID, sid, sdone} {
		if st, ok := done[id]; ok {
			t.Errorf("doneStates has %d (%s), which is open or no one's dependency", id, st)
		}
	}

	// The schedule's alone: its dependencies in backfills are done ones.
	open, done, err = s.LoadOpenScheduled(ctx)
	mustNil(t, err)
	got = got[:0]
	for _, in := range open {
		if strings.HasPrefix(in.Task, "open_") {
			got = append(got, in)
		}
	}
	if !reflect.DeepEqual(got, []store.BatchInstance{sched}) {
		t.Errorf("LoadOpenScheduled =\n%+v\nwant\n%+v", got, []store.BatchInstance{sched})
	}
	for id, st := range map[int64]string{x[0].ID: store.InstanceSucceeded, y[0].ID: store.InstanceWaiting} {
		if done[id] != st {
			t.Errorf("LoadOpenScheduled: doneStates[%d] = %q, want %q", id, done[id], st)
		}
	}
}
