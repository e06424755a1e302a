package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
)

// BenchmarkBatch prints the batch engine's figures: planning a backfill
// of 365 days over a generated DAG of 2,000 daily tasks (730,000
// instances), recording it, and running it with no-op tasks through the
// normal persisted dispatch path, on SQLite and on PostgreSQL metadata;
// then shell `true` tasks. TIDEMARK_BENCH_BATCH_DAYS shortens the range;
// TIDEMARK_BENCH_BATCH_RECOVERY_ONLY=1 times only a restarted engine.
func BenchmarkBatch(b *testing.B) {
	pgserver.ScrubEnv()
	days := benchDays(b, "TIDEMARK_BENCH_BATCH_DAYS", 365)
	ctx := context.Background()
	tasks := generatedDAG(2000, dag.TypeNoop, "")
	graph, err := dag.New(tasks)
	if err != nil {
		b.Fatal(err)
	}
	req := plan.Request{Task: tasks[0].ID, Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverDescendants},
		Dates:   plan.Dates{From: calendar.Date{Year: 2024, Month: 1, Day: 1}, To: calendar.Date{Year: 2024, Month: 1, Day: 1}.AddDays(days - 1)},
		Confirm: true}
	start := time.Now()
	p, err := plan.Build(plan.Input{Graph: graph, Request: req, Now: time.Now(), Sequence: 1})
	if err != nil {
		b.Fatal(err)
	}
	planTime := time.Since(start)
	fmt.Printf("batch plan: %d tasks x %d days = %d instances, %d dependencies, planned in %.2f s\n",
		len(tasks), days, len(p.Instances), countDeps(p), planTime.Seconds())

	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Stop()
	pgURL, err := pg.CreateDatabase(ctx, "batch_meta")
	if err != nil {
		b.Fatal(err)
	}
	recoveryOnly := os.Getenv("TIDEMARK_BENCH_BATCH_RECOVERY_ONLY") != ""
	for _, meta := range []struct{ name, url string }{
		{"sqlite", "sqlite://" + filepath.Join(b.TempDir(), "meta.db")},
		{"postgres", pgURL},
	} {
		if recoveryOnly {
			break
		}
		peak, canReset := "peak RSS unknown", resetPeak() == nil
		r, err := runBatch(ctx, meta.url, graph, req, 64)
		if err != nil {
			b.Fatalf("%s: %v", meta.name, err)
		}
		if hwm, err := procStatus("VmHWM"); err == nil && canReset {
			peak = fmt.Sprintf("peak RSS %d MiB", hwm>>20)
		}
		fmt.Printf("batch no-op on %s metadata: recorded in %.1f s; %d instances dispatched in %.1f s = %.0f instances/s (%.0f µs each); %s\n",
			meta.name, r.recorded.Seconds(), r.instances, r.ran.Seconds(), r.rate(), 1e6/r.rate(), peak)
	}
	// Recovery: an engine started on a store holding the same backfill,
	// submitted to start in an hour, so every instance is open.
	later := req
	at := time.Now().Add(time.Hour)
	later.StartAt = &at
	pgLater, err := pg.CreateDatabase(ctx, "batch_meta_later")
	if err != nil {
		b.Fatal(err)
	}
	for _, meta := range []struct{ name, url string }{
		{"sqlite", "sqlite://" + filepath.Join(b.TempDir(), "later.db")},
		{"postgres", pgLater},
	} {
		open, ready, err := readyWithOpen(ctx, meta.url, graph, later)
		if err != nil {
			b.Fatalf("%s: %v", meta.name, err)
		}
		fmt.Printf("batch engine on %s metadata with %d open instances: ready in %.2f s\n", meta.name, open, ready.Seconds())
	}
	if recoveryOnly {
		return
	}

	shell := generatedDAG(20, dag.TypeShell, "true")
	sg, err := dag.New(shell)
	if err != nil {
		b.Fatal(err)
	}
	sreq := req
	sreq.Task = shell[0].ID
	sreq.Dates.To = sreq.Dates.From.AddDays(99)
	r, err := runBatch(ctx, "sqlite://"+filepath.Join(b.TempDir(), "shell.db"), sg, sreq, 8)
	if err != nil {
		b.Fatalf("shell: %v", err)
	}
	fmt.Printf("batch shell `true` on sqlite metadata, 8 at once: %d instances in %.1f s = %.0f instances/s (%.1f ms each)\n",
		r.instances, r.ran.Seconds(), r.rate(), 1e3/r.rate())
}

type batchRun struct {
	instances     int
	recorded, ran time.Duration
}

func (r batchRun) rate() float64 { return float64(r.instances) / r.ran.Seconds() }

// runBatch submits req to an engine over the store at url and waits until
// the backfill has ended.
func runBatch(ctx context.Context, url string, g *dag.Graph, req plan.Request, concurrency int) (batchRun, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return batchRun{}, err
	}
	defer st.Close()
	e, err := newEngine(st, g, concurrency)
	if err != nil {
		return batchRun{}, err
	}
	return runEngine(ctx, st, e, req)
}

// newEngine is a quiet engine over st running up to concurrency
// instances at once.
func newEngine(st *store.Store, g *dag.Graph, concurrency int) (*engine.Engine, error) {
	return engine.New(engine.Options{Store: st, Graph: g, ResourceGroups: map[string]int{"default": concurrency},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WorkDir: os.TempDir()})
}

// readyWithOpen submits req (which starts later) through one engine on
// the store at url, then times how long a second engine, started on that
// store as a restarted daemon's would be, takes to be ready.
func readyWithOpen(ctx context.Context, url string, g *dag.Graph, req plan.Request) (open int, ready time.Duration, err error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	// run starts e and returns once it is ready, with the function that
	// stops it.
	run := func(e *engine.Engine) (stop func(), err error) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(rctx) }()
		select {
		case <-e.Ready():
			return func() { cancel(); <-done }, nil
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("the engine ended before it was ready: %w", err)
		}
	}
	first, err := newEngine(st, g, 64)
	if err != nil {
		return 0, 0, err
	}
	stop, err := run(first)
	if err != nil {
		return 0, 0, err
	}
	rec, err := first.Submit(ctx, req, "bench", nil)
	stop()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	second, err := newEngine(st, g, 64)
	if err != nil {
		return 0, 0, err
	}
	if stop, err = run(second); err != nil {
		return 0, 0, err
	}
	ready = time.Since(start)
	stop()
	return rec.Instances, ready, nil
}

// runEngine runs e, submits req and waits until the backfill has ended.
func runEngine(ctx context.Context, st *store.Store, e *engine.Engine, req plan.Request) (batchRun, error) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { cancel(); <-done }()
	<-e.Ready()
	events, unsubscribe := e.Subscribe()
	defer unsubscribe()
	start := time.Now()
	rec, err := e.Submit(ctx, req, "bench", nil)
	if err != nil {
		return batchRun{}, err
	}
	recorded := time.Since(start)
	for {
		b, err := st.GetBatchBackfill(ctx, rec.ID)
		if err != nil {
			return batchRun{}, err
		}
		switch b.State {
		case store.BatchSucceeded:
			return batchRun{instances: b.Instances, recorded: recorded, ran: time.Since(start) - recorded}, nil
		case store.BatchFailed, store.BatchStopped, store.BatchBlocked:
			return batchRun{}, fmt.Errorf("backfill ended %s: %s", b.State, b.Error)
		}
		wait(events, 500*time.Millisecond)
	}
}

// wait returns at the next backfill event or after d.
func wait(events <-chan engine.Event, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.Kind == engine.KindBatchBackfill {
				return
			}
		case <-t.C:
			return
		}
	}
}

func countDeps(p *plan.Plan) int {
	n := 0
	for _, in := range p.Instances {
		n += len(in.Deps)
	}
	return n
}

// generatedDAG is a layered random DAG of n daily tasks (fixed seed): a
// root, then layers of 100, each task with one upstream in the layer above
// and mostly one more anywhere above.
func generatedDAG(n int, typ, command string) []dag.Task {
	r := rand.New(rand.NewPCG(2025, 365))
	sched, err := calendar.Parse("daily", time.UTC)
	if err != nil {
		panic(err)
	}
	layer := func(i int) int {
		if i == 0 {
			return 0
		}
		return 1 + (i-1)/100
	}
	first := func(l int) int {
		if l == 0 {
			return 0
		}
		return 1 + (l-1)*100
	}
	id := func(i int) string { return fmt.Sprintf("p.t%04d", i) }
	tasks := make([]dag.Task, n)
	for i := range tasks {
		t := dag.Task{ID: id(i), Name: fmt.Sprintf("t%04d", i), Project: "p", Type: typ, Command: command,
			Schedule: sched, ResourceGroup: "default"}
		if i > 0 {
			lo, hi := first(layer(i)-1), first(layer(i))
			a := lo + r.IntN(hi-lo)
			t.Upstream = []string{id(a)}
			if c := r.IntN(hi); c != a && r.IntN(10) > 0 {
				t.Upstream = append(t.Upstream, id(c))
			}
		}
		tasks[i] = t
	}
	return tasks
}

// benchDays is the days the environment variable name asks for (1-365),
// or def when it is unset.
func benchDays(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 365 {
		b.Fatalf("%s=%q: use 1-365", name, v)
	}
	return n
}

// BenchmarkClusterDispatch prints the batch engine's dispatch through a
// cluster's queue (docs/cluster.md): a leader queues each claimed no-op
// attempt in the PostgreSQL store and the workers of one, then three,
// nodes (each its own store connections, in this process) take, run and
// end them; the baseline is the same backfill run by a lone engine on the
// same store, in the same run. 200 tasks over 300 days (60,000 instances:
// long enough for what the queue leaves behind to show);
// TIDEMARK_BENCH_DISPATCH_DAYS changes the days.
func BenchmarkClusterDispatch(b *testing.B) {
	pgserver.ScrubEnv()
	days := benchDays(b, "TIDEMARK_BENCH_DISPATCH_DAYS", 300)
	ctx := context.Background()
	tasks := generatedDAG(200, dag.TypeNoop, "")
	graph, err := dag.New(tasks)
	if err != nil {
		b.Fatal(err)
	}
	first := calendar.Date{Year: 2024, Month: 1, Day: 1}
	req := plan.Request{Task: tasks[0].ID, Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverDescendants},
		Dates:   plan.Dates{From: first, To: first.AddDays(days - 1)},
		Confirm: true}
	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Stop()
	var base batchRun
	for _, nodes := range []int{0, 1, 3} {
		url, err := pg.CreateDatabase(ctx, fmt.Sprintf("dispatch_%d", nodes))
		if err != nil {
			b.Fatal(err)
		}
		var r batchRun
		if nodes == 0 {
			r, err = runBatch(ctx, url, graph, req, 64)
			base = r
		} else {
			r, err = runClusterBatch(ctx, url, graph, req, 64, nodes)
		}
		if err != nil {
			b.Fatalf("%d nodes: %v", nodes, err)
		}
		if nodes == 0 {
			fmt.Printf("batch no-op dispatch, lone engine on postgres metadata (baseline): %d instances in %.1f s = %.0f instances/s\n",
				r.instances, r.ran.Seconds(), r.rate())
			continue
		}
		fmt.Printf("batch no-op dispatch through the cluster queue, %d node(s): %d instances in %.1f s = %.0f instances/s (%.2fx the lone engine)\n",
			nodes, r.instances, r.ran.Seconds(), r.rate(), r.rate()/base.rate())
	}
}

// runClusterBatch is runBatch with the engine queueing its attempts for
// the workers of nodes nodes.
func runClusterBatch(ctx context.Context, url string, g *dag.Graph, req plan.Request, concurrency, nodes int) (batchRun, error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the Wait
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var workers []func()
	for i := range nodes {
		st, err := store.Open(ctx, url)
		if err != nil {
			return batchRun{}, err
		}
		defer st.Close()
		name := fmt.Sprintf("n%d", i)
		w := remote.NewWorker(remote.Options{Store: st, Node: name, Host: "bench", Slots: concurrency, Logger: quiet})
		epoch, ok, err := st.AcquireLease(ctx, w.Lease(), name, time.Hour)
		if err != nil || !ok {
			return batchRun{}, fmt.Errorf("worker lease of %s: %v", name, err)
		}
		workers = append(workers, w.Wake)
		wg.Go(func() { _ = w.Run(rctx, epoch) })
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return batchRun{}, err
	}
	defer st.Close()
	e, err := engine.New(engine.Options{Store: st, Graph: g, ResourceGroups: map[string]int{"default": concurrency},
		Logger: quiet, Dispatch: true})
	if err != nil {
		return batchRun{}, err
	}
	// As the daemon's listener does: ends wake the leader, the rest the
	// workers (the nodes share one listener here).
	wg.Go(func() {
		_ = st.Listen(rctx, store.BatchDispatchChannel, nil, func(payload string) {
			if payload != store.NotifyQueued {
				e.WakeDispatch()
			}
			if payload != store.NotifyEnded {
				for _, wake := range workers {
					wake()
				}
			}
		})
	})
	return runEngine(ctx, st, e, req)
}
