package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// env is an engine over a fresh SQLite store, running until the test ends.
type env struct {
	t   *testing.T
	st  *store.Store
	e   *engine.Engine
	dir string
	// stop ends the engine (it also ends when the test does).
	stop func()
}

// task returns a task of the default project with a daily schedule.
func task(t *testing.T, name, typ, command string, upstream ...string) dag.Task {
	t.Helper()
	s, err := calendar.Parse("daily", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var ups []string
	for _, u := range upstream {
		ups = append(ups, "p."+u)
	}
	return dag.Task{ID: "p." + name, Name: name, Project: "p", Type: typ, Command: command,
		Schedule: s, Upstream: ups, ResourceGroup: "default"}
}

type envOpts struct {
	groups   map[string]int
	conns    map[string]runner.Connection
	schedule bool
	now      func() time.Time
	storeURL string
	host     string
	dispatch bool // queue attempts for workers (a cluster's leader)
}

func newEnv(t *testing.T, tasks []dag.Task, o envOpts) *env {
	t.Helper()
	dir := t.TempDir()
	url := o.storeURL
	if url == "" {
		url = "sqlite://" + filepath.Join(dir, "meta.db")
	}
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g, err := dag.New(tasks)
	if err != nil {
		t.Fatal(err)
	}
	groups := o.groups
	if groups == nil {
		groups = map[string]int{"default": 4}
	}
	e, err := engine.New(engine.Options{Store: st, Graph: g, ResourceGroups: groups, Connections: o.conns,
		Schedule: o.schedule, Now: o.now, WorkDir: dir, Logger: slog.New(slog.DiscardHandler), Host: o.host, Dispatch: o.dispatch})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("engine run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-e.Ready():
	case err := <-done:
		t.Fatalf("engine ended before it was ready: %v", err)
	}
	return &env{t: t, st: st, e: e, dir: dir, stop: stop}
}

func day(s string) calendar.Date {
	d, err := calendar.ParseDate(s)
	if err != nil {
		panic(err)
	}
	return d
}

// submit submits a backfill and fails the test on error.
func (v *env) submit(req plan.Request) store.BatchBackfill {
	v.t.Helper()
	rec, err := v.e.Submit(v.t.Context(), req, "test", nil)
	if err != nil {
		v.t.Fatalf("submit: %v", err)
	}
	return rec
}

var terminal = map[string]bool{store.BatchSucceeded: true, store.BatchFailed: true, store.BatchStopped: true, store.BatchBlocked: true}

// wait returns the backfill once it has ended. Events wake it; the store is
// the truth.
func (v *env) wait(id int64) store.BatchBackfill {
	v.t.Helper()
	return v.waitFor(id, func(b store.BatchBackfill) bool { return terminal[b.State] })
}

func (v *env) waitFor(id int64, cond func(store.BatchBackfill) bool) store.BatchBackfill {
	v.t.Helper()
	var b store.BatchBackfill
	v.until(fmt.Sprintf("backfill %d to reach the expected state", id), func() bool {
		var err error
		b, err = v.st.GetBatchBackfill(v.t.Context(), id)
		if err != nil {
			v.t.Fatal(err)
		}
		return cond(b)
	})
	return b
}

// until returns once cond holds. The engine's events wake it; a slow tick
// covers a missed event.
func (v *env) until(what string, cond func() bool) {
	v.t.Helper()
	events, cancel := v.e.Subscribe()
	defer cancel()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-events:
		case <-tick.C:
		case <-timeout.C:
			v.t.Fatalf("timed out waiting for %s (%v)", what, v.debug())
		}
	}
}

// instances returns every instance of a backfill.
func (v *env) instances(id int64) []store.BatchInstance {
	v.t.Helper()
	out, err := v.st.ListBatchInstances(v.t.Context(), store.BatchInstanceFilter{BackfillID: id, Limit: 100000})
	if err != nil {
		v.t.Fatal(err)
	}
	return out
}

func byTaskDate(ins []store.BatchInstance) map[string]store.BatchInstance {
	m := map[string]store.BatchInstance{}
	for _, in := range ins {
		m[in.Task+" "+in.BizTime.Format("2006-01-02")] = in
	}
	return m
}

func rangeReq(task, from, to string) plan.Request {
	return plan.Request{Task: task, Dates: plan.Dates{Mode: plan.DatesRange, From: day(from), To: day(to)}}
}

// debug summarises the store's backfills for a failure message.
func (v *env) debug() string {
	bfs, _ := v.st.ListBatchBackfills(context.Background(), store.BatchBackfillFilter{})
	var out []string
	for _, b := range bfs {
		out = append(out, fmt.Sprintf("backfill %d %s %v %s", b.ID, b.State, b.States, b.Error))
	}
	return strings.Join(out, "; ")
}
