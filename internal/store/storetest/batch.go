package storetest

import (
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
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
		{"SparseList", testBatchSparseList},
		{"BackfillFrom", testBatchBackfillFrom},
		{"Packed", testBatchPacked},
		{"UpdateInstances", testBatchUpdateInstances},
		{"RunningUnique", testBatchRunningUnique},
		{"OpenInstances", testBatchOpenInstances},
		{"Schedule", testBatchSchedule},
		{"Logs", testBatchLogs},
		{"LatestOutputs", testBatchLatestOutputs},
		{"TaskRunStates", testBatchTaskRunStates},
		{"TaskRuns", testBatchTaskRuns},
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
	checkPagedBatchInstances(t, s, b.ID, insts, edges)
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

// checkPagedBatchInstances pages through backfill id's instances, in three
// pages, and checks they are insts, with edges edges in all.
func checkPagedBatchInstances(t *testing.T, s *store.Store, id int64, insts []store.BatchInstance, edges int) {
	t.Helper()
	n := len(insts)
	var seen, seenEdges int
	after := int64(0)
	for {
		page, err := s.ListBatchInstances(t.Context(), store.BatchInstanceFilter{BackfillID: id, AfterID: after, Limit: n/3 + 1})
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
}
