package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// finish records a batch of ended attempts and then releases what they
// held: slots, their cycles, and (when they succeeded) what depends on them.
//
// When every one of them succeeded, the ends are written in the
// transaction that claims what they released (dispatchWith), one write
// instead of two: what depends on an instance is never recorded running
// without its end. A failure, a stop or a retry is written first, on its
// own, as the holds, stops and backfill ends that follow it read it so.
func (e *Engine) finish(ctx context.Context, ends []ending, shuttingDown bool) {
	now := e.now().UTC()
	changes := make([]store.BatchInstance, len(ends))
	next := make([]string, len(ends))
	for i, end := range ends {
		n := end.n
		st, reason := e.outcome(n, end, shuttingDown, now)
		next[i] = st
		a := n.edit()
		if st == store.InstanceSucceeded {
			a.outputs = end.res.Outputs
		}
		a.errText = ""
		if end.res.Err != nil && st != store.InstanceSucceeded {
			a.errText = storable(end.res.Err.Error())
		}
		changes[i] = record(n, st, reason, now)
		n.reason = reason
	}
	withClaims := !shuttingDown && !slices.ContainsFunc(next, func(st string) bool { return st != store.InstanceSucceeded })
	if !withClaims {
		e.recordEnds(ctx, changes)
	}
	for i, end := range ends {
		if end.n.task.Type == "noop" {
			continue
		}
		text := storable(end.log + fmt.Sprintf("\n[tidemark] attempt %d ended: %s\n", end.attempt, verdict(next[i], end.res)))
		if err := e.st.PutInstanceLog(ctx, end.n.id, end.attempt, text); err != nil {
			e.log.Warn("keep instance log", logkey.Instance(end.n.id), logkey.Err(err))
		}
	}
	touched := map[*backfill]bool{} // true: an instance failed or was stopped
	var holding []*node             // scheduled instances that failed or were stopped
	for i, end := range ends {
		n := end.n
		e.releaseCycle(n)
		n.run = nil
		n.state = next[i]
		if n.bf != nil {
			n.bf.running--
			touched[n.bf] = touched[n.bf] || ended(n) != ""
		} else if ended(n) != "" {
			holding = append(holding, n)
		}
		if !withClaims {
			e.publishInstance(n)
		}
		switch n.state {
		case store.InstanceSucceeded:
			n.settle() // its end is in changes, written below or above
			e.released(n)
			if !withClaims {
				e.forget(n)
			}
		case store.InstanceWaiting:
			e.consider(n)
		case store.InstanceFailed:
			e.log.Warn("instance failed", logkey.Instance(n.id), logkey.Task(n.task.ID), logkey.BusinessTime(n.biz()), logkey.Err(end.res.Err))
			if n.bf != nil && n.bf.req.StopOnFailure && !n.bf.stopped {
				e.stopBackfill(ctx, n.bf, fmt.Sprintf("stopped at the first failure: instance %d (%s %s) failed", n.id, n.task.ID, n.biz().Format(time.RFC3339)))
			}
		}
	}
	if withClaims {
		// Once written, as the others: told, and a scheduled instance
		// forgotten (not before: the claims' rendering reads its outputs
		// in memory, and the store has them only once written).
		written := func() {
			for _, end := range ends {
				e.publishInstance(end.n)
				e.forget(end.n)
			}
		}
		if !e.dispatchWith(ctx, changes, written) {
			e.recordEnds(ctx, changes)
			written()
		}
	}
	if len(holding) > 0 {
		e.holdBelow(ctx, holding...)
	}
	for bf, held := range touched {
		if held {
			e.markHeld(ctx, bf)
		}
		e.checkDone(ctx, bf)
	}
}

// recordEnds writes ended attempts. The attempts have ended whatever the
// store says, so it tries for a while; if the store stays down the loop
// goes on from memory, and a restart runs those instances again (they are
// still recorded as running).
func (e *Engine) recordEnds(ctx context.Context, changes []store.BatchInstance) {
	for attempt := 1; ; attempt++ {
		err := e.writeInstances(ctx, changes, nil)
		if err == nil {
			return
		}
		if attempt == 30 || ctx.Err() != nil {
			e.log.Error("could not record ended instances; a restart runs them again", "instances", len(changes), logkey.Err(err))
			return
		}
		e.log.Error("record ended instances; retrying", logkey.Err(err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// storable makes text safe for both stores: valid UTF-8 without NUL bytes
// (PostgreSQL text cannot hold them).
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// verdict says how an attempt ended, for the end of its log.
func verdict(state string, res runner.Result) string {
	if res.Err == nil {
		return "succeeded"
	}
	if state == store.InstanceWaiting {
		return fmt.Sprintf("failed (%v); it will be retried", res.Err)
	}
	return fmt.Sprintf("%s (%v)", state, res.Err)
}

// outcome decides the state an ended attempt leaves its instance in.
func (e *Engine) outcome(n *node, end ending, shuttingDown bool, now time.Time) (state, reason string) {
	switch {
	case end.res.Err == nil:
		// Done even if a stop came too late to prevent it.
		return store.InstanceSucceeded, ""
	case n.run != nil && n.run.stopReason != "":
		return store.InstanceStopped, n.run.stopReason
	case shuttingDown:
		n.clearNextTry()
		return store.InstanceWaiting, "interrupted by the daemon's shutdown; runs again at the next start"
	case lostWithNode(end.res.Err) && n.seen().lostRuns+1 >= maxLostRuns:
		n.edit().lostRuns = 0
		return store.InstanceFailed, fmt.Sprintf("attempt %d was lost with its node (%v), %d attempts in a row were: the task may be what stops its nodes; it is not run again (rerun it by hand once that is ruled out)",
			n.attempt, end.res.Err, maxLostRuns)
	case errors.Is(end.res.Err, remote.ErrInterrupted), lostWithNode(end.res.Err):
		a := n.edit()
		if lostWithNode(end.res.Err) {
			a.lostRuns++
		}
		a.retryBase++ // not the task's failure: no retry used
		// remoteEnded set when it runs again.
		return store.InstanceWaiting, fmt.Sprintf("attempt %d was interrupted (%v); it runs again", n.attempt, end.res.Err)
	}
	a := n.edit()
	a.lostRuns = 0
	used := n.attempt - a.retryBase
	if used <= n.task.Retries && !errors.Is(end.res.Err, errNotRunnable) {
		delay := max(n.task.RetryBackoff, 0) << min(used-1, 20) // 0: retry at once
		a.nextTry = now.Add(delay)
		return store.InstanceWaiting, fmt.Sprintf("attempt %d failed (%v); retry %d of %d at %s",
			n.attempt, end.res.Err, used, n.task.Retries, a.nextTry.Format(time.RFC3339))
	}
	return store.InstanceFailed, ""
}

// lostWithNode reports whether an attempt ended because its node was
// lost: its lease ran out, or its watchdog ended the task for want of a
// renewed deadline (which the node may report before it sees its leases
// lost).
func lostWithNode(err error) bool {
	return errors.Is(err, errNodeLost) || errors.Is(err, runner.ErrLapsed)
}

// maxLostRuns is how many attempts in a row an instance may lose with
// their nodes (killed, frozen, cut off) before it fails: a node's loss is
// not the task's fault and uses no retry, but a task that kills every node
// it runs on must not go round the cluster for ever.
const maxLostRuns = 3

// errNotRunnable marks failures that a retry cannot fix (the code does not
// render, the task or its connection is gone from the configuration).
var errNotRunnable = errors.New("cannot run")

// releaseCycle frees n's slot and cycle and wakes what waited for them.
func (e *Engine) releaseCycle(n *node) {
	s := e.s
	s.free[n.rg]++
	held := s.holding[n.task.ID]
	if i := slices.Index(held, n); i >= 0 {
		held = slices.Delete(held, i, i+1)
		if len(held) == 0 {
			delete(s.holding, n.task.ID)
		} else {
			s.holding[n.task.ID] = held
		}
	}
	waiting := s.busyWait[n]
	delete(s.busyWait, n)
	for _, w := range waiting {
		if w.live() {
			w.n.unqueue()
			e.consider(w.n)
		}
	}
}

// forget drops a succeeded instance of the recurring schedule from memory;
// what is created later and depends on it finds it done in the store.
func (e *Engine) forget(n *node) {
	if n.bf == nil {
		delete(e.s.nodes, n.id)
		n.down = nil
	}
}

// checkDone ends a running backfill when nothing more can happen in it:
// nothing runs and nothing is on its way to run.
func (e *Engine) checkDone(ctx context.Context, bf *backfill) {
	if bf.rec.State != store.BatchRunning || bf.running > 0 || bf.queued > 0 {
		return
	}
	counts := map[string]int{}
	for _, n := range bf.nodes {
		counts[n.state]++
	}
	final, msg := store.BatchSucceeded, ""
	switch {
	case bf.stopped:
		final, msg = store.BatchStopped, bf.rec.Error
	case counts[store.InstanceFailed] > 0:
		final, msg = store.BatchFailed, failureMessage(bf, counts[store.InstanceFailed])
	case counts[store.InstanceBlocked] > 0:
		final = store.BatchBlocked
		msg = fmt.Sprintf("%d instance(s) of paused tasks block the rest (paused policy \"block\"); mark them succeeded or re-submit with paused \"dry_run\" or \"run\"", counts[store.InstanceBlocked])
	case counts[store.InstanceStopped] > 0:
		final, msg = store.BatchStopped, fmt.Sprintf("%d instance(s) were stopped; `tidemark batch rerun %d` runs them again", counts[store.InstanceStopped], bf.rec.ID)
	case counts[store.InstanceWaiting] > 0:
		final = store.BatchFailed
		msg = fmt.Sprintf("%d instance(s) cannot run: what they wait for did not succeed; see `tidemark batch instances %d`", counts[store.InstanceWaiting], bf.rec.ID)
	}
	finished := e.now().UTC()
	if err := e.st.SetBatchBackfillState(ctx, bf.rec.ID, final, msg, nil, &finished); err != nil {
		e.log.Error("record the end of a backfill", logkey.BatchBackfill(bf.rec.ID), logkey.Err(err))
		return
	}
	bf.rec.State, bf.rec.Error, bf.rec.FinishedAt = final, msg, &finished
	e.publish(Event{Kind: KindBatchBackfill, BackfillID: bf.rec.ID, State: final})
	e.log.Info("backfill ended", logkey.BatchBackfill(bf.rec.ID), "name", bf.rec.Name, "state", final)
	// Finished backfills leave memory; a re-run loads them again.
	e.dropIfEnded(bf)
}

// failureMessage says which of bf's instances failed (the first few), how
// to read their logs, and what to do next.
func failureMessage(bf *backfill, failed int) string {
	const named = 3
	var names []string
	first := int64(0)
	for _, n := range bf.nodes {
		if n.state != store.InstanceFailed {
			continue
		}
		if first == 0 {
			first = n.id
		}
		if len(names) < named {
			names = append(names, fmt.Sprintf("%d (%s %s)", n.id, n.task.ID, bizLabel(n)))
		}
	}
	list := strings.Join(names, ", ")
	if failed > named {
		list += fmt.Sprintf(" and %d more (`tidemark batch instances %d --state failed`)", failed-named, bf.rec.ID)
	}
	return fmt.Sprintf("%d instance(s) failed: %s; read the log with `tidemark batch log %d`. What depends on them and the later dates of their groups did not run (held) — `tidemark batch rerun %d` runs them again, or `tidemark batch mark-succeeded ID` lets what waits for one proceed",
		failed, list, first, bf.rec.ID)
}
