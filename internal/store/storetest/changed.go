package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

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

// testProposals: an ended backfill's changed dates are handed over once;
// additions merge into a task's pending proposal (times joined, the due
// time the latest, automatic when one is); a proposal is decided once;
// one held waits for a person with its note.
func testProposals(t *testing.T, s *store.Store) {
	ctx := t.Context()
	bf := store.Backfill{Stream: "shop", Schema: "public", Table: "orders", StartedBy: "repair"}
	mustNil(t, s.CreateBackfill(ctx, &bf))
	mustNil(t, s.RecordChangedDates(ctx, []store.ChangedDate{{Stream: "shop", BackfillID: bf.ID, Object: "public.orders", Column: "day", Value: "2026-03-02"}}))
	if ids, err := s.UnhandledChanged(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("unhandled while the backfill runs: %v, %v", ids, err)
	}
	bf.Status = store.StatusCompleted // read to its end, its last chunk not committed yet
	mustNil(t, s.UpdateBackfill(ctx, bf))
	if ids, err := s.UnhandledChanged(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("unhandled before its last chunk is committed: %v, %v", ids, err)
	}
	loaded := time.Now()
	bf.LoadedAt = &loaded
	mustNil(t, s.UpdateBackfill(ctx, bf))
	if ids, err := s.UnhandledChanged(ctx); err != nil || len(ids) != 1 || ids[0] != bf.ID {
		t.Fatalf("unhandled once loaded: %v, %v; want [%d]", ids, err, bf.ID)
	}
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	now := time.Now()
	cause := store.Cause{Stream: "shop", BackfillID: bf.ID, Object: "public.orders", StartedBy: "repair"}
	add := store.ProposalAdd{Task: "sales.daily", Times: []time.Time{day(5), day(2)}, Cause: cause, DueAt: now.Add(time.Hour)}
	mustNil(t, s.HandleChanged(ctx, bf.ID, []store.ProposalAdd{add}))
	mustNil(t, s.HandleChanged(ctx, bf.ID, []store.ProposalAdd{add})) // a restart hands it over again: nothing changes
	if ids, _ := s.UnhandledChanged(ctx); len(ids) != 0 {
		t.Fatalf("still unhandled: %v", ids)
	}
	second := store.ProposalAdd{Task: "sales.daily", Auto: true, Times: []time.Time{day(9), day(5)}, Cause: store.Cause{Stream: "shop", BackfillID: bf.ID + 100}, DueAt: now.Add(-time.Minute)}
	mustNil(t, s.HandleChanged(ctx, bf.ID+100, []store.ProposalAdd{second}))
	ps, err := s.ListProposals(ctx, store.ProposalPending, 0)
	mustNil(t, err)
	if len(ps) != 1 || len(ps[0].Times) != 3 || !ps[0].Times[0].Equal(day(2)) || !ps[0].Times[2].Equal(day(9)) || len(ps[0].Causes) != 2 || !ps[0].Auto {
		t.Fatalf("merged proposals %+v, want one automatic proposal of 3 dates from 2 backfills", ps)
	}
	p := ps[0]
	if due, _ := s.DueProposals(ctx, now); len(due) != 0 {
		t.Fatalf("due before its latest due time: %+v", due)
	}
	if due, _ := s.DueProposals(ctx, now.Add(2*time.Hour)); len(due) != 1 || due[0].ID != p.ID {
		t.Fatalf("due after it: %+v", due)
	}
	mustNil(t, s.HoldProposal(ctx, p.ID, "the day's cap of 3 is reached"))
	if due, _ := s.DueProposals(ctx, now.Add(2*time.Hour)); len(due) != 0 {
		t.Fatalf("a held proposal is due: %+v", due)
	}
	mustNil(t, s.DecideProposal(ctx, p.ID, store.ProposalSubmitted, 12, "cli:ops", now))
	if err := s.DecideProposal(ctx, p.ID, store.ProposalDismissed, 0, "cli:ops", now); !errors.Is(err, store.ErrProposalDecided) {
		t.Fatalf("deciding twice: %v", err)
	}
	if err := s.DecideProposal(ctx, 999999, store.ProposalDismissed, 0, "cli:ops", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deciding an unknown proposal: %v", err)
	}
	got, err := s.GetProposal(ctx, p.ID)
	mustNil(t, err)
	if got.State != store.ProposalSubmitted || got.BatchBackfillID != 12 || got.DecidedBy != "cli:ops" || got.Note == "" {
		t.Fatalf("decided proposal %+v", got)
	}
	if n, err := s.SubmittedSince(ctx, "sales.daily", "cli:ops", now.Add(-time.Hour)); err != nil || n != 1 {
		t.Fatalf("submitted since: %d, %v", n, err)
	}
	// A new change after the submission opens a new proposal.
	mustNil(t, s.HandleChanged(ctx, bf.ID+200, []store.ProposalAdd{{Task: "sales.daily", Times: []time.Time{day(2)}, Cause: cause, DueAt: now}}))
	if ps, _ := s.ListProposals(ctx, "", 0); len(ps) != 2 || ps[0].State != store.ProposalPending || len(ps[0].Times) != 1 {
		t.Fatalf("after a submission: %+v", ps)
	}
}

// testLateDates: a late value waits once until handed over, which deletes
// it with the proposal's merge in one transaction.
func testLateDates(t *testing.T, s *store.Store) {
	ctx := t.Context()
	d := func(v string) store.ChangedDate {
		return store.ChangedDate{Stream: "shop", Object: "public.orders", Column: "day", Value: v}
	}
	mustNil(t, s.RecordLateDates(ctx, []store.ChangedDate{d("2026-03-02"), d("2026-03-05")}))
	mustNil(t, s.RecordLateDates(ctx, []store.ChangedDate{d("2026-03-02")})) // waiting already
	late, err := s.LateDates(ctx)
	mustNil(t, err)
	if len(late) != 2 || late[0].Value != "2026-03-02" || late[1].Value != "2026-03-05" || late[0].At.IsZero() {
		t.Fatalf("late dates %+v", late)
	}
	add := store.ProposalAdd{Task: "sales.daily", Auto: true, Times: []time.Time{time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)},
		Cause: store.Cause{Stream: "shop", Object: "public.orders", StartedBy: "late data"}, DueAt: time.Now()}
	mustNil(t, s.HandleLate(ctx, []int64{late[0].ID}, []store.ProposalAdd{add}))
	if late, _ := s.LateDates(ctx); len(late) != 1 || late[0].Value != "2026-03-05" {
		t.Fatalf("late dates after handing one over: %+v", late)
	}
	if ps, _ := s.ListProposals(ctx, store.ProposalPending, 0); len(ps) != 1 || ps[0].Causes[0].StartedBy != "late data" {
		t.Fatalf("proposals %+v", ps)
	}
	mustNil(t, s.RecordLateDates(ctx, []store.ChangedDate{d("2026-03-02")})) // late again, after its hand-over
	if late, _ := s.LateDates(ctx); len(late) != 2 {
		t.Fatalf("a value late again waits again: %+v", late)
	}
}
