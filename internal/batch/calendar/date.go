package calendar

import (
	"fmt"
	"time"
)

// Dates are converted to a day count (days since 1970-01-01) with Howard
// Hinnant's civil-calendar algorithms: pure integer arithmetic, so the
// planner's million calls cost no time.Date and no allocation.

// days returns d's day number, 0 being 1970-01-01. Days and months out of
// range are normalised the way time.Date does.
func (d Date) days() int64 {
	y, m := int64(d.Year), int64(d.Month)
	// Normalise the month first; the day is linear in the formula below.
	m--
	y += floorDiv(m, 12)
	m = m - floorDiv(m, 12)*12 + 1
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12 // March is 0
	doy := (153*mp+2)/5 + int64(d.Day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// dateFromDays is the inverse of Date.days.
func dateFromDays(z int64) Date {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return Date{int(y), time.Month(m), int(day)}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// daysIn returns the number of days of month m of year y.
func daysIn(m time.Month, y int) int {
	switch m {
	case time.February:
		if isLeap(y) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

func parseDate(s string) (Date, error) {
	bad := func() (Date, error) {
		return Date{}, fmt.Errorf("date %q: expected YYYY-MM-DD, e.g. 2025-03-31", s)
	}
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return bad()
	}
	y, ok1 := atoiDigits(s[0:4])
	m, ok2 := atoiDigits(s[5:7])
	d, ok3 := atoiDigits(s[8:10])
	if !ok1 || !ok2 || !ok3 {
		return bad()
	}
	if m < 1 || m > 12 {
		return Date{}, fmt.Errorf("date %q: month %02d is not 01–12", s, m)
	}
	if d < 1 || d > daysIn(time.Month(m), y) {
		return Date{}, fmt.Errorf("date %q: %s %d has %d days", s, time.Month(m), y, daysIn(time.Month(m), y))
	}
	return Date{y, time.Month(m), d}, nil
}

// atoiDigits reads a non-empty run of ASCII digits (no sign, unlike
// strconv.Atoi), at most 9 of them so it cannot overflow.
func atoiDigits(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func (d Date) string() string {
	if d.Year < 0 || d.Year > 9999 || d.Month < 1 || d.Month > 12 || d.Day < 0 || d.Day > 99 {
		return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
	}
	b := [10]byte{
		byte('0' + d.Year/1000), byte('0' + d.Year/100%10), byte('0' + d.Year/10%10), byte('0' + d.Year%10),
		'-', byte('0' + int(d.Month)/10), byte('0' + int(d.Month)%10),
		'-', byte('0' + d.Day/10), byte('0' + d.Day%10),
	}
	return string(b[:])
}

// midnight implements Date.Midnight.
func (d Date) midnight(loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t := time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
	got := DateOf(t)
	if got != d {
		// Midnight falls in a gap (clocks jump from 24:00 to 01:00) and Go
		// normalised it into the previous day, as it does in zones west of
		// UTC: the first instant of d is the end of the zone period t is in.
		if got.Compare(d) < 0 {
			_, end := t.ZoneBounds()
			if !end.IsZero() {
				return end
			}
		}
		return t
	}
	// When clocks went back across midnight, midnight happens twice and Go
	// may have picked the later one; the first instant is the earlier.
	start, _ := t.ZoneBounds()
	if start.IsZero() || t.Sub(start) >= 24*time.Hour {
		return t
	}
	_, off := t.Zone()
	_, prevOff := start.Add(-time.Nanosecond).Zone()
	if prevOff <= off {
		return t
	}
	if e := t.Add(-time.Duration(prevOff-off) * time.Second); e.Before(start) {
		if h, m, s := e.Clock(); h == 0 && m == 0 && s == 0 && DateOf(e) == d {
			return e
		}
	}
	return t
}
