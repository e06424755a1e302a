package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// maxCatchUp bounds the cycles one tick creates per task, so that a daemon
// that was down for long catches up without stalling the loop.
const maxCatchUp = 500

// scheduler creates the recurring schedule's instances: each cycle of each
// task once its scheduled time has come, with its same-cycle upstream
// instances (created early when they are not yet due; they wait for their
// time).
type scheduler struct {
	e *Engine
	// last is each task's latest created cycle; start the business time of
	// its first. Cycles before start belong to before tidemark scheduled the
	// task: they count as done.
	last  map[string]time.Time
	start map[string]time.Time
	ids   map[cycleKey]int64
}

// cycleKey names a task's cycle.
type cycleKey struct {
	task string
	biz  int64
}

func newScheduler(e *Engine) *scheduler {
	return &scheduler{e: e, last: map[string]time.Time{}, start: map[string]time.Time{}, ids: map[cycleKey]int64{}}
}

const startCursorPrefix = "start:"

// init reads each task's progress; a task seen for the first time starts
// with its next cycle (history is what backfills are for).
func (sc *scheduler) init(ctx context.Context) error {
	now := sc.e.now()
	for _, t := range sc.e.graph.Tasks() {
		last, found, err := sc.e.st.ScheduleCursor(ctx, t.ID)
		if err != nil {
			return err
		}
		start, hasStart, err := sc.e.st.ScheduleCursor(ctx, startCursorPrefix+t.ID)
		if err != nil {
			return err
		}
		if !found {
			last = latestDue(t, now)
		}
		if !hasStart {
			// The first cycle tidemark schedules; written before the
			// progress, and derived from it if a crash came in between.
			start = t.Schedule.Next(last)
			if err := sc.e.st.PutScheduleCursor(ctx, startCursorPrefix+t.ID, start); err != nil {
				return err
			}
		}
		if !found {
			if err := sc.e.st.PutScheduleCursor(ctx, t.ID, last); err != nil {
				return err
			}
		}
		sc.last[t.ID], sc.start[t.ID] = last, start
	}
	return nil
}

// latestDue is the business time of t's latest cycle due at now.
func latestDue(t *dag.Task, now time.Time) time.Time {
	s := t.Schedule
	c, ok := s.Prev(now)
	for ok && s.Scheduled(c).After(now) {
		c, ok = s.Prev(c)
	}
	if !ok {
		return now
	}
	return c
}

// tick creates the instances that are due and returns when the next cycle
// is.
func (sc *scheduler) tick(ctx context.Context) time.Time {
	now := sc.e.now()
	var next time.Time
	for _, t := range sc.e.graph.Tasks() {
		for i := 0; i < maxCatchUp; i++ {
			c := t.Schedule.Next(sc.last[t.ID])
			due := t.Schedule.Scheduled(c)
			if due.After(now) {
				next = earliest(next, due)
				break
			}
			if _, err := sc.ensure(ctx, t, c); err != nil {
				sc.e.log.Error("create a scheduled instance; retrying", logkey.Task(t.ID), logkey.BusinessTime(c), logkey.Err(err))
				return now.Add(time.Second)
			}
			if err := sc.e.st.PutScheduleCursor(ctx, t.ID, c); err != nil {
				sc.e.log.Error("record the schedule's progress", logkey.Task(t.ID), logkey.Err(err))
				return now.Add(time.Second)
			}
			sc.last[t.ID] = c
		}
	}
	return next
}

// ensure returns the scheduled instance of t at biz, creating it (and what
// it waits for) when missing.
func (sc *scheduler) ensure(ctx context.Context, t *dag.Task, biz time.Time) (int64, error) {
	k := cycleKey{t.ID, biz.UnixNano()}
	if id, ok := sc.ids[k]; ok {
		return id, nil
	}
	// Look before walking upstream: after a restart the cache is empty, and
	// a self-dependent task would otherwise walk back through every cycle.
	if id, _, found, err := sc.e.st.ScheduledInstance(ctx, t.ID, biz); err != nil || found {
		if found {
			sc.ids[k] = id
		}
		return id, err
	}
	var deps []int64
	for _, uid := range t.Upstream {
		u, _ := sc.e.graph.Task(uid)
		for _, ub := range upstreamCycles(t, u, biz) {
			if ub.Before(sc.start[u.ID]) {
				continue // before tidemark scheduled it: counts as done
			}
			id, err := sc.ensure(ctx, u, ub)
			if err != nil {
				return 0, err
			}
			deps = append(deps, id)
		}
	}
	if t.SelfDependent {
		if prev, ok := t.Schedule.Prev(biz); ok && !prev.Before(sc.start[t.ID]) {
			id, err := sc.ensure(ctx, t, prev)
			if err != nil {
				return 0, err
			}
			deps = append(deps, id)
		}
	}
	in := store.BatchInstance{Task: t.ID, BizTime: biz.UTC(), BizEnd: biz.UTC(),
		Scheduled: t.Schedule.Scheduled(biz).UTC(), Mode: plan.ModeRun, ResourceGroup: t.ResourceGroup,
		State: store.InstanceWaiting}
	switch {
	case t.Paused:
		in.Mode, in.State, in.Reason = plan.ModeBlocked, store.InstanceBlocked, "the task is paused"
	case t.DryRun:
		in.Mode, in.Reason = plan.ModeDryRun, "the task is a dry-run task"
	}
	id, created, err := sc.e.st.EnsureScheduledInstance(ctx, in, deps)
	if err != nil {
		return 0, fmt.Errorf("record scheduled instance of %s at %s: %w", t.ID, biz.Format(time.RFC3339), err)
	}
	sc.ids[k] = id
	if len(sc.ids) > 100000 {
		clear(sc.ids) // a cache only
		sc.ids[k] = id
	}
	if created {
		in.ID, in.Deps = id, deps
		n := sc.e.newNode(in, nil)
		sc.e.s.nodes[id] = n
		sc.e.link(n, func(id int64) string {
			in, err := sc.e.st.GetBatchInstance(ctx, id)
			if err != nil {
				sc.e.log.Warn("read an upstream instance; treating it as not done", logkey.Instance(id), logkey.Err(err))
				return ""
			}
			return in.State
		})
		if why := sc.e.upstreamHold(n, scheduledHold); why != "" && n.mode == plan.ModeRun {
			n.reason = why
			if err := sc.e.writeInstances(ctx, []store.BatchInstance{record(n, store.InstanceWaiting, why, sc.e.now().UTC())}, nil); err != nil {
				sc.e.log.Warn("record why a scheduled instance is held", logkey.Instance(id), logkey.Err(err))
			}
		}
		sc.e.consider(n)
		sc.e.publishInstance(n)
	}
	return id, nil
}

// upstreamCycles are the cycles of u that t's cycle at biz waits for: those
// that start within its period, or, when u is coarser, the one whose period
// contains biz.
func upstreamCycles(t, u *dag.Task, biz time.Time) []time.Time {
	in := u.Schedule.Cycles(biz, t.Schedule.End(biz))
	if len(in) > 0 {
		return in
	}
	if p, ok := u.Schedule.Prev(biz.Add(time.Nanosecond)); ok {
		return []time.Time{p}
	}
	return nil
}
