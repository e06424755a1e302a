package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
)

// maxBeyond is how many selected dates after the last date that can have a
// due cycle Build looks at to find one that has a cycle (and so must be
// refused). Ten years covers every schedule but the rarest cron ones.
const maxBeyond = 3700

// dateSelection is the request's dates, ascending without repeats, split at
// the last date on which any cycle can be due: dates up to it are planned;
// dates after it (beyond, the first maxBeyond of them; more says there are
// others) can only have cycles that are not due yet.
type dateSelection struct {
	dates  []calendar.Date
	beyond []calendar.Date
	more   bool
}

// selectDates selects the request's dates, split at last (see
// dateSelection).
func selectDates(d Dates, last calendar.Date) (dateSelection, error) {
	if d.Mode != DatesCustom && len(d.List) > 0 {
		return dateSelection{}, refuse("dates.list", "a list of dates is a custom selection; set dates.mode to %q", DatesCustom)
	}
	if d.Mode != DatesCycle && (len(d.Weekdays) > 0 || len(d.MonthDays) > 0) {
		return dateSelection{}, refuse("dates.mode", "weekdays and month_days choose dates in cycle mode; set dates.mode to %q", DatesCycle)
	}
	if d.Mode == DatesCustom {
		return selectListedDates(d, last)
	}
	return selectDatesFromTo(d, last)
}

// selectListedDates selects the dates of a custom selection.
func selectListedDates(d Dates, last calendar.Date) (dateSelection, error) {
	var sel dateSelection
	if d.From != (calendar.Date{}) || d.To != (calendar.Date{}) {
		return sel, refuse("dates.from", "a custom selection is its list; from and to bound range and cycle selections")
	}
	if len(d.List) == 0 {
		return sel, refuse("dates.list", "the custom selection is empty: list the dates to backfill")
	}
	for i, v := range d.List {
		if err := checkDate(fmt.Sprintf("dates.list[%d]", i), v); err != nil {
			return sel, err
		}
	}
	list := slices.Clone(d.List)
	slices.SortFunc(list, calendar.Date.Compare)
	list = slices.Compact(list)
	i, _ := slices.BinarySearchFunc(list, last.AddDays(1), calendar.Date.Compare)
	sel.dates = list[:i]
	sel.beyond = list[i:]
	if len(sel.beyond) > maxBeyond {
		sel.beyond, sel.more = sel.beyond[:maxBeyond], true
	}
	return sel, nil
}

// selectDatesFromTo selects the dates of a range or cycle selection.
func selectDatesFromTo(d Dates, last calendar.Date) (dateSelection, error) {
	var sel dateSelection
	if err := checkDate("dates.from", d.From); err != nil {
		return sel, err
	}
	if err := checkDate("dates.to", d.To); err != nil {
		return sel, err
	}
	if d.To.Before(d.From) {
		return sel, refuse("dates.to", "%s is before dates.from %s; for a single day give the same date twice", d.To, d.From)
	}
	match := func(calendar.Date) bool { return true }
	if d.Mode == DatesCycle {
		var err error
		if match, err = cycleMatcher(d); err != nil {
			return sel, err
		}
	}
	for v := d.From; !d.To.Before(v); v = v.AddDays(1) {
		if !match(v) {
			continue
		}
		if !last.Before(v) {
			sel.dates = append(sel.dates, v)
			continue
		}
		if len(sel.beyond) == maxBeyond {
			sel.more = true
			break
		}
		sel.beyond = append(sel.beyond, v)
	}
	if len(sel.dates) == 0 && len(sel.beyond) == 0 {
		return sel, refuse("dates", "no date from %s to %s is %s; widen the range or choose other days", d.From, d.To, describeCycle(d))
	}
	return sel, nil
}

// cycleMatcher returns whether a date is one of a cycle selection's
// weekdays or month days.
func cycleMatcher(d Dates) (func(calendar.Date) bool, error) {
	var weekdays [7]bool
	var monthDays [32]bool
	monthEnd := false
	for _, w := range d.Weekdays {
		if w < time.Sunday || w > time.Saturday {
			return nil, refuse("dates.weekdays", "%d is not a day of the week: use 0 (Sunday) to 6 (Saturday)", int(w))
		}
		weekdays[w] = true
	}
	for _, m := range d.MonthDays {
		switch {
		case m == calendar.MonthEnd:
			monthEnd = true
		case m >= 1 && m <= 31:
			monthDays[m] = true
		default:
			return nil, refuse("dates.month_days", "%d is not a day of the month: use 1 to 31, or %d for the last day", m, calendar.MonthEnd)
		}
	}
	if len(d.Weekdays) == 0 && len(d.MonthDays) == 0 {
		return nil, refuse("dates.weekdays", "a cycle selection needs weekdays or month_days (or both)")
	}
	return func(v calendar.Date) bool {
		return weekdays[v.Weekday()] || monthDays[v.Day] || (monthEnd && v.IsMonthEnd())
	}, nil
}

func describeCycle(d Dates) string {
	var parts []string
	for _, w := range d.Weekdays {
		parts = append(parts, "a "+w.String())
	}
	for _, m := range d.MonthDays {
		if m == calendar.MonthEnd {
			parts = append(parts, "the last day of a month")
		} else {
			parts = append(parts, fmt.Sprintf("day %d of a month", m))
		}
	}
	return strings.Join(parts, " or ")
}

// lanes splits n dates in run order into min(groups, n) contiguous lanes
// whose sizes differ by at most one, the larger lanes first, and returns
// each lane's first position (and n as the last element).
func lanes(n, groups int) []int {
	g := min(groups, n)
	starts := make([]int, 0, g+1)
	base, extra := n/g, n%g
	p := 0
	for i := range g {
		starts = append(starts, p)
		p += base
		if i < extra {
			p++
		}
	}
	return append(starts, n)
}
