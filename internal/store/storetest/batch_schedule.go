package storetest

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

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

	testBatchScheduleCursors(t, s)
}

// testBatchScheduleCursors moves the schedule's cursor of sch.
func testBatchScheduleCursors(t *testing.T, s *store.Store) {
	ctx := t.Context()
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

// TaskRuns finds the runs of a window: those whose business time is in it
// and the single instances whose range overlaps it, by id.
func testBatchTaskRuns(t *testing.T, s *store.Store) {
	ctx := t.Context()
	span := batchInst("tr_a", 1) // days 1 to 4 in one instance
	span.BizEnd, span.State = batchDay(4, 0), store.InstanceSucceeded
	alone := batchInst("tr_a", 3)
	alone.BizEnd = alone.BizTime
	before := batchInst("tr_a", 1)
	before.BizEnd = before.BizTime
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "tr-1", Task: "tr_a"}, []store.BatchInstance{span, alone, before}, nil)

	runs, err := s.TaskRuns(ctx, []string{"tr_a"}, batchDay(3, 0), batchDay(3, 12))
	mustNil(t, err)
	if len(runs) != 2 || runs[0].ID >= runs[1].ID {
		t.Fatalf("TaskRuns(day 3) = %+v, want the single instance over days 1-4 and day 3's, by id", runs)
	}
	got := runs[0]
	if !got.BizTime.Equal(batchDay(1, 0)) || !got.BizEnd.Equal(batchDay(4, 0)) || got.State != store.InstanceSucceeded || got.BizTime.Location() != time.UTC {
		t.Errorf("the single instance = %+v", got)
	}
	if !got.Covers(batchDay(2, 0)) || got.Covers(batchDay(5, 0)) || runs[1].Covers(batchDay(2, 0)) {
		t.Errorf("Covers: %+v, %+v", got, runs[1])
	}
	states, err := s.TaskRunStates(ctx, []string{"tr_a"}, batchDay(3, 0), batchDay(3, 12))
	mustNil(t, err)
	if len(states) != 1 {
		t.Errorf("TaskRunStates(day 3) = %v: only runs that start in the window", states)
	}
}
