package calendar

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// sameSchedule compares schedules without their cached cron expression.
func sameSchedule(a, b Schedule) bool {
	a.spec, b.spec = nil, nil
	return reflect.DeepEqual(a, b)
}

func TestParse(t *testing.T) {
	t.Parallel()
	ber := mustLoc(t, "Europe/Berlin")
	for _, tc := range []struct {
		spec string
		want Schedule // Location is filled in
		str  string   // String(), when not spec
	}{
		{spec: "every 15m", want: Schedule{Kind: Minute, Every: 15 * time.Minute}},
		{spec: "every 1m", want: Schedule{Kind: Minute, Every: time.Minute}},
		{spec: "every 60m", want: Schedule{Kind: Minute, Every: time.Hour}},
		{spec: "hourly", want: Schedule{Kind: Hourly, Every: time.Hour}},
		{spec: "hourly :30", want: Schedule{Kind: Hourly, Every: time.Hour, Offset: 30 * time.Minute}},
		{spec: "every 1h", want: Schedule{Kind: Hourly, Every: time.Hour}, str: "hourly"},
		{spec: "every 1h :05", want: Schedule{Kind: Hourly, Every: time.Hour, Offset: 5 * time.Minute}, str: "hourly :05"},
		{spec: "every 6h", want: Schedule{Kind: Hourly, Every: 6 * time.Hour}},
		{spec: "every 6h :15", want: Schedule{Kind: Hourly, Every: 6 * time.Hour, Offset: 15 * time.Minute}},
		{spec: "every 24h", want: Schedule{Kind: Hourly, Every: 24 * time.Hour}},
		{spec: "daily", want: Schedule{Kind: Daily}},
		{spec: "daily 00:00", want: Schedule{Kind: Daily}, str: "daily"},
		{spec: "daily 01:30", want: Schedule{Kind: Daily, Offset: 90 * time.Minute}},
		{spec: "daily 1:30", want: Schedule{Kind: Daily, Offset: 90 * time.Minute}, str: "daily 01:30"},
		{spec: "  DAILY   23:59 ", want: Schedule{Kind: Daily, Offset: 23*time.Hour + 59*time.Minute}, str: "daily 23:59"},
		{spec: "weekly mon,thu 02:00", want: Schedule{Kind: Weekly, Weekdays: []time.Weekday{time.Monday, time.Thursday}, Offset: 2 * time.Hour}},
		{spec: "weekly Thursday,sun", want: Schedule{Kind: Weekly, Weekdays: []time.Weekday{time.Sunday, time.Thursday}}, str: "weekly sun,thu"},
		{spec: "monthly 1,15,L 03:00", want: Schedule{Kind: Monthly, MonthDays: []int{1, 15, MonthEnd}, Offset: 3 * time.Hour}},
		{spec: "monthly last,31,1", want: Schedule{Kind: Monthly, MonthDays: []int{1, 31, MonthEnd}}, str: "monthly 1,31,L"},
		{spec: "cron 0 3 * * *", want: Schedule{Kind: Cron, Cron: "0 3 * * *"}},
		{spec: "cron  */15  0-6 1,15 * mon-fri", want: Schedule{Kind: Cron, Cron: "*/15 0-6 1,15 * mon-fri"}, str: "cron */15 0-6 1,15 * mon-fri"},
	} {
		got, err := Parse(tc.spec, ber)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		tc.want.Location = ber
		if !sameSchedule(got, tc.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
		wantStr := tc.str
		if wantStr == "" {
			wantStr = tc.spec
		}
		if got.String() != wantStr {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.spec, got.String(), wantStr)
		}
		again, err := Parse(got.String(), ber)
		if err != nil || !sameSchedule(again, got) {
			t.Errorf("Parse(%q) does not round-trip: %+v, %v", got.String(), again, err)
		}
	}
}

func TestParseNilLocationIsUTC(t *testing.T) {
	t.Parallel()
	s, err := Parse("daily", nil)
	if err != nil || s.Location != time.UTC {
		t.Fatalf("Parse(daily, nil) = %+v, %v; want UTC", s, err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"", "empty schedule: expected one of"},
		{"   ", "empty schedule"},
		{"yearly", `unknown kind "yearly": expected one of`},
		{"weekly", `schedule "weekly" needs weekdays, e.g. "weekly mon,thu 02:00"`},
		{"weekly mon,funday", `unknown weekday "funday"; use mon, tue`},
		{"weekly mon,mon", `weekday "mon" given twice`},
		{"weekly mon,Monday", `weekday "Monday" given twice`},
		{"weekly mon,", `unknown weekday ""`},
		{"weekly mon 25:00", `time of day must be HH:MM, 00:00–23:59, e.g. "weekly mon,thu 02:00"; got "25:00"`},
		{"monthly", `needs days of the month, e.g. "monthly 1,15,L 03:00"`},
		{"monthly 0", `day of the month "0" must be 1–31 or L`},
		{"monthly 32", `day of the month "32" must be 1–31 or L`},
		{"monthly -1", `day of the month "-1" must be 1–31 or L`},
		{"monthly +1", `day of the month "+1" must be 1–31 or L`},
		{"monthly 1,L,last", `day of the month "last" given twice`},
		{"monthly 5,05", `day of the month "05" given twice`},
		{"daily 25:00", `time of day must be HH:MM, 00:00–23:59, e.g. "daily 02:00"; got "25:00"`},
		{"daily 24:00", "time of day must be HH:MM"},
		{"daily 12:60", "time of day must be HH:MM"},
		{"daily 1230", "time of day must be HH:MM"},
		{"daily 12:3", "time of day must be HH:MM"},
		{"daily 01:00 02:00", `unexpected "02:00" after the time of day`},
		{"every", `needs an interval, e.g. "every 15m" or "every 6h"`},
		{"every 7m", "every 7m does not divide the hour; use 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60 minutes"},
		{"every 0m", "every 0m does not divide the hour"},
		{"every 90m", "every 90m does not divide the hour"},
		{"every 5h", "every 5h does not divide the day; use 1, 2, 3, 4, 6, 8, 12 or 24 hours"},
		{"every 48h", "every 48h does not divide the day"},
		{"every 15s", `interval "15s" must be minutes or hours`},
		{"every m", `interval "m" must be minutes or hours`},
		{"every -5m", `interval "-5m" must be minutes or hours`},
		{"every 15m :05", "minute schedules start on the hour"},
		{"hourly 30", `minute past the hour must be :00–:59, e.g. "hourly :30"; got "30"`},
		{"hourly :60", "minute past the hour must be :00–:59"},
		{"hourly :5", "minute past the hour must be :00–:59"},
		{"hourly :05 :10", `unexpected ":10" after the minute`},
		{"every 6h 01:00", "minute past the hour must be :00–:59"},
		{"cron", "cron needs five fields (minute hour day-of-month month day-of-week)"},
		{"cron 0 3 * *", "cron needs five fields"},
		{"cron 0 0 3 * * *", "cron needs five fields"},
		{"cron 61 3 * * *", "cron expression: "},
		{"cron TZ=UTC 0 3 * *", "no TZ= or @ descriptors"},
		{"cron @daily a b c d", "no TZ= or @ descriptors"},
		{"cron 0 0 30 2 *", `cron expression "0 0 30 2 *" never fires`},
	} {
		_, err := Parse(tc.spec, time.UTC)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error saying %q", tc.spec, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error = %q, want it to say %q", tc.spec, err, tc.want)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts prints as a spec that
// parses to the same schedule.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"every 15m", "hourly", "hourly :30", "every 6h :15", "daily", "daily 01:30",
		"weekly mon,thu 02:00", "monthly 1,15,L 03:00", "cron 0 3 * * *",
		"cron */5 1-3 L * 1#2", "cron TZ=", "weekly ,", "monthly 31,last", "every 0060m",
	} {
		f.Add(s)
	}
	ber := mustLoc(f, "Europe/Berlin")
	springForward := time.Date(2025, 3, 30, 1, 59, 0, 0, ber)
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec, ber)
		if err != nil {
			return
		}
		// Whatever parses can be walked, even across a DST change.
		if n := s.Next(springForward); n.IsZero() || !n.After(springForward) {
			t.Fatalf("Parse(%q): Next(%v) = %v", spec, springForward, n)
		}
		if p, ok := s.Prev(springForward); !ok || !p.Before(springForward) {
			t.Fatalf("Parse(%q): Prev(%v) = %v, %v", spec, springForward, p, ok)
		}
		again, err := Parse(s.String(), ber)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which does not parse: %v", spec, s.String(), err)
		}
		if !sameSchedule(again, s) {
			t.Fatalf("Parse(%q) = %+v but Parse(%q) = %+v", spec, s, s.String(), again)
		}
	})
}
