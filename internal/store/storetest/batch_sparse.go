package storetest

import (
	"reflect"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// testBatchSparseList checks that a sparse read of instances gives what a
// whole read does, whichever of the columns a sparse read leaves out an
// instance has set, for pages of every mix.
func testBatchSparseList(t *testing.T, s *store.Store) {
	ctx := t.Context()
	sets := []func(*store.BatchInstance){
		func(in *store.BatchInstance) { in.NextTry = batchTP(at(2)) },
		func(in *store.BatchInstance) { in.StartedAt = batchTP(at(3)) },
		func(in *store.BatchInstance) { in.FinishedAt = batchTP(at(4)) },
		func(in *store.BatchInstance) { in.PID = 7 },
		func(in *store.BatchInstance) { in.PGID = 8 },
		func(in *store.BatchInstance) { in.ProcStart = 1<<64 - 1 },
		func(in *store.BatchInstance) { in.Host = "h1" },
		func(in *store.BatchInstance) { in.SQLTag = "tag" },
		func(in *store.BatchInstance) { in.Rendered = "echo hi" },
		func(in *store.BatchInstance) { in.Outputs = map[string]string{"rows": "3"} },
		func(in *store.BatchInstance) { in.Error = "was: timeout" },
	}
	var insts []store.BatchInstance
	for d := 1; d <= 3*len(sets); d++ {
		in := batchInst("sp_a", d)
		in.Group, in.Seq, in.Order, in.Attempt = 2, d, 3*d, d%3
		switch d % 3 {
		case 0: // ran: one of the columns a sparse read leaves out is set
			sets[(d/3)%len(sets)](&in)
			in.State = store.InstanceFailed
		case 1: // not run, with a reason and another state
			in.State, in.Mode, in.Reason = store.InstanceBlocked, store.InstanceModeBlocked, "task paused"
		}
		insts = append(insts, in)
	}
	deps := make([][]int, len(insts))
	for i := 1; i < len(insts); i++ {
		deps[i] = []int{i - 1}
	}
	b := &store.BatchBackfill{Name: "sp", Task: "sp_a"}
	createBatchBackfill(t, s, b, insts, deps)
	// The whole table, then pages that end on each kind of row.
	filters := []store.BatchInstanceFilter{{BackfillID: b.ID}, {BackfillID: b.ID, States: []string{store.InstanceFailed}},
		{BackfillID: b.ID, States: []string{store.InstanceWaiting, store.InstanceBlocked}}}
	for k := range insts {
		filters = append(filters, store.BatchInstanceFilter{BackfillID: b.ID, AfterID: insts[k].ID, Limit: 4},
			store.BatchInstanceFilter{BackfillID: b.ID, ThroughID: insts[k].ID})
	}
	for _, f := range filters {
		whole, err := s.ListBatchInstances(ctx, f)
		mustNil(t, err)
		f.Sparse = true
		sparse, err := s.ListBatchInstances(ctx, f)
		mustNil(t, err)
		if !reflect.DeepEqual(sparse, whole) {
			t.Errorf("ListBatchInstances(%+v) =\n%+v\nwant (as read whole)\n%+v", f, sparse, whole)
		}
	}
	// And as they were created.
	all, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: b.ID, Sparse: true})
	mustNil(t, err)
	for i := range insts {
		if i >= len(all) || !reflect.DeepEqual(all[i], utcBatchInst(insts[i])) {
			t.Fatalf("sparse instance %d of %d =\n%+v\nwant\n%+v", i, len(all), all[min(i, len(all)-1)], utcBatchInst(insts[i]))
		}
	}
}

// testBatchBackfillFrom checks CreateBatchBackfillFrom: instances taken one
// at a time, dependency lists in any order with duplicates and gaps, every
// instance checked before anything is written.
func testBatchBackfillFrom(t *testing.T, s *store.Store) {
	ctx := t.Context()
	days := []int{3, 1, 2, 5, 4}
	deps := [][]int{nil, {0}, {1, 0, 1}, nil, {2, 2, 0}}
	asked := 0
	from := store.NewInstances{
		Len: len(days),
		At: func(i int, c *store.BatchInstance) {
			asked++
			*c = batchInst("fr_a", days[i])
			c.Mode, c.State = "", "" // the defaults fill them
		},
		Deps: func(i int) []int { return deps[i] },
	}
	b := &store.BatchBackfill{Name: "fr", Task: "fr_a", StartedBy: "cli", RunAt: at(1)}
	first, err := s.CreateBatchBackfillFrom(ctx, b, from)
	mustNil(t, err)
	if b.ID == 0 || b.Instances != len(days) || asked < len(days) {
		t.Fatalf("backfill %+v after %d instances asked for", b, asked)
	}
	wantDeps := [][]int64{nil, {first}, {first, first + 1}, nil, {first, first + 2}}
	for i, d := range days {
		want := batchInst("fr_a", d)
		want.ID, want.BackfillID, want.Deps = first+int64(i), b.ID, wantDeps[i]
		checkBatchInstance(t, s, want)
	}
	// No Deps: none wait.
	none := from
	none.Deps = nil
	nb := &store.BatchBackfill{Name: "fr-none", Task: "fr_a", StartedBy: "cli", RunAt: at(1)}
	first, err = s.CreateBatchBackfillFrom(ctx, nb, none)
	mustNil(t, err)
	got, err := s.GetBatchInstance(ctx, first+int64(len(days)-1))
	mustNil(t, err)
	if got.BackfillID != nb.ID || got.Deps != nil {
		t.Errorf("instance of a backfill without deps: %+v", got)
	}

	// Instances that have not run are written with their lean columns
	// alone: every one of those comes back as given, the others at
	// their defaults.
	lean := everyFieldBatchInst()
	lean.NextTry, lean.StartedAt, lean.FinishedAt = nil, nil, nil
	lean.PID, lean.PGID, lean.ProcStart, lean.Host, lean.SQLTag = 0, 0, 0, "", ""
	lean.Rendered, lean.Outputs, lean.Error = "", nil, ""
	lb := &store.BatchBackfill{Name: "fr-lean", Task: "rt_a", StartedBy: "cli", RunAt: at(1)}
	first, err = s.CreateBatchBackfillFrom(ctx, lb, store.NewInstances{Len: 1, At: func(_ int, c *store.BatchInstance) { *c = lean }})
	mustNil(t, err)
	lean.ID, lean.BackfillID, lean.Deps = first, lb.ID, nil
	checkBatchInstance(t, s, lean)

	// Refused, nothing is left behind: a bad instance (the last), a
	// dependency out of range or on itself, dependencies that change
	// between the check and the write, an instance that has run only
	// when written.
	bad := from
	bad.At = func(i int, c *store.BatchInstance) {
		*c = batchInst("fr_b", days[i])
		if i == len(days)-1 {
			c.State = "sleeping"
		}
	}
	refused := []store.NewInstances{bad}
	for _, d := range [][]int{{5}, {-1}, {4}} {
		r := from
		r.At = bad.At
		r.Deps = func(i int) []int {
			if i == len(days)-1 {
				return d
			}
			return deps[i]
		}
		refused = append(refused, r)
	}
	calls := 0
	shrinking := from
	shrinking.At = func(i int, c *store.BatchInstance) { *c = batchInst("fr_b", days[i]) }
	shrinking.Deps = func(i int) []int {
		calls++
		if calls > len(days) { // the write's pass
			return nil
		}
		return deps[i]
	}
	refused = append(refused, shrinking)
	asked = 0
	ran := from
	ran.At = func(i int, c *store.BatchInstance) {
		*c = batchInst("fr_b", days[i])
		if asked++; asked > len(days) { // the write's pass
			c.Host = "h"
		}
	}
	refused = append(refused, ran)
	for k, r := range refused {
		if _, err := s.CreateBatchBackfillFrom(ctx, &store.BatchBackfill{Name: "fr-bad", Task: "fr_b", StartedBy: "cli", RunAt: at(1)}, r); err == nil {
			t.Errorf("refused case %d: no error", k)
		}
		backfills, err := s.ListBatchBackfills(ctx, store.BatchBackfillFilter{Task: "fr_b"})
		mustNil(t, err)
		list, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{Task: "fr_b"})
		mustNil(t, err)
		if len(backfills) != 0 || len(list) != 0 {
			t.Errorf("refused case %d left %d backfills and %d instances", k, len(backfills), len(list))
		}
	}
}
