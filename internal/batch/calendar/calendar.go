// Package calendar knows when recurring tasks have cycles: schedules
// (minute, hourly, daily, weekly, monthly, cron) in a time zone, business
// dates, and when each cycle is due.
//
// Every cycle has a business time (the start of the period its data belongs
// to) and a scheduled time (when the recurring schedule runs it):
//
//   - daily, weekly and monthly schedules select business dates; a cycle's
//     business time is local midnight of its date, its period is that day,
//     and it is scheduled the next day at the schedule's time of day (T+1).
//   - minute and hourly schedules have a cycle every N minutes or hours on
//     the absolute time line (so a day has 23 or 25 hourly cycles when
//     daylight saving time starts or ends); a cycle is scheduled when the
//     next one begins.
//   - cron schedules have a cycle at each fire time, scheduled at the next
//     fire time. Fire times are robfig/cron's: a time of day that happens
//     twice when clocks go back fires twice, one skipped when they go
//     forward does not fire.
package calendar

import (
	"cmp"
	"time"

	"github.com/robfig/cron/v3"
)

// Kind is a schedule's kind.
type Kind string

const (
	Minute  Kind = "minute"
	Hourly  Kind = "hourly"
	Daily   Kind = "daily"
	Weekly  Kind = "weekly"
	Monthly Kind = "monthly"
	Cron    Kind = "cron"
)

// MonthEnd in Schedule.MonthDays and in date selections means the last day
// of the month.
const MonthEnd = -1

// Schedule is a parsed schedule. The zero Schedule is invalid; use Parse.
type Schedule struct {
	Kind Kind
	// Every is the cycle length of minute (1–60 minutes, dividing 60) and
	// hourly (1–24 hours, dividing 24) schedules.
	Every time.Duration
	// Offset is, for minute and hourly schedules, the minute past the hour
	// (hourly) at which cycles start; for daily, weekly and monthly ones the
	// time of day on the day after the business date at which a cycle is
	// scheduled.
	Offset time.Duration
	// Weekdays of a weekly schedule, ascending, no repeats.
	Weekdays []time.Weekday
	// MonthDays of a monthly schedule: 1–31 or MonthEnd, ascending with
	// MonthEnd last, no repeats. Day 31 has no cycle in a 30-day month.
	MonthDays []int
	// Cron is the five-field expression of a cron schedule.
	Cron     string
	Location *time.Location

	// spec is the parsed cron expression, cached by Parse so that walking
	// cycles never parses; a pointer because Schedule is passed by value.
	spec *cron.SpecSchedule
}

// Parse reads a schedule spec in loc (nil means UTC):
//
//	every 15m            minute cycles: 1m–60m, dividing 60
//	hourly               every hour at :00
//	hourly :30           every hour at :30
//	every 6h             every 6 hours at 00:00, 06:00, …; "every 6h :15" too
//	daily                every day, scheduled 00:00 the next day
//	daily 01:30          scheduled 01:30 the next day
//	weekly mon,thu 02:00 business dates that are Mondays or Thursdays
//	monthly 1,15,L 03:00 the 1st, the 15th and the last day of each month
//	cron 0 3 * * *       a standard five-field cron expression
//
// Errors say what was expected.
func Parse(spec string, loc *time.Location) (Schedule, error) {
	return parse(spec, loc)
}

// String returns the schedule in Parse's syntax.
func (s Schedule) String() string { return s.string() }

// DayBased reports whether cycles are whole business dates (daily, weekly,
// monthly).
func (s Schedule) DayBased() bool {
	return s.Kind == Daily || s.Kind == Weekly || s.Kind == Monthly
}

// HasDate reports whether a day-based schedule has a cycle on business date
// d. For minute, hourly and cron schedules it reports whether any cycle
// starts on d.
func (s Schedule) HasDate(d Date) bool {
	if s.DayBased() {
		return s.selects(d)
	}
	loc := s.loc()
	n := s.Next(d.midnight(loc).Add(-time.Nanosecond))
	return !n.IsZero() && n.Before(d.AddDays(1).midnight(loc))
}

// Cycles returns the business times of the cycles that start in [from, to),
// ascending, in the schedule's location.
func (s Schedule) Cycles(from, to time.Time) []time.Time {
	return s.AppendCycles(nil, from, to)
}

// AppendCycles appends the business times of the cycles that start in
// [from, to) to dst, so that a caller walking many days can reuse one
// slice.
func (s Schedule) AppendCycles(dst []time.Time, from, to time.Time) []time.Time {
	for c := s.Next(from.Add(-time.Nanosecond)); !c.IsZero() && c.Before(to); c = s.Next(c) {
		dst = append(dst, c)
	}
	return dst
}

// CyclesOn returns the business times of the cycles that start on business
// date d (local), ascending.
func (s Schedule) CyclesOn(d Date) []time.Time {
	var dst []time.Time
	switch {
	case s.DayBased():
	case s.Kind == Minute:
		dst = make([]time.Time, 0, 25*60/s.everyMinutes())
	case s.Kind == Hourly:
		dst = make([]time.Time, 0, 25*60/s.everyMinutes()+1)
	}
	return s.AppendCyclesOn(dst, d)
}

// AppendCyclesOn appends the business times of the cycles that start on
// business date d to dst.
func (s Schedule) AppendCyclesOn(dst []time.Time, d Date) []time.Time {
	loc := s.loc()
	if s.DayBased() {
		if s.selects(d) {
			dst = append(dst, d.midnight(loc))
		}
		return dst
	}
	return s.AppendCycles(dst, d.midnight(loc), d.AddDays(1).midnight(loc))
}

// Next returns the business time of the first cycle that starts after t.
//
// It returns the zero Time when there is none (an invalid schedule, or a
// cron expression that does not fire within five years).
func (s Schedule) Next(t time.Time) time.Time {
	loc := s.loc()
	switch s.Kind {
	case Daily, Weekly, Monthly:
		return s.nextDay(t, loc)
	case Minute, Hourly:
		return s.nextClock(t, loc)
	case Cron:
		return s.nextCron(t, loc)
	}
	return time.Time{}
}

// Prev returns the business time of the last cycle that starts before t; ok
// is false when there is none within ten years.
func (s Schedule) Prev(t time.Time) (prev time.Time, ok bool) {
	loc := s.loc()
	switch s.Kind {
	case Daily, Weekly, Monthly:
		return s.prevDay(t, loc)
	case Minute, Hourly:
		return s.prevClock(t, loc)
	case Cron:
		return s.prevCron(t, loc)
	}
	return time.Time{}, false
}

// End returns the end of the period of the cycle that starts at biz: the
// next local midnight for day-based schedules, the next cycle otherwise.
func (s Schedule) End(biz time.Time) time.Time {
	if s.DayBased() {
		loc := s.loc()
		return DateOf(biz.In(loc)).AddDays(1).midnight(loc)
	}
	return s.Next(biz)
}

// Scheduled returns when the cycle that starts at biz is due.
//
// Day-based cycles are due on the next day at Offset on the local wall
// clock, as time.Date computes it: a time skipped by a DST jump forward
// moves by the size of the jump, forward in zones east of UTC and backward
// west of it (02:30 on the spring-forward day is 03:30 CEST in
// Europe/Berlin but 01:30 EST in America/New_York), and a repeated time is
// one of its two instants (02:30 CET, the second, in Europe/Berlin; 01:30
// EDT, the first, in America/New_York). Other cycles are due when the next
// one starts.
func (s Schedule) Scheduled(biz time.Time) time.Time {
	if s.DayBased() {
		return s.scheduledDay(biz, s.loc())
	}
	return s.Next(biz)
}

func (s Schedule) loc() *time.Location {
	if s.Location == nil {
		return time.UTC
	}
	return s.Location
}

// Date is a calendar date without a time zone.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDate reads YYYY-MM-DD.
func ParseDate(s string) (Date, error) { return parseDate(s) }

// DateOf returns t's date in its own location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{y, m, d}
}

// String returns YYYY-MM-DD.
func (d Date) String() string { return d.string() }

// Midnight returns the first instant of d in loc (the first instant after
// midnight when midnight does not exist there).
func (d Date) Midnight(loc *time.Location) time.Time { return d.midnight(loc) }

// AddDays returns d moved by n days.
func (d Date) AddDays(n int) Date { return dateFromDays(d.days() + int64(n)) }

// Weekday returns d's day of the week.
func (d Date) Weekday() time.Weekday {
	// 1970-01-01 was a Thursday.
	return time.Weekday((d.days()%7 + 7 + 4) % 7)
}

// IsMonthEnd reports whether d is the last day of its month.
func (d Date) IsMonthEnd() bool { return d.Day == daysIn(d.Month, d.Year) }

// Before reports whether d is before e; Compare returns -1, 0 or +1.
func (d Date) Before(e Date) bool { return d.Compare(e) < 0 }

// Compare returns -1, 0 or +1.
func (d Date) Compare(e Date) int {
	return cmp.Or(cmp.Compare(d.Year, e.Year), cmp.Compare(d.Month, e.Month), cmp.Compare(d.Day, e.Day))
}

// MarshalText and UnmarshalText use YYYY-MM-DD.
func (d Date) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (d *Date) UnmarshalText(b []byte) error {
	v, err := ParseDate(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
