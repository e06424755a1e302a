package stream

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

func TestRunStatus(t *testing.T) {
	const (
		p, a, c = StatusPending, StatusActive, StatusCompleted
		s, f    = StatusStopped, StatusFailed
	)
	for _, tc := range []struct {
		members []string
		want    string
	}{
		{[]string{p}, p},
		{[]string{p, p, p}, p},
		{[]string{a}, a},
		{[]string{a, p}, a},
		{[]string{c, p}, a},
		{[]string{c, a}, a},
		{[]string{f, p}, a},
		{[]string{s, a}, a},
		{[]string{f, s, c, p}, a},
		{[]string{c}, c},
		{[]string{c, c, c}, c},
		{[]string{c, s}, s},
		{[]string{s, s}, s},
		{[]string{c, f}, f},
		{[]string{s, f, c}, f},
		{[]string{f}, f},
		{nil, f}, // no member recorded
	} {
		var members []store.Backfill
		for _, st := range tc.members {
			members = append(members, store.Backfill{Status: st})
		}
		if got := RunStatus(members); got != tc.want {
			t.Errorf("RunStatus(%v) = %s, want %s", tc.members, got, tc.want)
		}
	}
}

// TestRunViewTotals: a run's totals are its members' sums, its start the
// earliest member's, its finish the latest member's only once it ended,
// and its error each member's error named by object.
func TestRunViewTotals(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	members := []store.Backfill{
		{ID: 1, Schema: "public", Table: "a", Status: StatusCompleted, StartedAt: at(2), FinishedAt: at(5),
			RowsRead: 10, RowsWritten: 9, Bytes: 100, RowsEstimate: 10},
		{ID: 2, Schema: "Sales", Table: "b.c", Status: StatusActive, StartedAt: at(1),
			RowsRead: 3, RowsWritten: 3, Bytes: 30, RowsEstimate: 20},
	}
	v := newRunView(store.Run{ID: 7, Stream: "shop", StartedBy: "cli", CreatedAt: t0}, members)
	if v.Status != StatusActive || v.RowsRead != 13 || v.RowsWritten != 12 || v.Bytes != 130 || v.RowsEstimate != 30 {
		t.Errorf("active run: %+v", v)
	}
	if v.StartedAt == nil || !v.StartedAt.Equal(*at(1)) || v.FinishedAt != nil {
		t.Errorf("active run: started %v, finished %v; want %v and none", v.StartedAt, v.FinishedAt, at(1))
	}
	members[1].Status, members[1].FinishedAt, members[1].Error = StatusFailed, at(4), "boom"
	v = newRunView(store.Run{ID: 7}, members)
	if v.Status != StatusFailed || v.FinishedAt == nil || !v.FinishedAt.Equal(*at(5)) {
		t.Errorf("ended run: %s, finished %v; want failed at %v", v.Status, v.FinishedAt, at(5))
	}
	if want := `Sales."b.c": boom`; v.Error != want {
		t.Errorf("error %q, want %q", v.Error, want)
	}
	if v = newRunView(store.Run{ID: 8}, nil); v.Backfills == nil || v.Status != StatusFailed || !strings.Contains(v.Error, "no backfill") {
		t.Errorf("run without members: %+v", v)
	}
}
