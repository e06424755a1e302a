package storetest

import (
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// testChangedDates: changed dates are kept once per stream, backfill,
// object, column and value, whatever is recorded again, in sets larger
// than one insert, and read back per backfill in order.
func testChangedDates(t *testing.T, s *store.Store) {
	ctx := t.Context()
	d := func(id int64, obj, v string) store.ChangedDate {
		return store.ChangedDate{Stream: "shop", BackfillID: id, Object: obj, Column: "day", Value: v}
	}
	mustNil(t, s.RecordChangedDates(ctx, nil))
	mustNil(t, s.RecordChangedDates(ctx, []store.ChangedDate{d(1, "public.orders", "2026-03-05"), d(1, "public.orders", "2026-03-02"), d(2, "public.orders", "2026-03-09")}))
	mustNil(t, s.RecordChangedDates(ctx, []store.ChangedDate{d(1, "public.orders", "2026-03-02"), d(1, "public.items", "2026-03-01")}))
	var many []store.ChangedDate
	for i := range 1200 {
		many = append(many, d(3, "public.orders", fmt.Sprintf("2026-01-01 00:%02d:%02d", i/60, i%60)))
	}
	mustNil(t, s.RecordChangedDates(ctx, many))
	got, err := s.ChangedDates(ctx, "shop", 1)
	mustNil(t, err)
	want := []store.ChangedDate{d(1, "public.items", "2026-03-01"), d(1, "public.orders", "2026-03-02"), d(1, "public.orders", "2026-03-05")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changed dates of backfill 1 = %v, want %v", got, want)
	}
	if got, err := s.ChangedDates(ctx, "shop", 3); err != nil || len(got) != 1200 {
		t.Errorf("changed dates of backfill 3: %d, %v; want 1200", len(got), err)
	}
	if got, err := s.ChangedDates(ctx, "other", 1); err != nil || len(got) != 0 {
		t.Errorf("another stream's: %v, %v", got, err)
	}
}
