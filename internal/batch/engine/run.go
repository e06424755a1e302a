package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// command is a function the loop runs for a caller.
type command struct {
	fn   func(ctx context.Context) error
	done chan error
}

// do runs fn in the loop and returns its error.
func (e *Engine) do(ctx context.Context, fn func(ctx context.Context) error) error {
	c := command{fn: fn, done: make(chan error, 1)}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-e.exited:
		return errStopped
	case <-e.ready:
	}
	select {
	case e.cmds <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.exited:
		return errStopped
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errStopped answers commands once the loop has ended.
var errStopped = errors.New("the batch engine has stopped")

// Run recovers what a previous run left and then dispatches until ctx
// ends. On the way out it stops the attempts it started and records them
// as waiting, so the next start runs them again.
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.exited)
	sched, err := e.startUp(ctx)
	if err != nil {
		return err
	}
	close(e.ready)
	if e.opts.Dispatch {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go e.watchQueue(wctx)
	}
	e.log.Info("batch engine running", "tasks", len(e.graph.Tasks()), "open_backfills", len(e.s.bfs))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wake, ended := e.step(ctx, sched)
		if ended || len(e.s.dry) > 0 || e.anyReady() {
			continue // ends may have readied or timed more: look again at once
		}
		timer.Reset(e.sleepFor(wake))
		select {
		case <-ctx.Done():
			return e.shutdown(ctx)
		case c := <-e.cmds:
			c.done <- c.fn(ctx)
		case end := <-e.ends:
			e.finish(ctx, e.drainEnds(end), false)
		case out := <-e.remoteEnds:
			if ends := e.remoteEnded(ctx, out); len(ends) > 0 {
				e.finish(ctx, ends, false)
			}
		case <-timer.C:
			e.checkAll(ctx) // ends a backfill whose end could not be written before
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// startUp loads what is open, ends what a killed daemon left running and
// queues what is ready, before anything is dispatched.
func (e *Engine) startUp(ctx context.Context) (*scheduler, error) {
	e.s = newState(e.opts.ResourceGroups)
	if err := e.loadOpen(ctx); err != nil {
		return nil, fmt.Errorf("batch engine: load open instances: %w", err)
	}
	if err := e.recover(ctx); err != nil {
		return nil, fmt.Errorf("batch engine: recover interrupted instances: %w", err)
	}
	sched := newScheduler(e)
	if e.opts.Schedule {
		if err := sched.init(ctx); err != nil {
			return nil, fmt.Errorf("batch engine: start the recurring schedule: %w", err)
		}
	}
	for _, n := range e.s.nodes {
		e.consider(n)
	}
	// A daemon can die between an instance's end and its backfill's.
	e.checkAll(ctx)
	return sched, nil
}

// step creates due scheduled instances, starts due backfills, wakes timed
// nodes, dispatches, and records no-op ends; it returns the next time
// something is due (zero when nothing is) and whether it recorded ends.
func (e *Engine) step(ctx context.Context, sched *scheduler) (wake time.Time, ended bool) {
	if e.opts.Schedule {
		wake = earliest(wake, sched.tick(ctx))
	}
	wake = earliest(wake, e.startDue(ctx))
	wake = earliest(wake, e.wakeTimers())
	e.dispatch(ctx)
	if len(e.s.localEnds) == 0 {
		return wake, false
	}
	ends := e.s.localEnds
	e.s.localEnds = nil
	e.finish(ctx, ends, false)
	return wake, true
}

// sleepFor is how long the loop may wait for outside events before wake.
func (e *Engine) sleepFor(wake time.Time) time.Duration {
	if wake.IsZero() {
		return time.Hour
	}
	d := max(time.Until(wake), time.Millisecond)
	// Under a fake clock time.Until is meaningless; poll briefly.
	if e.fakeClock && d > 50*time.Millisecond {
		d = 50 * time.Millisecond
	}
	return d
}

// drainEnds collects the ends already waiting, up to a batch.
func (e *Engine) drainEnds(first ending) []ending {
	ends := []ending{first}
	for len(ends) < claimBatch {
		select {
		case more := <-e.ends:
			ends = append(ends, more)
		default:
			return ends
		}
	}
	return ends
}

// checkAll ends every running backfill in which nothing more can happen.
func (e *Engine) checkAll(ctx context.Context) {
	for _, bf := range e.s.bfs {
		e.checkDone(ctx, bf)
	}
}

// anyReady reports whether a queue holds a node that could be claimed now.
func (e *Engine) anyReady() bool {
	for rg, q := range e.s.queues {
		if q.Len() > 0 && e.s.free[rg] > 0 {
			return true
		}
	}
	return false
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// shutdown stops every running attempt and records it as waiting; ctx has
// ended, so the records are written under a timeout of their own.
func (e *Engine) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	n := 0
	for _, nd := range e.s.nodes {
		// A node's attempt runs on: the next leader takes it over.
		if nd.run != nil && nd.run.cancel != nil && !nd.run.remote {
			nd.run.cancel()
			n++
		}
	}
	ends := make([]ending, 0, n)
	for len(ends) < n {
		select {
		case end := <-e.ends:
			ends = append(ends, end)
		case <-ctx.Done():
			return fmt.Errorf("batch engine: %d attempts did not end within 30s of shutdown; the next start ends them", n-len(ends))
		}
	}
	if len(ends) > 0 {
		e.finish(ctx, ends, true)
	}
	return nil
}

// recover ends what a killed daemon left running — the recorded process
// group of a shell task, the session of a SQL task — and puts those
// instances back to waiting, before anything is dispatched. In a cluster,
// attempts queued for the nodes are adopted instead: they run on.
func (e *Engine) recover(ctx context.Context) error {
	adopted, err := e.adoptRunning(ctx)
	if err != nil {
		return fmt.Errorf("read queued attempts: %w", err)
	}
	var changes []store.BatchInstance
	now := e.now().UTC()
	for _, n := range e.s.nodes {
		if n.state != store.InstanceRunning || adopted[n.id] {
			continue
		}
		msg, elsewhere, err := e.endLeftovers(ctx, n)
		if err != nil {
			return err
		}
		msg = fmt.Sprintf("attempt %d was interrupted (the daemon stopped)", n.attempt) + msg
		e.log.Warn("re-running an interrupted instance", logkey.Instance(n.id), logkey.Task(n.task.ID), "detail", msg)
		n.run = nil
		n.state, n.reason = store.InstanceWaiting, msg+"; it runs again"
		if elsewhere {
			// Its node sent SIGTERM when it stopped, and SIGKILL a grace
			// period later: run it again only once that is over.
			n.edit().nextTry = now.Add(runner.GracePeriod + time.Second)
		}
		changes = append(changes, record(n, store.InstanceWaiting, n.reason, now))
	}
	if len(changes) == 0 {
		return nil
	}
	return e.writeInstances(ctx, changes, nil)
}

// endLeftovers ends what an interrupted attempt of n may have left
// running: its process groups when they ran on this host (elsewhere, their
// pids mean nothing here: the node ended them before its lease could
// expire, docs/cluster.md), and its SQL session. msg tells what was done.
func (e *Engine) endLeftovers(ctx context.Context, n *node) (msg string, elsewhere bool, err error) {
	elsewhere = n.run.host != "" && n.run.host != e.host
	if elsewhere {
		msg += fmt.Sprintf("; it ran on host %s, whose node ended it", n.run.host)
	}
	if p := n.run.proc; p.PGID != 0 && !elsewhere {
		ended, err := runner.EndProcessGroup(p)
		if err != nil {
			return "", false, fmt.Errorf("end the process group %d of instance %d: %w", p.PGID, n.id, err)
		}
		if ended {
			msg += fmt.Sprintf("; its process group %d was still running and was ended", p.PGID)
		}
	}
	if n.seen().tag != "" && n.task.Type == dag.TypeShell && !elsewhere {
		// The group may not have been recorded: the daemon can die
		// between starting a script and writing it down. The tag in
		// the script's environment finds it and its children.
		k, err := runner.EndTagged(n.seen().tag)
		if err != nil {
			return "", false, fmt.Errorf("end the processes of instance %d: %w", n.id, err)
		}
		if k > 0 {
			msg += fmt.Sprintf("; %d process group(s) of it were still running and were ended", k)
		}
	}
	if n.seen().tag != "" && n.task.Type == dag.TypeSQL {
		if conn, found := e.opts.Connections[n.task.Connection]; found {
			k, err := runner.CancelSQL(ctx, conn, n.seen().tag)
			if err != nil {
				return "", false, fmt.Errorf("cancel the SQL of instance %d on %s: %w", n.id, conn.Name, err)
			}
			if k > 0 {
				msg += "; its SQL session was still running and was terminated"
			}
		}
	}
	return msg, elsewhere, nil
}
