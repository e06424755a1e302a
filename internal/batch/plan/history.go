package plan

import (
	"cmp"
	"fmt"
)

// History states Build looks at.
const (
	stateSucceeded = "succeeded"
	stateDryRun    = "dry_run"
	stateFailed    = "failed"
	stateStopped   = "stopped"
	stateRunning   = "running"
)

// historyTally counts what the Succeeded and Running policies do to the
// candidates.
type historyTally struct {
	bySucceeded int // left out by the Succeeded policy
	byRunning   int // left out by the Running policy
	waiting     int // kept, starting after a run in progress
}

// applyHistory marks the candidates the Succeeded and Running policies
// leave out (idx -1) and checks the plan's size.
func (b *builder) applyHistory() error {
	total := 0
	for _, tp := range b.plans {
		total += len(tp.biz)
	}
	if b.in.History == nil {
		return b.checkSize(total)
	}
	var tally historyTally
	for _, tp := range b.plans {
		if tp.single {
			b.applyHistorySingle(tp, &tally)
		} else {
			b.applyHistoryCycles(tp, &tally)
		}
	}
	b.skipped = tally.bySucceeded + tally.byRunning
	kept := total - b.skipped
	if kept == 0 {
		field, hint := "succeeded", "succeeded="+SucceededRerun+" runs them again"
		if tally.byRunning > tally.bySucceeded {
			field, hint = "running", "running="+RunningWait+" runs them after the runs in progress"
		}
		return refuse(field, "nothing to backfill: succeeded=%s and running=%s leave out every task date (%d); %s",
			b.req.Succeeded, b.req.Running, total, hint)
	}
	if err := b.checkSize(kept); err != nil {
		return err
	}
	if tally.waiting > 0 {
		b.warnings = append(b.warnings, fmt.Sprintf("%d task dates have a run in progress; their instances start after it ends", tally.waiting))
	}
	return nil
}

// applyHistoryCycles applies the policies to each candidate of tp.
func (b *builder) applyHistoryCycles(tp *taskPlan, tally *historyTally) {
	for k, c := range tp.biz {
		out, running := b.leftOut(b.in.History.Last(tp.t.ID, c))
		switch {
		case out && running:
			tp.idx[k] = -1
			tally.byRunning++
		case out:
			tp.idx[k] = -1
			tally.bySucceeded++
		case running:
			tally.waiting++
		}
	}
}

// applyHistorySingle applies the policies to a single instance. It covers
// all the task's cycles, so it is left out when the policies leave out
// every one of them.
func (b *builder) applyHistorySingle(tp *taskPlan, tally *historyTally) {
	all, anyRunning := true, false
	for _, c := range tp.sc.biz {
		out, running := b.leftOut(b.in.History.Last(tp.t.ID, c))
		all = all && out
		anyRunning = anyRunning || running
	}
	switch {
	case all && anyRunning && b.req.Running == RunningSkip:
		tp.idx[0] = -1
		tally.byRunning++
	case all:
		tp.idx[0] = -1
		tally.bySucceeded++
	case anyRunning:
		tally.waiting++
	}
}

// leftOut reports whether the policies leave out a task date whose last
// run is in state st and, when the Succeeded policy keeps it, whether that
// run is still in progress.
func (b *builder) leftOut(st string) (out, running bool) {
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

// checkSize refuses a plan of n instances above the confirmation threshold
// unless the request confirms it.
func (b *builder) checkSize(n int) error {
	limit := cmp.Or(b.in.ConfirmAbove, DefaultConfirmAbove)
	if n > limit && !b.req.Confirm {
		return refuse("confirm", "the plan has %d instances, more than %d: check the dates and the selection, and set confirm to go ahead",
			n, limit)
	}
	return nil
}
