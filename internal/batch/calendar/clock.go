package calendar

import "time"

// Minute and hourly schedules: cycles are the instants on the absolute time
// line whose local wall clock matches (minute % N == 0; or minute == offset
// and hour % N == 0). Walking instants rather than wall clocks is what
// gives 23 and 25 hourly cycles on DST days.
//
// A search steps straight to the next wall clock that matches, computed as
// if the clock ran evenly. That holds only while the UTC offset stays the
// same, so a step never crosses a zone transition: it stops there and
// looks again (otherwise "every 6h" would step from 01:00 over a jump
// forward at 02:00 to 07:00 and miss 06:00).

// maxClockSteps bounds a search; a step moves at least a minute and usually
// straight to the answer, so only a broken schedule comes near it.
const maxClockSteps = 4 * 24 * 60

func (s Schedule) everyMinutes() int {
	n := int(s.Every / time.Minute)
	if n <= 0 {
		if s.Kind == Minute {
			return 1
		}
		return 60
	}
	return n
}

// matchesClock reports whether an instant with local clock h:m:sec.nsec
// starts a cycle.
func (s Schedule) matchesClock(h, m, sec, nsec int, every int) bool {
	if sec != 0 || nsec != 0 {
		return false
	}
	if s.Kind == Minute {
		return m%every == 0
	}
	return m == int(s.Offset/time.Minute) && h%(every/60) == 0
}

// minuteStart returns the instant at which t's local minute started.
func minuteStart(t time.Time) time.Time {
	return t.Add(-time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
}

func (s Schedule) nextClock(t time.Time, loc *time.Location) time.Time {
	every := s.everyMinutes()
	if s.Kind == Hourly && every%60 != 0 {
		return time.Time{}
	}
	off := int(s.Offset / time.Minute)
	u := minuteStart(t.In(loc))
	for range maxClockSteps {
		h, m, sec := u.Clock()
		if u.After(t) && s.matchesClock(h, m, sec, u.Nanosecond(), every) {
			return u
		}
		// Step by as many minutes as the wall clock says are left; a DST
		// jump on the way is caught by checking again.
		var step int
		switch {
		case sec != 0 || u.Nanosecond() != 0:
			u = minuteStart(u)
			step = 1
		case s.Kind == Minute:
			step = every - m%every
		case m != off:
			step = (off - m + 60) % 60
		default:
			step = 60
			if hours := every / 60; hours > 1 && h%hours != 0 {
				step = 60 * (hours - h%hours)
			}
		}
		u = forward(u, time.Duration(step)*time.Minute)
	}
	return time.Time{}
}

// forward returns u+d, or the first instant of the next zone period when
// that comes first.
func forward(u time.Time, d time.Duration) time.Time {
	v := u.Add(d)
	if _, end := u.ZoneBounds(); !end.IsZero() && end.After(u) && !v.Before(end) {
		return end.In(u.Location())
	}
	return v
}

// backward returns u-d, or the start of the last minute of the previous
// zone period when u-d is before the current one.
func backward(u time.Time, d time.Duration) time.Time {
	v := u.Add(-d)
	if start, _ := u.ZoneBounds(); !start.IsZero() && v.Before(start) {
		return minuteStart(start.Add(-time.Nanosecond).In(u.Location()))
	}
	return v
}

func (s Schedule) prevClock(t time.Time, loc *time.Location) (time.Time, bool) {
	every := s.everyMinutes()
	if s.Kind == Hourly && every%60 != 0 {
		return time.Time{}, false
	}
	off := int(s.Offset / time.Minute)
	u := minuteStart(t.Add(-time.Nanosecond).In(loc))
	for range maxClockSteps {
		h, m, sec := u.Clock()
		if s.matchesClock(h, m, sec, u.Nanosecond(), every) {
			return u, true
		}
		var step int
		switch {
		case sec != 0 || u.Nanosecond() != 0:
			u = minuteStart(u)
			continue
		case s.Kind == Minute:
			step = m % every
		case m != off:
			step = (m - off + 60) % 60
		default:
			step = 60 * (h % (every / 60))
		}
		u = backward(u, time.Duration(step)*time.Minute)
	}
	return time.Time{}, false
}
