package calendar

import (
	"fmt"
	"testing"
	"time"
)

func mustParse(t testing.TB, spec, zone string) Schedule {
	t.Helper()
	s, err := Parse(spec, mustLoc(t, zone))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rfc(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339)
	}
	return out
}

func TestCyclesOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec, zone string
		date       Date
		want       []string // all cycles, or with count the first and last
		count      int
	}{
		{spec: "daily", zone: "UTC", date: Date{2025, 1, 1}, want: []string{"2025-01-01T00:00:00Z"}},
		{spec: "daily 01:30", zone: "Europe/Berlin", date: Date{2025, 3, 30}, want: []string{"2025-03-30T00:00:00+01:00"}},
		{spec: "daily", zone: "America/New_York", date: Date{2025, 11, 2}, want: []string{"2025-11-02T00:00:00-04:00"}},
		{spec: "weekly mon,thu", zone: "UTC", date: Date{2025, 6, 2}, want: []string{"2025-06-02T00:00:00Z"}}, // Monday
		{spec: "weekly mon,thu", zone: "UTC", date: Date{2025, 6, 3}, want: nil},
		{spec: "monthly 1,15,L", zone: "UTC", date: Date{2025, 6, 30}, want: []string{"2025-06-30T00:00:00Z"}},
		{spec: "monthly 31", zone: "UTC", date: Date{2025, 6, 30}, want: nil},

		// Every hour of the local day, on the absolute time line: 23 on the
		// day clocks go forward, 25 (02:00 twice) on the day they go back.
		{spec: "hourly", zone: "Europe/Berlin", date: Date{2025, 3, 30}, count: 23,
			want: []string{"2025-03-30T00:00:00+01:00", "2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T23:00:00+02:00"}},
		{spec: "hourly", zone: "Europe/Berlin", date: Date{2025, 10, 26}, count: 25,
			want: []string{"2025-10-26T00:00:00+02:00", "2025-10-26T01:00:00+02:00", "2025-10-26T02:00:00+02:00", "2025-10-26T02:00:00+01:00", "2025-10-26T03:00:00+01:00", "2025-10-26T23:00:00+01:00"}},
		{spec: "hourly :30", zone: "America/New_York", date: Date{2025, 3, 9}, count: 23,
			want: []string{"2025-03-09T00:30:00-05:00", "2025-03-09T01:30:00-05:00", "2025-03-09T03:30:00-04:00", "2025-03-09T23:30:00-04:00"}},
		{spec: "hourly :30", zone: "America/New_York", date: Date{2025, 11, 2}, count: 25,
			want: []string{"2025-11-02T00:30:00-04:00", "2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00", "2025-11-02T02:30:00-05:00", "2025-11-02T23:30:00-05:00"}},
		{spec: "hourly", zone: "Europe/Berlin", date: Date{2025, 6, 1}, count: 24,
			want: []string{"2025-06-01T00:00:00+02:00", "2025-06-01T23:00:00+02:00"}},
		{spec: "every 6h", zone: "America/New_York", date: Date{2025, 3, 9},
			want: []string{"2025-03-09T00:00:00-05:00", "2025-03-09T06:00:00-04:00", "2025-03-09T12:00:00-04:00", "2025-03-09T18:00:00-04:00"}},
		{spec: "every 2h :15", zone: "Europe/Berlin", date: Date{2025, 10, 26}, count: 13,
			want: []string{"2025-10-26T00:15:00+02:00", "2025-10-26T02:15:00+02:00", "2025-10-26T02:15:00+01:00", "2025-10-26T04:15:00+01:00", "2025-10-26T22:15:00+01:00"}},
		{spec: "every 2h", zone: "Europe/Berlin", date: Date{2025, 3, 30}, count: 11,
			want: []string{"2025-03-30T00:00:00+01:00", "2025-03-30T04:00:00+02:00", "2025-03-30T22:00:00+02:00"}},
		{spec: "every 24h", zone: "Asia/Kolkata", date: Date{2025, 1, 1}, want: []string{"2025-01-01T00:00:00+05:30"}},
		{spec: "every 15m", zone: "UTC", date: Date{2025, 1, 1}, count: 96,
			want: []string{"2025-01-01T00:00:00Z", "2025-01-01T00:15:00Z", "2025-01-01T23:45:00Z"}},
		{spec: "every 30m", zone: "Europe/Berlin", date: Date{2025, 10, 26}, count: 50,
			want: []string{"2025-10-26T00:00:00+02:00", "2025-10-26T23:30:00+01:00"}},

		{spec: "cron 0 3 * * *", zone: "Europe/Berlin", date: Date{2025, 6, 1}, want: []string{"2025-06-01T03:00:00+02:00"}},
		{spec: "cron 0 9 * * mon-fri", zone: "UTC", date: Date{2025, 6, 1}, want: nil}, // Sunday
		{spec: "cron */20 8-9 * * *", zone: "UTC", date: Date{2025, 6, 1},
			want: []string{"2025-06-01T08:00:00Z", "2025-06-01T08:20:00Z", "2025-06-01T08:40:00Z", "2025-06-01T09:00:00Z", "2025-06-01T09:20:00Z", "2025-06-01T09:40:00Z"}},
		// robfig/cron fires in both 02:30s of the repeated hour and skips
		// the 02:30 that does not exist.
		{spec: "cron 30 2 * * *", zone: "Europe/Berlin", date: Date{2025, 10, 26},
			want: []string{"2025-10-26T02:30:00+02:00", "2025-10-26T02:30:00+01:00"}},
		{spec: "cron 30 2 * * *", zone: "Europe/Berlin", date: Date{2025, 3, 30}, want: nil},
	} {
		t.Run(fmt.Sprintf("%s/%s/%v", tc.spec, tc.zone, tc.date), func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tc.spec, tc.zone)
			got := rfc(s.CyclesOn(tc.date))
			if tc.count == 0 {
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("CyclesOn = %v, want %v", got, tc.want)
				}
			} else {
				if len(got) != tc.count {
					t.Fatalf("CyclesOn has %d cycles, want %d: %v", len(got), tc.count, got)
				}
				for _, w := range tc.want {
					found := false
					for _, g := range got {
						found = found || g == w
					}
					if !found {
						t.Errorf("CyclesOn lacks %s: %v", w, got)
					}
				}
				if got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
					t.Errorf("CyclesOn runs %s … %s, want %s … %s", got[0], got[len(got)-1], tc.want[0], tc.want[len(tc.want)-1])
				}
			}
			if has := s.HasDate(tc.date); has != (len(got) > 0) {
				t.Errorf("HasDate = %v with %d cycles", has, len(got))
			}
		})
	}
}

// TestClockCyclesMatchBruteForce compares minute and hourly cycles with a
// scan of every minute of the day, in zones with odd offsets and odd DST
// (Lord Howe moves by 30 minutes, Troll by two hours).
func TestClockCyclesMatchBruteForce(t *testing.T) {
	t.Parallel()
	zones := []struct {
		name  string
		dates []Date
	}{
		{"Europe/Berlin", []Date{{2025, 3, 30}, {2025, 10, 26}}},
		{"America/New_York", []Date{{2025, 3, 9}, {2025, 11, 2}}},
		{"America/Sao_Paulo", []Date{{2018, 11, 4}, {2019, 2, 16}}},
		{"Australia/Lord_Howe", []Date{{2024, 4, 7}, {2024, 10, 6}}},
		{"Antarctica/Troll", []Date{{2024, 3, 31}, {2024, 10, 27}}},
		{"Asia/Kathmandu", []Date{{2025, 1, 1}}},
		{"Pacific/Chatham", []Date{{2025, 4, 6}, {2025, 9, 28}}},
	}
	specs := []string{"every 1m", "every 5m", "every 15m", "every 60m", "hourly", "hourly :45",
		"every 2h", "every 3h :30", "every 6h :15", "every 8h", "every 24h"}
	for _, z := range zones {
		loc := mustLoc(t, z.name)
		for _, d := range z.dates {
			for _, spec := range specs {
				s := mustParse(t, spec, z.name)
				var want []time.Time
				end := d.AddDays(1).Midnight(loc)
				for u := d.Midnight(loc); u.Before(end); u = u.Add(time.Minute) {
					h, m, _ := u.Clock()
					if s.matchesClock(h, m, 0, 0, s.everyMinutes()) {
						want = append(want, u)
					}
				}
				got := s.CyclesOn(d)
				if fmt.Sprint(rfc(got)) != fmt.Sprint(rfc(want)) {
					t.Errorf("%s in %s on %v:\n got %v\nwant %v", spec, z.name, d, rfc(got), rfc(want))
				}
				checkPrevNext(t, s, got)
			}
		}
	}
}

// checkPrevNext checks that consecutive cycles are each other's Next and
// Prev.
func checkPrevNext(t *testing.T, s Schedule, cycles []time.Time) {
	t.Helper()
	for i, c := range cycles {
		if i > 0 {
			if p, ok := s.Prev(c); !ok || !p.Equal(cycles[i-1]) {
				t.Errorf("%v: Prev(%v) = %v, %v; want %v", s, c, p, ok, cycles[i-1])
			}
		}
		if i+1 < len(cycles) {
			if n := s.Next(c); !n.Equal(cycles[i+1]) {
				t.Errorf("%v: Next(%v) = %v, want %v", s, c, n, cycles[i+1])
			}
		}
	}
}

func TestPrevNextSymmetry(t *testing.T) {
	t.Parallel()
	specs := []string{"every 15m", "hourly :30", "every 6h", "daily", "daily 02:30", "weekly tue,sat 01:00",
		"monthly 1,15,L", "monthly 31", "monthly 29", "cron 0 3 * * *", "cron */7 * * * *",
		"cron 0 0 29 2 *", "cron 30 2 * * *", "cron 15 1 * * sun"}
	starts := []string{"2024-02-27T12:34:56.789+01:00", "2025-03-29T22:00:00+01:00", "2025-10-25T23:59:59+02:00", "2025-12-31T23:59:00+01:00"}
	for _, spec := range specs {
		for _, zone := range []string{"Europe/Berlin", "America/New_York", "UTC"} {
			s := mustParse(t, spec, zone)
			for _, st := range starts {
				t0, err := time.Parse(time.RFC3339Nano, st)
				if err != nil {
					t.Fatal(err)
				}
				var cycles []time.Time
				for c := s.Next(t0); len(cycles) < 12; c = s.Next(c) {
					if c.IsZero() || !c.After(t0) {
						t.Fatalf("%s in %s: Next gave %v after %v", spec, zone, c, t0)
					}
					cycles = append(cycles, c)
				}
				checkPrevNext(t, s, cycles)
				// No cycle between Prev(t) and t, nor between t and Next(t).
				first := cycles[0]
				if at := s.Next(t0.Add(-time.Nanosecond)); at.Equal(t0) {
					first = t0
				}
				if p, ok := s.Prev(t0); !ok || !p.Before(t0) || !s.Next(p).Equal(first) {
					t.Errorf("%s in %s: Prev(%v) = %v, %v, whose Next is %v; want %v", spec, zone, t0, p, ok, s.Next(p), first)
				}
				// Cycles over the same span agrees with walking Next.
				span := s.Cycles(t0.Add(time.Nanosecond), cycles[len(cycles)-1].Add(time.Nanosecond))
				if fmt.Sprint(rfc(span)) != fmt.Sprint(rfc(cycles)) {
					t.Errorf("%s in %s: Cycles = %v, want %v", spec, zone, rfc(span), rfc(cycles))
				}
			}
		}
	}
}

func TestPrevSparseCron(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "cron 0 0 29 2 *", "UTC")
	p, ok := s.Prev(time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC))
	if !ok || p.Format(time.RFC3339) != "2024-02-29T00:00:00Z" {
		t.Fatalf("Prev = %v, %v; want 2024-02-29", p, ok)
	}
	// The first instant of a fire time is not before it.
	p, ok = s.Prev(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC))
	if !ok || p.Format(time.RFC3339) != "2020-02-29T00:00:00Z" {
		t.Fatalf("Prev = %v, %v; want 2020-02-29", p, ok)
	}
}

func TestScheduledAndEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec, zone     string
		biz            string // RFC 3339
		scheduled, end string
	}{
		{"daily", "UTC", "2025-01-31T00:00:00Z", "2025-02-01T00:00:00Z", "2025-02-01T00:00:00Z"},
		{"daily 01:30", "Europe/Berlin", "2025-06-01T00:00:00+02:00", "2025-06-02T01:30:00+02:00", "2025-06-02T00:00:00+02:00"},
		{"weekly mon 02:00", "UTC", "2025-06-02T00:00:00Z", "2025-06-03T02:00:00Z", "2025-06-03T00:00:00Z"},
		{"monthly L 03:00", "UTC", "2024-02-29T00:00:00Z", "2024-03-01T03:00:00Z", "2024-03-01T00:00:00Z"},
		// The day before a DST change: the period is 23 or 25 hours, the
		// scheduled time is the wall clock time.Date gives.
		{"daily 01:30", "Europe/Berlin", "2025-03-29T00:00:00+01:00", "2025-03-30T01:30:00+01:00", "2025-03-30T00:00:00+01:00"},
		{"daily 01:30", "Europe/Berlin", "2025-03-30T00:00:00+01:00", "2025-03-31T01:30:00+02:00", "2025-03-31T00:00:00+02:00"},
		// 02:30 does not exist on the spring-forward day: time.Date moves
		// it forward east of UTC and backward west of it.
		{"daily 02:30", "Europe/Berlin", "2025-03-29T00:00:00+01:00", "2025-03-30T03:30:00+02:00", "2025-03-30T00:00:00+01:00"},
		{"daily 02:30", "America/New_York", "2025-03-08T00:00:00-05:00", "2025-03-09T01:30:00-05:00", "2025-03-09T00:00:00-05:00"},
		// A repeated time is one of its instants: the later in Berlin, the
		// earlier in New York.
		{"daily 02:30", "Europe/Berlin", "2025-10-25T00:00:00+02:00", "2025-10-26T02:30:00+01:00", "2025-10-26T00:00:00+02:00"},
		{"daily 01:30", "America/New_York", "2025-11-01T00:00:00-04:00", "2025-11-02T01:30:00-04:00", "2025-11-02T00:00:00-04:00"},
		{"daily 03:00", "America/New_York", "2025-11-01T00:00:00-04:00", "2025-11-02T03:00:00-05:00", "2025-11-02T00:00:00-04:00"},
		// Minute and hourly cycles are due when the next one starts.
		{"hourly", "Europe/Berlin", "2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T03:00:00+02:00"},
		{"hourly", "Europe/Berlin", "2025-10-26T02:00:00+02:00", "2025-10-26T02:00:00+01:00", "2025-10-26T02:00:00+01:00"},
		{"every 15m", "UTC", "2025-01-01T23:45:00Z", "2025-01-02T00:00:00Z", "2025-01-02T00:00:00Z"},
		{"every 6h :15", "UTC", "2025-01-01T18:15:00Z", "2025-01-02T00:15:00Z", "2025-01-02T00:15:00Z"},
		// Cron cycles are due at the next fire time.
		{"cron 0 3 * * mon", "UTC", "2025-06-02T03:00:00Z", "2025-06-09T03:00:00Z", "2025-06-09T03:00:00Z"},
	} {
		s := mustParse(t, tc.spec, tc.zone)
		biz, err := time.Parse(time.RFC3339, tc.biz)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Scheduled(biz).Format(time.RFC3339); got != tc.scheduled {
			t.Errorf("%s in %s: Scheduled(%s) = %s, want %s", tc.spec, tc.zone, tc.biz, got, tc.scheduled)
		}
		if got := s.End(biz).Format(time.RFC3339); got != tc.end {
			t.Errorf("%s in %s: End(%s) = %s, want %s", tc.spec, tc.zone, tc.biz, got, tc.end)
		}
	}
}

func TestHasDateMonthly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		date Date
		want bool
	}{
		{"monthly L", Date{2025, 2, 28}, true},
		{"monthly L", Date{2024, 2, 28}, false},
		{"monthly L", Date{2024, 2, 29}, true},
		{"monthly L", Date{2000, 2, 29}, true},
		{"monthly L", Date{2025, 4, 30}, true},
		{"monthly L", Date{2025, 1, 30}, false},
		{"monthly 28", Date{2025, 2, 28}, true},
		{"monthly 29", Date{2025, 2, 28}, false},
		{"monthly 29", Date{2024, 2, 29}, true},
		{"monthly 31", Date{2025, 4, 30}, false}, // no cycle in a 30-day month
		{"monthly 31", Date{2025, 5, 31}, true},
		{"monthly 30,L", Date{2025, 2, 28}, true},
		{"monthly 1,15", Date{2025, 2, 15}, true},
		{"monthly 1,15", Date{2025, 2, 16}, false},
		{"weekly sat,sun", Date{2025, 6, 1}, true},
		{"weekly sat,sun", Date{2025, 6, 2}, false},
		{"daily", Date{1999, 12, 31}, true},
		{"hourly", Date{2025, 3, 30}, true},
		{"cron 0 0 29 2 *", Date{2024, 2, 29}, true},
		{"cron 0 0 29 2 *", Date{2024, 2, 28}, false},
		{"cron 0 0 * * *", Date{2018, 11, 4}, true}, // UTC
	} {
		s := mustParse(t, tc.spec, "UTC")
		if got := s.HasDate(tc.date); got != tc.want {
			t.Errorf("%s: HasDate(%v) = %v, want %v", tc.spec, tc.date, got, tc.want)
		}
	}
	// "monthly 31" skips months without a 31st: Next from January 31st is
	// March 31st.
	s := mustParse(t, "monthly 31", "UTC")
	if got := s.Next(time.Date(2025, 1, 31, 0, 0, 0, 0, time.UTC)); got.Format(time.DateOnly) != "2025-03-31" {
		t.Errorf("Next = %v, want 2025-03-31", got)
	}
}

func TestHandBuiltSchedules(t *testing.T) {
	t.Parallel()
	// A Schedule built without Parse still works, if more slowly.
	s := Schedule{Kind: Cron, Cron: "0 3 * * *"}
	if got := s.Next(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)); got.Format(time.RFC3339) != "2025-01-01T03:00:00Z" {
		t.Errorf("Next = %v", got)
	}
	h := Schedule{Kind: Hourly, Every: time.Hour}
	if n := len(h.CyclesOn(Date{2025, 1, 1})); n != 24 {
		t.Errorf("hand-built hourly has %d cycles", n)
	}
	// Invalid ones have no cycles, and searches end.
	for _, s := range []Schedule{{}, {Kind: Weekly}, {Kind: Monthly}, {Kind: Cron, Cron: "bad"}, {Kind: Hourly, Every: 90 * time.Minute}} {
		if !s.Next(time.Now()).IsZero() {
			t.Errorf("%+v has a next cycle", s)
		}
		if _, ok := s.Prev(time.Now()); ok {
			t.Errorf("%+v has a previous cycle", s)
		}
		if s.HasDate(Date{2025, 1, 1}) || len(s.CyclesOn(Date{2025, 1, 1})) > 0 {
			t.Errorf("%+v has cycles", s)
		}
	}
}
