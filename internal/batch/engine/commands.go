package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// Errors of the commands; the API maps them to status codes.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// history adapts stored runs to plan.History: the latest run (highest
// instance id) of a cycle, whether it ran the cycle alone or inside a
// single instance's range.
type history struct {
	exact map[store.TaskTime]store.TaskRun
	spans map[string][]store.TaskRun // single instances, by task
}

func newHistory(runs []store.TaskRun) history {
	h := history{exact: map[store.TaskTime]store.TaskRun{}, spans: map[string][]store.TaskRun{}}
	for _, r := range runs { // by id: later ids win
		if r.BizEnd.After(r.BizTime) {
			h.spans[r.Task] = append(h.spans[r.Task], r)
			continue
		}
		h.exact[store.TaskTime{Task: r.Task, BizTime: r.BizTime}] = r
	}
	return h
}

func (h history) Last(task string, biz time.Time) string {
	biz = biz.UTC()
	last := h.exact[store.TaskTime{Task: task, BizTime: biz}]
	for _, r := range h.spans[task] {
		if r.ID > last.ID && r.Covers(biz) {
			last = r
		}
	}
	return last.State
}

// Preview plans req without running anything.
func (e *Engine) Preview(ctx context.Context, req plan.Request) (*plan.Plan, error) {
	if rg := req.ResourceGroup; rg != "" {
		if _, found := e.opts.ResourceGroups[rg]; !found {
			return nil, &plan.RequestError{Field: "resource_group", Message: fmt.Sprintf("%q is not a configured resource group: use one of %s, or add it under resource_groups", rg, strings.Join(e.groupNames(), ", "))}
		}
	}
	now := e.now()
	seq := 1
	if root, err := e.graph.Lookup(req.Task); err == nil {
		n, err := e.st.CountBatchBackfillsSince(ctx, root.ID, startOfDayUTC(now))
		if err != nil {
			return nil, err
		}
		seq = n + 1
	}
	in := plan.Input{Graph: e.graph, Request: req, Now: now, Sequence: seq, ConfirmAbove: e.opts.ConfirmAbove}
	if !needsHistory(req) {
		return plan.Build(in)
	}
	// The policies for dates already run need their history: plan once to
	// learn the tasks and times (without the size check, which counts only
	// what is kept), read it, and plan again.
	first := in
	first.Request.Confirm = true
	p, err := plan.Build(first)
	if err != nil || len(p.Instances) == 0 {
		return p, err
	}
	from, to := p.Instances[0].BizTime, p.Instances[0].BizEnd
	for _, in := range p.Instances {
		from, to = minTime(from, in.BizTime), maxTime(to, maxTime(in.BizTime, in.BizEnd))
	}
	runs, err := e.st.TaskRuns(ctx, p.Tasks, from, to)
	if err != nil {
		return nil, err
	}
	in.History = newHistory(runs)
	return plan.Build(in)
}

func (e *Engine) groupNames() []string {
	names := make([]string, 0, len(e.opts.ResourceGroups))
	for n := range e.opts.ResourceGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func needsHistory(r plan.Request) bool {
	return (r.Succeeded != "" && r.Succeeded != plan.SucceededRerun) || r.Running == plan.RunningSkip
}

// Submit plans req, records the backfill and its instances, and hands them
// to the loop. show, when not nil, is given the plan once it is recorded
// (to describe it): the engine then lets the plan go and builds its nodes
// from the record, as a restart does, so that a large backfill is never
// held as the plan and the nodes at once (docs/benchmark.md, "Batch
// benchmark").
func (e *Engine) Submit(ctx context.Context, req plan.Request, startedBy string, show func(*plan.Plan)) (store.BatchBackfill, error) {
	rec, err := e.recordBackfill(ctx, req, startedBy, show)
	if err != nil {
		return rec, err
	}
	// Recorded: the loop must take it even if the caller goes away now.
	if err := e.adoptRecorded(context.WithoutCancel(ctx), rec); err != nil {
		return rec, fmt.Errorf("batch backfill %d is recorded but not yet running (the daemon picks it up at its next start): %w", rec.ID, err)
	}
	return rec, nil
}

// adoptRecorded reads the nodes of a backfill just recorded, outside the
// loop, and hands them to it, unless the loop read it meanwhile.
func (e *Engine) adoptRecorded(ctx context.Context, rec store.BatchBackfill) error {
	select {
	case <-e.exited:
		return errStopped
	default:
	}
	bf, readErr := e.readBackfill(ctx, rec)
	return e.do(ctx, func(ctx context.Context) error {
		if e.s.adopted[rec.ID] {
			// Read from the store meanwhile, by the start-up or a command
			// naming it: that memory is the one that counts.
			return nil
		}
		if readErr == nil {
			e.finishAdopt(bf)
		} else if _, err := e.loadBackfill(ctx, rec); err != nil {
			// Tried once more, in the loop: a backfill recorded and not
			// adopted would wait for the next start.
			return errors.Join(readErr, err)
		}
		e.publish(Event{Kind: KindBatchBackfill, BackfillID: rec.ID, State: rec.State})
		return nil
	})
}

// recordBackfill plans req and records the backfill and its instances, showing
// the plan to show (when not nil) once it is recorded. A request with
// nothing to run is refused.
func (e *Engine) recordBackfill(ctx context.Context, req plan.Request, startedBy string, show func(*plan.Plan)) (store.BatchBackfill, error) {
	p, err := e.Preview(ctx, req)
	if err != nil {
		return store.BatchBackfill{}, err
	}
	if len(p.Instances) == 0 {
		return store.BatchBackfill{}, &plan.RequestError{Field: "dates", Message: fmt.Sprintf("nothing to run: every selected task date is left out (%d by the succeeded/running policies)", p.Skipped)}
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return store.BatchBackfill{}, fmt.Errorf("encode request: %w", err)
	}
	rec := store.BatchBackfill{Name: p.Name, Task: p.Task, StartedBy: startedBy, Request: reqJSON,
		State: store.BatchWaiting, RunAt: p.RunAt.UTC().Truncate(time.Microsecond)}
	// The store takes the instances one at a time from the plan: no slice
	// of store rows is made of them.
	if _, err := e.st.CreateBatchBackfillFrom(ctx, &rec, store.NewInstances{
		Len:  len(p.Instances),
		At:   func(i int, c *store.BatchInstance) { *c = plannedInstance(&p.Instances[i]) },
		Deps: func(i int) []int { return p.Instances[i].Deps },
	}); err != nil {
		return store.BatchBackfill{}, fmt.Errorf("record backfill: %w", err)
	}
	if show != nil {
		show(p)
	}
	return rec, nil
}

// StopBackfill stops a backfill: its running instances are ended and the
// others will not run.
func (e *Engine) StopBackfill(ctx context.Context, id int64, by string) error {
	return e.do(ctx, func(ctx context.Context) error {
		bf := e.s.bfs[id]
		if bf == nil {
			// Recorded but not in memory: Submit has not handed it over
			// yet (or could not). Read it now; Submit then leaves it.
			rec, err := e.st.GetBatchBackfill(ctx, id)
			if err == nil && (rec.State == store.BatchWaiting || rec.State == store.BatchRunning) {
				if bf, err = e.loadBackfill(ctx, rec); err != nil {
					return err
				}
			}
		}
		if bf == nil {
			return e.notOpen(ctx, id)
		}
		e.stopBackfill(ctx, bf, "stopped by "+by)
		return nil
	})
}

func (e *Engine) notOpen(ctx context.Context, id int64) error {
	rec, err := e.st.GetBatchBackfill(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("batch backfill %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("batch backfill %d already ended (%s): %w", id, rec.State, ErrConflict)
}

func (e *Engine) stopBackfill(ctx context.Context, bf *backfill, reason string) {
	bf.stopped = true
	bf.rec.Error = reason
	now := e.now().UTC()
	var changes []store.BatchInstance
	var stopped []*node
	for _, n := range bf.nodes {
		switch {
		case n.run != nil:
			n.run.stopReason = reason
			if n.run.cancel != nil {
				n.run.cancel()
			}
		case n.state == store.InstanceWaiting:
			changes = append(changes, record(n, store.InstanceStopped, reason, now))
			stopped = append(stopped, n)
		}
	}
	if err := e.writeInstances(ctx, changes, nil); err != nil {
		e.log.Error("record stopped instances", logkey.BatchBackfill(bf.rec.ID), logkey.Err(err))
	}
	for _, n := range stopped {
		n.state, n.reason = store.InstanceStopped, reason
	}
	if bf.rec.State == store.BatchWaiting {
		bf.rec.State = store.BatchRunning // so that checkDone ends it
	}
	for _, n := range bf.nodes {
		n.unqueue() // their entries go stale
	}
	e.checkDone(ctx, bf)
}

// StopInstance stops one instance (ending its process or SQL if it runs).
func (e *Engine) StopInstance(ctx context.Context, id int64, by string) error {
	return e.do(ctx, func(ctx context.Context) error {
		n := e.s.nodes[id]
		if n == nil {
			return e.instanceNotOpen(ctx, id)
		}
		reason := "stopped by " + by
		if n.run != nil {
			n.run.stopReason = reason
			if n.run.cancel != nil {
				n.run.cancel()
			}
			return nil
		}
		if n.state != store.InstanceWaiting {
			return fmt.Errorf("instance %d is %s, not waiting or running: %w", id, n.state, ErrConflict)
		}
		if err := e.writeInstances(ctx, []store.BatchInstance{record(n, store.InstanceStopped, reason, e.now().UTC())}, nil); err != nil {
			return err
		}
		n.state, n.reason = store.InstanceStopped, reason
		n.unqueue()
		e.publishInstance(n)
		if n.bf == nil {
			e.holdBelow(ctx, n)
			return nil
		}
		e.markHeld(ctx, n.bf)
		e.checkDone(ctx, n.bf)
		return nil
	})
}

func (e *Engine) instanceNotOpen(ctx context.Context, id int64) error {
	in, err := e.st.GetBatchInstance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("instance %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if in.BackfillID == 0 {
		return fmt.Errorf("instance %d of the recurring schedule is %s, not waiting or running: %w", id, in.State, ErrConflict)
	}
	return fmt.Errorf("instance %d is %s and its backfill has ended; re-run it instead: %w", id, in.State, ErrConflict)
}

func startOfDayUTC(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
