// Package daemon wires a configuration into a running tidemark: the
// metadata store, one stream per configured stream, the batch engine, the
// metrics registry and the HTTP API.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/cluster"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/console"
	"github.com/tidemark/tidemark/internal/lineage"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/metrics"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types streams open
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// Daemon is a configured, not yet running tidemark.
type Daemon struct {
	cfg     *config.Config
	st      *store.Store
	log     *slog.Logger
	streams []*stream.Stream
	batch   *engine.Engine
	lineage *lineage.Watcher // nil when no tasks are configured
	metrics *metrics.Registry
	api     *api.Server
	claim   *store.Claim    // nil unless New was given ClaimStore
	member  *cluster.Member // nil unless the configuration has a cluster section
	worker  *remote.Worker  // runs queued attempts on a cluster node with tasks
	// hold is a cluster node's shared hold on the store (holdStore).
	hold     *store.Claim
	batchLed atomic.Bool // a cluster node's engine ran (it runs once)
	// batchEnded receives the batch engine's end on a cluster node.
	batchEnded chan error
	// Ready is closed once the API listens; Addr is then its address.
	Ready chan struct{}
	Addr  string
}

// Option changes what New does.
type Option func(*settings)

type settings struct {
	claim bool
}

// ClaimStore makes New claim the metadata store before it records anything,
// as `tidemark run` does: a daemon already running on the store makes New
// fail with a *store.ClaimedError naming it, and a claim lost while running
// stops Run. Without it (the demo, tests) the store is shared.
func ClaimStore() Option { return func(s *settings) { s.claim = true } }

// New opens the metadata store and builds the streams.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts stream.Options, options ...Option) (*Daemon, error) {
	var set settings
	for _, o := range options {
		o(&set)
	}
	if err := checkListen(cfg.API); err != nil {
		return nil, err
	}
	var storeOpts []store.Option
	if cfg.Cluster != nil {
		storeOpts = append(storeOpts, store.IdleTransactionLimit(cfg.Cluster.Lease))
	}
	st, err := store.Open(ctx, cfg.Metadata, storeOpts...)
	if err != nil {
		return nil, fmt.Errorf("open metadata store: %w", err)
	}
	d := &Daemon{cfg: cfg, st: st, log: log, metrics: metrics.New(log), Ready: make(chan struct{})}
	if cfg.Cluster != nil {
		set.claim = false // the nodes' leases replace the one-daemon claim
	}
	if set.claim {
		if d.claim, err = st.Claim(ctx); err != nil {
			st.Close()
			return nil, err
		}
	}
	if err := d.build(ctx, opts); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// build makes the streams, the batch engine and the API.
func (d *Daemon) build(ctx context.Context, opts stream.Options) error {
	cfg, st, log := d.cfg, d.st, d.log
	st.Observe(d.metrics.ObserveStore)
	for _, sc := range cfg.Streams {
		s := stream.New(sc, st, log, opts)
		// In a cluster, the stream's record is its running node's.
		if cfg.Cluster == nil {
			if err := s.MarkNotStarted(ctx); err != nil {
				return fmt.Errorf("record stream %s: %w", sc.Name, err)
			}
		}
		d.streams = append(d.streams, s)
	}
	if len(cfg.Tasks) > 0 {
		if err := lineage.CheckReads(ctx, cfg, log); err != nil {
			return fmt.Errorf("what tasks read:\n%w", err)
		}
		var err error
		if d.batch, err = newEngine(cfg, st, log); err != nil {
			return err
		}
	}
	err := d.metrics.Register(metrics.NewCollector(metrics.Sources{Streams: d.streams, Store: st, Batch: d.batch != nil}))
	if err != nil {
		return err
	}
	apiOpts := []api.Option{api.WithMetrics(d.metrics), api.WithHosts(cfg.API.Listen, cfg.API.AllowedHosts)}
	if d.batch != nil {
		d.lineage = &lineage.Watcher{Store: st, Batch: d.batch, Log: log.With("component", "lineage")}
		apiOpts = append(apiOpts, api.WithLineage(d.lineage))
	}
	if cfg.Cluster != nil {
		if err := api.CheckAdvertise(cfg.API.Listen, cfg.API.AllowedHosts, cfg.Cluster.Advertise); err != nil {
			return err
		}
		if err := d.join(ctx); err != nil {
			return err
		}
		names := make([]string, len(cfg.Streams))
		for i, sc := range cfg.Streams {
			names[i] = sc.Name
		}
		apiOpts = append(apiOpts, api.WithCluster(cluster.NewRouter(d.member, st, names, d.batch != nil)))
	}
	d.api = api.New(d.streams, d.batch, st, cfg.API.Tokens, log, apiOpts...)
	return nil
}

// close gives up the claim or hold, if any, then closes the store.
func (d *Daemon) close() {
	if d.hold != nil {
		if err := d.hold.Release(); err != nil {
			d.log.Warn("release the node's hold on the metadata store", logkey.Err(err))
		}
	}
	if d.claim != nil {
		if err := d.claim.Release(); err != nil {
			d.log.Warn("release the metadata store's claim", logkey.Err(err))
		}
	}
	d.st.Close()
}

// newEngine builds the batch engine over the configured tasks.
func newEngine(cfg *config.Config, st *store.Store, log *slog.Logger) (*engine.Engine, error) {
	graph, err := dag.New(cfg.Tasks)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	groups := map[string]int{}
	for _, g := range cfg.ResourceGroups {
		groups[g.Name] = g.Concurrency
	}
	return engine.New(engine.Options{
		Store: st, Graph: graph, Connections: connections(cfg), ResourceGroups: groups,
		Dispatch:       cfg.Cluster != nil,
		OutputLookback: time.Duration(cfg.Batch.OutputLookbackDays) * 24 * time.Hour,
		ConfirmAbove:   cfg.Batch.ConfirmAbove,
		LogLimit:       cfg.Batch.LogLimitBytes,
		Schedule:       true,
		Logger:         log,
		Host:           hostOf(cfg),
	})
}

// connections are the SQL tasks' connections by name.
func connections(cfg *config.Config) map[string]runner.Connection {
	conns := map[string]runner.Connection{}
	for _, c := range cfg.Connections {
		dsn := c.DSN
		if c.Type == config.TypeSQLite {
			dsn = c.Path
		}
		conns[c.Name] = runner.Connection{Name: c.Name, Type: c.Type, DSN: dsn}
	}
	return conns
}

// hostOf is the host task processes run on: cluster.host in a cluster,
// else the host name (the engine's default).
func hostOf(cfg *config.Config) string {
	if cfg.Cluster != nil {
		return cfg.Cluster.Host
	}
	return ""
}

// Batch returns the batch engine, nil when no tasks are configured.
func (d *Daemon) Batch() *engine.Engine { return d.batch }

// checkListen refuses to serve beyond loopback without a token.
func checkListen(a config.API) error {
	host, _, err := net.SplitHostPort(a.Listen)
	if err != nil {
		return fmt.Errorf("api.listen %q: %w", a.Listen, err)
	}
	if len(a.Tokens) > 0 {
		return nil
	}
	if config.LoopbackHost(host) { // the same test as the config's api.allowed_hosts rule
		return nil
	}
	return fmt.Errorf("api.listen %q is beyond loopback and no API token is configured: add api.tokens (or TIDEMARK_API_TOKEN), or listen on 127.0.0.1", a.Listen)
}

// Streams returns the daemon's streams.
func (d *Daemon) Streams() []*stream.Stream { return d.streams }

// Metrics returns the daemon's metrics registry, which /metrics serves.
func (d *Daemon) Metrics() *metrics.Registry { return d.metrics }

// Store returns the metadata store.
func (d *Daemon) Store() *store.Store { return d.st }

// Run serves the API and runs every stream until ctx ends.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	ln, err := net.Listen("tcp", d.cfg.API.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.cfg.API.Listen, err)
	}
	d.Addr = ln.Addr().String()
	g, gctx := errgroup.WithContext(ctx)
	// Request contexts end with the daemon, so event streams let go.
	srv := d.api.HTTPServer()
	srv.BaseContext = func(net.Listener) context.Context { return gctx }
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve API: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	})
	if d.member != nil {
		g.Go(func() error { return d.member.Run(gctx) })
		events := cluster.NewEvents(d.member, d.st, d.streams, d.batch, d.log)
		g.Go(func() error { return events.Run(gctx) })
		g.Go(func() error { return d.batchLost(gctx) })
		g.Go(func() error { return d.holdStore(gctx) })
		if d.worker != nil {
			g.Go(func() error { return d.listenDispatch(gctx) })
		}
	} else {
		for _, s := range d.streams {
			g.Go(func() error { return s.Run(gctx) })
		}
		if d.batch != nil {
			g.Go(func() error { return d.runBatch(gctx) })
		}
	}
	if d.claim != nil {
		g.Go(func() error {
			select {
			case <-d.claim.Lost():
				return fmt.Errorf("%w: stopping, as another daemon may now take the store", d.claim.Err())
			case <-gctx.Done():
				return nil
			}
		})
	}
	d.log.Info("tidemark is running", "api", "http://"+d.Addr, "console", "http://"+d.Addr+console.Prefix, "streams", len(d.streams), "tasks", len(d.cfg.Tasks))
	close(d.Ready)
	return g.Wait()
}

// runBatch runs the batch engine and, when a task acts on changes, the
// lineage watcher until ctx ends.
func (d *Daemon) runBatch(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.batch.Run(gctx) })
	if d.lineage != nil && actsOnChanges(d.cfg) {
		g.Go(func() error {
			select { // submissions need the engine's loop
			case <-d.batch.Ready():
			case <-gctx.Done():
				return nil
			}
			return d.lineage.Run(gctx)
		})
	}
	return g.Wait()
}

// actsOnChanges reports whether a task's on_change acts on what backfills
// change.
func actsOnChanges(cfg *config.Config) bool {
	for _, t := range cfg.Tasks {
		if t.OnChange != nil && t.OnChange.Action != dag.OnChangeOff {
			return true
		}
	}
	return false
}
