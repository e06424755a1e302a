package lineage

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/change"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func placer(t *testing.T, spec, schedZone, readZone string, tag change.Tag) *Placer {
	t.Helper()
	s, err := calendar.Parse(spec, zone(t, schedZone))
	if err != nil {
		t.Fatal(err)
	}
	r := dag.Read{Object: "public.orders", DateColumn: "created_at"}
	if readZone != "" {
		r.Location = zone(t, readZone)
	}
	p, err := NewPlacer(s, r, change.Column{Name: "created_at", Tag: tag})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlace maps values of every usable column type to the cycles of
// every kind of schedule, time zones applied at day boundaries.
func TestPlace(t *testing.T) {
	cases := []struct {
		name, spec, schedZone, readZone string
		tag                             change.Tag
		value                           string
		want                            []string // RFC 3339 in the schedule's zone
	}{
		{"daily date", "daily", "UTC", "", change.TagDate, "2026-03-02", []string{"2026-03-02T00:00:00Z"}},
		{"daily date in the schedule's zone", "daily 01:30", "Asia/Shanghai", "", change.TagDate, "2026-03-02", []string{"2026-03-02T00:00:00+08:00"}},
		{"timestamptz after local midnight", "daily", "Asia/Shanghai", "", change.TagTimestampTZ, "2026-03-01 16:00:00+00", []string{"2026-03-02T00:00:00+08:00"}},
		{"timestamptz before local midnight", "daily", "Asia/Shanghai", "", change.TagTimestampTZ, "2026-03-01 15:59:59.999999+00", []string{"2026-03-01T00:00:00+08:00"}},
		{"the read's zone decides the date", "daily", "UTC", "Asia/Shanghai", change.TagTimestampTZ, "2026-03-01 17:00:00+00", []string{"2026-03-02T00:00:00Z"}},
		{"timestamp is wall time in the read's zone", "daily", "UTC", "Asia/Shanghai", change.TagTimestamp, "2026-03-01 23:30:00", []string{"2026-03-01T00:00:00Z"}},
		{"hourly", "hourly", "UTC", "", change.TagTimestampTZ, "2026-03-02 10:15:00+00", []string{"2026-03-02T10:00:00Z"}},
		{"hourly on the hour", "hourly", "UTC", "", change.TagTimestampTZ, "2026-03-02 10:00:00+00", []string{"2026-03-02T10:00:00Z"}},
		{"hourly at :30", "hourly :30", "UTC", "", change.TagTimestampTZ, "2026-03-02 10:15:00+00", []string{"2026-03-02T09:30:00Z"}},
		{"every 6h", "every 6h", "Asia/Shanghai", "", change.TagTimestamp, "2026-03-02 05:59:59", []string{"2026-03-02T00:00:00+08:00"}},
		{"weekly", "weekly mon", "UTC", "", change.TagDate, "2026-03-04", []string{"2026-03-02T00:00:00Z"}},
		{"weekly on its day", "weekly mon", "UTC", "", change.TagDate, "2026-03-02", []string{"2026-03-02T00:00:00Z"}},
		{"weekly twice", "weekly mon,thu", "UTC", "", change.TagDate, "2026-03-07", []string{"2026-03-05T00:00:00Z"}},
		{"weekly before the week's day", "weekly mon", "UTC", "", change.TagDate, "2026-03-01", []string{"2026-02-23T00:00:00Z"}},
		{"monthly", "monthly 1", "UTC", "", change.TagDate, "2026-03-17", []string{"2026-03-01T00:00:00Z"}},
		{"monthly at month end", "monthly L", "UTC", "", change.TagTimestampTZ, "2026-03-17 12:00:00+00", []string{"2026-02-28T00:00:00Z"}},
		{"cron before its hour", "cron 0 3 * * *", "UTC", "", change.TagTimestampTZ, "2026-03-02 02:59:59+00", []string{"2026-03-01T03:00:00Z"}},
		{"cron at its hour", "cron 0 3 * * *", "UTC", "", change.TagTimestampTZ, "2026-03-02 03:00:00+00", []string{"2026-03-02T03:00:00Z"}},
		{"cron and a date", "cron 0 3 * * *", "UTC", "", change.TagDate, "2026-03-02", []string{"2026-03-01T03:00:00Z", "2026-03-02T03:00:00Z"}},
		{"null", "daily", "UTC", "", change.TagDate, "", nil},
		{"infinity", "daily", "UTC", "", change.TagTimestamp, "infinity", nil},
		{"-infinity", "daily", "UTC", "", change.TagDate, "-infinity", nil},
		{"BC", "daily", "UTC", "", change.TagDate, "0044-03-15 BC", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := placer(t, c.spec, c.schedZone, c.readZone, c.tag)
			var v *string
			if c.name != "null" {
				v = &c.value
			}
			got, err := p.Place(v)
			if err != nil {
				t.Fatal(err)
			}
			var gotS []string
			for _, g := range got {
				gotS = append(gotS, g.In(zone(t, c.schedZone)).Format(time.RFC3339))
			}
			if strings.Join(gotS, " ") != strings.Join(c.want, " ") {
				t.Errorf("Place(%q) = %v, want %v", c.value, gotS, c.want)
			}
		})
	}
}

// TestPlaceDateOnSubDaySchedules: a date column's value is its whole
// local day, so an hourly reader gets every hour of it, 23 on a day that
// springs forward.
func TestPlaceDateOnSubDaySchedules(t *testing.T) {
	for _, c := range []struct {
		zone, date  string
		first, last string
		n           int
	}{
		{"UTC", "2026-03-02", "2026-03-02T00:00:00Z", "2026-03-02T23:00:00Z", 24},
		{"Europe/Berlin", "2026-03-29", "2026-03-29T00:00:00+01:00", "2026-03-29T23:00:00+02:00", 23},
		{"Europe/Berlin", "2026-10-25", "2026-10-25T00:00:00+02:00", "2026-10-25T23:00:00+01:00", 25},
	} {
		p := placer(t, "hourly", c.zone, "", change.TagDate)
		got, err := p.Place(&c.date)
		if err != nil {
			t.Fatal(err)
		}
		loc := zone(t, c.zone)
		if len(got) != c.n || got[0].In(loc).Format(time.RFC3339) != c.first || got[len(got)-1].In(loc).Format(time.RFC3339) != c.last {
			t.Errorf("%s in %s: %d hours from %v to %v, want %d from %s to %s", c.date, c.zone, len(got), got[0].In(loc), got[len(got)-1].In(loc), c.n, c.first, c.last)
		}
	}
}

// TestPlacerRefuses: a column that is no date or time, and values that
// are not in their tag's canonical form, say so.
func TestPlacerRefuses(t *testing.T) {
	s, _ := calendar.Parse("daily", time.UTC)
	r := dag.Read{Object: "public.orders", DateColumn: "note"}
	_, err := NewPlacer(s, r, change.Column{Name: "note", Type: "text", Tag: change.TagText})
	want := `column "note" of public.orders is text, which places no row on a date: name a date, timestamp or timestamptz column as date_column`
	if err == nil || err.Error() != want {
		t.Errorf("text column: %v, want %s", err, want)
	}
	_, err = NewPlacer(s, r, change.Column{Name: "note", Type: "time without time zone", Native: "time", Tag: change.TagInterval})
	if err == nil || !strings.Contains(err.Error(), "is time, which places no row") {
		t.Errorf("MySQL time column: %v", err)
	}
	for tag, bad := range map[change.Tag]string{change.TagDate: "2026-02-30", change.TagTimestamp: "yesterday", change.TagTimestampTZ: "2026-03-02 10:00:00"} {
		p := placer(t, "daily", "UTC", "", tag)
		if _, err := p.Place(&bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s value %q: %v", tag, bad, err)
		}
	}
}

func FuzzPlace(f *testing.F) {
	for _, s := range []string{"2026-03-02", "2026-03-01 16:00:00+00", "infinity", "0044-03-15 BC", "9999-12-31 23:59:59.999999"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, v string, k uint8) {
		tags := []change.Tag{change.TagDate, change.TagTimestamp, change.TagTimestampTZ}
		specs := []string{"daily", "hourly", "weekly mon", "monthly 1,L", "cron 0 3 * * *"}
		p := placer(t, specs[int(k)%len(specs)], "Europe/Berlin", "Asia/Shanghai", tags[int(k/8)%len(tags)])
		got, err := p.Place(&v)
		if err != nil {
			return
		}
		for i := 1; i < len(got); i++ {
			if !got[i-1].Before(got[i]) {
				t.Fatalf("Place(%q) not ascending: %v", v, got)
			}
		}
	})
}

func TestMark(t *testing.T) {
	for _, c := range []struct {
		tag     change.Tag
		in, out string
	}{
		{change.TagDate, "2026-03-02", "2026-03-02"},
		{change.TagTimestamp, "2026-03-02 10:15:27.123456", "2026-03-02 10:15:00"},
		{change.TagTimestamp, "2026-03-02 10:15:27", "2026-03-02 10:15:00"},
		{change.TagTimestampTZ, "2026-03-02 10:15:27.5+00", "2026-03-02 10:15:00+00"},
		{change.TagTimestampTZ, "2026-03-02 10:15:27+05:30", "2026-03-02 10:15:00+05:30"},
		{change.TagTimestampTZ, "infinity", "infinity"},
		{change.TagTimestamp, "0044-03-15 12:00:00 BC", "0044-03-15 12:00:00 BC"},
		{change.TagTimestamp, "12345-01-01 00:00:00", "12345-01-01 00:00:00"},
	} {
		if got := Mark(c.tag, c.in); got != c.out {
			t.Errorf("Mark(%s, %q) = %q, want %q", c.tag, c.in, got, c.out)
		}
	}
}

func TestLate(t *testing.T) {
	now := time.Date(2026, 3, 12, 10, 0, 0, 0, time.UTC)
	shanghai := zone(t, "Asia/Shanghai")
	for _, c := range []struct {
		tag   change.Tag
		v     string
		loc   *time.Location
		after time.Duration
		late  bool
	}{
		{change.TagDate, "2026-03-02", time.UTC, 24 * time.Hour, true},
		{change.TagDate, "2026-03-11", time.UTC, 24 * time.Hour, false}, // ended 10 hours ago
		{change.TagDate, "2026-03-10", time.UTC, 24 * time.Hour, true},  // ended 34 hours ago
		{change.TagDate, "2026-03-11", shanghai, 0, true},               // ended at 16:00 UTC on the 10th
		{change.TagTimestampTZ, "2026-03-11 09:59:00+00", time.UTC, 24 * time.Hour, true},
		{change.TagTimestampTZ, "2026-03-11 10:01:00+00", time.UTC, 24 * time.Hour, false},
		{change.TagTimestamp, "2026-03-11 17:30:00", shanghai, 24 * time.Hour, true}, // 09:30 UTC
		{change.TagDate, "infinity", time.UTC, time.Minute, false},
		{change.TagDate, "-infinity", time.UTC, time.Minute, false},
		{change.TagDate, "not a date", time.UTC, time.Minute, false},
	} {
		if got := Late(c.tag, c.v, c.loc, c.after, now); got != c.late {
			t.Errorf("Late(%s %q in %s, after %s) = %v, want %v", c.tag, c.v, c.loc, c.after, got, c.late)
		}
	}
}
