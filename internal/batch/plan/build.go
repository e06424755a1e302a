package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
)

// builder holds one Build's state. Tasks are graph positions (ints), dates
// are indexes into dates (ascending), candidates are per-task slices: no
// per-instance maps.
type builder struct {
	in   Input
	g    *dag.Graph
	req  Request
	root int
	// limit: cycles due after it have not come yet (Now, or the end of the
	// day after RunAt's date); runAt is when the backfill starts.
	limit, runAt time.Time
	tr           *timeRange

	dates  []calendar.Date // planned dates, ascending
	scheds map[schedKey]*sched
	plans  []*taskPlan // planned tasks, topological
	byPos  []int       // graph position → index in plans, or -1

	nGroups int
	starts  []int // lane starts in run positions, plus len(dates)

	skipped  int // candidates the history policies leave out
	warnings []string
}

// sched is a schedule's cycles on the selected dates, computed once however
// many tasks share the schedule.
type sched struct {
	s        calendar.Schedule
	loc      *time.Location
	dayBased bool
	first    int // graph position of the first planned task using it
	// The cycles of date i are biz[off[i]:off[i+1]], ascending; end and
	// due are their period ends and scheduled times, date their date
	// indexes.
	off           []int32
	biz, end, due []time.Time
	date          []int32
}

type schedKey struct {
	spec string
	loc  *time.Location
}

// taskPlan is a planned task and its candidate instances, ascending by
// business time.
type taskPlan struct {
	pos          int
	t            *dag.Task
	sc           *sched
	single       bool
	mode, reason string
	rg           string

	// Candidates. For a single instance there is one candidate covering
	// every cycle of sc; lastBiz and lastDate are those of its last cycle.
	biz, end, due []time.Time
	date          []int32
	off           []int32 // as sched.off; nil for a single instance
	lastBiz       time.Time
	lastDate      int32
	// idx is, per candidate, -1 when it is left out, else (after emission)
	// its index in Plan.Instances.
	idx []int32
}

// build runs the planning steps in order; each refuses what it cannot plan.
func (b *builder) build() (*Plan, error) {
	req, err := normalize(b.in.Request)
	if err != nil {
		return nil, err
	}
	b.req = req
	if err := b.findStart(); err != nil {
		return nil, err
	}
	ds, err := selectDates(req.Dates, b.lastPlannableDate())
	if err != nil {
		return nil, err
	}
	if b.tr, err = parseTimeRange(req.TimeRange); err != nil {
		return nil, err
	}
	sel, err := selectTasks(b.g, b.root, req.Scope)
	if err != nil {
		return nil, err
	}
	b.warnings = append(b.warnings, sel.warnings...)
	b.planTasks(sel)
	if err := b.checkTimeRange(); err != nil {
		return nil, err
	}

	b.dates = ds.dates
	b.computeCycles()
	if err := b.checkDue(ds); err != nil {
		return nil, err
	}
	if err := b.dropEmptyDates(); err != nil {
		return nil, err
	}
	b.splitGroups()

	b.candidates()
	if err := b.checkSelfDependent(); err != nil {
		return nil, err
	}
	if err := b.applyHistory(); err != nil {
		return nil, err
	}
	insts := b.emit()
	b.dependencies(insts)
	if insts, err = b.order(insts); err != nil {
		return nil, err
	}
	return b.assemble(insts), nil
}

// assemble fills the plan around the ordered instances.
func (b *builder) assemble(insts []Instance) *Plan {
	root := b.g.At(b.root)
	p := &Plan{
		Name:      b.req.Name,
		Task:      root.ID,
		RunAt:     b.runAt,
		Instances: insts,
		Skipped:   b.skipped,
		Warnings:  b.warnings,
	}
	if p.Name == "" {
		p.Name = fmt.Sprintf("%s_%s_%d", root.Name, b.in.Now.UTC().Format("20060102"), max(b.in.Sequence, 1))
	}
	n := len(b.dates)
	p.Dates = make([]calendar.Date, n)
	for k := range n {
		p.Dates[k] = b.dates[k]
		if b.req.Order == OrderDesc {
			p.Dates[k] = b.dates[n-1-k]
		}
	}
	for g := range b.nGroups {
		p.Groups = append(p.Groups, p.Dates[b.starts[g]:b.starts[g+1]:b.starts[g+1]])
	}
	for _, tp := range b.plans {
		if slices.ContainsFunc(tp.idx, func(x int32) bool { return x >= 0 }) {
			p.Tasks = append(p.Tasks, tp.t.ID)
		}
	}
	return p
}

// findStart finds the start task and when the backfill runs: now, or at
// StartAt.
func (b *builder) findStart() error {
	req := b.req
	if req.Task == "" {
		return refuse("task", "name the task the backfill starts from (an ID or a unique name)")
	}
	rt, err := b.g.Lookup(req.Task)
	if err != nil {
		return refuse("task", "%v", err)
	}
	b.root, _ = b.g.Index(rt.ID)

	b.limit, b.runAt = b.in.Now, b.in.Now
	if req.StartAt == nil {
		return nil
	}
	b.runAt = *req.StartAt
	if !req.StartAt.After(b.in.Now) {
		return refuse("start_at", "%s is not in the future (now is %s); leave start_at out to start now",
			req.StartAt.Format(time.RFC3339), b.in.Now.Format(time.RFC3339))
	}
	// As the reference allows, a backfill that runs later may take data
	// timestamps up to its run date: cycles due by the end of the day after
	// it (in the start task's time zone).
	loc := cmp.Or(rt.Schedule.Location, time.UTC)
	b.limit = calendar.DateOf(req.StartAt.In(loc)).AddDays(2).Midnight(loc).Add(-time.Nanosecond)
	return nil
}

// lastPlannableDate is the last date that can have a cycle due by limit.
// No cycle of a later date can be, in any time zone: a date starts at
// least 14 hours before its UTC midnight.
func (b *builder) lastPlannableDate() calendar.Date {
	return calendar.DateOf(b.limit.UTC()).AddDays(2)
}

// planTasks fixes the planned tasks, their modes and resource groups.
func (b *builder) planTasks(sel *selection) {
	req := b.req
	b.byPos = make([]int, b.g.Len())
	for i := range b.byPos {
		b.byPos[i] = -1
		if !sel.planned[i] {
			continue
		}
		t := b.g.At(i)
		tp := &taskPlan{pos: i, t: t, mode: ModeRun, rg: cmp.Or(req.ResourceGroup, t.ResourceGroup)}
		switch {
		case sel.between[i] != "":
			tp.mode, tp.reason = ModeDryRun, sel.between[i]
		case i == b.root && req.DryRunTask:
			tp.mode, tp.reason = ModeDryRun, "dry_run_task: the start task succeeds without running so that downstream proceeds"
		case t.Paused && req.Paused == PausedBlock:
			tp.mode, tp.reason = ModeBlocked, "task is paused (paused=block): it does not run and what depends on it waits"
		case t.Paused && req.Paused == PausedDryRun:
			tp.mode, tp.reason = ModeDryRun, "task is paused (paused=dry_run): succeeds without running"
		case t.DryRun && req.DryRun == DryRunDryRun: // also a paused task under paused=run
			tp.mode, tp.reason = ModeDryRun, "task is a dry-run task (dry_run=dry_run): succeeds without running"
		}
		b.byPos[i] = len(b.plans)
		b.plans = append(b.plans, tp)
	}
}

// checkTimeRange refuses a time range when no planned task is sub-daily
// (it would select nothing), and warns that hourly_scope within does
// nothing without one.
func (b *builder) checkTimeRange() error {
	if b.tr == nil {
		if b.req.HourlyScope == HourlyScopeWithin {
			b.warnings = append(b.warnings, "hourly_scope within has no effect without a time_range")
		}
		return nil
	}
	for _, tp := range b.plans {
		if !tp.t.Schedule.DayBased() {
			return nil
		}
	}
	return refuse("time_range", "a time range selects cycles of minute, hourly and cron tasks, and no selected task is one; leave time_range out")
}

// splitGroups splits the dates into the concurrency groups' lanes, no more
// groups than dates.
func (b *builder) splitGroups() {
	n := len(b.dates)
	b.nGroups = min(b.req.Groups, n)
	if b.nGroups < b.req.Groups {
		b.warnings = append(b.warnings, fmt.Sprintf("groups reduced from %d to %d: there are only %d dates", b.req.Groups, b.nGroups, n))
	}
	b.starts = lanes(n, b.nGroups)
}
