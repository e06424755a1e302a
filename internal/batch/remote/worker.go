package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// NodeEnv names, in a shell task's environment, the node that runs it.
const NodeEnv = "TIDEMARK_NODE"

// Options configure a Worker.
type Options struct {
	Store *store.Store
	// Node is this node's name; Host where its processes run.
	Node, Host string
	// Slots bounds the attempts this node runs at once.
	Slots       int
	Connections map[string]runner.Connection
	WorkDir     string
	LookupEnv   func(string) (string, bool)
	LogLimit    int
	Logger      *slog.Logger
	// Poll is how often the queue is read without a notification (1s
	// when 0): a lost NOTIFY delays an attempt, never loses it.
	Poll time.Duration
}

// Worker takes queued attempts while its node holds the node's worker
// lease, runs them, and writes how they ended.
type Worker struct {
	opts Options
	log  *slog.Logger
	wake chan struct{}
}

// NewWorker returns a Worker; run it as the node's work under
// WorkerLeasePrefix+node.
func NewWorker(opts Options) *Worker {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.LogLimit <= 0 {
		opts.LogLimit = 1 << 20
	}
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Worker{opts: opts, log: opts.Logger.With("component", "worker"), wake: make(chan struct{}, 1)}
}

// Lease is the worker lease's name.
func (w *Worker) Lease() string { return WorkerLeasePrefix + w.opts.Node }

// Wake makes the worker read the queue now (a notification arrived).
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// taken is one attempt this worker runs.
type taken struct {
	id      int64
	attempt int
	cancel  context.CancelFunc
	stopped atomic.Bool
}

// finished is an attempt that ended, on its way to the store.
type finished struct {
	a   store.QueuedAttempt
	res Result
}

// Run takes and runs attempts until ctx ends (the lease is lost or the
// node stops); it then ends the attempts it runs and writes them as
// interrupted, so that the leader runs them again at once. If the lease
// is gone, those writes are refused, and the leader finds the attempts
// lost when the lease expires.
func (w *Worker) Run(ctx context.Context, epoch int64) error {
	f := store.WorkerFence{Lease: w.Lease(), Node: w.opts.Node, Epoch: epoch}
	running := map[int64]*taken{}
	results := make(chan finished, w.opts.Slots)
	done := make(chan []store.QueuedAttempt, 1)
	fatal := make(chan error, 1)
	var attempts sync.WaitGroup
	written := make(chan struct{})
	go func() {
		defer close(written)
		w.writeEnds(ctx, f, results, done, fatal)
	}()
	defer func() {
		for _, t := range running {
			t.cancel()
		}
		attempts.Wait()
		close(results)
		for {
			select {
			case <-done:
			case <-written:
				return
			}
		}
	}()
	tick := time.NewTicker(w.opts.Poll)
	defer tick.Stop()
	for {
		if free := w.opts.Slots - len(running); free > 0 {
			claimed, err := w.opts.Store.ClaimBatchAttempts(ctx, f, free)
			if errors.Is(err, store.ErrFenced) {
				return err
			}
			if err != nil && ctx.Err() == nil {
				w.log.Warn("take queued attempts", logkey.Err(err))
			}
			for _, a := range claimed {
				running[a.InstanceID] = w.start(ctx, f, a, results, &attempts)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case ended := <-done:
			for _, a := range ended {
				if t := running[a.InstanceID]; t != nil && t.attempt == a.Attempt {
					delete(running, a.InstanceID)
				}
			}
			continue // slots are free: take more at once
		case err := <-fatal:
			// An end that could not be written leaves its attempt
			// claimed: giving the lease up makes the leader find it lost.
			return err
		case <-w.wake:
		case <-tick.C:
		}
		w.stopAsked(ctx, f, running)
	}
}

// writeEnds writes the ends of attempts as they come, those already in
// together in one transaction, and then frees their slots.
func (w *Worker) writeEnds(ctx context.Context, f store.WorkerFence, results <-chan finished, done chan<- []store.QueuedAttempt, fatal chan<- error) {
	// Bounds on one transaction: attempts, and their logs' bytes (each up
	// to the log limit).
	const most, mostBytes = 500, 16 << 20
	for first := range results {
		batch := []finished{first}
		size := len(first.res.Log)
	more:
		for len(batch) < most && size < mostBytes {
			select {
			case r, ok := <-results:
				if !ok {
					break more
				}
				batch = append(batch, r)
				size += len(r.res.Log)
			default:
				break more
			}
		}
		if err := w.end(ctx, f, batch); err != nil {
			select {
			case fatal <- err:
			default:
			}
		}
		ended := make([]store.QueuedAttempt, len(batch))
		for i, r := range batch {
			ended[i] = r.a
		}
		done <- ended
	}
}

// stopAsked ends the attempts the leader asked to stop.
func (w *Worker) stopAsked(ctx context.Context, f store.WorkerFence, running map[int64]*taken) {
	if len(running) == 0 {
		return
	}
	asked, err := w.opts.Store.StopRequests(ctx, f)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("read stop requests", logkey.Err(err))
		}
		return
	}
	for id, attempt := range asked {
		if t := running[id]; t != nil && t.attempt == attempt && !t.stopped.Swap(true) {
			w.log.Info("stopping an attempt as asked", logkey.Instance(id), "attempt", attempt)
			t.cancel()
		}
	}
}

// start runs one taken attempt in a goroutine of its own, which hands
// how it ended to results.
func (w *Worker) start(ctx context.Context, f store.WorkerFence, a store.QueuedAttempt, results chan<- finished, wg *sync.WaitGroup) *taken {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &taken{id: a.InstanceID, attempt: a.Attempt, cancel: cancel}
	wg.Go(func() {
		defer cancel()
		res := w.run(actx, f, a)
		// A lapse is the node's loss even when its work was told to stop
		// (its leases ran out): counted as such, not as a shutdown's.
		if ctx.Err() != nil && res.Err != "" && !t.stopped.Load() && !res.Lapsed {
			res.Interrupted = true
		}
		results <- finished{a: a, res: res}
	})
	return t
}

// run runs attempt a and returns how it ended.
func (w *Worker) run(ctx context.Context, f store.WorkerFence, a store.QueuedAttempt) Result {
	res := Result{Node: w.opts.Node}
	spec, err := Decode(a.Spec, w.opts.Connections, w.opts.LookupEnv, w.opts.WorkDir)
	if err != nil {
		res.Err, res.ExitCode = err.Error(), -1
		return res
	}
	if spec.Type == runner.TypeShell {
		spec.Env = append(spec.Env, NodeEnv+"="+w.opts.Node)
	}
	log := runner.NewLog(w.opts.LogLimit)
	out := runner.Run(ctx, spec, log, func(p runner.Proc) error {
		return w.opts.Store.StartBatchAttempt(ctx, f, a.InstanceID, a.Attempt, w.opts.Host, p.PID, p.PGID, p.StartTicks)
	})
	res.Outputs, res.ExitCode, res.Log = out.Outputs, out.ExitCode, log.String()
	if out.Err != nil {
		res.Err = out.Err.Error()
		res.Lapsed = errors.Is(out.Err, runner.ErrLapsed)
	}
	return res
}

// end writes how attempts ended, trying for a while: they are over
// whatever the store says. A refusal for the fence, or of an attempt no
// longer this node's, is final; a store that keeps failing is an error.
func (w *Worker) end(ctx context.Context, f store.WorkerFence, batch []finished) error {
	ends := make([]store.AttemptEnd, 0, len(batch))
	for _, r := range batch {
		data, err := json.Marshal(r.res)
		if err != nil {
			return fmt.Errorf("encode the end of instance %d: %w", r.a.InstanceID, err)
		}
		ends = append(ends, store.AttemptEnd{InstanceID: r.a.InstanceID, Attempt: r.a.Attempt, Result: string(data)})
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for {
		refused, err := w.opts.Store.EndBatchAttempts(wctx, f, ends)
		if errors.Is(err, store.ErrFenced) {
			w.log.Warn("the ends of attempts were not recorded: this node's worker lease is gone; the leader runs them again", "attempts", len(ends), logkey.Err(err))
			return nil
		}
		if err == nil {
			for _, id := range refused {
				w.log.Warn("an attempt's end was not recorded: it is no longer this node's", logkey.Instance(id))
			}
			return nil
		}
		w.log.Warn("record the ends of attempts; retrying", "attempts", len(ends), logkey.Err(err))
		select {
		case <-wctx.Done():
			return fmt.Errorf("worker of node %s: the ends of %d attempt(s) could not be recorded for 30s: giving its lease up so that the leader runs them again: %w", f.Node, len(ends), err)
		case <-time.After(time.Second):
		}
	}
}
