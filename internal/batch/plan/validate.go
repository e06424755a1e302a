package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
)

// firstDate is the earliest business date a backfill accepts. Go's time
// handles earlier dates; the floor is kept because the systems tidemark
// backfills into (legacy databases and their date types) commonly start at
// 1900, and a date before it is almost always a typo.
var firstDate = calendar.Date{Year: 1900, Month: time.January, Day: 1}

// DefaultConfirmAbove is the instance count above which a plan needs
// Request.Confirm when Input.ConfirmAbove is 0.
const DefaultConfirmAbove = 10_000

// MaxLevels is the largest number of list-mode levels besides
// dag.AllLevels.
const MaxLevels = 10

func refuse(field, format string, args ...any) *RequestError {
	return &RequestError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// enum returns v, or def when v is empty, refusing values not in allowed.
func enum(field, v, def string, allowed ...string) (string, error) {
	if v == "" {
		return def, nil
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", refuse(field, "unknown value %q; use one of %s", v, strings.Join(allowed, ", "))
}

// normalize checks the request's enumerations and numbers and fills in the
// defaults.
func normalize(r Request) (Request, error) {
	var err error
	if r.Order, err = enum("order", r.Order, OrderAsc, OrderAsc, OrderDesc); err != nil {
		return r, err
	}
	if r.Paused, err = enum("paused", r.Paused, PausedBlock, PausedBlock, PausedDryRun, PausedRun); err != nil {
		return r, err
	}
	if r.DryRun, err = enum("dry_run", r.DryRun, DryRunDryRun, DryRunDryRun, DryRunRun); err != nil {
		return r, err
	}
	if r.HourlyScope, err = enum("hourly_scope", r.HourlyScope, HourlyScopeAll, HourlyScopeAll, HourlyScopeWithin); err != nil {
		return r, err
	}
	if r.Succeeded, err = enum("succeeded", r.Succeeded, SucceededRerun, SucceededRerun, SucceededSkip, SucceededFailedOnly); err != nil {
		return r, err
	}
	if r.Running, err = enum("running", r.Running, RunningWait, RunningWait, RunningSkip); err != nil {
		return r, err
	}
	if r.Dates.Mode, err = enum("dates.mode", r.Dates.Mode, DatesRange, DatesRange, DatesCycle, DatesCustom); err != nil {
		return r, err
	}
	if r.Scope.Mode, err = enum("scope.mode", r.Scope.Mode, ScopeTask, ScopeTask, ScopeList, ScopeMass); err != nil {
		return r, err
	}
	switch {
	case r.StartAt == nil:
		r.StartAt = r.RunAt
	case r.RunAt != nil && !r.StartAt.Equal(*r.RunAt):
		return r, refuse("start_at", "start_at %s and run_at %s differ: send start_at only (run_at is its deprecated alias)",
			r.StartAt.Format(time.RFC3339), r.RunAt.Format(time.RFC3339))
	}
	r.RunAt = r.StartAt
	if r.Groups == 0 {
		r.Groups = 1
	}
	if r.Groups < 1 || r.Groups > MaxGroups {
		return r, refuse("groups", "%d concurrency groups: use 1 to %d", r.Groups, MaxGroups)
	}

	s := &r.Scope
	if s.Mode != ScopeList && (s.Downstream != 0 || s.Upstream != 0) {
		return r, refuse("scope.mode", "scope.downstream and scope.upstream are levels of list mode; set scope.mode to %q or leave them 0", ScopeList)
	}
	for _, lv := range []struct {
		field string
		v     int
	}{{"scope.downstream", s.Downstream}, {"scope.upstream", s.Upstream}} {
		if lv.v != dag.AllLevels && (lv.v < 0 || lv.v > MaxLevels) {
			return r, refuse(lv.field, "%d levels: use 0 (none), 1 to %d, or %d for all levels", lv.v, MaxLevels, dag.AllLevels)
		}
	}
	if s.Mode != ScopeMass {
		if s.Coverage != "" || len(s.Values) > 0 {
			return r, refuse("scope.coverage", "coverage and values choose tasks in mass mode; set scope.mode to %q", ScopeMass)
		}
	} else {
		if s.Coverage, err = enum("scope.coverage", s.Coverage, "", CoverProjects, CoverOutputs, CoverDescendants,
			CoverChildren, CoverEndPoints, CoverStartPoints, CoverNames, CoverIDs, CoverAncestors, CoverAncestorsDescendants); err != nil {
			return r, err
		}
		switch s.Coverage {
		case "":
			return r, refuse("scope.coverage", "mass mode needs a coverage: one of %s", strings.Join([]string{CoverProjects, CoverOutputs, CoverDescendants,
				CoverChildren, CoverEndPoints, CoverStartPoints, CoverNames, CoverIDs, CoverAncestors, CoverAncestorsDescendants}, ", "))
		case CoverDescendants, CoverAncestors, CoverAncestorsDescendants:
			if len(s.Values) > 0 {
				return r, refuse("scope.values", "coverage %q takes no values", s.Coverage)
			}
		default:
			if len(s.Values) == 0 {
				return r, refuse("scope.values", "coverage %q needs values: %s", s.Coverage, coverageValues[s.Coverage])
			}
		}
	}
	return r, nil
}

var coverageValues = map[string]string{
	CoverProjects:    "the projects whose tasks to backfill",
	CoverOutputs:     "the output names of the tasks to backfill",
	CoverChildren:    "the level-1 children (IDs or names) of the start task",
	CoverEndPoints:   "the end points (IDs or names) of the paths from the start task",
	CoverStartPoints: "the start points (IDs or names) of the paths to the start task",
	CoverNames:       "the names of downstream tasks",
	CoverIDs:         "the IDs of downstream tasks",
}

// validDate reports whether d is a real calendar date.
func validDate(d calendar.Date) bool {
	if d.Year < 1 || d.Year > 9999 || d.Month < time.January || d.Month > time.December || d.Day < 1 {
		return false
	}
	t := time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC)
	return calendar.DateOf(t) == d
}

func checkDate(field string, d calendar.Date) error {
	if d == (calendar.Date{}) {
		return refuse(field, "a date (YYYY-MM-DD) is required")
	}
	if !validDate(d) {
		return refuse(field, "%04d-%02d-%02d is not a date", d.Year, int(d.Month), d.Day)
	}
	if d.Before(firstDate) {
		return refuse(field, "%s is before %s, the earliest data timestamp a backfill accepts", d, firstDate)
	}
	return nil
}

// timeRange is a parsed TimeRange in minutes of the day, inclusive.
type timeRange struct{ from, to int }

func (tr *timeRange) contains(t time.Time) bool {
	m := t.Hour()*60 + t.Minute()
	return m >= tr.from && m <= tr.to
}

func parseTimeRange(r *TimeRange) (*timeRange, error) {
	if r == nil {
		return nil, nil
	}
	from, ok := parseHHMM(r.From)
	if !ok {
		return nil, refuse("time_range.from", "%q is not a time of day: use HH:MM, 00:00 to 23:59", r.From)
	}
	to, ok := parseHHMM(r.To)
	if !ok {
		return nil, refuse("time_range.to", "%q is not a time of day: use HH:MM, 00:00 to 23:59", r.To)
	}
	if from > to {
		return nil, refuse("time_range", "from %s is after to %s; a range within one day runs from the earlier to the later time", r.From, r.To)
	}
	return &timeRange{from, to}, nil
}

func parseHHMM(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	d := func(c byte) (int, bool) { return int(c - '0'), c >= '0' && c <= '9' }
	h1, ok1 := d(s[0])
	h2, ok2 := d(s[1])
	m1, ok3 := d(s[3])
	m2, ok4 := d(s[4])
	h, m := h1*10+h2, m1*10+m2
	if !ok1 || !ok2 || !ok3 || !ok4 || h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// CheckOptions checks the options of a request whose task and dates are
// chosen elsewhere (a task's on_change backfill, docs/lineage.md).
func CheckOptions(r Request) error {
	_, err := normalize(r)
	return err
}
