// Package storetest is the conformance suite every store dialect must pass.
// internal/store's tests run it against SQLite and PostgreSQL.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// Run runs the suite. open must return a fresh, empty store for each call and
// arrange for it to be closed when the test ends.
func Run(t *testing.T, open func(t *testing.T) *store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *store.Store)
	}{
		{"Streams", testStreams},
		{"Objects", testObjects},
		{"Backfills", testBackfills},
		{"BackfillFilters", testBackfillFilters},
		{"Runs", testRuns},
		{"Actions", testActions},
		{"ChangedDates", testChangedDates},
		{"Proposals", testProposals},
		{"LateDates", testLateDates},
		{"ConcurrentCreateBackfill", testConcurrentCreate},
		{"Counters", testCounters},
		{"TablesCounters", testTablesCounters},
		{"RunObject", testRunObject},
		{"BackfillAndObject", testBackfillAndObject},
		{"RecordObjects", testRecordObjects},
		{"RecordCommit", testRecordCommit},
		{"Validation", testValidation},
		{"CanceledContext", testCanceledContext},
		{"Batch", testBatch},
		{"Summaries", testSummaries},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// RunReopen checks that a store keeps its data and schema across re-opens and
// that re-running the migrations is harmless. newURL returns the URL of a
// fresh, empty database.
func RunReopen(t *testing.T, newURL func(t *testing.T) string) {
	ctx := t.Context()
	url := newURL(t)
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("first open: %v", err)
	}
	v1, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v1 < 1 {
		t.Fatalf("schema version after first open = %d, want >= 1", v1)
	}
	want := store.StreamState{Name: "s1", State: store.StateRunning, UpdatedAt: at(1)}
	mustNil(t, s.PutStream(ctx, want))
	b := &store.Backfill{Stream: "s1", Schema: "public", Table: "t", StartedBy: "cli"}
	mustNil(t, s.CreateBackfill(ctx, b))
	mustNil(t, s.Close())

	for i := range 2 {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatalf("re-open %d: %v", i+1, err)
		}
		v, err := s.SchemaVersion(ctx)
		mustNil(t, err)
		if v != v1 {
			t.Errorf("schema version after re-open %d = %d, want %d", i+1, v, v1)
		}
		got, err := s.GetStream(ctx, "s1")
		mustNil(t, err)
		if got.Name != want.Name || got.State != want.State || !got.UpdatedAt.Equal(want.UpdatedAt) {
			t.Errorf("stream after re-open = %+v, want %+v", got, want)
		}
		b2 := &store.Backfill{Stream: "s1", Schema: "public", Table: "t", StartedBy: "cli"}
		mustNil(t, s.CreateBackfill(ctx, b2))
		if b2.ID <= b.ID {
			t.Errorf("backfill id after re-open = %d, want > %d", b2.ID, b.ID)
		}
		b = b2
		mustNil(t, s.Close())
	}

	// Several processes starting at once on a fresh database all migrate it.
	url = newURL(t)
	const openers = 4
	stores := make([]*store.Store, openers)
	errs := make([]error, openers)
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() { stores[i], errs[i] = store.Open(ctx, url) })
	}
	wg.Wait()
	for i := range openers {
		if errs[i] != nil {
			t.Errorf("concurrent open %d: %v", i, errs[i])
			continue
		}
		if v, err := stores[i].SchemaVersion(ctx); err != nil || v != v1 {
			t.Errorf("concurrent open %d: schema version %d, %v; want %d", i, v, err, v1)
		}
		mustNil(t, stores[i].Close())
	}
}

// at is a fixed, non-UTC test time with microsecond precision.
func at(hour int) time.Time {
	return time.Date(2024, 3, 10, hour, 4, 5, 123456000, time.FixedZone("X", 5*3600+1800))
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: err = %v, want ErrNotFound", what, err)
	}
}

func checkUTC(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("%s = %v, want %v in UTC", what, got, want.UTC())
	}
}

func testStreams(t *testing.T, s *store.Store) {
	ctx := t.Context()
	if s.Dialect() != "sqlite" && s.Dialect() != "postgres" {
		t.Errorf("Dialect() = %q", s.Dialect())
	}
	_, err := s.GetStream(ctx, "missing")
	wantNotFound(t, "GetStream(missing)", err)
	list, err := s.ListStreams(ctx)
	mustNil(t, err)
	if len(list) != 0 {
		t.Fatalf("ListStreams on empty store = %v", list)
	}

	for _, st := range []store.StreamState{
		{Name: "orders", State: store.StateRunning, UpdatedAt: at(1)},
		{Name: "Zeta", State: store.StateNotStarted, UpdatedAt: at(2)},
		{Name: "audit", State: store.StateFailed, Reason: "slot \"x\" is gone?", UpdatedAt: at(3)},
	} {
		mustNil(t, s.PutStream(ctx, st))
	}
	got, err := s.GetStream(ctx, "audit")
	mustNil(t, err)
	if got.Name != "audit" || got.State != store.StateFailed || got.Reason != "slot \"x\" is gone?" {
		t.Errorf("GetStream(audit) = %+v", got)
	}
	checkUTC(t, "UpdatedAt", got.UpdatedAt, at(3))

	// Upsert replaces state and reason.
	mustNil(t, s.PutStream(ctx, store.StreamState{Name: "audit", State: store.StatePaused, UpdatedAt: at(4)}))
	got, err = s.GetStream(ctx, "audit")
	mustNil(t, err)
	if got.State != store.StatePaused || got.Reason != "" {
		t.Errorf("after upsert = %+v", got)
	}
	checkUTC(t, "UpdatedAt after upsert", got.UpdatedAt, at(4))

	// Zero UpdatedAt means now.
	before := time.Now().Add(-time.Second)
	mustNil(t, s.PutStream(ctx, store.StreamState{Name: "orders", State: store.StateRetrying, Reason: "conn reset"}))
	got, err = s.GetStream(ctx, "orders")
	mustNil(t, err)
	if got.UpdatedAt.Before(before) || got.UpdatedAt.After(time.Now().Add(time.Second)) || got.UpdatedAt.Location() != time.UTC {
		t.Errorf("UpdatedAt defaulted to %v, want about now in UTC", got.UpdatedAt)
	}

	list, err = s.ListStreams(ctx)
	mustNil(t, err)
	var names []string
	for _, st := range list {
		names = append(names, st.Name+"="+st.State)
	}
	want := []string{"Zeta=not_started", "audit=paused", "orders=retrying"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("ListStreams = %v, want %v", names, want)
	}
}

func testObjects(t *testing.T, s *store.Store) {
	ctx := t.Context()
	_, err := s.GetObject(ctx, "s1", "public", "missing")
	wantNotFound(t, "GetObject(missing)", err)

	cols := []store.ColumnInfo{{Name: "id", Type: "bigint", Key: true}, {Name: "note", Type: "text"}}
	objs := []store.Object{
		{Stream: "s1", Schema: "public", Table: "users", Status: store.StatusCompleted, Loaded: true, BackfillID: 7, Columns: cols, UpdatedAt: at(1)},
		{Stream: "s1", Schema: "public", Table: "accounts", Status: store.StatusNone, Reason: "no primary key", UpdatedAt: at(2)},
		{Stream: "s1", Schema: "billing", Table: "invoices", Status: store.StatusActive, BackfillID: 9, UpdatedAt: at(3)},
		{Stream: "s2", Schema: "public", Table: "users", Status: store.StatusFailed, Reason: "boom", UpdatedAt: at(4)},
	}
	for _, o := range objs {
		mustNil(t, s.PutObject(ctx, o))
	}
	got, err := s.GetObject(ctx, "s1", "public", "users")
	mustNil(t, err)
	checkUTC(t, "UpdatedAt", got.UpdatedAt, at(1))
	want := objs[0]
	want.UpdatedAt = got.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetObject = %+v, want %+v", got, want)
	}
	got, err = s.GetObject(ctx, "s1", "public", "accounts")
	mustNil(t, err)
	if got.Status != "" || got.Reason != "no primary key" || got.Loaded || got.BackfillID != 0 || got.Columns != nil {
		t.Errorf("GetObject(accounts) = %+v", got)
	}
	_, err = s.GetObject(ctx, "s3", "public", "users")
	wantNotFound(t, "GetObject(other stream)", err)

	// Upsert replaces every field, including columns.
	upd := store.Object{Stream: "s1", Schema: "public", Table: "users", Status: store.StatusPending, BackfillID: 8,
		Columns: []store.ColumnInfo{{Name: "id", Type: "uuid", Key: true}}, UpdatedAt: at(5)}
	mustNil(t, s.PutObject(ctx, upd))
	got, err = s.GetObject(ctx, "s1", "public", "users")
	mustNil(t, err)
	upd.UpdatedAt = at(5).UTC()
	if !reflect.DeepEqual(got, upd) {
		t.Errorf("after upsert = %+v, want %+v", got, upd)
	}

	list, err := s.ListObjects(ctx, "s1")
	mustNil(t, err)
	var keys []string
	for _, o := range list {
		keys = append(keys, o.Stream+"/"+o.Schema+"."+o.Table)
	}
	if w := []string{"s1/billing.invoices", "s1/public.accounts", "s1/public.users"}; !reflect.DeepEqual(keys, w) {
		t.Errorf("ListObjects(s1) = %v, want %v", keys, w)
	}
	list, err = s.ListObjects(ctx, "")
	mustNil(t, err)
	if len(list) != 4 || list[3].Stream != "s2" {
		t.Errorf("ListObjects(\"\") = %d objects, last %+v", len(list), list[len(list)-1])
	}
	list, err = s.ListObjects(ctx, "none")
	mustNil(t, err)
	if len(list) != 0 {
		t.Errorf("ListObjects(none) = %v", list)
	}
}

func testBackfills(t *testing.T, s *store.Store) {
	ctx := t.Context()
	_, err := s.GetBackfill(ctx, 12345)
	wantNotFound(t, "GetBackfill(missing)", err)
	err = s.UpdateBackfill(ctx, store.Backfill{ID: 12345, Stream: "s", Schema: "p", Table: "t", StartedBy: "cli", Status: store.StatusActive})
	wantNotFound(t, "UpdateBackfill(missing)", err)

	before := time.Now().Add(-time.Second)
	b := &store.Backfill{
		Stream: "s1", Schema: "public", Table: "users", StartedBy: "api:ci-token",
		Options: map[string]any{"chunk_size": 5000.0, "where": "id > 10", "nested": map[string]any{"on": true}, "list": []any{"a", 1.5}},
	}
	mustNil(t, s.CreateBackfill(ctx, b))
	if b.ID <= 0 {
		t.Fatalf("ID = %d", b.ID)
	}
	if b.Status != store.StatusPending {
		t.Errorf("default status = %q, want pending", b.Status)
	}
	if b.CreatedAt.Before(before) || b.CreatedAt.After(time.Now().Add(time.Second)) || b.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want about now in UTC", b.CreatedAt)
	}
	got, err := s.GetBackfill(ctx, b.ID)
	mustNil(t, err)
	if !reflect.DeepEqual(got, *b) {
		t.Errorf("GetBackfill = %+v, want %+v", got, *b)
	}

	started, finished, loaded := at(1), at(2), at(3)
	upd := *b
	upd.Status = store.StatusCompleted
	upd.Error = "retried: deadlock"
	upd.Options = nil
	upd.StartedAt, upd.FinishedAt, upd.LoadedAt = &started, &finished, &loaded
	upd.RowsRead, upd.RowsWritten, upd.RowsRemoved, upd.Bytes = 1000, 990, 10, 1<<40
	upd.Chunks, upd.WindowConflicts, upd.Retries = 3, 2, 1
	upd.CreatedAt = at(9) // ignored: CreatedAt never changes
	mustNil(t, s.UpdateBackfill(ctx, upd))
	got, err = s.GetBackfill(ctx, b.ID)
	mustNil(t, err)
	checkUTC(t, "StartedAt", *got.StartedAt, started)
	checkUTC(t, "FinishedAt", *got.FinishedAt, finished)
	checkUTC(t, "LoadedAt", *got.LoadedAt, loaded)
	checkUTC(t, "CreatedAt", got.CreatedAt, b.CreatedAt)
	got.StartedAt, got.FinishedAt, got.LoadedAt, got.CreatedAt = upd.StartedAt, upd.FinishedAt, upd.LoadedAt, upd.CreatedAt
	if !reflect.DeepEqual(got, upd) {
		t.Errorf("after update = %+v, want %+v", got, upd)
	}

	// Times can be cleared again.
	upd.StartedAt, upd.FinishedAt, upd.LoadedAt = nil, nil, nil
	mustNil(t, s.UpdateBackfill(ctx, upd))
	got, err = s.GetBackfill(ctx, b.ID)
	mustNil(t, err)
	if got.StartedAt != nil || got.FinishedAt != nil || got.LoadedAt != nil {
		t.Errorf("cleared times = %v %v %v", got.StartedAt, got.FinishedAt, got.LoadedAt)
	}
}

func testBackfillFilters(t *testing.T, s *store.Store) {
	ctx := t.Context()
	type spec struct{ stream, schema, table, status, by string }
	specs := []spec{
		{"s1", "public", "users", store.StatusCompleted, "automatic"},
		{"s1", "public", "orders", store.StatusFailed, "cli"},
		{"s2", "public", "users", store.StatusActive, "api"},
		{"s1", "billing", "users", store.StatusActive, "api:ops"},
		{"s1", "public", "users", store.StatusPending, "cli"},
	}
	var ids []int64
	var marks []time.Time // marks[i] is between backfill i-1 and i
	for _, sp := range specs {
		time.Sleep(3 * time.Millisecond)
		marks = append(marks, time.Now())
		time.Sleep(3 * time.Millisecond)
		b := &store.Backfill{Stream: sp.stream, Schema: sp.schema, Table: sp.table, Status: sp.status, StartedBy: sp.by}
		mustNil(t, s.CreateBackfill(ctx, b))
		ids = append(ids, b.ID)
	}
	idsOf := func(f store.BackfillFilter) []int64 {
		t.Helper()
		list, err := s.ListBackfills(ctx, f)
		mustNil(t, err)
		out := []int64{}
		for _, b := range list {
			out = append(out, b.ID)
		}
		return out
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
		f    store.BackfillFilter
		want []int64
	}{
		{"all", store.BackfillFilter{}, rev(0, 1, 2, 3, 4)},
		{"stream", store.BackfillFilter{Stream: "s1"}, rev(0, 1, 3, 4)},
		{"schema", store.BackfillFilter{Schema: "billing"}, rev(3)},
		{"table", store.BackfillFilter{Table: "users"}, rev(0, 2, 3, 4)},
		{"object", store.BackfillFilter{Stream: "s1", Schema: "public", Table: "users"}, rev(0, 4)},
		{"status", store.BackfillFilter{Status: store.StatusActive}, rev(2, 3)},
		{"started by", store.BackfillFilter{StartedBy: "cli"}, rev(1, 4)},
		{"started by token", store.BackfillFilter{StartedBy: "api:ops"}, rev(3)},
		{"since", store.BackfillFilter{Since: marks[2]}, rev(2, 3, 4)},
		{"until", store.BackfillFilter{Until: marks[2]}, rev(0, 1)},
		{"window", store.BackfillFilter{Since: marks[1], Until: marks[3]}, rev(1, 2)},
		{"window in other zone", store.BackfillFilter{Since: marks[1].In(time.FixedZone("Y", -7*3600)), Until: marks[3]}, rev(1, 2)},
		{"limit", store.BackfillFilter{Limit: 2}, rev(3, 4)},
		{"combined", store.BackfillFilter{Stream: "s1", Table: "users", Since: marks[1], Limit: 1}, rev(4)},
		{"no match", store.BackfillFilter{Stream: "s1", Status: store.StatusStopped}, []int64{}},
	} {
		if got := idsOf(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ids = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Exact bounds: Since is inclusive, Until exclusive.
	b2, err := s.GetBackfill(ctx, ids[2])
	mustNil(t, err)
	if got, want := idsOf(store.BackfillFilter{Since: b2.CreatedAt, Until: b2.CreatedAt.Add(time.Microsecond)}), rev(2); !reflect.DeepEqual(got, want) {
		t.Errorf("exact window: ids = %v, want %v", got, want)
	}
	if got := idsOf(store.BackfillFilter{Since: b2.CreatedAt, Until: b2.CreatedAt}); len(got) != 0 {
		t.Errorf("empty window: ids = %v", got)
	}
	if _, err := s.ListBackfills(ctx, store.BackfillFilter{Limit: -1}); err == nil {
		t.Error("negative limit: no error")
	}
}

func testConcurrentCreate(t *testing.T, s *store.Store) {
	ctx := t.Context()
	const workers, each = 8, 15
	var mu sync.Mutex
	seen := map[int64]bool{}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				b := &store.Backfill{Stream: "s", Schema: "public", Table: fmt.Sprintf("t%d", w), StartedBy: "automatic",
					Options: map[string]any{"i": float64(i)}}
				if err := s.CreateBackfill(ctx, b); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if seen[b.ID] {
					errs <- fmt.Errorf("duplicate id %d", b.ID)
				}
				seen[b.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct ids, want %d", len(seen), workers*each)
	}
	list, err := s.ListBackfills(ctx, store.BackfillFilter{})
	mustNil(t, err)
	if len(list) != workers*each {
		t.Fatalf("ListBackfills = %d, want %d", len(list), workers*each)
	}
	ids := make([]int64, len(list))
	for i, b := range list {
		ids[i] = b.ID
		if !seen[b.ID] {
			t.Errorf("listed id %d was never returned by CreateBackfill", b.ID)
		}
	}
	if !sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] > ids[j] }) {
		t.Errorf("ListBackfills not newest first: %v", ids)
	}
	list, err = s.ListBackfills(ctx, store.BackfillFilter{Table: "t3"})
	mustNil(t, err)
	if len(list) != each {
		t.Errorf("ListBackfills(t3) = %d, want %d", len(list), each)
	}
}

// cn builds Counters in field order.
func cn(processed, loaded, bytesProcessed, bytesLoaded int64) store.Counters {
	return store.Counters{EventsProcessed: processed, EventsLoaded: loaded, BytesProcessed: bytesProcessed, BytesLoaded: bytesLoaded}
}

func testCounters(t *testing.T, s *store.Store) {
	ctx := t.Context()
	utc := func(d, h int) time.Time { return time.Date(2024, 5, d, h, 30, 0, 0, time.UTC) }
	add := func(stream, schema, table string, day time.Time, c store.Counters) {
		t.Helper()
		mustNil(t, s.AddCounters(ctx, stream, schema, table, day, c))
	}
	sum := func(stream, schema, table string, since time.Time) store.Counters {
		t.Helper()
		c, err := s.SumCounters(ctx, stream, schema, table, since)
		mustNil(t, err)
		return c
	}
	if c := sum("s1", "public", "t", time.Time{}); c != (store.Counters{}) {
		t.Errorf("empty sum = %+v", c)
	}
	add("s1", "public", "t", utc(1, 1), cn(1, 2, 3, 4))
	add("s1", "public", "t", utc(1, 23), cn(10, 20, 30, 40)) // same UTC day: added
	add("s1", "public", "t", utc(2, 0), cn(100, 200, 300, 400))
	// 01:00 on May 4 at UTC+5 is 20:00 on May 3 UTC.
	add("s1", "public", "t", time.Date(2024, 5, 4, 1, 0, 0, 0, time.FixedZone("E", 5*3600)), cn(1000, 2000, 3000, 4000))
	add("s1", "public", "other", utc(2, 5), cn(5, 5, 5, 5))
	add("s2", "public", "t", utc(2, 5), cn(7, 7, 7, 7))

	for _, tc := range []struct {
		name                  string
		stream, schema, table string
		since                 time.Time
		want                  store.Counters
	}{
		{"all days", "s1", "public", "t", time.Time{}, cn(1111, 2222, 3333, 4444)},
		{"since day 1", "s1", "public", "t", utc(1, 12), cn(1111, 2222, 3333, 4444)},
		{"since day 2 late", "s1", "public", "t", utc(2, 23), cn(1100, 2200, 3300, 4400)},
		{"since day 3", "s1", "public", "t", utc(3, 0), cn(1000, 2000, 3000, 4000)},
		// 02:00 on May 3 at UTC+5 is still May 2 in UTC.
		{"since in other zone", "s1", "public", "t", time.Date(2024, 5, 3, 2, 0, 0, 0, time.FixedZone("E", 5*3600)), cn(1100, 2200, 3300, 4400)},
		{"since day 4", "s1", "public", "t", utc(4, 0), store.Counters{}},
		{"other table", "s1", "public", "other", time.Time{}, cn(5, 5, 5, 5)},
		{"other stream", "s2", "public", "t", time.Time{}, cn(7, 7, 7, 7)},
		{"whole stream", "s1", "", "", time.Time{}, cn(1116, 2227, 3338, 4449)},
		{"everything since day 2", "", "", "", utc(2, 0), cn(1112, 2212, 3312, 4412)},
		{"unknown table", "s1", "public", "nope", time.Time{}, store.Counters{}},
	} {
		if got := sum(tc.stream, tc.schema, tc.table, tc.since); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	byObject, err := s.SumCountersByObject(ctx, "s1", utc(2, 0))
	mustNil(t, err)
	want := map[store.ObjectName]store.Counters{
		{Schema: "public", Table: "t"}:     cn(1100, 2200, 3300, 4400),
		{Schema: "public", Table: "other"}: cn(5, 5, 5, 5),
	}
	if len(byObject) != len(want) || byObject[store.ObjectName{Schema: "public", Table: "t"}] != want[store.ObjectName{Schema: "public", Table: "t"}] ||
		byObject[store.ObjectName{Schema: "public", Table: "other"}] != want[store.ObjectName{Schema: "public", Table: "other"}] {
		t.Errorf("sums by object since day 2: %+v, want %+v", byObject, want)
	}
}

// testTablesCounters: several tables' counters added in one call add up
// as one call each would, a table named twice adds twice, and a call with
// one invalid table adds nothing.
func testTablesCounters(t *testing.T, s *store.Store) {
	ctx := t.Context()
	day := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	mustNil(t, s.AddCounters(ctx, "tc", "public", "a", day, cn(1, 1, 1, 1)))
	mustNil(t, s.AddTablesCounters(ctx, "tc", day, []store.TableCounters{
		{Schema: "public", Table: "b", Counters: cn(2, 3, 4, 5)},
		{Schema: "public", Table: "a", Counters: cn(10, 10, 10, 10)},
		{Schema: "other", Table: "a", Counters: cn(7, 7, 7, 7)},
		{Schema: "public", Table: "b", Counters: cn(1, 1, 1, 1)},
	}))
	mustNil(t, s.AddTablesCounters(ctx, "tc", day, nil))
	// More tables than one statement takes: added in one transaction.
	many := make([]store.TableCounters, 1203)
	for i := range many {
		many[i] = store.TableCounters{Schema: "wide", Table: fmt.Sprintf("t%04d", i), Counters: cn(1, 2, 3, int64(i))}
	}
	mustNil(t, s.AddTablesCounters(ctx, "tc", day, many))
	mustNil(t, s.AddTablesCounters(ctx, "tc", day, many))
	if got, err := s.SumCounters(ctx, "tc", "wide", "", time.Time{}); err != nil || got != cn(2*1203, 4*1203, 6*1203, 1203*1202) {
		t.Errorf("1,203 tables added twice: %+v %v, want %+v", got, err, cn(2*1203, 4*1203, 6*1203, 1203*1202))
	}
	if got, err := s.SumCounters(ctx, "tc", "wide", "t1202", time.Time{}); err != nil || got != cn(2, 4, 6, 2*1202) {
		t.Errorf("the last of 1,203 tables: %+v %v", got, err)
	}
	err := s.AddTablesCounters(ctx, "tc", day, []store.TableCounters{
		{Schema: "public", Table: "a", Counters: cn(100, 100, 100, 100)},
		{Schema: "public", Table: "", Counters: cn(100, 100, 100, 100)},
	})
	if err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("a table without a name: %v, want an error saying the table is required", err)
	}
	for _, tc := range []struct {
		schema, table string
		want          store.Counters
	}{
		{"public", "a", cn(11, 11, 11, 11)},
		{"public", "b", cn(3, 4, 5, 6)},
		{"other", "a", cn(7, 7, 7, 7)},
	} {
		got, err := s.SumCounters(ctx, "tc", tc.schema, tc.table, time.Time{})
		mustNil(t, err)
		if got != tc.want {
			t.Errorf("%s.%s: %+v, want %+v", tc.schema, tc.table, got, tc.want)
		}
	}
}

// testRunObject: a run's status and its loading reach its object only
// while the object's latest backfill is that run, leave its columns
// alone, and an invalid status is refused.
func testRunObject(t *testing.T, s *store.Store) {
	ctx := t.Context()
	cols := []store.ColumnInfo{{Name: "id", Type: "bigint", Key: true}, {Name: "v", Type: "text"}}
	mustNil(t, s.PutObject(ctx, store.Object{Stream: "ro", Schema: "public", Table: "t", Status: store.StatusPending, BackfillID: 5, Columns: cols}))
	get := func() store.Object {
		t.Helper()
		o, err := s.GetObject(ctx, "ro", "public", "t")
		mustNil(t, err)
		return o
	}
	if ok, err := s.SetRunObjectStatus(ctx, "ro", "public", "t", 4, store.StatusFailed, "an older run"); ok || err != nil {
		t.Errorf("an older run's status: %v %v, want false and no error", ok, err)
	}
	if ok, err := s.MarkRunObjectLoaded(ctx, "ro", "public", "t", 4); ok || err != nil {
		t.Errorf("an older run's load: %v %v, want false and no error", ok, err)
	}
	if o := get(); o.Status != store.StatusPending || o.Loaded {
		t.Errorf("after an older run's writes: %+v, want pending and not loaded", o)
	}
	if ok, err := s.SetRunObjectStatus(ctx, "ro", "public", "t", 5, store.StatusCompleted, "why"); !ok || err != nil {
		t.Errorf("the latest run's status: %v %v, want true", ok, err)
	}
	if ok, err := s.MarkRunObjectLoaded(ctx, "ro", "public", "t", 5); !ok || err != nil {
		t.Errorf("the latest run's load: %v %v, want true", ok, err)
	}
	if o := get(); o.Status != store.StatusCompleted || o.Reason != "why" || !o.Loaded || o.BackfillID != 5 || len(o.Columns) != 2 || o.Columns[0] != cols[0] {
		t.Errorf("after the latest run's writes: %+v", o)
	}
	if ok, err := s.MarkRunObjectLoaded(ctx, "ro", "public", "t", 5); ok || err != nil {
		t.Errorf("loading a loaded object again: %v %v, want false (nothing written) and no error", ok, err)
	}
	if ok, err := s.SetRunObjectReason(ctx, "ro", "public", "t", 4, "older"); ok || err != nil {
		t.Errorf("an older run's reason: %v %v, want false and no error", ok, err)
	}
	if ok, err := s.SetRunObjectReason(ctx, "ro", "public", "t", 5, "the verify differed"); !ok || err != nil {
		t.Errorf("the latest run's reason: %v %v, want true", ok, err)
	}
	if o := get(); o.Status != store.StatusCompleted || o.Reason != "the verify differed" {
		t.Errorf("after the latest run's reason: %+v", o)
	}
	mustNil(t, s.SetObjectStatus(ctx, "ro", "public", "t", store.StatusFailed, "refused"))
	if o := get(); o.Status != store.StatusFailed || o.Reason != "refused" || o.BackfillID != 5 || !o.Loaded || len(o.Columns) != 2 {
		t.Errorf("after SetObjectStatus: %+v, want failed with the rest kept", o)
	}
	if err := s.SetObjectStatus(ctx, "ro", "public", "nope", store.StatusFailed, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetObjectStatus of an object not recorded: %v, want ErrNotFound", err)
	}
	if _, err := s.SetRunObjectStatus(ctx, "ro", "public", "t", 5, "done", ""); err == nil || !strings.Contains(err.Error(), "invalid status") {
		t.Errorf("an invalid status: %v, want it refused", err)
	}
	if ok, err := s.SetRunObjectStatus(ctx, "ro", "public", "nope", 5, store.StatusCompleted, ""); ok || err != nil {
		t.Errorf("an object not recorded: %v %v, want false and no error", ok, err)
	}
}

func testValidation(t *testing.T, s *store.Store) {
	ctx := t.Context()
	for name, err := range map[string]error{
		"stream without name":      s.PutStream(ctx, store.StreamState{State: store.StateRunning}),
		"stream bad state":         s.PutStream(ctx, store.StreamState{Name: "x", State: "sleeping"}),
		"object without table":     s.PutObject(ctx, store.Object{Stream: "x", Schema: "public"}),
		"object bad status":        s.PutObject(ctx, store.Object{Stream: "x", Schema: "public", Table: "t", Status: "done"}),
		"backfill without started": s.CreateBackfill(ctx, &store.Backfill{Stream: "x", Schema: "public", Table: "t"}),
		"backfill bad status":      s.CreateBackfill(ctx, &store.Backfill{Stream: "x", Schema: "public", Table: "t", StartedBy: "cli", Status: "done"}),
		"update without status":    s.UpdateBackfill(ctx, store.Backfill{ID: 1, Stream: "x", Schema: "public", Table: "t", StartedBy: "cli"}),
		"counters without table":   s.AddCounters(ctx, "x", "public", "", time.Now(), store.Counters{}),
		"counters zero day":        s.AddCounters(ctx, "x", "public", "t", time.Time{}, store.Counters{}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	list, err := s.ListStreams(ctx)
	mustNil(t, err)
	objs, err := s.ListObjects(ctx, "")
	mustNil(t, err)
	bfs, err := s.ListBackfills(ctx, store.BackfillFilter{})
	mustNil(t, err)
	if len(list)+len(objs)+len(bfs) != 0 {
		t.Errorf("invalid writes stored something: %v %v %v", list, objs, bfs)
	}
}

func testCanceledContext(t *testing.T, s *store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.ListStreams(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ListStreams with canceled context: err = %v, want context.Canceled", err)
	}
	if err := s.PutStream(ctx, store.StreamState{Name: "x", State: store.StateRunning}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutStream with canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := s.GetStream(t.Context(), "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("stream written despite canceled context: err = %v", err)
	}
}
