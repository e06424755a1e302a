package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// In a cluster (Options.Dispatch) the engine runs nothing itself (an
// attempt that cannot run fails in place): it queues each attempt it
// claims in the store, in the same transaction as the claim, and the
// worker of any node with a free slot runs it (internal/batch/remote). The engine still decides everything —
// resource groups, concurrency groups and one run per task cycle hold
// across nodes because one loop gates them — and learns of ends from the
// queue: written results, or attempts whose node lost its worker lease.

// errNodeLost marks an attempt whose node lost its worker lease before
// writing how it ended.
var errNodeLost = errors.New("its node stopped renewing its lease")

// writeInstances writes instance records: with Dispatch, queueing the
// attempts in queue and ending the queue entries of instances that left
// "running", in the same transaction.
func (e *Engine) writeInstances(ctx context.Context, changes []store.BatchInstance, queue []store.QueuedAttempt) error {
	if e.opts.Dispatch {
		return e.st.WriteBatchDispatch(ctx, changes, queue)
	}
	return e.st.UpdateBatchInstances(ctx, changes)
}

// queueEntry encodes a claimed attempt for the nodes.
func (e *Engine) queueEntry(n *node, spec runner.Spec) (store.QueuedAttempt, error) {
	data, err := remote.Encode(spec, e.inheritedEnv(n))
	return store.QueuedAttempt{InstanceID: n.id, Attempt: n.attempt, Spec: data}, err
}

// startRemote marks n as running on some node: stopping it asks the
// store.
func (e *Engine) startRemote(ctx context.Context, n *node) {
	id, attempt := n.id, n.attempt
	n.run.remote = true
	n.run.cancel = func() {
		go e.stopRemote(context.WithoutCancel(ctx), id, attempt)
	}
}

// stopRemote asks the node running an attempt to end it; an attempt no
// node took yet ends at once, never having run, its end read from the
// queue like any other.
func (e *Engine) stopRemote(ctx context.Context, id int64, attempt int) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	unclaimed, err := e.st.StopBatchAttempt(ctx, id, attempt, `{"error":"stopped before a node took it","exit_code":-1}`)
	if err != nil {
		e.log.Error("ask a node to stop an attempt; its node runs it to its end", logkey.Instance(id), logkey.Err(err))
		return
	}
	if unclaimed {
		e.WakeDispatch()
	}
}

// WakeDispatch makes the engine read the queue's ends now (a node wrote
// one and notified).
func (e *Engine) WakeDispatch() {
	select {
	case e.remoteWake <- struct{}{}:
	default:
	}
}

// tidyQueueEvery is how many rows of ended attempts the leader reads
// between vacuums of the queue (each costs a few milliseconds on a queue
// of a few hundred rows). An end is counted each time it is read: one
// lost with its node, read every second through its grace period, too.
const tidyQueueEvery = 1000

// watchQueue hands the loop the queue's ended and lost attempts, on each
// notification and at least every second, until ctx ends.
func (e *Engine) watchQueue(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	untidy := 0 // rows of ends read since the queue was last vacuumed
	for {
		out, err := e.st.ListBatchDispatch(ctx, remote.WorkerLeasePrefix, true)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("read the ends of queued attempts", logkey.Err(err))
		}
		if untidy += len(out); untidy >= tidyQueueEvery {
			if err := e.st.TidyBatchDispatch(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("vacuum the queue of attempts", logkey.Err(err))
			}
			untidy = 0
		}
		if len(out) > 0 {
			select {
			case e.remoteEnds <- out:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.remoteWake:
		case <-tick.C:
		}
	}
}

// remoteEnded turns the queue's ends into the loop's: each once, for the
// attempt in memory. An attempt lost with its node has its leftovers ended
// when they ran on this host; elsewhere it runs again once its node's
// grace period is over.
func (e *Engine) remoteEnded(ctx context.Context, out []store.DispatchedAttempt) []ending {
	var ends []ending
	now := e.now()
	for _, a := range out {
		n := e.s.nodes[a.InstanceID]
		if n == nil || n.run == nil || !n.run.remote || n.run.delivered || n.attempt != a.Attempt {
			continue // already taken in, or of an earlier attempt
		}
		if !n.run.lostMarked {
			n.run.host = a.Host
			n.run.proc.PID, n.run.proc.PGID, n.run.proc.StartTicks = a.PID, a.PGID, a.ProcStart
		}
		end := ending{n: n, attempt: a.Attempt}
		if a.Result != "" && !n.run.lostMarked {
			r, err := remote.DecodeResult(a.Result)
			if err != nil {
				r = remote.Result{Err: err.Error(), ExitCode: -1}
			}
			end.res, end.log = r.RunnerResult(), r.Log
			if r.Interrupted {
				n.clearNextTry()
			}
		} else {
			res, ready, err := e.lost(ctx, n, a, now)
			if err != nil {
				e.log.Error("take in a lost attempt; trying again", logkey.Instance(n.id), logkey.Err(err))
				continue
			}
			if !ready {
				continue
			}
			end.res = res
		}
		n.run.delivered = true
		ends = append(ends, end)
	}
	return ends
}

// lost takes in an attempt whose node lost its worker lease. It is marked
// lost first (which also revokes the lease's epoch, so that the node can
// neither start nor end it any more), then what it left running is ended:
// its processes when they ran on this host — elsewhere they are its
// node's to end (docs/cluster.md), so the attempt, and its task cycle,
// is held until the runner's grace period has passed since the loss was
// seen. ready is false until then, or when the node wrote an end or
// renewed its lease after all (the next read of the queue takes that in).
func (e *Engine) lost(ctx context.Context, n *node, a store.DispatchedAttempt, now time.Time) (res runner.Result, ready bool, err error) {
	if !n.run.lostMarked {
		if elsewhere := n.run.host != e.host; elsewhere { // "" too: it may have run anywhere
			// The queue is read every second: a gap means the node held
			// its lease again meanwhile, and the wait starts over.
			if n.run.lostSeen.IsZero() || now.Sub(n.run.lostSeen) > 3*time.Second {
				n.run.lostAt = now
			}
			n.run.lostSeen = now
			if now.Before(n.run.lostAt.Add(runner.GracePeriod + time.Second)) {
				return res, false, nil
			}
		}
		// Interrupted, so that a next leader reading the mark (this one may
		// die before it records the end) runs it again too.
		data, err := json.Marshal(remote.Result{Err: errNodeLost.Error(), ExitCode: -1, Node: a.Node, Interrupted: true})
		if err != nil {
			return res, false, err
		}
		marked, at, err := e.st.MarkAttemptLost(ctx, a, remote.WorkerLeasePrefix+a.Node, string(data))
		if err != nil || !marked {
			return res, false, err
		}
		n.run.lostMarked = true
		n.run.host = at.Host
		n.run.proc.PID, n.run.proc.PGID, n.run.proc.StartTicks = at.PID, at.PGID, at.ProcStart
	}
	msg, _, err := e.endLeftovers(ctx, n)
	if err != nil {
		return res, false, err
	}
	n.clearNextTry()
	return runner.Result{ExitCode: -1, Err: fmt.Errorf("%w (node %s)%s", errNodeLost, a.Node, msg)}, true, nil
}

// adoptRunning takes the attempts a previous leader queued back into
// memory as running: they run on, and their ends come from the queue.
// The others (none in a cluster, or a lone daemon's) are recovered.
func (e *Engine) adoptRunning(ctx context.Context) (map[int64]bool, error) {
	adopted := map[int64]bool{}
	if !e.opts.Dispatch {
		return adopted, nil
	}
	queued, err := e.st.ListBatchDispatch(ctx, remote.WorkerLeasePrefix, false)
	if err != nil {
		return nil, err
	}
	for _, a := range queued {
		n := e.s.nodes[a.InstanceID]
		if n == nil || n.state != store.InstanceRunning || n.attempt != a.Attempt {
			continue
		}
		e.startRemote(ctx, n)
		if a.Stop {
			n.run.stopReason = "stopped (asked of the previous batch leader)"
		}
		e.occupy(n)
		adopted[n.id] = true
	}
	return adopted, nil
}

// occupy takes n's slot and cycle for its running attempt.
func (e *Engine) occupy(n *node) {
	e.s.holding[n.task.ID] = append(e.s.holding[n.task.ID], n)
	e.s.free[n.rg]--
	if n.bf != nil {
		n.bf.running++
	}
}
