package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// testBackfillAndObject: a backfill's record and its object's status (or
// loaded flag) change together, and not at all when the backfill is
// unknown or the change is invalid; the object of another run is left
// alone while the backfill's record changes.
func testBackfillAndObject(t *testing.T, s *store.Store) {
	ctx := t.Context()
	b := store.Backfill{Stream: "bo", Schema: "public", Table: "t", StartedBy: "cli"}
	mustNil(t, s.CreateBackfill(ctx, &b))
	mustNil(t, s.PutObject(ctx, store.Object{Stream: "bo", Schema: "public", Table: "t", Status: store.StatusPending, BackfillID: b.ID}))
	check := func(what, status string, rows int64, loaded bool) {
		t.Helper()
		o, err := s.GetObject(ctx, "bo", "public", "t")
		mustNil(t, err)
		got, err := s.GetBackfill(ctx, b.ID)
		mustNil(t, err)
		if o.Status != status || o.Loaded != loaded || got.Status != status || got.RowsRead != rows {
			t.Errorf("%s: object %s loaded %v, backfill %s with %d rows read; want %s, %v, %d", what, o.Status, o.Loaded, got.Status, got.RowsRead, status, loaded, rows)
		}
	}
	b.Status, b.RowsRead = store.StatusActive, 10
	if ok, err := s.UpdateBackfillAndObject(ctx, b, store.RunObjectChange{Status: store.StatusActive}); !ok || err != nil {
		t.Errorf("the run active: %v %v, want true", ok, err)
	}
	check("active", store.StatusActive, 10, false)
	b.Status, b.RowsRead = store.StatusCompleted, 20
	if ok, err := s.UpdateBackfillAndObject(ctx, b, store.RunObjectChange{Status: store.StatusCompleted}); !ok || err != nil {
		t.Errorf("the run completed: %v %v, want true", ok, err)
	}
	b.RowsRead = 30
	if ok, err := s.UpdateBackfillAndObject(ctx, b, store.RunObjectChange{Loaded: true}); !ok || err != nil {
		t.Errorf("the run loaded: %v %v, want true", ok, err)
	}
	check("loaded", store.StatusCompleted, 30, true)
	for what, o := range map[string]store.RunObjectChange{
		"an invalid status":   {Status: "done"},
		"no change":           {},
		"a status and loaded": {Status: store.StatusFailed, Loaded: true},
	} {
		b.RowsRead = 99
		if _, err := s.UpdateBackfillAndObject(ctx, b, o); err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	unknown := b
	unknown.ID = b.ID + 1000
	if _, err := s.UpdateBackfillAndObject(ctx, unknown, store.RunObjectChange{Status: store.StatusFailed}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown backfill: %v, want ErrNotFound", err)
	}
	check("after the refused changes", store.StatusCompleted, 30, true)
	// A newer run owns the object: the older one's record changes, the
	// object does not.
	mustNil(t, s.PutObject(ctx, store.Object{Stream: "bo", Schema: "public", Table: "t", Status: store.StatusPending, BackfillID: b.ID + 1}))
	b.Status, b.RowsRead = store.StatusFailed, 40
	if ok, err := s.UpdateBackfillAndObject(ctx, b, store.RunObjectChange{Status: store.StatusFailed}); ok || err != nil {
		t.Errorf("an older run: %v %v, want false and no error", ok, err)
	}
	if o, err := s.GetObject(ctx, "bo", "public", "t"); err != nil || o.Status != store.StatusPending {
		t.Errorf("the newer run's object: %+v %v, want pending", o, err)
	}
	if got, err := s.GetBackfill(ctx, b.ID); err != nil || got.Status != store.StatusFailed || got.RowsRead != 40 {
		t.Errorf("the older run's record: %+v %v, want failed with 40 rows read", got, err)
	}
}

// testRecordObjects: each object is read, changed and written in one
// transaction; an object not recorded comes as not found; an error of the
// change writes none of them.
func testRecordObjects(t *testing.T, s *store.Store) {
	ctx := t.Context()
	mustNil(t, s.PutObject(ctx, store.Object{Stream: "rec", Schema: "public", Table: "a", Status: store.StatusCompleted, BackfillID: 3, Loaded: true}))
	names := []store.ObjectName{{Schema: "public", Table: "a"}, {Schema: "public", Table: "b"}}
	seen := map[string]bool{}
	err := s.RecordObjects(ctx, "rec", names, func(n store.ObjectName, o store.Object, found bool) (store.Object, error) {
		seen[n.Table] = found
		if found && (o.Status != store.StatusCompleted || o.BackfillID != 3) {
			t.Errorf("object a as read: %+v", o)
		}
		o.Reason = "seen " + n.Table
		if !found {
			o.Status = store.StatusNone
		}
		o.Stream, o.Table = "elsewhere", "other" // the name is the one read
		return o, nil
	})
	mustNil(t, err)
	if !seen["a"] || seen["b"] || len(seen) != 2 {
		t.Errorf("found: %v, want a and not b", seen)
	}
	for _, n := range names {
		o, err := s.GetObject(ctx, "rec", n.Schema, n.Table)
		if err != nil || o.Reason != "seen "+n.Table {
			t.Errorf("object %s after: %+v %v", n.Table, o, err)
		}
	}
	if a, _ := s.GetObject(ctx, "rec", "public", "a"); a.Status != store.StatusCompleted || !a.Loaded || a.BackfillID != 3 {
		t.Errorf("object a lost what it held: %+v", a)
	}
	refused := errors.New("refused")
	err = s.RecordObjects(ctx, "rec", append(names, store.ObjectName{Schema: "public", Table: "c"}), func(n store.ObjectName, o store.Object, found bool) (store.Object, error) {
		if n.Table == "c" {
			return o, refused
		}
		o.Reason = "rolled back"
		return o, nil
	})
	if !errors.Is(err, refused) {
		t.Errorf("a change that fails: %v, want its error", err)
	}
	if a, _ := s.GetObject(ctx, "rec", "public", "a"); a.Reason != "seen a" {
		t.Errorf("after a failed batch, object a: %+v, want it unchanged", a)
	}
	if _, err := s.GetObject(ctx, "rec", "public", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a failed batch, object c: %v, want not recorded", err)
	}
}

// testRecordCommit: a commit's counters and its loaded runs with their
// objects are recorded together; a run the store does not know records
// nothing, counters included; without runs it adds the counters alone.
func testRecordCommit(t *testing.T, s *store.Store) {
	ctx := t.Context()
	day := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	var runs []store.Backfill
	for _, table := range []string{"a", "b"} {
		b := store.Backfill{Stream: "rc", Schema: "public", Table: table, StartedBy: "cli", Status: store.StatusCompleted}
		mustNil(t, s.CreateBackfill(ctx, &b))
		mustNil(t, s.PutObject(ctx, store.Object{Stream: "rc", Schema: "public", Table: table, Status: store.StatusCompleted, BackfillID: b.ID}))
		b.RowsWritten = 7
		runs = append(runs, b)
	}
	counters := []store.TableCounters{
		{Schema: "public", Table: "a", Counters: cn(7, 7, 70, 70)},
		{Schema: "public", Table: "b", Counters: cn(7, 7, 70, 70)},
		{Schema: "public", Table: "live", Counters: cn(1, 1, 10, 10)},
	}
	state := func(what string, rows int64, loaded bool, sum store.Counters) {
		t.Helper()
		for _, b := range runs {
			o, err := s.GetObject(ctx, "rc", "public", b.Table)
			mustNil(t, err)
			got, err := s.GetBackfill(ctx, b.ID)
			mustNil(t, err)
			if o.Loaded != loaded || got.RowsWritten != rows {
				t.Errorf("%s: %s loaded %v with %d rows written, want %v and %d", what, b.Table, o.Loaded, got.RowsWritten, loaded, rows)
			}
		}
		if got, err := s.SumCounters(ctx, "rc", "", "", time.Time{}); err != nil || got != sum {
			t.Errorf("%s: counters %+v %v, want %+v", what, got, err, sum)
		}
	}
	unknown := runs[1]
	unknown.ID += 1000
	if err := s.RecordCommit(ctx, "rc", day, counters, []store.Backfill{runs[0], unknown}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a commit with an unknown run: %v, want ErrNotFound", err)
	}
	state("after the refused commit", 0, false, store.Counters{})
	mustNil(t, s.RecordCommit(ctx, "rc", day, counters, runs))
	state("after the commit", 7, true, cn(15, 15, 150, 150))
	mustNil(t, s.RecordCommit(ctx, "rc", day, counters[2:], nil))
	state("after a commit of live changes", 7, true, cn(16, 16, 160, 160))
}
