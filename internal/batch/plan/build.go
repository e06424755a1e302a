package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
)

// History states Build looks at.
const (
	stateSucceeded = "succeeded"
	stateDryRun    = "dry_run"
	stateFailed    = "failed"
	stateStopped   = "stopped"
	stateRunning   = "running"
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

func (b *builder) build() (*Plan, error) {
	req, err := normalize(b.in.Request)
	if err != nil {
		return nil, err
	}
	b.req = req
	g := b.g

	if req.Task == "" {
		return nil, refuse("task", "name the task the backfill starts from (an ID or a unique name)")
	}
	rt, err := g.Lookup(req.Task)
	if err != nil {
		return nil, refuse("task", "%v", err)
	}
	b.root, _ = g.Index(rt.ID)

	b.limit, b.runAt = b.in.Now, b.in.Now
	if req.RunAt != nil {
		b.runAt = *req.RunAt
		if !req.RunAt.After(b.in.Now) {
			return nil, refuse("run_at", "%s is not in the future (now is %s); leave run_at out to run now",
				req.RunAt.Format(time.RFC3339), b.in.Now.Format(time.RFC3339))
		}
		// As the reference allows, a backfill that runs later may take
		// data timestamps up to its run date: cycles due by the end of
		// the day after it (in the start task's time zone).
		loc := rt.Schedule.Location
		if loc == nil {
			loc = time.UTC
		}
		b.limit = calendar.DateOf(req.RunAt.In(loc)).AddDays(2).Midnight(loc).Add(-time.Nanosecond)
	}

	// No cycle of a date after last can be due by limit in any time zone:
	// the date starts at least 14 hours before its UTC midnight.
	last := calendar.DateOf(b.limit.UTC()).AddDays(2)
	ds, err := selectDates(req.Dates, last)
	if err != nil {
		return nil, err
	}
	if b.tr, err = parseTimeRange(req.TimeRange); err != nil {
		return nil, err
	}

	sel, err := selectTasks(g, b.root, req.Scope)
	if err != nil {
		return nil, err
	}
	b.warnings = append(b.warnings, sel.warnings...)
	b.planTasks(sel)

	if b.tr != nil {
		subDaily := false
		for _, tp := range b.plans {
			subDaily = subDaily || !tp.t.Schedule.DayBased()
		}
		if !subDaily {
			return nil, refuse("time_range", "a time range selects cycles of minute, hourly and cron tasks, and no selected task is one; leave time_range out")
		}
	} else if req.HourlyScope == HourlyScopeWithin {
		b.warnings = append(b.warnings, "hourly_scope within has no effect without a time_range")
	}

	b.dates = ds.dates
	b.computeCycles()
	if err := b.checkDue(ds); err != nil {
		return nil, err
	}
	if err := b.dropEmptyDates(); err != nil {
		return nil, err
	}

	n := len(b.dates)
	b.nGroups = min(req.Groups, n)
	if b.nGroups < req.Groups {
		b.warnings = append(b.warnings, fmt.Sprintf("groups reduced from %d to %d: there are only %d dates", req.Groups, b.nGroups, n))
	}
	b.starts = lanes(n, b.nGroups)

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

// checkDue refuses cycles that are not due by limit: on planned dates, and
// on selected dates after them (which can only have such cycles).
func (b *builder) checkDue(ds dateSelection) error {
	field := "dates.to"
	if b.req.Dates.Mode == DatesCustom {
		field = "dates.list"
	}
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
	var day calendar.Date
	if bad != nil {
		day = b.dates[badDay]
	} else {
		scheds := b.sortedScheds()
	beyond:
		for _, d := range ds.beyond {
			for _, sc := range scheds {
				if cs := b.cyclesOn(sc, d); len(cs) > 0 {
					bad, day, badDue = sc, d, sc.s.Scheduled(cs[0])
					break beyond
				}
			}
		}
	}
	if bad == nil {
		if ds.more {
			return refuse(field, "the dates run more than ten years past %s; pick dates up to %s",
				b.limit.Format("2006-01-02"), calendar.DateOf(b.limit).AddDays(-1))
		}
		return nil // the dates after the planned ones have no cycles
	}
	t := b.g.At(bad.first)
	msg := fmt.Sprintf("data timestamp %s of task %s has no cycle yet: it is scheduled %s", day, t.ID, badDue.In(bad.loc).Format("2006-01-02 15:04 MST"))
	if upTo, ok := b.lastDue(bad, day); ok {
		msg += "; pick dates up to " + upTo.String()
	}
	if b.req.RunAt == nil {
		msg += ", or set run_at after " + badDue.In(bad.loc).Format("2006-01-02 15:04 MST")
	}
	return refuse(field, "%s", msg)
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

// candidates gives every planned task its candidate instances, dropping
// planned tasks without any.
func (b *builder) candidates() {
	single := false
	plans := b.plans[:0]
	for _, tp := range b.plans {
		sc := tp.sc
		if len(sc.biz) == 0 {
			b.byPos[tp.pos] = -1
			continue
		}
		if b.req.SingleInstance && tp.t.SingleInstance && len(sc.biz) > 1 {
			single = true
			last := len(sc.biz) - 1
			tp.single = true
			tp.biz = sc.biz[:1]
			tp.date = sc.date[:1]
			tp.end = []time.Time{sc.end[last]}
			tp.due = []time.Time{sc.due[last]}
			tp.lastBiz, tp.lastDate = sc.biz[last], sc.date[last]
		} else {
			tp.biz, tp.end, tp.due, tp.date, tp.off = sc.biz, sc.end, sc.due, sc.date, sc.off
		}
		tp.idx = make([]int32, len(tp.biz))
		b.byPos[tp.pos] = len(plans)
		plans = append(plans, tp)
	}
	b.plans = plans
	if b.req.SingleInstance && !single && !slices.ContainsFunc(plans, func(tp *taskPlan) bool { return tp.t.SingleInstance }) {
		b.warnings = append(b.warnings, "single_instance: no selected task can run as a single instance; each date runs on its own")
	}
}

// checkSelfDependent refuses concurrency groups and descending order when a
// task depends on its own previous cycle: its dates must run one after
// another, oldest first.
func (b *builder) checkSelfDependent() error {
	for _, tp := range b.plans {
		if !tp.t.SelfDependent || tp.single {
			continue
		}
		if b.nGroups > 1 {
			return refuse("groups", "task %s depends on its own previous cycle (self-dependent), so its dates run one after another: concurrent groups are not supported; use 1 group", tp.t.ID)
		}
		if b.req.Order == OrderDesc {
			return refuse("order", "task %s depends on its own previous cycle (self-dependent): descending order is not supported; use %q", tp.t.ID, OrderAsc)
		}
	}
	return nil
}

func (b *builder) confirmAbove() int { return cmp.Or(b.in.ConfirmAbove, DefaultConfirmAbove) }

func (b *builder) refuseSize(n int) error {
	return refuse("confirm", "the plan has %d instances, more than %d: check the dates and the selection, and set confirm to go ahead",
		n, b.confirmAbove())
}

// applyHistory marks the candidates the Succeeded and Running policies
// leave out (idx -1) and checks the plan's size.
func (b *builder) applyHistory() error {
	total := 0
	for _, tp := range b.plans {
		total += len(tp.biz)
	}
	h := b.in.History
	if h == nil {
		if total > b.confirmAbove() && !b.req.Confirm {
			return b.refuseSize(total)
		}
		return nil
	}
	var bySucceeded, byRunning, waiting int
	// out reports whether the policies leave out a task date in state st.
	out := func(st string) (bool, bool) {
		switch b.req.Succeeded {
		case SucceededSkip:
			if st == stateSucceeded || st == stateDryRun {
				return true, false
			}
		case SucceededFailedOnly:
			if st != stateFailed && st != stateStopped {
				return true, false
			}
		}
		return st == stateRunning && b.req.Running == RunningSkip, st == stateRunning
	}
	for _, tp := range b.plans {
		id := tp.t.ID
		if tp.single {
			// One instance covers all the task's cycles: it is left out
			// when the policies leave out every one of them.
			all, anyRunning := true, false
			for _, c := range tp.sc.biz {
				st := h.Last(id, c)
				o, r := out(st)
				all = all && o
				anyRunning = anyRunning || r
			}
			switch {
			case all && anyRunning && b.req.Running == RunningSkip:
				tp.idx[0] = -1
				byRunning++
			case all:
				tp.idx[0] = -1
				bySucceeded++
			case anyRunning:
				waiting++
			}
			continue
		}
		for k, c := range tp.biz {
			st := h.Last(id, c)
			o, running := out(st)
			switch {
			case o && running:
				tp.idx[k] = -1
				byRunning++
			case o:
				tp.idx[k] = -1
				bySucceeded++
			case running:
				waiting++
			}
		}
	}
	b.skipped = bySucceeded + byRunning
	kept := total - b.skipped
	if kept == 0 {
		field, hint := "succeeded", "succeeded="+SucceededRerun+" runs them again"
		if byRunning > bySucceeded {
			field, hint = "running", "running="+RunningWait+" runs them after the runs in progress"
		}
		return refuse(field, "nothing to backfill: succeeded=%s and running=%s leave out every task date (%d); %s",
			b.req.Succeeded, b.req.Running, total, hint)
	}
	if kept > b.confirmAbove() && !b.req.Confirm {
		return b.refuseSize(kept)
	}
	if waiting > 0 {
		b.warnings = append(b.warnings, fmt.Sprintf("%d task dates have a run in progress; their instances start after it ends", waiting))
	}
	return nil
}

// emit creates the kept instances in dispatch order: by step (Seq), then
// date in run order, then task in topological order, then business time in
// run order; idx then holds each candidate's instance index.
func (b *builder) emit() []Instance {
	n := 0
	for _, tp := range b.plans {
		for _, x := range tp.idx {
			if x >= 0 {
				n++
			}
		}
	}
	insts := make([]Instance, 0, n)
	desc := b.req.Order == OrderDesc
	add := func(tp *taskPlan, k int, group, seq int) {
		tp.idx[k] = int32(len(insts))
		in := Instance{
			Task:          tp.t.ID,
			BizTime:       tp.biz[k],
			BizEnd:        tp.biz[k],
			Date:          b.dates[tp.date[k]],
			Scheduled:     tp.due[k],
			Group:         group,
			Seq:           seq,
			Order:         len(insts),
			Mode:          tp.mode,
			Reason:        tp.reason,
			ResourceGroup: tp.rg,
		}
		if tp.single {
			in.BizEnd = tp.lastBiz
		}
		insts = append(insts, in)
	}
	longest := b.starts[1] - b.starts[0]
	for seq := range longest {
		for g := range b.nGroups {
			p := b.starts[g] + seq
			if p >= b.starts[g+1] {
				continue
			}
			di := p
			if desc {
				di = len(b.dates) - 1 - p
			}
			for _, tp := range b.plans {
				if tp.single {
					// A single instance belongs to the first step of
					// group 1.
					if p == 0 && tp.idx[0] >= 0 {
						add(tp, 0, 1, 0)
					}
					continue
				}
				lo, hi := int(tp.off[di]), int(tp.off[di+1])
				for j := lo; j < hi; j++ {
					k := j
					if desc {
						k = hi - 1 - (j - lo)
					}
					if tp.idx[k] >= 0 {
						add(tp, k, g+1, seq)
					}
				}
			}
		}
	}
	return insts
}

// dependencies fills Deps. A task's instance waits for the instances of
// each planned upstream task that cover the same data:
//
//   - when either task is day-based, the upstream's cycles on the same
//     business date (each task reads dates in its own time zone, so a daily
//     task in Berlin and one in Tokyo match by date);
//   - otherwise the upstream's cycles that start within the instance's
//     period [biz, End(biz));
//
// and, when there are none, the upstream's latest candidate before (the
// upstream is coarser). A candidate left out by the history policies counts
// as done. A self-dependent task waits for its previous kept instance.
func (b *builder) dependencies(insts []Instance) {
	starts := make([]int32, len(insts)+1)
	ends := make([]int32, len(insts))
	flat := make([]int, 0, 2*len(insts))
	for _, tp := range b.plans {
		var ups []*taskPlan
		for _, u := range b.g.UpstreamAt(tp.pos) {
			if x := b.byPos[u]; x >= 0 {
				ups = append(ups, b.plans[x])
			}
		}
		prev := int32(-1)
		for k, self := range tp.idx {
			if self < 0 {
				continue
			}
			start := len(flat)
			dlo, dhi := tp.date[k], tp.date[k]
			if tp.single {
				dhi = tp.lastDate
			}
			for _, up := range ups {
				var lo, hi int
				switch {
				case (up.sc.dayBased || tp.sc.dayBased) && up.off != nil:
					lo, hi = int(up.off[dlo]), int(up.off[dhi+1])
				case up.sc.dayBased || tp.sc.dayBased:
					lo, _ = slices.BinarySearch(up.date, dlo)
					hi, _ = slices.BinarySearch(up.date, dhi+1)
				default:
					lo, _ = slices.BinarySearchFunc(up.biz, tp.biz[k], time.Time.Compare)
					hi, _ = slices.BinarySearchFunc(up.biz, tp.end[k], time.Time.Compare)
					hi = max(lo, hi)
				}
				if lo == hi { // none: the upstream's latest candidate before
					if lo > 0 && up.idx[lo-1] >= 0 {
						flat = append(flat, int(up.idx[lo-1]))
					}
					continue
				}
				for _, x := range up.idx[lo:hi] {
					if x >= 0 {
						flat = append(flat, int(x))
					}
				}
			}
			if tp.t.SelfDependent && prev >= 0 {
				flat = append(flat, int(prev))
			}
			prev = self
			slices.Sort(flat[start:])
			starts[self] = int32(start)
			ends[self] = int32(len(flat))
		}
	}
	for i := range insts {
		if s, e := starts[i], ends[i]; e > s {
			insts[i].Deps = flat[s:e:e]
		}
	}
}
