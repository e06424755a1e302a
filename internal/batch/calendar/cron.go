package calendar

import (
	"time"

	"github.com/robfig/cron/v3"
)

// Cron schedules: a cycle at each fire time of the expression in the
// schedule's location, as robfig/cron computes it. Around DST it fires
// twice in a repeated hour and not at all in a skipped one.

// cronSpec returns the parsed expression: the one Parse cached, or for a
// hand-built Schedule a fresh parse (slow, but correct).
func (s Schedule) cronSpec(loc *time.Location) *cron.SpecSchedule {
	if s.spec != nil {
		return s.spec
	}
	p, err := parse("cron "+s.Cron, loc)
	if err != nil {
		return nil
	}
	return p.spec
}

func (s Schedule) nextCron(t time.Time, loc *time.Location) time.Time {
	c := s.cronSpec(loc)
	if c == nil {
		return time.Time{}
	}
	return fireAfter(c, t, loc)
}

// fireAfter returns the first fire time after t, or the zero Time.
func fireAfter(c *cron.SpecSchedule, t time.Time, loc *time.Location) time.Time {
	// Fire times are whole local minutes: start Next at the first one after
	// t, since it walks an unaligned start a second at a time.
	n := c.Next(minuteStart(t.In(loc)).Add(time.Minute - time.Second))
	if n.IsZero() || !n.After(t) {
		return time.Time{}
	}
	return n.In(loc)
}

// fireFrom returns the first fire time at or after the start of x's local
// minute, or the zero Time.
func fireFrom(c *cron.SpecSchedule, x time.Time, loc *time.Location) time.Time {
	return c.Next(minuteStart(x.In(loc)).Add(-time.Second))
}

// prevCron finds the last fire time before t: it widens a window [t-w, t)
// fourfold until a fire time falls in it, walks forward from there a few
// times, and bisects what is left, so that a schedule firing every minute
// and one firing on February 29th both take a few dozen calls of Next.
func (s Schedule) prevCron(t time.Time, loc *time.Location) (time.Time, bool) {
	c := s.cronSpec(loc)
	if c == nil {
		return time.Time{}, false
	}
	const limit = 10 * 366 * 24 * time.Hour
	var lo time.Time
	for w := time.Minute; ; w *= 4 {
		w = min(w, limit)
		if f := fireFrom(c, t.Add(-w), loc); !f.IsZero() && f.Before(t) {
			lo = f
			break
		}
		if w == limit {
			return time.Time{}, false
		}
	}
	// Invariant: lo is a fire time before t, and none is in [hi, t).
	hi := t
	for range 8 {
		n := fireAfter(c, lo, loc)
		if n.IsZero() || !n.Before(t) {
			return lo.In(loc), true
		}
		lo = n
	}
	for hi.Sub(lo) > time.Minute {
		mid := minuteStart(lo.Add(hi.Sub(lo) / 2))
		if !mid.After(lo) {
			break
		}
		if f := fireFrom(c, mid, loc); !f.IsZero() && f.Before(t) {
			lo = f
		} else {
			hi = mid
		}
	}
	// Less than a minute is left: at most one fire time in it besides lo.
	if n := fireAfter(c, lo, loc); !n.IsZero() && n.Before(t) {
		lo = n
	}
	return lo.In(loc), true
}
