package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

func testBatchBackfill(t *testing.T, s *store.Store) {
	ctx := t.Context()
	_, err := s.GetBatchBackfill(ctx, 99999)
	wantNotFound(t, "GetBatchBackfill(missing)", err)
	_, err = s.GetBatchInstance(ctx, 99999)
	wantNotFound(t, "GetBatchInstance(missing)", err)
	wantNotFound(t, "SetBatchBackfillState(missing)", s.SetBatchBackfillState(ctx, 99999, store.BatchRunning, "", nil, nil))

	insts := []store.BatchInstance{everyFieldBatchInst(), batchInst("rt_a", 2), batchInst("rt_b", 1)}
	insts[2].Mode, insts[2].State = "", "" // defaults
	before := time.Now().Add(-time.Second)
	req := json.RawMessage(`{"from": "2024-03-01", "tasks": ["rt_a", "rt_b"], "n": 1.50}`)
	b := &store.BatchBackfill{Name: "rt_a-20240310-1", Task: "rt_a", StartedBy: "api:ops", Request: req, RunAt: at(5)}
	createBatchBackfill(t, s, b, insts, [][]int{nil, {0}, {1, 0, 1}})
	checkCreatedBackfill(t, b, insts, before)
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
	testBatchBackfillStateChanges(t, s, b.ID)

	// A backfill without instances, and without a request.
	empty := &store.BatchBackfill{Name: "empty", Task: "rt_c", State: store.BatchSucceeded}
	createBatchBackfill(t, s, empty, nil, nil)
	got, err = s.GetBatchBackfill(ctx, empty.ID)
	mustNil(t, err)
	if got.Instances != 0 || len(got.States) != 0 || got.States == nil || got.Request != nil || got.State != store.BatchSucceeded {
		t.Errorf("empty backfill = %+v", got)
	}
}

// everyFieldBatchInst is an instance of rt_a with every field set, the
// awkward values included; its ID, BackfillID and Deps are for the store to
// ignore.
func everyFieldBatchInst() store.BatchInstance {
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
	return full
}

// checkCreatedBackfill checks what CreateBatchBackfill set on b and its
// three instances, created after before with the dependencies
// {nil, {0}, {1, 0, 1}}, the third with an empty State and Mode.
func checkCreatedBackfill(t *testing.T, b *store.BatchBackfill, insts []store.BatchInstance, before time.Time) {
	t.Helper()
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
}

// testBatchBackfillStateChanges starts and fails backfill id: nil times
// leave the columns alone.
func testBatchBackfillStateChanges(t *testing.T, s *store.Store, id int64) {
	ctx := t.Context()
	mustNil(t, s.SetBatchBackfillState(ctx, id, store.BatchRunning, "", batchTP(at(6)), nil))
	got, err := s.GetBatchBackfill(ctx, id)
	mustNil(t, err)
	if got.State != store.BatchRunning || got.Error != "" || got.StartedAt == nil || got.FinishedAt != nil {
		t.Fatalf("after start = %+v", got)
	}
	checkUTC(t, "StartedAt", *got.StartedAt, at(6))
	mustNil(t, s.SetBatchBackfillState(ctx, id, store.BatchFailed, "instance 7 failed", nil, batchTP(at(7))))
	got, err = s.GetBatchBackfill(ctx, id)
	mustNil(t, err)
	if got.State != store.BatchFailed || got.Error != "instance 7 failed" || got.StartedAt == nil || got.FinishedAt == nil {
		t.Fatalf("after failure = %+v", got)
	}
	checkUTC(t, "StartedAt kept", *got.StartedAt, at(6))
	checkUTC(t, "FinishedAt", *got.FinishedAt, at(7))
	if err := s.SetBatchBackfillState(ctx, id, "sleeping", "", nil, nil); err == nil {
		t.Error("SetBatchBackfillState(invalid state): no error")
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

// createFilterBackfills creates the backfills testBatchBackfillFilters
// lists: backfill i has i+1 instances, the first succeeded. marks[i] is a
// time between the creations of backfills i-1 and i.
func createFilterBackfills(t *testing.T, s *store.Store) (ids []int64, marks []time.Time) {
	type spec struct{ task, state, by string }
	specs := []spec{
		{"flt_a", store.BatchSucceeded, "cli"},
		{"flt_a", store.BatchRunning, "api:ops"},
		{"flt_b", store.BatchRunning, "cli"},
		{"flt_a", store.BatchWaiting, "cli"},
	}
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
	return ids, marks
}

func testBatchBackfillFilters(t *testing.T, s *store.Store) {
	ctx := t.Context()
	ids, marks := createFilterBackfills(t, s)
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
	testCountBatchBackfillsSince(t, s, ids, marks)
}

// testCountBatchBackfillsSince counts the backfills of
// createFilterBackfills.
func testCountBatchBackfillsSince(t *testing.T, s *store.Store, ids []int64, marks []time.Time) {
	ctx := t.Context()
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
