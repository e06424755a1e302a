package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// heldPrefix starts the reason of an instance that cannot run because of
// an instance that failed, was stopped or is blocked.
const heldPrefix = "held: "

// markHeld gives each waiting instance of bf that a failed, stopped or
// blocked instance holds back a reason that names it — an upstream one
// ("held: upstream sales.extract 2025-01-02 failed (instance 12)") or an
// earlier date of its concurrency group ("held: 2025-01-02 failed in group
// 1 (instance 12)") — and clears the reason of those no longer held. Only
// instances that would run get it: a dry-run or blocked one's reason says
// why it does not run. bf.nodes are in dispatch order, so an instance's
// upstream and its group's earlier dates come before it.
func (e *Engine) markHeld(ctx context.Context, bf *backfill) {
	cause := map[*node]string{} // held instances' reasons
	type gate struct {
		seq int32
		why string
	}
	gates := map[int32]gate{} // group → the first date that will not finish
	var changes []store.BatchInstance
	now := e.now().UTC()
	for _, n := range bf.nodes {
		if what := ended(n); what != "" {
			if _, seen := gates[n.group]; !seen {
				gates[n.group] = gate{n.seq, fmt.Sprintf("%s%s %s in group %d (instance %d)", heldPrefix, bizLabel(n), what, n.group, n.id)}
			}
			continue
		}
		if n.state != store.InstanceWaiting {
			continue
		}
		why := e.upstreamHold(n, func(d *node) string { return cause[d] })
		if g, found := gates[n.group]; why == "" && found && g.seq < n.seq {
			why = g.why
		}
		if why != "" {
			cause[n] = why
			if _, seen := gates[n.group]; !seen {
				gates[n.group] = gate{n.seq, why}
			}
		}
		if n.mode != plan.ModeRun || (why == "" && !strings.HasPrefix(n.reason, heldPrefix)) || n.reason == why {
			continue
		}
		n.reason = why
		changes = append(changes, record(n, store.InstanceWaiting, why, now))
	}
	if err := e.writeInstances(ctx, changes, nil); err != nil {
		e.log.Warn("record why instances are held", logkey.BatchBackfill(bf.rec.ID), logkey.Err(err))
	}
}

// upstreamHold is why an upstream instance holds n back, or "": one that
// failed, was stopped or is blocked, or one that is itself held (cause says
// why).
func (e *Engine) upstreamHold(n *node, cause func(*node) string) string {
	for _, id := range n.deps {
		d := e.s.nodes[id]
		if d == nil {
			continue
		}
		if what := ended(d); what != "" {
			return fmt.Sprintf("%supstream %s %s %s (instance %d)", heldPrefix, d.task.ID, bizLabel(d), what, d.id)
		}
		if why := cause(d); why != "" {
			return why
		}
	}
	return ""
}

// ended says how n ended without succeeding, so that what waits for it
// cannot run: "failed", "was stopped", "is blocked"; "" otherwise.
func ended(n *node) string {
	switch n.state {
	case store.InstanceFailed:
		return "failed"
	case store.InstanceStopped:
		return "was stopped"
	case store.InstanceBlocked:
		return "is blocked (a paused task)"
	}
	return ""
}

// bizLabel is n's business time in its task's zone: the date, with the
// time of day when the cycle does not start at midnight.
func bizLabel(n *node) string {
	t := n.biz()
	if loc := n.task.Schedule.Location; loc != nil {
		t = t.In(loc)
	}
	if h, m, _ := t.Clock(); h != 0 || m != 0 {
		return t.Format("2006-01-02 15:04")
	}
	return t.Format(time.DateOnly)
}

// holdBelow is markHeld for the recurring schedule: the waiting instances
// below roots (in memory, transitively) get the reason an upstream holds
// them, or lose a held reason that no longer holds (an upstream re-run or
// marked succeeded).
func (e *Engine) holdBelow(ctx context.Context, roots ...*node) {
	now := e.now().UTC()
	var changes []store.BatchInstance
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, d := range n.down {
			if d.bf != nil || d.state != store.InstanceWaiting || d.mode != plan.ModeRun {
				continue
			}
			why := e.upstreamHold(d, scheduledHold)
			if why == d.reason || (why == "" && !strings.HasPrefix(d.reason, heldPrefix)) {
				continue
			}
			d.reason = why
			changes = append(changes, record(d, store.InstanceWaiting, why, now))
			queue = append(queue, d) // what is below it changes with it
		}
	}
	if err := e.writeInstances(ctx, changes, nil); err != nil {
		e.log.Warn("record why scheduled instances are held", logkey.Err(err))
	}
}

// scheduledHold is the held reason of a waiting scheduled instance, which
// what is below it inherits.
func scheduledHold(d *node) string {
	if d.state == store.InstanceWaiting && strings.HasPrefix(d.reason, heldPrefix) {
		return d.reason
	}
	return ""
}
