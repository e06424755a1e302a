package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// StartedBy is who a batch backfill that tidemark submitted on its own
// (on_change: run) was started by.
const StartedBy = "lineage"

// Batch is what the watcher needs of the batch engine.
type Batch interface {
	Graph() *dag.Graph
	Submit(ctx context.Context, req plan.Request, startedBy string, show func(*plan.Plan)) (store.BatchBackfill, error)
}

// Watcher turns the dates that backfills changed into proposals for the
// tasks that read them and have run those dates, and submits the due
// automatic ones as batch backfills (docs/lineage.md). Approve and Dismiss
// decide a proposal for a person.
type Watcher struct {
	Store *store.Store
	Batch Batch
	Log   *slog.Logger
	// Every is how often it looks (default a second).
	Every time.Duration
	Now   func() time.Time // default time.Now

	mu sync.Mutex // one decision at a time: a proposal is submitted once
}

// Run looks until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	every := w.Every
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := w.Tick(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("lineage: acting on changed dates failed; trying again", logkey.Err(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Tick hands the changes of backfills that ended to proposals, then
// submits the automatic proposals that are due.
func (w *Watcher) Tick(ctx context.Context) error {
	errs := []error{w.handOver(ctx)}
	due, err := w.Store.DueProposals(ctx, w.now())
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, p := range due {
		if err := w.auto(ctx, p); err != nil { // the others go on
			errs = append(errs, fmt.Errorf("proposal %d: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

// handOver hands the changes of ended backfills and the late data to
// proposals. It holds the lock an approval holds, so that nothing joins a
// proposal between its approval's read and its decision.
func (w *Watcher) handOver(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids, err := w.Store.UnhandledChanged(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := w.hand(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("backfill %d: %w", id, err))
		}
	}
	if err := w.handLate(ctx); err != nil {
		errs = append(errs, fmt.Errorf("late data: %w", err))
	}
	return errors.Join(errs...)
}

// hand adds what backfill id changed to the proposals of the tasks whose
// on_change acts on it, keeping only the cycles each task has run.
func (w *Watcher) hand(ctx context.Context, id int64) error {
	bf, err := w.Store.GetBackfill(ctx, id)
	if err != nil {
		return err
	}
	ds, err := w.Store.ChangedDates(ctx, bf.Stream, id)
	if err != nil {
		return err
	}
	// Its changes were all in the destination once it was loaded (its last
	// chunk committed), or once it ended.
	until := w.now()
	switch {
	case bf.LoadedAt != nil:
		until = *bf.LoadedAt
	case bf.FinishedAt != nil:
		until = *bf.FinishedAt
	}
	adds, err := w.proposals(ctx, bf.Stream, ds, until, nil, func(object string) store.Cause {
		return store.Cause{Stream: bf.Stream, BackfillID: id, Object: object, StartedBy: bf.StartedBy}
	})
	if err != nil {
		return err
	}
	if err := w.Store.HandleChanged(ctx, id, adds); err != nil {
		return err
	}
	if len(adds) > 0 {
		failpoint("after-hand")
	}
	for _, a := range adds {
		w.Log.Info("lineage: changed dates proposed for a re-run", logkey.Backfill(id), logkey.Task(a.Task), "cycles", len(a.Times), "auto", a.Auto)
	}
	return nil
}

// LateCause is who a proposal's late data cause was started by.
const LateCause = "late data"

// handLate adds the late data waiting to the proposals of the tasks whose
// on_change acts on it, stream by stream, and deletes it.
func (w *Watcher) handLate(ctx context.Context) error {
	late, err := w.Store.LateDates(ctx)
	if err != nil || len(late) == 0 {
		return err
	}
	byStream := map[string][]store.LateDate{}
	var streams []string
	for _, d := range late {
		if byStream[d.Stream] == nil {
			streams = append(streams, d.Stream)
		}
		byStream[d.Stream] = append(byStream[d.Stream], d)
	}
	for _, name := range streams {
		var ds []store.ChangedDate
		var ids []int64
		var until time.Time
		for _, d := range byStream[name] {
			ds, ids = append(ds, d.ChangedDate), append(ids, d.ID)
			if d.At.After(until) {
				until = d.At
			}
		}
		at := map[store.ChangedDate]time.Time{}
		for _, d := range byStream[name] {
			at[d.ChangedDate] = d.At
		}
		// Each read judges lateness by its own late_after and zone.
		late := func(r dag.Read, d store.ChangedDate) bool {
			return r.LateAfter > 0 && LateValue(r, d.Value, at[d])
		}
		adds, err := w.proposals(ctx, name, ds, until, late, func(object string) store.Cause {
			return store.Cause{Stream: name, Object: object, StartedBy: LateCause}
		})
		if err != nil {
			return err
		}
		if err := w.Store.HandleLate(ctx, ids, adds); err != nil {
			return err
		}
		for _, a := range adds {
			w.Log.Info("lineage: late data proposed for a re-run", logkey.Stream(name), logkey.Task(a.Task), "cycles", len(a.Times), "auto", a.Auto)
		}
	}
	return nil
}

// proposals are the additions changed dates ds of stream make to the
// proposals of the tasks whose on_change acts on them: per task, its
// cycles holding them that ran before until.
func (w *Watcher) proposals(ctx context.Context, stream string, ds []store.ChangedDate, until time.Time,
	keep func(dag.Read, store.ChangedDate) bool, cause func(object string) store.Cause) ([]store.ProposalAdd, error) {
	var acting []*dag.Task
	for _, t := range w.Batch.Graph().Tasks() {
		if t.OnChange != nil && t.OnChange.Action != dag.OnChangeOff {
			acting = append(acting, t)
		}
	}
	affected, err := AffectedIf(acting, stream, ds, keep)
	if err != nil {
		return nil, err
	}
	var adds []store.ProposalAdd
	for _, a := range affected {
		t, err := w.Batch.Graph().Lookup(a.Task)
		if err != nil {
			return nil, err
		}
		ran, err := w.ranBefore(ctx, t.ID, a.Times, until)
		if err != nil {
			return nil, err
		}
		if len(ran) == 0 {
			continue // dates never run are left to the schedule
		}
		adds = append(adds, store.ProposalAdd{Task: t.ID, Auto: t.OnChange.Action == dag.OnChangeRun, Times: ran,
			Cause: cause(a.Object), DueAt: w.now().Add(t.OnChange.Settle)})
	}
	return adds, nil
}

// ranBefore keeps the cycles of task among times that an instance ran
// before until, the end of the backfill that changed them (started, or
// ended for a dry run, which never starts): scheduled or in a batch
// backfill, whatever its outcome. An instance that started later read the
// changed rows already.
func (w *Watcher) ranBefore(ctx context.Context, task string, times []time.Time, until time.Time) ([]time.Time, error) {
	runs, err := w.Store.TaskRuns(ctx, []string{task}, times[0], times[len(times)-1])
	if err != nil {
		return nil, err
	}
	before := func(r store.TaskRun) bool {
		at := r.StartedAt
		if at == nil {
			at = r.FinishedAt
		}
		return at != nil && at.Before(until)
	}
	// One cycle's runs are found by its time; a single instance covering
	// several cycles is looked through (they are few).
	at := map[time.Time]bool{}
	var spans []store.TaskRun
	for _, r := range runs {
		switch {
		case !before(r):
		case r.BizEnd.Equal(r.BizTime):
			at[r.BizTime.UTC()] = true
		default:
			spans = append(spans, r)
		}
	}
	var out []time.Time
	for _, c := range times {
		if at[c.UTC()] || slices.ContainsFunc(spans, func(r store.TaskRun) bool { return r.Covers(c.UTC()) }) {
			out = append(out, c)
		}
	}
	return out, nil
}

// auto submits a due automatic proposal, unless the task's own batch
// backfill of an earlier proposal is still open (it waits for it, so that
// changes during a run queue one more run after it) or the day's cap is
// reached (it is held for a person).
func (w *Watcher) auto(ctx context.Context, p store.Proposal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, err := w.Batch.Graph().Lookup(p.Task)
	if err != nil || t.OnChange == nil || t.OnChange.Action != dag.OnChangeRun {
		return w.Store.HoldProposal(ctx, p.ID, "the task's on_change is no longer run: approve or dismiss it")
	}
	if open, err := w.openRun(ctx, t.ID); err != nil || open {
		return err
	}
	loc := t.Schedule.Location
	if loc == nil {
		loc = time.UTC
	}
	midnight := calendar.DateOf(w.now().In(loc)).Midnight(loc)
	n, err := w.Store.SubmittedSince(ctx, t.ID, StartedBy, midnight)
	if err != nil {
		return err
	}
	if n >= t.OnChange.MaxPerDay {
		w.Log.Warn("lineage: the day's cap of re-runs is reached; the proposal waits for a person", logkey.Task(t.ID), "proposal", p.ID, "max_per_day", t.OnChange.MaxPerDay)
		return w.Store.HoldProposal(ctx, p.ID, fmt.Sprintf("%d batch backfills of %s were started today, its on_change.max_per_day: approve or dismiss it", n, t.ID))
	}
	_, err = w.submit(ctx, t, p, StartedBy)
	var refused *plan.RequestError
	if errors.As(err, &refused) {
		// Submitting again cannot help: a person decides.
		w.Log.Warn("lineage: the batch backfill of a proposal was refused; it waits for a person", "proposal", p.ID, logkey.Task(t.ID), logkey.Err(err))
		return w.Store.HoldProposal(ctx, p.ID, "the batch backfill was refused ("+refused.Error()+"): approve once that is fixed, or dismiss it")
	}
	return err
}

// openRun reports whether the task's latest submitted proposal's batch
// backfill has not ended.
func (w *Watcher) openRun(ctx context.Context, task string) (bool, error) {
	ps, err := w.Store.ListProposals(ctx, store.ProposalSubmitted, 200)
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		if p.Task != task || p.BatchBackfillID == 0 {
			continue
		}
		bb, err := w.Store.GetBatchBackfill(ctx, p.BatchBackfillID)
		if err != nil {
			return false, err
		}
		return bb.State == store.BatchWaiting || bb.State == store.BatchRunning, nil
	}
	return false, nil
}

// Approve submits a pending proposal now, for by.
func (w *Watcher) Approve(ctx context.Context, id int64, by string) (store.Proposal, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, err := w.Store.GetProposal(ctx, id)
	if err != nil {
		return p, err
	}
	if p.State != store.ProposalPending {
		return p, fmt.Errorf("proposal %d is %s: %w", id, p.State, store.ErrProposalDecided)
	}
	t, err := w.Batch.Graph().Lookup(p.Task)
	if err != nil {
		return p, fmt.Errorf("proposal %d: %w: dismiss it", id, &TaskGoneError{Task: p.Task})
	}
	return w.submit(ctx, t, p, by)
}

// TaskGoneError is a proposal of a task no longer configured.
type TaskGoneError struct{ Task string }

func (e *TaskGoneError) Error() string { return "task " + e.Task + " is no longer configured" }

// Dismiss closes a pending proposal without running it.
func (w *Watcher) Dismiss(ctx context.Context, id int64, by string) (store.Proposal, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.Store.DecideProposal(ctx, id, store.ProposalDismissed, 0, by, w.now()); err != nil {
		return store.Proposal{}, err
	}
	return w.Store.GetProposal(ctx, id)
}

// submit starts p's batch backfill, named after the proposal so that one
// submitted just before a crash is found rather than submitted again.
func (w *Watcher) submit(ctx context.Context, t *dag.Task, p store.Proposal, by string) (store.Proposal, error) {
	req, err := Request(t, p)
	if err != nil {
		return p, err
	}
	bb, found, err := w.submitted(ctx, t.ID, req.Name)
	if err != nil {
		return p, err
	}
	if !found {
		if bb, err = w.Batch.Submit(ctx, req, by, nil); err != nil {
			return p, fmt.Errorf("submit the batch backfill of proposal %d: %w", p.ID, err)
		}
		failpoint("after-submit")
	}
	if err := w.Store.DecideProposal(ctx, p.ID, store.ProposalSubmitted, bb.ID, by, w.now()); err != nil {
		return p, err
	}
	w.Log.Info("lineage: batch backfill submitted", "proposal", p.ID, logkey.Task(t.ID), logkey.BatchBackfill(bb.ID), "cycles", len(p.Times), "by", by)
	return w.Store.GetProposal(ctx, p.ID)
}

// submitted finds the batch backfill named name of task.
func (w *Watcher) submitted(ctx context.Context, task, name string) (store.BatchBackfill, bool, error) {
	bbs, err := w.Store.ListBatchBackfills(ctx, store.BatchBackfillFilter{Task: task, Limit: 1000})
	if err != nil {
		return store.BatchBackfill{}, false, err
	}
	for _, bb := range bbs {
		if bb.Name == name {
			return bb, true, nil
		}
	}
	return store.BatchBackfill{}, false, nil
}

// Request is the batch backfill of proposal p for task t: the task's
// on_change options (without a scope: the task and all its downstream), its
// business dates, and for a sub-day task the time of day from the first
// changed cycle's to the last's.
func Request(t *dag.Task, p store.Proposal) (plan.Request, error) {
	var req plan.Request
	if t.OnChange != nil && len(t.OnChange.Backfill) > 0 {
		if err := json.Unmarshal(t.OnChange.Backfill, &req); err != nil {
			return req, fmt.Errorf("task %s on_change.backfill: %w", t.ID, err)
		}
	}
	if reflect.ValueOf(req.Scope).IsZero() { // no scope given: the task and all its downstream
		req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels}
	}
	if len(p.Times) == 0 {
		return req, errors.New("the proposal holds no cycle")
	}
	req.Task, req.Name, req.Confirm = t.ID, fmt.Sprintf("lineage_%d", p.ID), true
	loc := t.Schedule.Location
	if loc == nil {
		loc = time.UTC
	}
	req.Dates = plan.Dates{Mode: plan.DatesCustom}
	lo, hi := "23:59", "00:00"
	for _, c := range p.Times {
		local := c.In(loc)
		if d := calendar.DateOf(local); !slices.Contains(req.Dates.List, d) {
			req.Dates.List = append(req.Dates.List, d)
		}
		hm := local.Format("15:04")
		lo, hi = min(lo, hm), max(hi, hm)
	}
	if !t.Schedule.DayBased() {
		req.TimeRange = &plan.TimeRange{From: lo, To: hi}
	}
	return req, nil
}
