package engine

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// claimBatch bounds the instances claimed in one transaction.
const claimBatch = 256

// ending is the end of one attempt.
type ending struct {
	n       *node
	attempt int
	res     runner.Result
	log     string
}

// dispatch records the ready dry-run instances as such, claims ready
// instances up to the free slots, and starts them.
func (e *Engine) dispatch(ctx context.Context) {
	e.dispatchWith(ctx, nil, nil)
}

// dispatchWith is dispatch that also writes ended, the records of ended
// attempts, in its transaction, and calls written once that committed,
// before anything claimed is told. It reports whether it was written; if
// not, nothing was, nothing was claimed, and written is not called.
func (e *Engine) dispatchWith(ctx context.Context, ended []store.BatchInstance, written func()) bool {
	now := e.now().UTC()
	taken := map[*node]bool{} // a node can sit in a queue twice (stopped, then re-run)
	dry := e.takeDry(taken)
	claims, deferred := e.takeClaims(taken)
	if len(dry) == 0 && len(claims) == 0 && len(deferred) == 0 && len(ended) == 0 {
		return true // nothing ended: written is nil
	}
	changes := make([]store.BatchInstance, 0, len(ended)+len(dry)+len(claims)+len(deferred))
	changes = append(changes, ended...)
	for _, n := range deferred {
		changes = append(changes, record(n, store.InstanceWaiting, n.reason, now))
	}
	for _, n := range dry {
		changes = append(changes, record(n, store.InstanceDryRun, n.reason, now))
	}
	specs := make([]runner.Spec, len(claims))
	var queue []store.QueuedAttempt
	for i, n := range claims {
		specs[i] = e.claim(ctx, n, now)
		changes = append(changes, record(n, store.InstanceRunning, "", now))
		if e.remotely(specs[i]) {
			q, err := e.queueEntry(n, specs[i])
			if err != nil {
				specs[i].Type, specs[i].Script = "invalid", err.Error()
				continue
			}
			queue = append(queue, q)
		}
	}
	if err := e.writeInstances(ctx, changes, queue); err != nil {
		e.log.Error("record dispatched instances; retrying in a second", logkey.Err(err))
		e.undoClaims(dry, claims)
		return false
	}
	if written != nil {
		written()
	}
	// Claims first: a backfill whose last dry-run instance is released
	// here must already count its claimed instances as running.
	for i, n := range claims {
		n.state = store.InstanceRunning
		if n.bf != nil {
			n.bf.running++
		}
		e.publishInstance(n)
		e.start(ctx, n, specs[i])
	}
	touched := map[*backfill]bool{}
	for _, n := range dry {
		n.state = store.InstanceDryRun
		e.publishInstance(n)
		e.released(n)
		e.forget(n)
		if n.bf != nil {
			touched[n.bf] = true
		}
	}
	for bf := range touched {
		e.checkDone(ctx, bf)
	}
	return true
}

// dispatchable reports whether a node taken off a queue may still run.
func dispatchable(n *node, taken map[*node]bool) bool {
	return n.state == store.InstanceWaiting && n.pending == 0 && !taken[n] &&
		(n.bf == nil || (!n.bf.stopped && n.bf.rec.State == store.BatchRunning))
}

// takeDry empties the dry-run queue.
func (e *Engine) takeDry(taken map[*node]bool) []*node {
	var dry []*node
	for _, en := range e.s.dry {
		if !en.live() {
			continue
		}
		n := en.n
		n.unqueue()
		if dispatchable(n, taken) {
			taken[n] = true
			dry = append(dry, n)
		}
	}
	e.s.dry = e.s.dry[:0]
	return dry
}

// takeClaims pops ready nodes up to each resource group's free slots and
// takes their cycles; a node whose cycle runs elsewhere (the schedule,
// another backfill, a single instance covering it) waits for it, and
// deferred are those whose reason now says so.
func (e *Engine) takeClaims(taken map[*node]bool) (claims, deferred []*node) {
	s := e.s
	for rg, q := range s.queues {
		for s.free[rg] > 0 && q.Len() > 0 && len(claims) < claimBatch {
			en := heap.Pop(q).(entry)
			if !en.live() {
				continue
			}
			n := en.n
			n.unqueue()
			if !dispatchable(n, taken) {
				continue
			}
			if holder := e.holder(n); holder != nil {
				s.busyWait[holder] = append(s.busyWait[holder], n.enqueue())
				if r := busyReason(holder); n.reason != r {
					n.reason = r
					deferred = append(deferred, n)
				}
				continue
			}
			taken[n] = true
			s.holding[n.task.ID] = append(s.holding[n.task.ID], n)
			s.free[rg]--
			claims = append(claims, n)
		}
	}
	return claims, deferred
}

// busyReason says which run a node waits for when holder runs a cycle it
// covers.
func busyReason(holder *node) string {
	where := "the recurring schedule"
	if holder.bf != nil {
		where = fmt.Sprintf("backfill %d", holder.bf.rec.ID)
	}
	what := "the same task and business time"
	if holder.endUS() > holder.bizUS {
		what = fmt.Sprintf("a single instance covering %s to %s", holder.biz().Format(time.RFC3339), holder.end().Format(time.RFC3339))
	}
	return fmt.Sprintf("waits for instance %d of %s, %s, to end: one task and business time never runs twice at once", holder.id, where, what)
}

// holder is the node whose running attempt holds a cycle n covers, or nil.
// A task has few attempts running at once (the resource groups bound
// them), so the list is short.
func (e *Engine) holder(n *node) *node {
	for _, h := range e.s.holding[n.task.ID] {
		if h.overlaps(n) {
			return h
		}
	}
	return nil
}

// claim starts n's next attempt in memory and returns what to run. A
// template that cannot render fails the attempt without running anything;
// the error says what to fix.
func (e *Engine) claim(ctx context.Context, n *node, now time.Time) runner.Spec {
	spec, rendered, err := e.prepare(ctx, n)
	n.attempt++
	n.run = &running{host: e.host}
	if e.opts.Dispatch {
		n.run.host = "" // the node that takes it records its own
	}
	a := n.edit()
	a.rendered, a.tag, a.errText, a.startedAt = rendered, spec.Tag, "", &now
	n.reason = ""
	if err != nil {
		spec.Type, spec.Script = "invalid", err.Error()
	}
	return spec
}

// undoClaims puts claimed nodes back after the store refused the claim.
func (e *Engine) undoClaims(dry, claims []*node) {
	retry := e.now().Add(time.Second)
	for _, n := range claims {
		e.releaseCycle(n)
		n.attempt--
		n.run = nil
	}
	for _, n := range append(dry, claims...) {
		n.edit().nextTry = retry
		e.consider(n)
	}
}

// record is the stored form of n in state st. It writes every column, the
// attempt's too: never call it for a node that succeeded, whose attempt
// record settle dropped (the store has it).
func record(n *node, st, reason string, now time.Time) store.BatchInstance {
	a := n.seen()
	r := store.BatchInstance{
		ID: n.id, Task: n.task.ID, State: st, Reason: reason, Attempt: n.attempt,
		StartedAt: a.startedAt, Outputs: a.outputs,
		Rendered: a.rendered, SQLTag: a.tag, Error: a.errText,
	}
	if !a.nextTry.IsZero() && st == store.InstanceWaiting {
		t := a.nextTry.UTC()
		r.NextTry = &t
	}
	if st != store.InstanceWaiting && st != store.InstanceRunning {
		r.FinishedAt = &now
	}
	if n.run != nil {
		r.PID, r.PGID, r.ProcStart, r.Host = n.run.proc.PID, n.run.proc.PGID, n.run.proc.StartTicks, n.run.host
	}
	return r
}

// start runs one claimed attempt: no-op tasks end at once, inside the
// loop; the others run in their own goroutine.
func (e *Engine) start(ctx context.Context, n *node, spec runner.Spec) {
	if e.remotely(spec) {
		e.startRemote(ctx, n)
		return
	}
	switch spec.Type {
	case dag.TypeNoop:
		e.s.localEnds = append(e.s.localEnds, ending{n: n, attempt: n.attempt})
		return
	case "invalid":
		e.s.localEnds = append(e.s.localEnds, ending{n: n, attempt: n.attempt,
			res: runner.Result{Err: fmt.Errorf("%w: %s", errNotRunnable, spec.Script)}})
		return
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.run.cancel = cancel
	snapshot := record(n, store.InstanceRunning, "", time.Time{})
	attempt := n.attempt
	go func() {
		defer cancel()
		log := runner.NewLog(e.opts.LogLimit)
		res := runner.Run(rctx, spec, log, func(p runner.Proc) error {
			// Recorded before anything else happens, so that a restarted
			// daemon can end the process group.
			snapshot.PID, snapshot.PGID, snapshot.ProcStart = p.PID, p.PGID, p.StartTicks
			return e.st.UpdateBatchInstances(rctx, []store.BatchInstance{snapshot})
		})
		e.ends <- ending{n: n, attempt: attempt, res: res, log: log.String()}
	}()
}

// remotely reports whether a node of the cluster runs spec: with
// Dispatch, every attempt but one that cannot run (a no-op goes through
// a node too, so that a cluster dispatches every task the same way).
func (e *Engine) remotely(spec runner.Spec) bool {
	return e.opts.Dispatch && spec.Type != "invalid"
}

func (e *Engine) publishInstance(n *node) {
	ev := Event{Kind: KindInstance, InstanceID: n.id, Task: n.task.ID, State: n.state}
	if n.bf != nil {
		ev.BackfillID = n.bf.rec.ID
	}
	e.publish(ev)
}
