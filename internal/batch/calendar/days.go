package calendar

import (
	"slices"
	"time"
)

// Day-based schedules (daily, weekly, monthly): a cycle is a business date
// selected by the schedule, starting at its local midnight.

// tenYears bounds backward searches, as Prev documents.
const tenYears = 3653

// selects reports whether a day-based schedule has business date d.
func (s Schedule) selects(d Date) bool {
	switch s.Kind {
	case Daily:
		return true
	case Weekly:
		return slices.Contains(s.Weekdays, d.Weekday())
	case Monthly:
		for _, md := range s.MonthDays {
			if md == d.Day || md == MonthEnd && d.IsMonthEnd() {
				return true
			}
		}
	}
	return false
}

// selectsAny reports whether selects can ever be true, so that searches on
// a hand-built schedule with no weekdays or days give up at once.
func (s Schedule) selectsAny() bool {
	switch s.Kind {
	case Daily:
		return true
	case Weekly:
		return len(s.Weekdays) > 0
	case Monthly:
		return len(s.MonthDays) > 0
	}
	return false
}

func (s Schedule) nextDay(t time.Time, loc *time.Location) time.Time {
	if !s.selectsAny() {
		return time.Time{}
	}
	// A selected day comes within 62 days: the longest gap is a monthly
	// schedule on the 31st (Mar 31 → May 31).
	d := DateOf(t.In(loc))
	for range 64 {
		if s.selects(d) {
			if m := d.midnight(loc); m.After(t) {
				return m
			}
		}
		d = d.AddDays(1)
	}
	return time.Time{}
}

func (s Schedule) prevDay(t time.Time, loc *time.Location) (time.Time, bool) {
	if !s.selectsAny() {
		return time.Time{}, false
	}
	d := DateOf(t.In(loc))
	for range tenYears {
		if s.selects(d) {
			if m := d.midnight(loc); m.Before(t) {
				return m, true
			}
		}
		d = d.AddDays(-1)
	}
	return time.Time{}, false
}

// scheduledDay is the next day's wall clock at Offset; time.Date
// normalises a time skipped by a DST jump forward (02:30 becomes 03:30) and
// picks one of the two instants of a repeated time.
func (s Schedule) scheduledDay(biz time.Time, loc *time.Location) time.Time {
	d := DateOf(biz.In(loc)).AddDays(1)
	m := int(s.Offset / time.Minute)
	return time.Date(d.Year, d.Month, d.Day, m/60, m%60, 0, 0, loc)
}
