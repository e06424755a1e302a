package lineage

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestAffected: a backfill's changed dates reach each reading task as its
// own cycles: days for a daily reader, hours for an hourly one, weeks for
// a weekly one; another stream's or column's reader gets none.
func TestAffected(t *testing.T) {
	sched := func(spec string) calendar.Schedule {
		s, err := calendar.Parse(spec, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sales := change.TableID{Schema: "public", Name: "sales"}
	read := func(stream, col string) []dag.Read {
		return []dag.Read{{Stream: stream, Object: "public.sales", Table: sales, DateColumn: col, Location: time.UTC}}
	}
	tasks := []*dag.Task{
		{ID: "s.daily", Schedule: sched("daily"), Reads: read("shop", "day")},
		{ID: "s.hourly", Schedule: sched("hourly"), Reads: read("shop", "at")},
		{ID: "s.weekly", Schedule: sched("weekly mon"), Reads: read("shop", "day")},
		{ID: "s.other_stream", Schedule: sched("daily"), Reads: read("crm", "day")},
		{ID: "s.unread", Schedule: sched("daily")},
	}
	d := func(col, v string) store.ChangedDate {
		return store.ChangedDate{Stream: "shop", BackfillID: 7, Object: "public.sales", Column: col, Value: v}
	}
	got, err := Affected(tasks, "shop", []store.ChangedDate{d("day", "2026-03-04"), d("day", "2026-03-06"), d("day", "2026-03-09"),
		d("day", "2026-03-04"), d("at", "2026-03-04 10:15:00+00"), d("at", "2026-03-04 10:45:00+00"), d("at", "2026-03-04 11:00:00+00"),
		d("day", "infinity")})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, in := range got {
		var ts []string
		for _, c := range in.Times {
			ts = append(ts, c.Format("01-02T15"))
		}
		lines = append(lines, in.Task+" "+in.Column+": "+strings.Join(ts, ","))
	}
	want := []string{"s.daily day: 03-04T00,03-06T00,03-09T00", "s.hourly at: 03-04T10,03-04T11", "s.weekly day: 03-02T00,03-09T00"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Affected:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
