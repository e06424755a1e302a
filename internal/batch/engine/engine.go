// Package engine runs recurring tasks: the recurring schedule and batch
// backfills, through one persisted dispatch path.
//
// One goroutine (the loop) owns every open instance in memory: the
// dependency counters, the concurrency groups' gates, the resource groups'
// free slots and the set of task cycles with a run in progress (so that the
// schedule and a backfill never run the same task and business time at
// once). Every state change is written to the store before the loop acts on
// it; instances are claimed (state running) in one transaction per batch
// before they start, and their ends are written in one transaction per
// batch before what depends on them is released. A restarted daemon first
// ends whatever a killed one left running (process groups, SQL sessions)
// and then runs those instances again.
package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/fanout"
	"github.com/tidemark/tidemark/internal/store"
)

// Options configure an Engine.
type Options struct {
	Store *store.Store
	Graph *dag.Graph
	// Connections of sql tasks by name.
	Connections map[string]runner.Connection
	// ResourceGroups gives each pool's concurrency.
	ResourceGroups map[string]int
	// OutputLookback bounds how old a run outside a backfill may be for its
	// outputs to be used.
	OutputLookback time.Duration
	ConfirmAbove   int
	LogLimit       int
	// Schedule runs the recurring schedule; off, only backfills run.
	Schedule bool
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
	// Host names the machine shell tasks run on (the host name when
	// empty): recovery ends a process group left running only when it ran
	// on this host (docs/cluster.md).
	Host string
	// Dispatch queues claimed attempts for the cluster's nodes to run
	// (internal/batch/remote) instead of running them in this process; it
	// needs a PostgreSQL store.
	Dispatch bool
	// WorkDir is the working directory of shell tasks ("" = the daemon's).
	WorkDir string
	// LookupEnv reads the daemon's environment for the variables a shell
	// task receives from it (os.LookupEnv when nil): PATH, HOME, LANG, TZ
	// and those the task lists under env. Nothing else reaches a task.
	LookupEnv func(string) (string, bool)
}

// Engine is the executor. Create it with New and start it with Run.
type Engine struct {
	opts  Options
	st    *store.Store
	graph *dag.Graph
	log   *slog.Logger
	now   func() time.Time
	host  string // Options.Host, or the host name
	// fakeClock: the loop cannot sleep until a time of a clock it does not
	// know, so it polls.
	fakeClock bool

	cmds   chan command
	ends   chan ending
	ready  chan struct{} // closed when recovery is done and the loop runs
	exited chan struct{} // closed when Run returns

	subs fanout.Hub[Event]

	// With Options.Dispatch: the queue's ends for the loop, and the
	// notification that a node wrote one.
	remoteEnds chan []store.DispatchedAttempt
	remoteWake chan struct{}

	// Owned by the loop goroutine.
	s *state
}

// Event kinds: an instance's change, or a batch backfill's.
const (
	KindInstance      = "instance"
	KindBatchBackfill = "batch_backfill"
)

// Event tells subscribers that an instance or a batch backfill changed.
type Event struct {
	Kind       string    `json:"kind"` // KindInstance or KindBatchBackfill
	BackfillID int64     `json:"backfill_id,omitempty"`
	InstanceID int64     `json:"instance_id,omitempty"`
	Task       string    `json:"task,omitempty"`
	State      string    `json:"state"`
	Time       time.Time `json:"time"`
	// Relayed marks an event of the batch engine another cluster node
	// leads, received from that node (Relay).
	Relayed bool `json:"-"`
}

// DefaultConcurrency is the default resource group's when the
// configuration does not declare it.
const DefaultConcurrency = 4

// New checks the options.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil || opts.Graph == nil {
		return nil, errors.New("batch engine: a store and a task graph are required")
	}
	fake := opts.Now != nil
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.LogLimit <= 0 {
		opts.LogLimit = 1 << 20
	}
	if opts.ConfirmAbove <= 0 {
		opts.ConfirmAbove = 10000
	}
	if opts.OutputLookback <= 0 {
		opts.OutputLookback = 15 * 24 * time.Hour
	}
	if opts.ResourceGroups == nil {
		opts.ResourceGroups = map[string]int{}
	}
	if _, ok := opts.ResourceGroups["default"]; !ok {
		opts.ResourceGroups["default"] = DefaultConcurrency
	}
	for _, t := range opts.Graph.Tasks() {
		if _, ok := opts.ResourceGroups[t.ResourceGroup]; t.ResourceGroup != "" && !ok {
			return nil, fmt.Errorf("batch engine: task %s uses resource group %q, which is not configured", t.ID, t.ResourceGroup)
		}
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	return &Engine{
		host:   opts.Host,
		opts:   opts,
		st:     opts.Store,
		graph:  opts.Graph,
		log:    opts.Logger.With("component", "batch"),
		now:    opts.Now,
		cmds:   make(chan command),
		ends:   make(chan ending, 1024),
		ready:  make(chan struct{}),
		exited: make(chan struct{}),

		remoteEnds: make(chan []store.DispatchedAttempt),
		remoteWake: make(chan struct{}, 1),

		fakeClock: fake,
	}, nil
}

// Ready is closed once the engine has recovered what a previous run left
// and dispatches.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// Graph returns the task graph.
func (e *Engine) Graph() *dag.Graph { return e.graph }

// Subscribe returns a channel of events and a function that ends the
// subscription and closes it. A subscriber that falls behind misses events
// (see fanout).
func (e *Engine) Subscribe() (<-chan Event, func()) {
	return e.subs.Subscribe(256)
}

// Relay hands subscribers an event of the batch engine that the cluster
// node leading it sent (docs/cluster.md).
func (e *Engine) Relay(ev Event) {
	ev.Relayed = true
	e.subs.Publish(ev)
}

func (e *Engine) publish(ev Event) {
	ev.Time = e.now().UTC()
	e.subs.Publish(ev)
}
