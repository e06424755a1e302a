package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// testSummaries checks the monitoring summaries: the latest run of every
// object, runs counted by stream and status, batch backfills and instances
// counted by state, and the observer's operation names.
func testSummaries(t *testing.T, s *store.Store) {
	ctx := t.Context()
	var ops []string
	s.Observe(func(op string, took time.Duration) {
		if took < 0 {
			t.Errorf("%s took %s", op, took)
		}
		ops = append(ops, op)
	})
	defer s.Observe(nil)

	latest, err := s.LatestBackfills(ctx)
	mustNil(t, err)
	counts, err := s.CountBackfills(ctx)
	mustNil(t, err)
	if len(latest) != 0 || len(counts) != 0 {
		t.Errorf("empty store: latest %v, counts %v", latest, counts)
	}

	// users: a failed run, then a completed one (its latest); orders: one
	// active run; items: no run; another stream's object: one failed run.
	run := func(stream, table, status string) store.Backfill {
		t.Helper()
		b := &store.Backfill{Stream: stream, Schema: "public", Table: table, StartedBy: "cli", Status: status}
		mustNil(t, s.CreateBackfill(ctx, b))
		return *b
	}
	run("s1", "users", store.StatusFailed)
	users := run("s1", "users", store.StatusCompleted)
	users.RowsRead, users.RowsWritten, users.Chunks = 10, 9, 2
	mustNil(t, s.UpdateBackfill(ctx, users))
	orders := run("s1", "orders", store.StatusActive)
	other := run("s2", "users", store.StatusFailed)
	for _, o := range []store.Object{
		{Stream: "s1", Schema: "public", Table: "users", Status: store.StatusCompleted, BackfillID: users.ID},
		{Stream: "s1", Schema: "public", Table: "orders", Status: store.StatusActive, BackfillID: orders.ID},
		{Stream: "s1", Schema: "public", Table: "items"},
		{Stream: "s2", Schema: "public", Table: "users", Status: store.StatusFailed, BackfillID: other.ID},
	} {
		mustNil(t, s.PutObject(ctx, o))
	}
	latest, err = s.LatestBackfills(ctx)
	mustNil(t, err)
	var ids []int64
	for _, b := range latest {
		ids = append(ids, b.ID)
	}
	if want := []int64{users.ID, orders.ID, other.ID}; !reflect.DeepEqual(ids, want) {
		t.Errorf("latest backfills %v, want %v", ids, want)
	}
	if len(latest) > 0 && (latest[0].RowsWritten != 9 || latest[0].Chunks != 2) {
		t.Errorf("latest run of users = %+v, want 9 rows written in 2 chunks", latest[0])
	}
	counts, err = s.CountBackfills(ctx)
	mustNil(t, err)
	wantCounts := []store.StatusCount{
		{Stream: "s1", Status: store.StatusActive, N: 1},
		{Stream: "s1", Status: store.StatusCompleted, N: 1},
		{Stream: "s1", Status: store.StatusFailed, N: 1},
		{Stream: "s2", Status: store.StatusFailed, N: 1},
	}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Errorf("CountBackfills = %+v, want %+v", counts, wantCounts)
	}

	insts := []store.BatchInstance{batchInst("sum_a", 1), batchInst("sum_a", 2), batchInst("sum_b", 1)}
	insts[2].State = store.InstanceFailed
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "sum", Task: "sum_a"}, insts, nil)
	createBatchBackfill(t, s, &store.BatchBackfill{Name: "sum2", Task: "sum_a", State: store.BatchSucceeded}, []store.BatchInstance{batchInst("sum_c", 1)}, nil)
	_, _, err = s.EnsureScheduledInstance(ctx, batchInst("sum_a", 3), nil)
	mustNil(t, err)
	bb, err := s.CountBatchBackfills(ctx)
	mustNil(t, err)
	if want := map[string]int64{store.BatchWaiting: 1, store.BatchSucceeded: 1}; !reflect.DeepEqual(bb, want) {
		t.Errorf("CountBatchBackfills = %v, want %v", bb, want)
	}
	backfill, schedule, err := s.CountBatchInstances(ctx)
	mustNil(t, err)
	if want := map[string]int64{store.InstanceWaiting: 3, store.InstanceFailed: 1}; !reflect.DeepEqual(backfill, want) {
		t.Errorf("instances of backfills = %v, want %v", backfill, want)
	}
	if want := map[string]int64{store.InstanceWaiting: 1}; !reflect.DeepEqual(schedule, want) {
		t.Errorf("instances of the schedule = %v, want %v", schedule, want)
	}

	seen := map[string]bool{}
	for _, op := range ops {
		seen[op] = true
	}
	for _, op := range []string{"select backfills", "insert backfills", "update backfills", "insert objects", "select batch_instances", "tx batch_write"} {
		if !seen[op] {
			t.Errorf("observer never saw %q; it saw %v", op, seen)
		}
	}
}
