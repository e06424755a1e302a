package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// testBatch checks the batch engine's metadata. Its parts share one store,
// so each uses its own task names and filters what lists everything.
func testBatch(t *testing.T, s *store.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s *store.Store)
	}{
		{"Backfill", testBatchBackfill},
		{"BackfillValidation", testBatchBackfillValidation},
		{"BackfillFilters", testBatchBackfillFilters},
		{"InstanceFilters", testBatchInstanceFilters},
		{"UpdateInstances", testBatchUpdateInstances},
		{"RunningUnique", testBatchRunningUnique},
		{"OpenInstances", testBatchOpenInstances},
		{"Schedule", testBatchSchedule},
		{"Logs", testBatchLogs},
		{"LatestOutputs", testBatchLatestOutputs},
		{"TaskRunStates", testBatchTaskRunStates},
		{"Size", testBatchSize},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

// batchDay is midnight UTC+5:30 of 2024-03-d plus h hours, a non-UTC business time.
func batchDay(d, h int) time.Time {
	return time.Date(2024, 3, d, h, 0, 0, 0, time.FixedZone("X", 5*3600+1800))
}

// batchInst is a waiting instance of task for the day d.
func batchInst(task string, d int) store.BatchInstance {
	return store.BatchInstance{
		Task: task, BizTime: batchDay(d, 0), BizEnd: batchDay(d+1, 0), Scheduled: batchDay(d+1, 2),
		Mode: store.InstanceModeRun, ResourceGroup: "default", State: store.InstanceWaiting,
	}
}

func batchTP(t time.Time) *time.Time { return &t }

// utcBatchInst returns b with every time in UTC, as the store returns it.
func utcBatchInst(b store.BatchInstance) store.BatchInstance {
	b.BizTime, b.BizEnd, b.Scheduled = b.BizTime.UTC(), b.BizEnd.UTC(), b.Scheduled.UTC()
	for _, p := range []**time.Time{&b.NextTry, &b.StartedAt, &b.FinishedAt} {
		if *p != nil {
			*p = batchTP((**p).UTC())
		}
	}
	return b
}

func checkBatchInstance(t *testing.T, s *store.Store, want store.BatchInstance) {
	t.Helper()
	got, err := s.GetBatchInstance(t.Context(), want.ID)
	mustNil(t, err)
	if w := utcBatchInst(want); !reflect.DeepEqual(got, w) {
		t.Errorf("GetBatchInstance(%d) =\n%+v\nwant\n%+v", want.ID, got, w)
	}
}

func createBatchBackfill(t *testing.T, s *store.Store, b *store.BatchBackfill, insts []store.BatchInstance, deps [][]int) {
	t.Helper()
	if b.StartedBy == "" {
		b.StartedBy = "cli"
	}
	if b.RunAt.IsZero() {
		b.RunAt = at(1)
	}
	mustNil(t, s.CreateBatchBackfill(t.Context(), b, insts, deps))
}

func testBatchBackfill(t *testing.T, s *store.Store) {
	ctx := t.Context()
	_, err := s.GetBatchBackfill(ctx, 99999)
	wantNotFound(t, "GetBatchBackfill(missing)", err)
	_, err = s.GetBatchInstance(ctx, 99999)
	wantNotFound(t, "GetBatchInstance(missing)", err)
	wantNotFound(t, "SetBatchBackfillState(missing)", s.SetBatchBackfillState(ctx, 99999, store.BatchRunning, "", nil, nil))

	full := batchInst("rt_a", 1)
	full.Group, full.Seq, full.Order = 3, 4, -5
	full.Mode, full.ResourceGroup = store.InstanceModeDryRun, "heavy \"q\""
	full.State, full.Reason = store.InstanceDryRun, "upstream paused?"
	full.Attempt = 2
	full.NextTry, full.StartedAt, full.FinishedAt = batchTP(at(2)), batchTP(at(3)), batchTP(at(4))
	full.PID, full.PGID, full.ProcStart = 4242, 4240, 1<<63+12345
	full.SQLTag, full.Rendered = "tm-1-2", "INSERT INTO t SELECT 1 -- ?"
	full.Outputs = map[string]string{"rows": "12", "path": "s3://x/y?z"}
	full.Error = "exit status 1"
	full.Deps = []int64{777}            // ignored
	full.ID, full.BackfillID = 555, 666 // ignored
	insts := []store.BatchInstance{full, batchInst("rt_a", 2), batchInst("rt_b", 1)}
	insts[2].Mode, insts[2].State = "", "" // defaults

	before := time.Now().Add(-time.Second)
	req := json.RawMessage(`{"from": "2024-03-01", "tasks": ["rt_a", "rt_b"], "n": 1.50}`)
	b := &store.BatchBackfill{Name: "rt_a-20240310-1", Task: "rt_a", StartedBy: "api:ops", Request: req, RunAt: at(5)}
	createBatchBackfill(t, s, b, insts, [][]int{nil, {0}, {1, 0, 1}})
	if b.ID <= 0 || b.State != store.BatchWaiting || b.Instances != 3 {
		t.Fatalf("created backfill = %+v", b)
	}
	if b.CreatedAt.Before(before) || b.CreatedAt.After(time.Now().Add(time.Second)) || b.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want about now in UTC", b.CreatedAt)
	}
	for i, in := range insts {
		if in.ID <= 0 || in.BackfillID != b.ID {
			t.Errorf("instance %d: ID %d, BackfillID %d", i, in.ID, in.BackfillID)
		}
		if i > 0 && in.ID <= insts[i-1].ID {
			t.Errorf("instance ids not ascending: %d after %d", in.ID, insts[i-1].ID)
		}
	}
	if insts[0].Deps != nil || !reflect.DeepEqual(insts[1].Deps, []int64{insts[0].ID}) ||
		!reflect.DeepEqual(insts[2].Deps, []int64{insts[0].ID, insts[1].ID}) {
		t.Errorf("Deps = %v, %v, %v", insts[0].Deps, insts[1].Deps, insts[2].Deps)
	}
	if insts[2].State != store.InstanceWaiting || insts[2].Mode != store.InstanceModeRun {
		t.Errorf("defaults: state %q, mode %q", insts[2].State, insts[2].Mode)
	}
	for _, in := range insts {
		checkBatchInstance(t, s, in)
	}

	got, err := s.GetBatchBackfill(ctx, b.ID)
	mustNil(t, err)
	want := *b
	want.RunAt = want.RunAt.UTC()
	want.States = map[string]int{store.InstanceDryRun: 1, store.InstanceWaiting: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetBatchBackfill =\n%+v\nwant\n%+v", got, want)
	}
	if string(got.Request) != string(req) {
		t.Errorf("Request = %s, want %s byte for byte", got.Request, req)
	}

	// State changes; nil times leave the columns alone.
	mustNil(t, s.SetBatchBackfillState(ctx, b.ID, store.BatchRunning, "", batchTP(at(6)), nil))
	got, err = s.GetBatchBackfill(ctx, b.ID)
	mustNil(t, err)
	if got.State != store.BatchRunning || got.Error != "" || got.StartedAt == nil || got.FinishedAt != nil {
		t.Fatalf("after start = %+v", got)
	}
	checkUTC(t, "StartedAt", *got.StartedAt, at(6))
	mustNil(t, s.SetBatchBackfillState(ctx, b.ID, store.BatchFailed, "instance 7 failed", nil, batchTP(at(7))))
	got, err = s.GetBatchBackfill(ctx, b.ID)
	mustNil(t, err)
	if got.State != store.BatchFailed || got.Error != "instance 7 failed" || got.StartedAt == nil || got.FinishedAt == nil {
		t.Fatalf("after failure = %+v", got)
	}
	checkUTC(t, "StartedAt kept", *got.StartedAt, at(6))
	checkUTC(t, "FinishedAt", *got.FinishedAt, at(7))
	if err := s.SetBatchBackfillState(ctx, b.ID, "sleeping", "", nil, nil); err == nil {
		t.Error("SetBatchBackfillState(invalid state): no error")
	}

	// A backfill without instances, and without a request.
	empty := &store.BatchBackfill{Name: "empty", Task: "rt_c", State: store.BatchSucceeded}
	createBatchBackfill(t, s, empty, nil, nil)
	got, err = s.GetBatchBackfill(ctx, empty.ID)
	mustNil(t, err)
	if got.Instances != 0 || len(got.States) != 0 || got.States == nil || got.Request != nil || got.State != store.BatchSucceeded {
		t.Errorf("empty backfill = %+v", got)
	}
}

func testBatchBackfillValidation(t *testing.T, s *store.Store) {
	ctx := t.Context()
	count := func() int {
		list, err := s.ListBatchBackfills(ctx, store.BatchBackfillFilter{Task: "val"})
		mustNil(t, err)
		return len(list)
	}
	two := []store.BatchInstance{batchInst("val", 1), batchInst("val", 2)}
	bad := batchInst("val", 3)
	bad.State = "sleeping"
	for name, tc := range map[string]struct {
		b     store.BatchBackfill
		insts []store.BatchInstance
		deps  [][]int
	}{
		"bad backfill state": {store.BatchBackfill{State: "done"}, two, nil},
		"bad request":        {store.BatchBackfill{Request: json.RawMessage(`{"a":`)}, two, nil},
		"dep out of range":   {store.BatchBackfill{}, two, [][]int{nil, {2}}},
		"negative dep":       {store.BatchBackfill{}, two, [][]int{{-1}}},
		"self dep":           {store.BatchBackfill{}, two, [][]int{nil, {0, 1}}},
		"too many deps":      {store.BatchBackfill{}, two, [][]int{nil, nil, nil}},
		"bad instance state": {store.BatchBackfill{}, []store.BatchInstance{batchInst("val", 1), bad}, nil},
		"instance no task":   {store.BatchBackfill{}, []store.BatchInstance{{BizTime: batchDay(1, 0)}}, nil},
	} {
		b := tc.b
		b.Name, b.Task, b.StartedBy = name, "val", "cli"
		insts := slices.Clone(tc.insts)
		if err := s.CreateBatchBackfill(ctx, &b, insts, tc.deps); err == nil {
			t.Errorf("%s: no error", name)
		}
		if b.ID != 0 || insts[0].ID != 0 {
			t.Errorf("%s: ids set after a failure: %d, %d", name, b.ID, insts[0].ID)
		}
	}
	if n := count(); n != 0 {
		t.Errorf("failed creates stored %d backfills", n)
	}
	if _, err := s.ListBatchBackfills(ctx, store.BatchBackfillFilter{Limit: -1}); err == nil {
		t.Error("ListBatchBackfills(negative limit): no error")
	}
	if _, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{Limit: -1}); err == nil {
		t.Error("ListBatchInstances(negative limit): no error")
	}
	if _, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{Scheduled: true, BackfillID: 1}); err == nil {
		t.Error("ListBatchInstances(Scheduled and BackfillID): no error")
	}
}

func testBatchBackfillFilters(t *testing.T, s *store.Store) {
	ctx := t.Context()
	type spec struct{ task, state, by string }
	specs := []spec{
		{"flt_a", store.BatchSucceeded, "cli"},
		{"flt_a", store.BatchRunning, "api:ops"},
		{"flt_b", store.BatchRunning, "cli"},
		{"flt_a", store.BatchWaiting, "cli"},
	}
	var ids []int64
	var marks []time.Time
	for i, sp := range specs {
		time.Sleep(3 * time.Millisecond)
		marks = append(marks, time.Now())
		time.Sleep(3 * time.Millisecond)
		insts := []store.BatchInstance{batchInst(sp.task, 1), batchInst(sp.task, 2), batchInst(sp.task, 3), batchInst(sp.task, 4)}
		insts[0].State = store.InstanceSucceeded
		b := &store.BatchBackfill{Name: fmt.Sprintf("flt-%d", i), Task: sp.task, State: sp.state, StartedBy: sp.by}
		createBatchBackfill(t, s, b, insts[:i+1], nil)
		ids = append(ids, b.ID)
	}
	rev := func(idx ...int) []int64 {
		out := []int64{}
		for i := len(idx) - 1; i >= 0; i-- {
			out = append(out, ids[idx[i]])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.BatchBackfillFilter
		want []int64
	}{
		{"task", store.BatchBackfillFilter{Task: "flt_a"}, rev(0, 1, 3)},
		{"state", store.BatchBackfillFilter{Task: "flt_a", State: store.BatchRunning}, rev(1)},
		{"started by", store.BatchBackfillFilter{Task: "flt_a", StartedBy: "api:ops"}, rev(1)},
		{"since", store.BatchBackfillFilter{Task: "flt_a", Since: marks[1]}, rev(1, 3)},
		{"until", store.BatchBackfillFilter{Since: marks[0], Until: marks[2]}, rev(0, 1)},
		{"limit", store.BatchBackfillFilter{Task: "flt_a", Limit: 2}, rev(1, 3)},
		{"no match", store.BatchBackfillFilter{Task: "flt_b", State: store.BatchFailed}, []int64{}},
	} {
		list, err := s.ListBatchBackfills(ctx, tc.f)
		mustNil(t, err)
		got := []int64{}
		for _, b := range list {
			got = append(got, b.ID)
			// States are filled: backfill i has i+1 instances, the first succeeded.
			i := slices.Index(ids, b.ID)
			want := map[string]int{store.InstanceSucceeded: 1}
			if i > 0 {
				want[store.InstanceWaiting] = i
			}
			if b.Instances != i+1 || !reflect.DeepEqual(b.States, want) {
				t.Errorf("%s: backfill %d: Instances %d, States %v, want %d, %v", tc.name, b.ID, b.Instances, b.States, i+1, want)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ids = %v, want %v", tc.name, got, tc.want)
		}
	}

	n, err := s.CountBatchBackfillsSince(ctx, "flt_a", marks[0])
	mustNil(t, err)
	if n != 3 {
		t.Errorf("CountBatchBackfillsSince(flt_a, first) = %d, want 3", n)
	}
	b3, err := s.GetBatchBackfill(ctx, ids[3])
	mustNil(t, err)
	for _, tc := range []struct {
		since time.Time
		want  int
	}{
		{marks[2], 1},
		{b3.CreatedAt, 1}, // inclusive
		{b3.CreatedAt.Add(time.Microsecond), 0},
		{time.Time{}, 3},
	} {
		if n, err := s.CountBatchBackfillsSince(ctx, "flt_a", tc.since); err != nil || n != tc.want {
			t.Errorf("CountBatchBackfillsSince(flt_a, %v) = %d, %v; want %d", tc.since, n, err, tc.want)
		}
	}
	if n, err := s.CountBatchBackfillsSince(ctx, "flt_none", time.Time{}); err != nil || n != 0 {
		t.Errorf("CountBatchBackfillsSince(unknown task) = %d, %v", n, err)
	}
}

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

	ids := func(f store.BatchInstanceFilter) []int64 {
		t.Helper()
		list, err := s.ListBatchInstances(ctx, f)
		mustNil(t, err)
		out := []int64{}
		for _, in := range list {
			out = append(out, in.ID)
			var want []int64
			switch {
			case in.ID == schedID:
				want = []int64{insts[0].ID, insts[1].ID}
			case in.BackfillID == b.ID:
				want = insts[slices.IndexFunc(insts, func(x store.BatchInstance) bool { return x.ID == in.ID })].Deps
			}
			if !reflect.DeepEqual(in.Deps, want) {
				t.Errorf("ListBatchInstances(%+v): instance %d Deps %v, want %v", f, in.ID, in.Deps, want)
			}
		}
		return out
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
		{"task everywhere", store.BatchInstanceFilter{Task: "if_a", States: []string{store.InstanceWaiting}, AfterID: insts[4].ID},
			append(idsOf(6), otherInsts[0].ID, schedID)},
		{"scheduled", store.BatchInstanceFilter{Scheduled: true, Task: "if_a"}, []int64{schedID}},
		{"other backfill", store.BatchInstanceFilter{BackfillID: other.ID}, []int64{otherInsts[0].ID}},
		{"unknown backfill", store.BatchInstanceFilter{BackfillID: 99999}, []int64{}},
	} {
		if got := ids(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ids = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Whole rows come back as GetBatchInstance returns them.
	list, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: b.ID, Limit: 1})
	mustNil(t, err)
	if len(list) != 1 || !reflect.DeepEqual(list[0], utcBatchInst(insts[0])) {
		t.Errorf("ListBatchInstances first = %+v, want %+v", list, utcBatchInst(insts[0]))
	}
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
}

func testBatchSchedule(t *testing.T, s *store.Store) {
	ctx := t.Context()
	up := []store.BatchInstance{batchInst("sch_up", 1)}
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "sch", Task: "sch_up"}, up, nil)
	upSched, created, err := s.EnsureScheduledInstance(ctx, batchInst("sch_up", 1), nil)
	mustNil(t, err)
	if !created || upSched == up[0].ID {
		t.Fatalf("the schedule's instance of a backfilled cycle: id %d, created %v", upSched, created)
	}

	full := batchInst("sch", 1)
	full.Group, full.Seq, full.Order, full.Reason, full.Outputs = 1, 2, 3, "waiting for 00:00", map[string]string{"k": "v"}
	full.ID, full.Deps = 12345, []int64{1} // ignored
	id, created, err := s.EnsureScheduledInstance(ctx, full, []int64{upSched, up[0].ID, upSched})
	mustNil(t, err)
	if !created || id <= 0 {
		t.Fatalf("EnsureScheduledInstance = %d, %v", id, created)
	}
	want := full
	want.ID, want.Deps = id, slices.Sorted(slices.Values([]int64{upSched, up[0].ID}))
	checkBatchInstance(t, s, want)

	// Again, even with other fields (also in another zone): the same one.
	again := batchInst("sch", 1)
	again.BizTime = again.BizTime.In(time.FixedZone("W", -8*3600))
	again.State = store.InstanceFailed
	id2, created, err := s.EnsureScheduledInstance(ctx, again, nil)
	mustNil(t, err)
	if created || id2 != id {
		t.Errorf("EnsureScheduledInstance again = %d, %v; want %d, false", id2, created, id)
	}
	checkBatchInstance(t, s, want)
	// Another cycle is another instance; a microsecond apart is another cycle.
	id3, created, err := s.EnsureScheduledInstance(ctx, batchInst("sch", 2), nil)
	mustNil(t, err)
	if !created || id3 == id {
		t.Errorf("next cycle = %d, %v", id3, created)
	}
	near := batchInst("sch", 1)
	near.BizTime = near.BizTime.Add(time.Microsecond)
	id4, created, err := s.EnsureScheduledInstance(ctx, near, nil)
	mustNil(t, err)
	if !created || id4 == id {
		t.Errorf("a microsecond later = %d, %v", id4, created)
	}

	_, _, err = s.EnsureScheduledInstance(ctx, batchInst("sch", 5), []int64{up[0].ID, 99999})
	wantNotFound(t, "EnsureScheduledInstance(unknown upstream)", err)
	withBackfill := batchInst("sch", 6)
	withBackfill.BackfillID = 1
	if _, _, err := s.EnsureScheduledInstance(ctx, withBackfill, nil); err == nil {
		t.Error("EnsureScheduledInstance(BackfillID 1): no error")
	}
	list, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{Scheduled: true, Task: "sch"})
	mustNil(t, err)
	if len(list) != 3 {
		t.Errorf("the schedule has %d instances of sch, want 3", len(list))
	}

	// Cursors.
	if _, ok, err := s.ScheduleCursor(ctx, "sch"); err != nil || ok {
		t.Errorf("ScheduleCursor before any = %v, %v", ok, err)
	}
	mustNil(t, s.PutScheduleCursor(ctx, "sch", batchDay(1, 0)))
	mustNil(t, s.PutScheduleCursor(ctx, "sch_up", batchDay(9, 0)))
	last, ok, err := s.ScheduleCursor(ctx, "sch")
	mustNil(t, err)
	if !ok {
		t.Fatal("ScheduleCursor: not ok")
	}
	checkUTC(t, "cursor", last, batchDay(1, 0))
	mustNil(t, s.PutScheduleCursor(ctx, "sch", batchDay(2, 0)))
	last, _, err = s.ScheduleCursor(ctx, "sch")
	mustNil(t, err)
	checkUTC(t, "cursor moved", last, batchDay(2, 0))
	if err := s.PutScheduleCursor(ctx, "", batchDay(1, 0)); err == nil {
		t.Error("PutScheduleCursor(empty task): no error")
	}
}

func testBatchLogs(t *testing.T, s *store.Store) {
	ctx := t.Context()
	insts := []store.BatchInstance{batchInst("log", 1), batchInst("log", 2)}
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "log", Task: "log"}, insts, nil)
	id := insts[0].ID
	_, _, err := s.GetInstanceLog(ctx, id, 0)
	wantNotFound(t, "GetInstanceLog(no logs)", err)
	wantNotFound(t, "PutInstanceLog(unknown instance)", s.PutInstanceLog(ctx, 99999, 1, "x"))

	mustNil(t, s.PutInstanceLog(ctx, id, 1, "first\nattempt ?"))
	mustNil(t, s.PutInstanceLog(ctx, id, 2, "second"))
	mustNil(t, s.PutInstanceLog(ctx, insts[1].ID, 7, "other"))
	check := func(attempt int, wantLog string, wantAttempt int) {
		t.Helper()
		log, got, err := s.GetInstanceLog(ctx, id, attempt)
		mustNil(t, err)
		if log != wantLog || got != wantAttempt {
			t.Errorf("GetInstanceLog(%d, %d) = %q, %d; want %q, %d", id, attempt, log, got, wantLog, wantAttempt)
		}
	}
	check(0, "second", 2)
	check(1, "first\nattempt ?", 1)
	mustNil(t, s.PutInstanceLog(ctx, id, 1, "first, replaced"))
	check(1, "first, replaced", 1)
	check(0, "second", 2)
	big := strings.Repeat("line of output\n", 20000)
	mustNil(t, s.PutInstanceLog(ctx, id, 3, big))
	check(0, big, 3)
	_, _, err = s.GetInstanceLog(ctx, id, 4)
	wantNotFound(t, "GetInstanceLog(unlogged attempt)", err)
}

func testBatchLatestOutputs(t *testing.T, s *store.Store) {
	ctx := t.Context()
	insts := []store.BatchInstance{batchInst("lo", 1), batchInst("lo", 2), batchInst("lo", 3), batchInst("lo", 4), batchInst("lo_other", 1)}
	finish := func(i int, state string, fin time.Time, out map[string]string) {
		insts[i].State, insts[i].FinishedAt, insts[i].Outputs = state, batchTP(fin), out
	}
	finish(0, store.InstanceSucceeded, at(2), map[string]string{"v": "1"})
	finish(1, store.InstanceSucceeded, at(4), map[string]string{"v": "2"}) // the latest success
	finish(2, store.InstanceFailed, at(5), map[string]string{"v": "3"})
	finish(3, store.InstanceDryRun, at(6), map[string]string{"v": "4"})
	finish(4, store.InstanceSucceeded, at(7), map[string]string{"v": "other"})
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "lo", Task: "lo"}, insts, nil)

	check := func(task string, since time.Time, want map[string]string, wantOK bool) {
		t.Helper()
		got, ok, err := s.LatestOutputs(ctx, task, since)
		mustNil(t, err)
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("LatestOutputs(%s, %v) = %v, %v; want %v, %v", task, since, got, ok, want, wantOK)
		}
	}
	check("lo", time.Time{}, map[string]string{"v": "2"}, true)
	check("lo", at(4), map[string]string{"v": "2"}, true) // inclusive
	check("lo", at(4).Add(time.Microsecond), nil, false)
	check("lo_other", at(1), map[string]string{"v": "other"}, true)
	check("lo_none", time.Time{}, nil, false)

	// A later success of the schedule wins, even without outputs.
	sid, _, err := s.EnsureScheduledInstance(ctx, batchInst("lo", 9), nil)
	mustNil(t, err)
	sched, err := s.GetBatchInstance(ctx, sid)
	mustNil(t, err)
	sched.State, sched.FinishedAt = store.InstanceSucceeded, batchTP(at(8))
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{sched}))
	check("lo", at(3), nil, true)
}

func testBatchTaskRunStates(t *testing.T, s *store.Store) {
	ctx := t.Context()
	first := []store.BatchInstance{batchInst("trs_a", 1), batchInst("trs_a", 2), batchInst("trs_b", 1), batchInst("trs_a", 5)}
	first[0].State, first[1].State, first[2].State = store.InstanceSucceeded, store.InstanceSucceeded, store.InstanceDryRun
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "trs-1", Task: "trs_a"}, first, nil)
	// A later backfill reruns trs_a@1, which fails: the latest wins.
	second := []store.BatchInstance{batchInst("trs_a", 1)}
	second[0].State = store.InstanceFailed
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "trs-2", Task: "trs_a"}, second, nil)
	// The schedule then plans trs_a@3.
	_, _, err := s.EnsureScheduledInstance(ctx, batchInst("trs_a", 3), nil)
	mustNil(t, err)
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "trs-3", Task: "trs_c"}, []store.BatchInstance{batchInst("trs_c", 1)}, nil)

	got, err := s.TaskRunStates(ctx, []string{"trs_a", "trs_b", "trs_none"}, batchDay(1, 0).In(time.FixedZone("W", -3600)), batchDay(3, 0))
	mustNil(t, err)
	key := func(task string, d int) store.TaskTime {
		return store.TaskTime{Task: task, BizTime: batchDay(d, 0).UTC()}
	}
	want := map[store.TaskTime]string{
		key("trs_a", 1): store.InstanceFailed,
		key("trs_a", 2): store.InstanceSucceeded,
		key("trs_a", 3): store.InstanceWaiting,
		key("trs_b", 1): store.InstanceDryRun,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TaskRunStates = %v, want %v", got, want)
	}
	for k := range got {
		if k.BizTime.Location() != time.UTC {
			t.Errorf("key %v not in UTC", k)
		}
	}
	got, err = s.TaskRunStates(ctx, []string{"trs_a"}, batchDay(2, 0).Add(time.Microsecond), batchDay(3, 0).Add(-time.Microsecond))
	mustNil(t, err)
	if len(got) != 0 {
		t.Errorf("TaskRunStates(open window) = %v", got)
	}
	got, err = s.TaskRunStates(ctx, nil, batchDay(1, 0), batchDay(9, 0))
	mustNil(t, err)
	if len(got) != 0 {
		t.Errorf("TaskRunStates(no tasks) = %v", got)
	}
}

// batchRaceEnabled reports whether the test binary was built with -race.
func batchRaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, st := range bi.Settings {
		if st.Key == "-race" {
			return st.Value == "true"
		}
	}
	return false
}

// testBatchSize creates a backfill of 20,000 instances and 40,000 edges.
// Under -race, whose pointer checks slow the transpiled SQLite about
// thirtyfold, SQLite gets a tenth of that.
func testBatchSize(t *testing.T, s *store.Store) {
	ctx := t.Context()
	n := 20000
	if s.Dialect() == "sqlite" && batchRaceEnabled() {
		n = 2000
	}
	insts := make([]store.BatchInstance, n)
	deps := make([][]int, n)
	for i := range insts {
		insts[i] = batchInst(fmt.Sprintf("size_%02d", i%50), 1)
		insts[i].BizTime = insts[i].BizTime.AddDate(0, 0, i/50)
		insts[i].Seq = i
		switch {
		case i >= 2:
			deps[i] = []int{i - 1, i - 2}
		case i == 1:
			deps[i] = []int{0}
		}
	}
	edges := 2*n - 3
	start := time.Now()
	b := &store.BatchBackfill{Name: "size", Task: "size_00", State: store.BatchRunning}
	createBatchBackfill(t, s, b, insts, deps)
	t.Logf("%s: created %d instances and %d edges in %v", s.Dialect(), n, edges, time.Since(start))

	got, err := s.GetBatchBackfill(ctx, b.ID)
	mustNil(t, err)
	if got.Instances != n || got.States[store.InstanceWaiting] != n {
		t.Errorf("backfill: %d instances, states %v", got.Instances, got.States)
	}
	checkBatchInstance(t, s, insts[n/2])

	start = time.Now()
	var seen, seenEdges int
	after := int64(0)
	for {
		page, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: b.ID, AfterID: after, Limit: n/3 + 1})
		mustNil(t, err)
		if len(page) == 0 {
			break
		}
		for _, in := range page {
			if in.ID != insts[seen].ID || !slices.Equal(in.Deps, insts[seen].Deps) {
				t.Fatalf("instance %d: id %d deps %v, want %d %v", seen, in.ID, in.Deps, insts[seen].ID, insts[seen].Deps)
			}
			seen++
			seenEdges += len(in.Deps)
		}
		after = page[len(page)-1].ID
	}
	if seen != n || seenEdges != edges {
		t.Errorf("paged through %d instances and %d edges, want %d and %d", seen, seenEdges, n, edges)
	}
	t.Logf("%s: listed them in %v", s.Dialect(), time.Since(start))

	start = time.Now()
	open, _, err := s.LoadOpenInstances(ctx)
	mustNil(t, err)
	var mine, mineEdges int
	for _, in := range open {
		if in.BackfillID == b.ID {
			mine++
			mineEdges += len(in.Deps)
		}
	}
	if mine != n || mineEdges != edges {
		t.Errorf("LoadOpenInstances: %d instances and %d edges of the backfill, want %d and %d", mine, mineEdges, n, edges)
	}
	t.Logf("%s: loaded them in %v", s.Dialect(), time.Since(start))
}
