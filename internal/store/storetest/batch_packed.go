package storetest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// readPacked reads backfill id's instances through its packed value, in
// pages of size; ok false when it has none.
func readPacked(t *testing.T, s *store.Store, id int64, size int) (insts []store.BatchInstance, ok bool) {
	t.Helper()
	ok, err := s.ReadBatchBackfillInstances(t.Context(), id, size, func(page []store.BatchInstance) error {
		if len(page) == 0 || len(page) > size {
			t.Errorf("a page of %d instances, pages of %d asked for", len(page), size)
		}
		insts = append(insts, page...)
		return nil
	})
	mustNil(t, err)
	return insts, ok
}

// checkPackedRead checks that reading backfill id through its packed value
// gives what listing its rows does, in pages of every size up to n+1.
func checkPackedRead(t *testing.T, s *store.Store, id int64, n int) {
	t.Helper()
	rows, err := s.ListBatchInstances(t.Context(), store.BatchInstanceFilter{BackfillID: id})
	mustNil(t, err)
	if len(rows) != n {
		t.Fatalf("listed %d instances, want %d", len(rows), n)
	}
	for size := 1; size <= n+1; size++ {
		got, ok := readPacked(t, s, id, size)
		if !ok {
			t.Fatalf("backfill %d has no packed instances", id)
		}
		if !reflect.DeepEqual(got, rows) {
			t.Fatalf("packed read (pages of %d) =\n%+v\nwant (as listed)\n%+v", size, got, rows)
		}
	}
}

// testBatchPacked checks a backfill's packed instances: read back as its
// rows are listed, every field and dependency list (in any order,
// upstream or downstream, duplicated) included, and again once instances
// are updated, whichever fields change; a backfill recorded with an
// instance that had run has none.
func testBatchPacked(t *testing.T, s *store.Store) {
	ctx := t.Context()
	var insts []store.BatchInstance
	for d := 1; d <= 9; d++ {
		in := batchInst("pk_a", d)
		in.Group, in.Seq, in.Order = d%3, -d, 1<<40+d
		switch d % 3 {
		case 1:
			in.State, in.Mode, in.Reason = store.InstanceBlocked, store.InstanceModeBlocked, "task paused"
		case 2:
			in.Mode, in.ResourceGroup, in.Task = store.InstanceModeDryRun, "heavy \"q\"", "pk_b ü"
		}
		if d == 5 {
			in.BizTime = batchDay(1, 0) // earlier than the one before
			in.BizEnd = in.BizTime      // a point in time
		}
		insts = append(insts, in)
	}
	deps := [][]int{nil, {0}, {1, 0, 1}, {8}, {0, 8, 3, 3}, nil, {4}, {6, 5}, {2}}
	b := &store.BatchBackfill{Name: "pk", Task: "pk_a"}
	createBatchBackfill(t, s, b, insts, deps)
	checkPackedRead(t, s, b.ID, len(insts))

	// Updates of every kind: the updated rows are read whole in their
	// places, their dependencies kept.
	u := insts[1]
	u.State, u.Attempt, u.NextTry, u.StartedAt = store.InstanceRunning, 1, batchTP(at(2)), batchTP(at(3))
	u.PID, u.PGID, u.ProcStart, u.Host = 99, 98, 1<<64-1, "h1"
	w := insts[4]
	w.State, w.Reason = store.InstanceStopped, "stopped by ops"
	x := insts[8]
	x.State, x.Attempt, x.FinishedAt, x.Outputs, x.Error = store.InstanceFailed, 2, batchTP(at(4)), map[string]string{"rows": "3"}, "exit 1"
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{u, w, x}))
	checkPackedRead(t, s, b.ID, len(insts))
	// Back to what it was recorded as: still read as its row says.
	mustNil(t, s.UpdateBatchInstances(ctx, []store.BatchInstance{insts[4]}))
	checkPackedRead(t, s, b.ID, len(insts))

	// Recorded with an instance that had run: no packed value, nothing read.
	ran := []store.BatchInstance{batchInst("pk_c", 1), everyFieldBatchInst()}
	b2 := &store.BatchBackfill{Name: "pk-ran", Task: "pk_c"}
	createBatchBackfill(t, s, b2, ran, nil)
	if got, ok := readPacked(t, s, b2.ID, 10); ok || got != nil {
		t.Errorf("backfill recorded with a run instance: packed read ok=%v, %d instances", ok, len(got))
	}
	// Empty, and unknown.
	b3 := &store.BatchBackfill{Name: "pk-empty", Task: "pk_a"}
	createBatchBackfill(t, s, b3, nil, nil)
	if got, ok := readPacked(t, s, b3.ID, 10); !ok || got != nil {
		t.Errorf("empty backfill: packed read ok=%v, %d instances", ok, len(got))
	}
	_, err := s.ReadBatchBackfillInstances(ctx, b3.ID+1000, 10, func([]store.BatchInstance) error { return nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown backfill: %v, want ErrNotFound", err)
	}
	// A page's error ends the read with it.
	stop := errors.New("enough")
	_, err = s.ReadBatchBackfillInstances(ctx, b.ID, 2, func([]store.BatchInstance) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("page error: %v, want %v", err, stop)
	}
}
