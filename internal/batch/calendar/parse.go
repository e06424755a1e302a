package calendar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// syntax is appended to errors about a spec that matches no kind.
const syntax = `expected one of "every 15m", "hourly", "hourly :30", "every 6h", "daily 01:30", ` +
	`"weekly mon,thu 02:00", "monthly 1,15,L 03:00", "cron 0 3 * * *"`

// cronParser is the standard five-field parser, without descriptors
// (@daily, @every) whose constant-delay schedules cannot be walked back.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

func parse(spec string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	f := strings.Fields(spec)
	if len(f) == 0 {
		return Schedule{}, fmt.Errorf("empty schedule: %s", syntax)
	}
	s := Schedule{Location: loc}
	var err error
	switch kw := strings.ToLower(f[0]); kw {
	case "every":
		err = s.parseEvery(spec, f[1:])
	case "hourly":
		s.Kind, s.Every = Hourly, time.Hour
		err = s.parseMinutePast(spec, f[1:])
	case "daily":
		s.Kind = Daily
		err = s.parseTimeOfDay(spec, f[1:])
	case "weekly":
		s.Kind = Weekly
		if len(f) < 2 {
			return Schedule{}, fmt.Errorf("schedule %q needs weekdays, e.g. \"weekly mon,thu 02:00\"", spec)
		}
		if s.Weekdays, err = parseWeekdays(spec, f[1]); err == nil {
			err = s.parseTimeOfDay(spec, f[2:])
		}
	case "monthly":
		s.Kind = Monthly
		if len(f) < 2 {
			return Schedule{}, fmt.Errorf("schedule %q needs days of the month, e.g. \"monthly 1,15,L 03:00\"", spec)
		}
		if s.MonthDays, err = parseMonthDays(spec, f[1]); err == nil {
			err = s.parseTimeOfDay(spec, f[2:])
		}
	case "cron":
		s.Kind = Cron
		err = s.parseCron(spec, f[1:])
	default:
		return Schedule{}, fmt.Errorf("schedule %q: unknown kind %q: %s", spec, f[0], syntax)
	}
	if err != nil {
		return Schedule{}, err
	}
	return s, nil
}

// parseEvery reads "15m", "6h" and "6h :15".
func (s *Schedule) parseEvery(spec string, f []string) error {
	if len(f) == 0 {
		return fmt.Errorf("schedule %q needs an interval, e.g. \"every 15m\" or \"every 6h\"", spec)
	}
	v := strings.ToLower(f[0])
	n, ok := 0, false
	if len(v) > 1 {
		n, ok = atoiDigits(v[:len(v)-1])
	}
	switch {
	case ok && strings.HasSuffix(v, "m"):
		if n < 1 || n > 60 || 60%n != 0 {
			return fmt.Errorf("schedule %q: every %dm does not divide the hour; use 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60 minutes", spec, n)
		}
		if len(f) > 1 {
			return fmt.Errorf("schedule %q: minute schedules start on the hour and take nothing after the interval, e.g. \"every 15m\"", spec)
		}
		s.Kind, s.Every = Minute, time.Duration(n)*time.Minute
		return nil
	case ok && strings.HasSuffix(v, "h"):
		if n < 1 || n > 24 || 24%n != 0 {
			return fmt.Errorf("schedule %q: every %dh does not divide the day; use 1, 2, 3, 4, 6, 8, 12 or 24 hours", spec, n)
		}
		s.Kind, s.Every = Hourly, time.Duration(n)*time.Hour
		return s.parseMinutePast(spec, f[1:])
	}
	return fmt.Errorf("schedule %q: interval %q must be minutes or hours, e.g. \"every 15m\" or \"every 6h\"", spec, f[0])
}

// parseMinutePast reads an optional ":MM".
func (s *Schedule) parseMinutePast(spec string, f []string) error {
	if len(f) == 0 {
		return nil
	}
	if len(f) > 1 {
		return fmt.Errorf("schedule %q: unexpected %q after the minute; e.g. \"hourly :30\"", spec, f[1])
	}
	m, ok := 0, false
	if len(f[0]) == 3 && f[0][0] == ':' {
		m, ok = atoiDigits(f[0][1:])
	}
	if !ok || m > 59 {
		return fmt.Errorf("schedule %q: minute past the hour must be :00–:59, e.g. \"hourly :30\"; got %q", spec, f[0])
	}
	s.Offset = time.Duration(m) * time.Minute
	return nil
}

// parseTimeOfDay reads an optional "HH:MM".
func (s *Schedule) parseTimeOfDay(spec string, f []string) error {
	if len(f) == 0 {
		return nil
	}
	if len(f) > 1 {
		return fmt.Errorf("schedule %q: unexpected %q after the time of day; e.g. \"%s 02:00\"", spec, f[1], s.example())
	}
	h, m, ok := parseClock(f[0])
	if !ok {
		return fmt.Errorf("schedule %q: time of day must be HH:MM, 00:00–23:59, e.g. \"%s 02:00\"; got %q", spec, s.example(), f[0])
	}
	s.Offset = time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	return nil
}

func (s *Schedule) example() string {
	switch s.Kind {
	case Weekly:
		return "weekly mon,thu"
	case Monthly:
		return "monthly 1,15,L"
	}
	return "daily"
}

// parseClock reads H:MM or HH:MM.
func parseClock(v string) (h, m int, ok bool) {
	hs, ms, found := strings.Cut(v, ":")
	if !found || len(hs) < 1 || len(hs) > 2 || len(ms) != 2 {
		return 0, 0, false
	}
	h, ok1 := atoiDigits(hs)
	m, ok2 := atoiDigits(ms)
	if !ok1 || !ok2 || h > 23 || m > 59 {
		return 0, 0, false
	}
	return h, m, true
}

var weekdayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// WeekdayNamed reads a weekday's English name or its three-letter
// abbreviation, in any case: the one reading of weekday names, for
// schedules and for the CLI's --weekdays.
func WeekdayNamed(name string) (time.Weekday, bool) {
	wd, ok := weekdayNames[strings.ToLower(name)]
	return wd, ok
}

// MonthDayNamed reads a day of the month, 1–31, or L or last (any case)
// for the month's last day (MonthEnd).
func MonthDayNamed(name string) (int, bool) {
	if strings.EqualFold(name, "L") || strings.EqualFold(name, "last") {
		return MonthEnd, true
	}
	d, ok := atoiDigits(name)
	return d, ok && d >= 1 && d <= 31
}

func parseWeekdays(spec, v string) ([]time.Weekday, error) {
	var out []time.Weekday
	for _, name := range strings.Split(v, ",") {
		wd, ok := WeekdayNamed(name)
		if !ok {
			return nil, fmt.Errorf("schedule %q: unknown weekday %q; use mon, tue, wed, thu, fri, sat or sun, comma-separated, e.g. \"weekly mon,thu 02:00\"", spec, name)
		}
		if slices.Contains(out, wd) {
			return nil, fmt.Errorf("schedule %q: weekday %q given twice", spec, name)
		}
		out = append(out, wd)
	}
	slices.Sort(out)
	return out, nil
}

func parseMonthDays(spec, v string) ([]int, error) {
	var out []int
	for _, name := range strings.Split(v, ",") {
		d, ok := MonthDayNamed(name)
		if !ok {
			return nil, fmt.Errorf("schedule %q: day of the month %q must be 1–31 or L (the last day), comma-separated, e.g. \"monthly 1,15,L 03:00\"", spec, name)
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("schedule %q: day of the month %q given twice", spec, name)
		}
		out = append(out, d)
	}
	// Ascending with MonthEnd (-1) last.
	slices.SortFunc(out, func(a, b int) int { return monthDayKey(a) - monthDayKey(b) })
	return out, nil
}

func monthDayKey(d int) int {
	if d == MonthEnd {
		return 32
	}
	return d
}

func (s *Schedule) parseCron(spec string, f []string) error {
	if len(f) != 5 {
		return fmt.Errorf("schedule %q: cron needs five fields (minute hour day-of-month month day-of-week), e.g. \"cron 0 3 * * *\"", spec)
	}
	expr := strings.Join(f, " ")
	// The time zone is the schedule's; robfig/cron's own TZ= prefix would
	// override it (and panics on some malformed prefixes).
	if strings.Contains(expr, "=") || strings.HasPrefix(expr, "@") {
		return fmt.Errorf("schedule %q: cron takes five plain fields, no TZ= or @ descriptors, e.g. \"cron 0 3 * * *\"", spec)
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		return fmt.Errorf("schedule %q: cron expression: %w", spec, err)
	}
	ss, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return fmt.Errorf("schedule %q: cron expression %q is not a field schedule", spec, expr)
	}
	c := *ss
	c.Location = s.Location
	// A day that never comes (30 2 = February 30th) would make every
	// search run to its limit.
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return fmt.Errorf("schedule %q: cron expression %q never fires", spec, expr)
	}
	s.Cron, s.spec = expr, &c
	return nil
}

func (s Schedule) string() string {
	switch s.Kind {
	case Minute:
		return "every " + strconv.Itoa(int(s.Every/time.Minute)) + "m"
	case Hourly:
		out := "hourly"
		if s.Every > time.Hour {
			out = "every " + strconv.Itoa(int(s.Every/time.Hour)) + "h"
		}
		if s.Offset != 0 {
			out += fmt.Sprintf(" :%02d", int(s.Offset/time.Minute))
		}
		return out
	case Daily:
		return "daily" + s.timeOfDay()
	case Weekly:
		names := make([]string, len(s.Weekdays))
		for i, wd := range s.Weekdays {
			names[i] = strings.ToLower(wd.String()[:3])
		}
		return "weekly " + strings.Join(names, ",") + s.timeOfDay()
	case Monthly:
		days := make([]string, len(s.MonthDays))
		for i, d := range s.MonthDays {
			if d == MonthEnd {
				days[i] = "L"
			} else {
				days[i] = strconv.Itoa(d)
			}
		}
		return "monthly " + strings.Join(days, ",") + s.timeOfDay()
	case Cron:
		return "cron " + s.Cron
	}
	return "invalid schedule"
}

func (s Schedule) timeOfDay() string {
	if s.Offset == 0 {
		return ""
	}
	m := int(s.Offset / time.Minute)
	return fmt.Sprintf(" %02d:%02d", m/60, m%60)
}
