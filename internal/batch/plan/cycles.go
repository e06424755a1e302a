package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
)

// computeCycles finds each planned schedule's cycles on the dates.
func (b *builder) computeCycles() {
	b.scheds = make(map[schedKey]*sched)
	for _, tp := range b.plans {
		s := tp.t.Schedule
		loc := cmp.Or(s.Location, time.UTC)
		key := schedKey{fmt.Sprintf("%s|%d|%d|%v|%v|%s", s.Kind, s.Every, s.Offset, s.Weekdays, s.MonthDays, s.Cron), loc}
		sc := b.scheds[key]
		if sc == nil {
			sc = &sched{s: s, loc: loc, dayBased: s.DayBased(), first: tp.pos}
			sc.off = make([]int32, len(b.dates)+1)
			for i, d := range b.dates {
				for _, c := range b.cyclesOn(sc, d) {
					sc.biz = append(sc.biz, c)
					sc.date = append(sc.date, int32(i))
				}
				sc.off[i+1] = int32(len(sc.biz))
			}
			sc.end = make([]time.Time, len(sc.biz))
			sc.due = make([]time.Time, len(sc.biz))
			for k, c := range sc.biz {
				sc.end[k] = s.End(c)
				sc.due[k] = s.Scheduled(c)
			}
			b.scheds[key] = sc
		}
		tp.sc = sc
	}
}

// cyclesOn returns the business times of sc's cycles on d that the time
// range keeps.
func (b *builder) cyclesOn(sc *sched, d calendar.Date) []time.Time {
	if sc.dayBased {
		if !sc.s.HasDate(d) {
			return nil
		}
		biz := d.Midnight(sc.loc)
		if b.tr != nil && b.req.HourlyScope == HourlyScopeWithin && !b.tr.contains(sc.s.Scheduled(biz).In(sc.loc)) {
			return nil
		}
		return []time.Time{biz}
	}
	cs := sc.s.CyclesOn(d)
	if b.tr == nil {
		return cs
	}
	kept := cs[:0]
	for _, c := range cs {
		if b.tr.contains(c.In(sc.loc)) {
			kept = append(kept, c)
		}
	}
	return kept
}

// sortedScheds returns the schedules in the order of their first task.
func (b *builder) sortedScheds() []*sched {
	out := make([]*sched, 0, len(b.scheds))
	for _, sc := range b.scheds {
		out = append(out, sc)
	}
	slices.SortFunc(out, func(x, y *sched) int { return x.first - y.first })
	return out
}

// dropEmptyDates leaves out the dates on which no planned task has a
// cycle.
func (b *builder) dropEmptyDates() error {
	n := len(b.dates)
	used := make([]bool, n)
	for _, sc := range b.scheds {
		for _, di := range sc.date {
			used[di] = true
		}
	}
	remap := make([]int32, n)
	var kept, dropped []calendar.Date
	for i, d := range b.dates {
		remap[i] = int32(len(kept))
		if used[i] {
			kept = append(kept, d)
		} else {
			dropped = append(dropped, d)
		}
	}
	if len(kept) == 0 {
		why := "check the dates and the tasks' schedules"
		if b.tr != nil {
			why = fmt.Sprintf("check the dates, the tasks' schedules and time_range %s–%s", b.req.TimeRange.From, b.req.TimeRange.To)
			if b.req.HourlyScope == HourlyScopeWithin {
				why += fmt.Sprintf(" (with hourly_scope %s, daily, weekly and monthly tasks need their scheduled time in it)", HourlyScopeWithin)
			}
		}
		list := ""
		if len(dropped) > 0 {
			list = " (" + shortDates(dropped) + ")"
		}
		return refuse("dates", "no selected task has a cycle on the selected dates%s; %s", list, why)
	}
	if len(dropped) == 0 {
		return nil
	}
	b.warnings = append(b.warnings, fmt.Sprintf("%d selected dates have no cycle of any selected task and are left out: %s", len(dropped), shortDates(dropped)))
	for _, sc := range b.scheds {
		for k, di := range sc.date {
			sc.date[k] = remap[di]
		}
		off := make([]int32, 0, len(kept)+1)
		off = append(off, 0)
		for i := range n {
			if used[i] {
				off = append(off, sc.off[i+1])
			}
		}
		sc.off = off
	}
	b.dates = kept
	return nil
}

func shortDates(ds []calendar.Date) string {
	var s []string
	for _, d := range ds[:min(5, len(ds))] {
		s = append(s, d.String())
	}
	out := strings.Join(s, ", ")
	if len(ds) > 5 {
		out += fmt.Sprintf(" and %d more", len(ds)-5)
	}
	return out
}
