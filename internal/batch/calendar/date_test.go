package calendar

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, whatever the host has
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseDate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    Date
		wantErr string
	}{
		{in: "2025-03-31", want: Date{2025, time.March, 31}},
		{in: "2024-02-29", want: Date{2024, time.February, 29}},
		{in: "2000-02-29", want: Date{2000, time.February, 29}},
		{in: "1900-02-29", wantErr: "February 1900 has 28 days"},
		{in: "2025-02-29", wantErr: "February 2025 has 28 days"},
		{in: "2025-04-31", wantErr: "April 2025 has 30 days"},
		{in: "2025-13-01", wantErr: "month 13 is not 01–12"},
		{in: "2025-00-01", wantErr: "month 00 is not 01–12"},
		{in: "2025-01-00", wantErr: "has 31 days"},
		{in: "2025-1-01", wantErr: "expected YYYY-MM-DD"},
		{in: "2025/01/01", wantErr: "expected YYYY-MM-DD"},
		{in: "+025-01-01", wantErr: "expected YYYY-MM-DD"},
		{in: "", wantErr: "expected YYYY-MM-DD"},
	} {
		got, err := ParseDate(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseDate(%q) error = %v, want it to say %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestDateTextRoundTrip(t *testing.T) {
	t.Parallel()
	d := Date{2025, time.January, 5}
	b, err := d.MarshalText()
	if err != nil || string(b) != "2025-01-05" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	var e Date
	if err := e.UnmarshalText(b); err != nil || e != d {
		t.Fatalf("UnmarshalText = %v, %v", e, err)
	}
	if err := e.UnmarshalText([]byte("2025-02-30")); err == nil {
		t.Fatal("UnmarshalText accepted February 30th")
	}
}

// TestDateArithmetic checks AddDays, Weekday and IsMonthEnd against the
// time package, day by day over four centuries around the epoch.
func TestDateArithmetic(t *testing.T) {
	t.Parallel()
	start := time.Date(1800, time.January, 1, 0, 0, 0, 0, time.UTC)
	base := DateOf(start)
	for n := range 400 * 366 {
		tt := start.AddDate(0, 0, n)
		want := DateOf(tt)
		got := base.AddDays(n)
		if got != want {
			t.Fatalf("%v.AddDays(%d) = %v, want %v", base, n, got, want)
		}
		if back := got.AddDays(-n); back != base {
			t.Fatalf("%v.AddDays(%d) = %v, want %v", got, -n, back, base)
		}
		if got.Weekday() != tt.Weekday() {
			t.Fatalf("%v.Weekday() = %v, want %v", got, got.Weekday(), tt.Weekday())
		}
		if wantEnd := tt.AddDate(0, 0, 1).Day() == 1; got.IsMonthEnd() != wantEnd {
			t.Fatalf("%v.IsMonthEnd() = %v", got, got.IsMonthEnd())
		}
	}
}

func TestDateAddDaysNormalises(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    Date
		n    int
		want Date
	}{
		{Date{2025, time.February, 30}, 0, Date{2025, time.March, 2}},
		{Date{2025, 13, 1}, 0, Date{2026, time.January, 1}},
		{Date{2025, 0, 1}, 0, Date{2024, time.December, 1}},
		{Date{2024, time.February, 28}, 1, Date{2024, time.February, 29}},
		{Date{2025, time.February, 28}, 1, Date{2025, time.March, 1}},
		{Date{2025, time.January, 1}, -1, Date{2024, time.December, 31}},
	} {
		if got := tc.d.AddDays(tc.n); got != tc.want {
			t.Errorf("%+v.AddDays(%d) = %v, want %v", tc.d, tc.n, got, tc.want)
		}
	}
}

func TestDateCompare(t *testing.T) {
	t.Parallel()
	a, b := Date{2025, 1, 31}, Date{2025, 2, 1}
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 || !a.Before(b) || b.Before(a) {
		t.Fatal("Compare/Before disagree with the calendar")
	}
	if (Date{2024, 12, 31}).Compare(Date{2025, 1, 1}) != -1 {
		t.Fatal("year must dominate")
	}
}

func TestMidnight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		zone string
		d    Date
		want string // RFC 3339
	}{
		{"UTC", Date{2025, 3, 30}, "2025-03-30T00:00:00Z"},
		{"Europe/Berlin", Date{2025, 3, 30}, "2025-03-30T00:00:00+01:00"},
		{"Europe/Berlin", Date{2025, 3, 31}, "2025-03-31T00:00:00+02:00"},
		{"Europe/Berlin", Date{2025, 10, 26}, "2025-10-26T00:00:00+02:00"},
		{"America/New_York", Date{2025, 3, 9}, "2025-03-09T00:00:00-05:00"},
		{"America/New_York", Date{2025, 11, 2}, "2025-11-02T00:00:00-04:00"},
		// Brazil sprang forward at midnight: the day began at 01:00, and
		// Go's time.Date alone would return 23:00 the day before.
		{"America/Sao_Paulo", Date{2018, 11, 4}, "2018-11-04T01:00:00-02:00"},
		// Lebanon too, east of UTC, where time.Date gets it right.
		{"Asia/Beirut", Date{2023, 3, 26}, "2023-03-26T01:00:00+03:00"},
		// Cuba fell back from 01:00 to 00:00: midnight came twice, and the
		// day began at the first.
		{"America/Havana", Date{2024, 11, 3}, "2024-11-03T00:00:00-04:00"},
		// So did Tunisia, east of UTC, where time.Date picks the second.
		{"Africa/Tunis", Date{1990, 9, 30}, "1990-09-30T00:00:00+02:00"},
	} {
		got := tc.d.Midnight(mustLoc(t, tc.zone))
		if got.Format(time.RFC3339) != tc.want {
			t.Errorf("%v.Midnight(%s) = %s, want %s", tc.d, tc.zone, got.Format(time.RFC3339), tc.want)
		}
		if DateOf(got) != tc.d {
			t.Errorf("%v.Midnight(%s) is on %v", tc.d, tc.zone, DateOf(got))
		}
	}
	if got := (Date{2025, 1, 1}).Midnight(nil); got.Location() != time.UTC || got.Hour() != 0 {
		t.Errorf("Midnight(nil) = %v, want UTC midnight", got)
	}
}
