package plan

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
)

// checkDue refuses cycles that are not due by limit: on planned dates, and
// on selected dates after them (which can only have such cycles).
func (b *builder) checkDue(ds dateSelection) error {
	field := "dates.to"
	if b.req.Dates.Mode == DatesCustom {
		field = "dates.list"
	}
	bad, day, due := b.firstNotDue()
	if bad == nil {
		bad, day, due = b.firstCycleBeyond(ds.beyond)
	}
	if bad == nil {
		if ds.more {
			return refuse(field, "the dates run more than ten years past %s; pick dates up to %s",
				b.limit.Format("2006-01-02"), calendar.DateOf(b.limit).AddDays(-1))
		}
		return nil // the dates after the planned ones have no cycles
	}
	t := b.g.At(bad.first)
	msg := fmt.Sprintf("data timestamp %s of task %s has no cycle yet: it is scheduled %s", day, t.ID, due.In(bad.loc).Format("2006-01-02 15:04 MST"))
	if upTo, ok := b.lastDue(bad, day); ok {
		msg += "; pick dates up to " + upTo.String()
	}
	if b.req.StartAt == nil {
		msg += ", or set start_at after " + due.In(bad.loc).Format("2006-01-02 15:04 MST")
	}
	return refuse(field, "%s", msg)
}

// firstNotDue finds the earliest planned date with a cycle that is not due
// by limit: the schedule (the one of the first task when several have such
// a cycle on that date), the date and when that cycle is due. The schedule
// is nil when every planned cycle is due.
func (b *builder) firstNotDue() (*sched, calendar.Date, time.Time) {
	var (
		bad    *sched
		badDay = int32(-1)
		badDue time.Time
	)
	for _, sc := range b.sortedScheds() {
		for k, due := range sc.due {
			if due.After(b.limit) {
				if bad == nil || sc.date[k] < badDay {
					bad, badDay, badDue = sc, sc.date[k], due
				}
				break
			}
		}
	}
	if bad == nil {
		return nil, calendar.Date{}, time.Time{}
	}
	return bad, b.dates[badDay], badDue
}

// firstCycleBeyond finds the first of the dates after the planned ones on
// which a planned schedule has a cycle, as firstNotDue.
func (b *builder) firstCycleBeyond(beyond []calendar.Date) (*sched, calendar.Date, time.Time) {
	scheds := b.sortedScheds()
	for _, d := range beyond {
		for _, sc := range scheds {
			if cs := b.cyclesOn(sc, d); len(cs) > 0 {
				return sc, d, sc.s.Scheduled(cs[0])
			}
		}
	}
	return nil, calendar.Date{}, time.Time{}
}

// lastDue returns the last date before d whose cycles of sc are all due.
func (b *builder) lastDue(sc *sched, d calendar.Date) (calendar.Date, bool) {
	for range 4000 {
		d = d.AddDays(-1)
		if d.Before(firstDate) {
			return d, false
		}
		ok := true
		for _, c := range b.cyclesOn(sc, d) {
			if sc.s.Scheduled(c).After(b.limit) {
				ok = false
				break
			}
		}
		if ok {
			return d, true
		}
	}
	return d, false
}
