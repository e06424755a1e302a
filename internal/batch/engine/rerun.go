package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/store"
)

// Rerun runs failed and stopped instances of a backfill again: those in
// ids, or all of them when ids is empty. What waits for them, and the later
// dates of their groups, then proceed.
func (e *Engine) Rerun(ctx context.Context, backfillID int64, ids []int64, by string) (int, error) {
	count := 0
	err := e.do(ctx, func(ctx context.Context) error {
		bf, err := e.openBackfill(ctx, backfillID)
		if err != nil {
			return err
		}
		defer e.dropIfEnded(bf)
		ids = dedupe(ids)
		now := e.now().UTC()
		reason := "re-run by " + by
		var changes []store.BatchInstance
		var picked []*node
		for _, n := range bf.nodes {
			if len(ids) > 0 && !slices.Contains(ids, n.id) {
				continue
			}
			if n.state != store.InstanceFailed && n.state != store.InstanceStopped {
				if len(ids) > 0 {
					return fmt.Errorf("instance %d is %s; only failed and stopped instances can be re-run: %w", n.id, n.state, ErrConflict)
				}
				continue
			}
			picked = append(picked, n)
			c := record(n, store.InstanceWaiting, reason, now)
			c.FinishedAt, c.NextTry = nil, nil
			changes = append(changes, c)
		}
		if len(ids) > 0 && len(picked) < len(ids) {
			return fmt.Errorf("some of instances %v are not in batch backfill %d: %w", ids, backfillID, ErrNotFound)
		}
		if len(picked) == 0 {
			return fmt.Errorf("batch backfill %d has no failed or stopped instance to re-run: %w", backfillID, ErrConflict)
		}
		if err := e.reopen(ctx, bf, changes); err != nil {
			return err
		}
		for _, n := range picked {
			n.state, n.reason = store.InstanceWaiting, reason
			n.rerun()
			e.publishInstance(n)
		}
		e.resume(ctx, bf)
		count = len(picked)
		return nil
	})
	return count, err
}

func dedupe(ids []int64) []int64 {
	seen := map[int64]bool{}
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// MarkSucceeded records an instance as succeeded without running it, so
// that what waits for it proceeds.
func (e *Engine) MarkSucceeded(ctx context.Context, backfillID, id int64, by string) error {
	return e.do(ctx, func(ctx context.Context) error {
		bf, err := e.openBackfill(ctx, backfillID)
		if err != nil {
			return err
		}
		defer e.dropIfEnded(bf)
		var n *node
		for _, c := range bf.nodes {
			if c.id == id {
				n = c
			}
		}
		if n == nil {
			return fmt.Errorf("instance %d is not in batch backfill %d: %w", id, backfillID, ErrNotFound)
		}
		if n.run != nil || ok(n.state) {
			return fmt.Errorf("instance %d is %s; stop it first or leave it: %w", id, n.state, ErrConflict)
		}
		c := record(n, store.InstanceSucceeded, "marked succeeded by "+by, e.now().UTC())
		if err := e.reopen(ctx, bf, []store.BatchInstance{c}); err != nil {
			return err
		}
		n.state, n.reason = store.InstanceSucceeded, c.Reason
		n.unqueue()
		e.publishInstance(n)
		e.released(n)
		e.resume(ctx, bf)
		return nil
	})
}

// openBackfill returns the backfill in memory, loading an ended one.
func (e *Engine) openBackfill(ctx context.Context, id int64) (*backfill, error) {
	if bf := e.s.bfs[id]; bf != nil {
		return bf, nil
	}
	rec, err := e.st.GetBatchBackfill(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("batch backfill %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return e.loadBackfill(ctx, rec)
}

// dropIfEnded takes an ended backfill, loaded for a command that did not
// reopen it, out of memory again.
func (e *Engine) dropIfEnded(bf *backfill) {
	if bf.rec.State == store.BatchRunning || bf.rec.State == store.BatchWaiting {
		return
	}
	for _, n := range bf.nodes {
		delete(e.s.nodes, n.id)
	}
	delete(e.s.bfs, bf.rec.ID)
}

// reopen writes instance changes and puts an ended backfill back to
// running.
func (e *Engine) reopen(ctx context.Context, bf *backfill, changes []store.BatchInstance) error {
	if err := e.writeInstances(ctx, changes, nil); err != nil {
		return err
	}
	// Someone acts on it again: a stop still winding down is over.
	bf.stopped = false
	if bf.rec.State == store.BatchRunning || bf.rec.State == store.BatchWaiting {
		bf.rec.Error = ""
		return nil
	}
	if err := e.st.SetBatchBackfillState(ctx, bf.rec.ID, store.BatchRunning, "", nil, nil); err != nil {
		return err
	}
	bf.rec.State, bf.rec.Error, bf.stopped = store.BatchRunning, "", false
	e.publish(Event{Kind: KindBatchBackfill, BackfillID: bf.rec.ID, State: store.BatchRunning})
	return nil
}

// resume considers every node of bf again and ends it if nothing can run.
func (e *Engine) resume(ctx context.Context, bf *backfill) {
	for _, n := range bf.nodes {
		e.consider(n)
	}
	e.markHeld(ctx, bf)
	e.checkDone(ctx, bf)
}

// RerunScheduled runs a failed, stopped or blocked instance of the
// recurring schedule again; what waits for it proceeds once it succeeds.
func (e *Engine) RerunScheduled(ctx context.Context, id int64, by string) error {
	return e.do(ctx, func(ctx context.Context) error {
		n, err := e.scheduledNode(ctx, id)
		if err != nil {
			return err
		}
		switch n.state {
		case store.InstanceFailed, store.InstanceStopped, store.InstanceBlocked:
		default:
			return fmt.Errorf("instance %d is %s; only failed, stopped and blocked instances can be re-run: %w", id, n.state, ErrConflict)
		}
		n.clearNextTry()
		c := record(n, store.InstanceWaiting, "re-run by "+by, e.now().UTC())
		c.FinishedAt = nil
		if err := e.writeInstances(ctx, []store.BatchInstance{c}, nil); err != nil {
			return err
		}
		n.state, n.reason = store.InstanceWaiting, c.Reason
		n.rerun()
		if n.mode == plan.ModeBlocked {
			n.mode = plan.ModeRun // blocked by a pause: run it as asked
		}
		e.publishInstance(n)
		e.holdBelow(ctx, n)
		e.consider(n)
		return nil
	})
}

// MarkScheduledSucceeded records an instance of the recurring schedule as
// succeeded without running it.
func (e *Engine) MarkScheduledSucceeded(ctx context.Context, id int64, by string) error {
	return e.do(ctx, func(ctx context.Context) error {
		n, err := e.scheduledNode(ctx, id)
		if err != nil {
			return err
		}
		if n.run != nil || ok(n.state) {
			return fmt.Errorf("instance %d is %s; stop it first or leave it: %w", id, n.state, ErrConflict)
		}
		c := record(n, store.InstanceSucceeded, "marked succeeded by "+by, e.now().UTC())
		if err := e.writeInstances(ctx, []store.BatchInstance{c}, nil); err != nil {
			return err
		}
		n.state, n.reason = store.InstanceSucceeded, c.Reason
		n.unqueue()
		e.publishInstance(n)
		e.holdBelow(ctx, n)
		e.released(n)
		e.forget(n)
		return nil
	})
}

// scheduledNode returns an instance of the recurring schedule in memory,
// loading it (and relinking what waits for it) when it ended before the
// daemon started.
func (e *Engine) scheduledNode(ctx context.Context, id int64) (*node, error) {
	if n := e.s.nodes[id]; n != nil {
		if n.bf != nil {
			return nil, fmt.Errorf("instance %d belongs to batch backfill %d: %w", id, n.bf.rec.ID, ErrConflict)
		}
		return n, nil
	}
	in, err := e.st.GetBatchInstance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("instance %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if in.BackfillID != 0 {
		return nil, fmt.Errorf("instance %d belongs to batch backfill %d: %w", id, in.BackfillID, ErrConflict)
	}
	n := e.newNode(in, nil)
	e.s.nodes[id] = n
	e.link(n, func(dep int64) string {
		d, err := e.st.GetBatchInstance(ctx, dep)
		if err != nil {
			return ""
		}
		return d.State
	})
	for _, d := range e.s.nodes {
		if d.bf == nil && slices.Contains(d.deps, id) {
			n.down = append(n.down, d)
		}
	}
	return n, nil
}
