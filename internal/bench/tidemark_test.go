package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types streams open
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

const streamName = "bench"

// tidemark is one stream running in-process the way the daemon runs it:
// configuration through config.Parse, default stream.Options, a SQLite
// metadata store.
type tidemark struct {
	s      *stream.Stream
	st     *store.Store
	name   string // the stream's
	schema string // of the tables backfilled
	stop   func() error
}

// startTidemark starts a stream from the PostgreSQL database srcDSN into
// the postgres destination dstDSN (backfill mode manual) and waits until it
// is running. extra are more keys of the stream's YAML mapping, one a line
// ("batch: {…}"). The verify that ends each backfill is off: it would read
// the table again while later phases measure.
func startTidemark(ctx context.Context, srcDSN, dstDSN, dir string, p params, extra ...string) (*tidemark, error) {
	return startStream(ctx, "postgres", srcDSN, "public", dstDSN, dir, p, extra...)
}

// startStream is startTidemark from a source of any type (srcType, as in
// the source's "type" key) whose tables are in schema (for MySQL, the
// database).
func startStream(ctx context.Context, srcType, srcDSN, schema, dstDSN, dir string, p params, extra ...string) (*tidemark, error) {
	spec := streamSpec{name: streamName, srcType: srcType, srcDSN: srcDSN, schema: schema,
		destination: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dstDSN)}
	return spec.start(ctx, dir, p, extra...)
}

// streamSpec is what differs between the benchmarks' streams.
type streamSpec struct {
	name           string // the stream's, and so its slot's and publication's
	srcType        string // the source's "type" key
	srcDSN, schema string // schema holds the tables (for MySQL, the database)
	destination    string // the destination's YAML flow mapping
	mode           string // backfill.mode ("": manual)
	verify         bool   // backfill.verify (off: it would read the table again while later phases measure)
	backfill       string // more keys of the backfill mapping, each ", key: value"
}

// start starts the stream (backfill mode manual unless sp.mode, verify off unless sp.verify) with its
// metadata store in dir and waits until it is running.
func (sp streamSpec) start(ctx context.Context, dir string, p params, extra ...string) (*tidemark, error) {
	var more strings.Builder
	write := ""
	if p.chunkWrite != "" {
		write = ", chunk_write_target: " + p.chunkWrite
	}
	write += sp.backfill
	for _, line := range extra {
		more.WriteString("    " + line + "\n")
	}
	verify := "false"
	if sp.verify {
		verify = "true"
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
streams:
  - name: %s
    source: {type: %s, dsn: "%s"}
    destination: %s
    include: ["%s.*"]
    backfill: {mode: %s, chunk_size: %d%s, verify: %s}
%s`, sp.name, sp.srcType, sp.srcDSN, sp.destination, sp.schema, cmp.Or(sp.mode, "manual"), p.chunkSize, write, verify, more.String())), func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, fmt.Errorf("parse stream configuration: %w", err)
	}
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		return nil, fmt.Errorf("open metadata store: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := stream.New(cfg.Streams[0], st, log, stream.Options{})
	if err := s.MarkNotStarted(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("record stream: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	tm := &tidemark{s: s, st: st, name: sp.name, schema: sp.schema}
	tm.stop = func() error {
		cancel()
		err := <-done
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := tm.waitRunning(ctx); err != nil {
		_ = tm.stop()
		return nil, err
	}
	return tm, nil
}

func (tm *tidemark) waitRunning(ctx context.Context) error {
	events, unsubscribe := tm.s.Subscribe()
	defer unsubscribe()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for tm.s.State().State != store.StateRunning {
		select {
		case <-events:
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("stream not running after 2 minutes: %+v", tm.s.State())
		case <-ctx.Done():
			return fmt.Errorf("wait for the stream: %w", ctx.Err())
		}
	}
	return nil
}

// backfill initiates a backfill of <schema>.<table> (as the CLI would) and
// waits until its object is Completed and Loaded. It returns the time from
// Initiate to that point and the backfill's final record.
func (tm *tidemark) backfill(ctx context.Context, table string) (time.Duration, store.Backfill, error) {
	events, unsubscribe := tm.s.Subscribe()
	defer unsubscribe()
	start := time.Now()
	recs, err := tm.s.Initiate(ctx, []change.TableID{{Schema: tm.schema, Name: table}}, store.StartedByCLI, nil)
	if err != nil {
		return 0, store.Backfill{}, fmt.Errorf("initiate backfill of %s: %w", table, err)
	}
	id := recs[0].ID
	// The store decides, as `tidemark objects` would show it; the final
	// event says when to look, and a 20ms poll covers the moment between
	// that event and the object's Loaded flag (and dropped events).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev := <-events:
			if b := ev.Backfill; b == nil || b.ID != id || b.LoadedAt == nil || b.Status != store.StatusCompleted {
				continue
			}
		case <-tick.C:
		case <-ctx.Done():
			return 0, store.Backfill{}, fmt.Errorf("wait for backfill of %s: %w", table, ctx.Err())
		}
		done, err := tm.loaded(ctx, table, id)
		if err != nil {
			return 0, store.Backfill{}, err
		}
		if done {
			break
		}
	}
	elapsed := time.Since(start)
	rec, err := tm.st.GetBackfill(ctx, id)
	if err != nil {
		return 0, store.Backfill{}, fmt.Errorf("read backfill record: %w", err)
	}
	return elapsed, rec, nil
}

// backfillVerified is backfill of a stream whose backfills end with a
// verify: it also waits for the verify's result, which must be a match,
// and returns the time to that and the time to Loaded.
func (tm *tidemark) backfillVerified(ctx context.Context, table string) (total, loaded time.Duration, rec store.Backfill, err error) {
	start := time.Now()
	if loaded, rec, err = tm.backfill(ctx, table); err != nil {
		return 0, 0, rec, err
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for rec.Verify == nil || rec.Verify.Status == stream.VerifyRunning {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, 0, rec, fmt.Errorf("wait for the verify of %s: %w", table, ctx.Err())
		}
		if rec, err = tm.st.GetBackfill(ctx, rec.ID); err != nil {
			return 0, 0, rec, fmt.Errorf("read backfill record: %w", err)
		}
	}
	total = time.Since(start)
	if v := rec.Verify; v.Status != stream.VerifyMatch {
		return total, loaded, rec, fmt.Errorf("the verify of %s: %s %s", table, v.Status, v.Error)
	}
	return total, loaded, rec, nil
}

// loaded tells whether the object's backfill id is Completed and Loaded.
func (tm *tidemark) loaded(ctx context.Context, table string, id int64) (bool, error) {
	o, err := tm.st.GetObject(ctx, tm.name, tm.schema, table)
	if err != nil {
		return false, fmt.Errorf("read object %s: %w", table, err)
	}
	if o.BackfillID != id {
		return false, nil
	}
	switch o.Status {
	case store.StatusFailed, store.StatusStopped:
		return false, fmt.Errorf("backfill of %s %s: %s", table, o.Status, o.Reason)
	}
	return o.Status == store.StatusCompleted && o.Loaded, nil
}
