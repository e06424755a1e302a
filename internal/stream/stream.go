// Package stream runs streams: a source's change log applied to a
// destination in commit order, with per-object backfills whose chunks enter
// the same ordered pipeline at the log position where they are correct.
//
// Wiring of one running stream (see runOnce):
//
//	source.Stream ──events──▶ applier ──batches──▶ writer ──▶ sink
//	                             ▲                     │
//	backfill workers ─register/submit chunks─┘         └─ confirm position to source
//
// The applier is the only goroutine that decides order. The writer commits
// one batch at a time and confirms its position to the source only after
// the destination committed it. Backfill workers read chunks concurrently.
package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/fanout"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// Options tune what the config does not (tests shorten intervals).
type Options struct {
	// ProbeInterval is how often a pending chunk asks where the stream is.
	ProbeInterval time.Duration
	// RaceHorizon: see applierConfig.
	RaceHorizon time.Duration
	// SlotCheckInterval is how often the slot's retained WAL is checked.
	SlotCheckInterval time.Duration
	// LagCheckInterval is how often the lag is compared with lag_warn.
	LagCheckInterval time.Duration
}

// Stream is one configured stream and its lifecycle.
type Stream struct {
	cfg  config.Stream
	opts Options
	st   *store.Store
	log  *slog.Logger
	bf   *backfills

	lag     *lagClock
	lagOver atomic.Bool
	events  atomic.Int64 // changes committed to the destination
	// load is the pipeline's load in the slot's snapshot, if it has one.
	load atomic.Pointer[snapshotLoad]
	// epoch is the stream's lease epoch when a cluster node runs it
	// (RunAs); 0 for a daemon of its own.
	epoch atomic.Int64

	mu        sync.Mutex
	state     store.StreamState
	tables    map[change.TableID]*change.Table
	skipped   map[change.TableID]string        // included tables not streamed, and why
	parked    map[change.TableID]*change.Table // stopped tables still in the log (lookupLog)
	refills   []change.TableID                 // tables a start's reconcile wants backfilled
	src       source.Source
	snk       sink.Sink
	walBytes  int64
	paused    bool
	pauseAsks uint64 // Pause and Resume calls so far
	// pauseAsksSeen is pauseAsks when the last term ended (RunAs): a pause
	// or resume since, which reached this node as it took the lease, wins
	// over the stream's record.
	pauseAsksSeen uint64
	reset         bool          // a reset was requested: re-create a lost slot and backfill everything
	wake          chan struct{} // signalled by Resume
	runCancel     context.CancelFunc

	subs fanout.Hub[Event] // backfill, state and lag events

	afterRecordRead func() // tests: runs as RunAs has read the stream's record
}

// Event is pushed to subscribers when a backfill record or the stream state
// changes, or the lag crosses lag_warn: one of Backfill, State and Lag is
// set.
type Event struct {
	Stream   string             `json:"stream"`
	Backfill *store.Backfill    `json:"backfill,omitempty"`
	State    *store.StreamState `json:"state,omitempty"`
	Lag      *LagAlert          `json:"lag,omitempty"`
	// Relayed marks an event of a stream another cluster node runs,
	// received from that node (Relay).
	Relayed bool `json:"-"`
}

// New builds a stream; Run starts it.
func New(cfg config.Stream, st *store.Store, log *slog.Logger, opts Options) *Stream {
	opts.ProbeInterval = cmpOr(opts.ProbeInterval, 10*time.Millisecond)
	opts.RaceHorizon = cmpOr(opts.RaceHorizon, time.Minute)
	opts.SlotCheckInterval = cmpOr(opts.SlotCheckInterval, 30*time.Second)
	opts.LagCheckInterval = cmpOr(opts.LagCheckInterval, time.Second)
	s := &Stream{cfg: cfg, opts: opts, st: st, log: log.With(logkey.Stream(cfg.Name)), lag: &lagClock{},
		wake: make(chan struct{}, 1)}
	s.state = store.StreamState{Name: cfg.Name, State: store.StateNotStarted}
	s.bf = newBackfills(cfg.Name, st, s.log, BackfillConfig{
		MaxConcurrent: cfg.Backfill.MaxConcurrent,
		ChunkSize:     cfg.Backfill.ChunkSize,
		RowsPerSecond: float64(cfg.Backfill.RowsPerSecond),
		Verify:        cfg.Backfill.Verify,
		Retry:         retryPolicy{Initial: cfg.Retry.Initial, Max: cfg.Retry.Max},
	}, s.publishBackfill)
	s.bf.check = s.precheck
	return s
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Name is the stream's name.
func (s *Stream) Name() string { return s.cfg.Name }

// Config is the stream's configuration.
func (s *Stream) Config() config.Stream { return s.cfg }

// State returns the stream's lifecycle state.
func (s *Stream) State() store.StreamState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// RetainedWAL is the WAL the slot holds back on the source, in bytes, as
// last measured.
func (s *Stream) RetainedWAL() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.walBytes
}

func (s *Stream) setState(ctx context.Context, state, reason string) {
	s.mu.Lock()
	s.state = store.StreamState{Name: s.cfg.Name, State: state, Reason: reason, UpdatedAt: time.Now().UTC()}
	st := s.state
	s.mu.Unlock()
	if err := s.st.PutStream(context.WithoutCancel(ctx), st); err != nil {
		s.log.Error("record stream state", logkey.Err(err))
	}
	s.publish(Event{Stream: s.cfg.Name, State: &st})
}

// Subscribe returns a channel of events; cancel stops them and closes it.
// Slow subscribers miss events rather than slow the stream (see fanout).
func (s *Stream) Subscribe() (<-chan Event, func()) {
	return s.subs.Subscribe(256)
}

func (s *Stream) publish(ev Event) { s.subs.Publish(ev) }

// Relay hands subscribers an event of this stream that another cluster
// node, which runs it, sent (docs/cluster.md).
func (s *Stream) Relay(ev Event) {
	ev.Relayed = true
	s.subs.Publish(ev)
}

func (s *Stream) publishBackfill(b store.Backfill) {
	s.publish(Event{Stream: s.cfg.Name, Backfill: &b})
}

// Initiate starts backfills of objects.
func (s *Stream) Initiate(ctx context.Context, ids []change.TableID, startedBy string, opts map[string]any) ([]store.Backfill, error) {
	return s.bf.initiate(ctx, ids, startedBy, opts, false)
}

// StopBackfills stops the backfills of objects.
func (s *Stream) StopBackfills(ctx context.Context, ids []change.TableID) error {
	return s.bf.stop(ctx, ids)
}

// Pause stops streaming until Resume; object statuses are kept and active
// backfills continue from their cursors on resume.
func (s *Stream) Pause() {
	s.mu.Lock()
	s.paused = true
	s.pauseAsks++
	cancel := s.runCancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Resume restarts a paused or failed stream.
func (s *Stream) Resume() {
	s.mu.Lock()
	s.paused = false
	s.pauseAsks++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run keeps the stream running until ctx ends: transient failures are
// retried with exponential backoff (state "retrying", with the reason);
// failures that need a person leave it "failed" until Resume.
func (s *Stream) Run(ctx context.Context) error {
	lagCtx, stopLag := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.watchLag(lagCtx) })
	defer func() {
		stopLag()
		wg.Wait()
	}()
	delay := s.cfg.Retry.Initial
	for {
		if s.isPaused() {
			s.setState(ctx, store.StatePaused, "paused by request")
			if !s.waitWake(ctx) {
				return nil
			}
			continue
		}
		s.drainWake() // a Resume of a running stream is not a wake-up
		runCtx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.runCancel = cancel
		s.mu.Unlock()
		started := time.Now()
		err := s.runOnce(runCtx)
		cancel()
		if ctx.Err() != nil {
			// A cluster node's term ends when the stream moves: its next
			// node records the state, which this write could overwrite.
			if s.epoch.Load() == 0 {
				s.setState(ctx, store.StateNotStarted, "tidemark stopped")
			}
			return nil
		}
		if s.isPaused() || s.resetPending() {
			continue
		}
		if err == nil {
			err = errors.New("stream ended unexpectedly")
		}
		if source.IsPermanent(err) {
			s.log.Error("stream failed; it needs attention", logkey.Err(err))
			s.setState(ctx, store.StateFailed, s.failedReason(err))
			if !s.waitWake(ctx) {
				return nil
			}
			continue
		}
		if time.Since(started) > s.cfg.Retry.Max {
			delay = s.cfg.Retry.Initial
		}
		s.log.Warn("stream interrupted; retrying", "retry_in", delay, logkey.Err(err))
		s.setState(ctx, store.StateRetrying, fmt.Sprintf("%v (retrying in %s)", err, delay))
		if !sleep(ctx, delay) {
			return nil
		}
		delay = retryPolicy{Initial: s.cfg.Retry.Initial, Max: s.cfg.Retry.Max}.next(delay)
	}
}

// failedReason is a failed stream's reason: what went wrong and, unless the
// message already names the command to run, how to go on once it is fixed.
func (s *Stream) failedReason(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "`tidemark ") {
		return msg
	}
	return msg + "; once that is fixed, run `tidemark stream resume " + s.cfg.Name +
		"` (a fix in the configuration file needs a restart of tidemark instead)"
}

func (s *Stream) resetPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reset
}

// Paused reports whether a pause was requested and not resumed since.
func (s *Stream) Paused() bool { return s.isPaused() }

func (s *Stream) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

func (s *Stream) drainWake() {
	select {
	case <-s.wake:
	default:
	}
}

func (s *Stream) waitWake(ctx context.Context) bool {
	select {
	case <-s.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// Tables returns the described tables of the running stream.
func (s *Stream) Tables() map[change.TableID]*change.Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tables
}

func (s *Stream) whyNotStreamed(id change.TableID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped[id]
}

func (s *Stream) lookup(id change.TableID) *change.Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tables[id]
}

// runOnce connects, prepares and runs the stream until ctx ends or a part
// fails.
func (s *Stream) runOnce(ctx context.Context) error {
	s.setState(ctx, store.StateStarting, "")
	epoch := s.epoch.Load()
	src, err := source.Open(ctx, s.cfg.Source, source.Options{ProbeInterval: s.opts.ProbeInterval, TakeOver: epoch > 0}, s.log)
	if err != nil {
		return err
	}
	defer src.Close()
	snk, err := openSink(ctx, &s.cfg)
	if err != nil {
		return err
	}
	defer snk.Close()
	if err := s.fence(ctx, snk, epoch); err != nil {
		return err
	}
	cp, err := snk.Checkpoint(ctx, s.cfg.Name)
	if err != nil {
		return fmt.Errorf("read destination checkpoint: %w", err)
	}
	// What the destination committed is confirmed before the log is looked
	// at: a source that keeps its log by age (MySQL) judges whether the
	// stream's position is still in it.
	src.Confirm(cp.Position)
	if err := source.ResumeFrom(ctx, src, cp.Position, cp.Resume); err != nil {
		return err
	}
	slot, err := src.LogState(ctx)
	if err != nil {
		return err
	}
	resetting := s.takeReset()
	if resetting && slot.Exists && slot.Invalidated {
		if err := src.DropLog(ctx); err != nil {
			return err
		}
		slot.Exists = false
	}
	if !slot.Exists && cp.Position > 0 && !resetting {
		return s.slotLost(slot, "is gone but the destination was at %s", source.FormatCheckpoint(s.cfg.Source.Type, cp.Position, cp.Resume))
	}
	// An invalidated slot is reported here, with the stream's name, as
	// watchSlot reports it while running (EnsureSlot's own error cannot
	// name the stream).
	if slot.Exists && slot.Invalidated && !resetting {
		return s.slotLost(slot, "was invalidated (%s)", slot.InvalidatedReason)
	}
	firstStart := !slot.Exists && cp.Position == 0
	resetAll := resetting && !slot.Exists
	if resetAll {
		// The old position belongs to a lost slot: stream from the new one
		// and let backfills bring every object back.
		cp.Position, cp.Resume = 0, ""
		if err := source.ResumeFrom(ctx, src, 0, ""); err != nil {
			return err
		}
		s.log.Warn("resetting the stream: re-creating the replication slot and backfilling every object")
	}
	tables, skipped, err := s.discover(ctx, src, snk, firstStart)
	if err != nil {
		return err
	}
	ids := make([]change.TableID, 0, len(tables))
	for id := range tables {
		ids = append(ids, id)
	}
	if err := src.PrepareCapture(ctx, ids); err != nil {
		return err
	}
	// The slot exists before any chunk is read: chunk positions are only
	// meaningful on a log the slot retains. A first start's slot exports
	// its snapshot for the initial load (snapload.go).
	exp, err := s.ensureLog(ctx, src, firstStart)
	if err != nil {
		return err
	}
	defer exp.Close()
	s.mu.Lock()
	s.tables, s.skipped, s.parked, s.src, s.snk = tables, skipped, nil, src, snk
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.src, s.snk = nil, nil
		s.mu.Unlock()
	}()
	return s.pipeline(ctx, src, snk, cp, exp, resetAll)
}

// Reset recovers a stream whose replication slot was lost: it re-creates
// the slot and backfills every object (started by "reset"). It restarts a
// failed stream; on a healthy stream with its slot it does nothing.
func (s *Stream) Reset() {
	s.mu.Lock()
	s.reset = true
	cancel := s.runCancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.Resume()
}

func (s *Stream) takeReset() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reset
	s.reset = false
	return r
}

func (s *Stream) pipeline(ctx context.Context, src source.Source, snk sink.Sink, cp sink.Checkpoint, exp *source.Export, resetAll bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	events := make(chan change.Event, 1024)
	batches := make(chan *outBatch) // unbuffered: a send finds the writer idle (handoff.go)
	lanes := chunkLaneCount(snk, s.cfg.Backfill.MaxConcurrent)
	lanesOpen := &atomic.Int32{}
	lanesOpen.Store(int32(lanes))
	load, start := s.startLoad(src, exp, cp.Position)
	defer load.close()
	app := newApplier(gctx.Done(), applierConfig{
		BatchChanges: s.cfg.Batch.MaxChanges, BatchDelay: s.cfg.Batch.MaxDelay, ChunkRows: s.cfg.Backfill.ChunkSize,
		WindowMaxChanges: s.cfg.Backfill.WindowMaxChanges, RaceHorizon: s.opts.RaceHorizon,
		DateColumns: s.cfg.DateColumns, LateData: s.cfg.LateData, ChunkLanes: lanes, LanesOpen: lanesOpen,
	}, s.cfg.Name, src, readerOf(snk), s.log, events, batches, start)
	app.load = load
	app.resume = cp.Resume
	if resetAll {
		s.lag.reset()
	}
	app.lag = s.lag
	app.pace = &chunkPace{target: s.cfg.Backfill.ChunkWriteTarget}
	if _, ok := snk.(sink.ChunkLaner); ok {
		app.pace.lanes = lanesOpen
	}
	schemaEvents := newSchemaQueue()
	app.schema = s.newSchema(src, snk, schemaEvents)
	app.regen = newRegenerator(src, snk, src.Attributes)
	app.refused = newRefusals()
	w := &writer{sink: snk, in: batches, confirm: src.Confirm, committed: s.committed, log: s.log,
		retry: retryPolicy{Initial: s.cfg.Retry.Initial, Max: s.cfg.Retry.Max}, health: newDestHealth(s.destinationHealth), lanes: chunkLanes{max: lanes, usable: lanesOpen},
		refused: app.refused, fail: s.refuseObject, hint: rejectedHint(snk), record: s.st.RecordChangedDates, recordLate: s.st.RecordLateDates, late: s.cfg.LateData}
	if ko, ok := src.(source.KeyOrderer); ok {
		w.keyOrder = ko.KeyCompare
	}
	src.Confirm(cp.Position)
	g.Go(func() error {
		if err := load.wait(gctx); err != nil {
			return err
		}
		return src.Stream(gctx, cp.Position, s.lookupLog, events)
	})
	g.Go(func() error { return app.run(gctx) })
	g.Go(func() error { return w.run(gctx) })
	g.Go(func() error { return s.watchSlot(gctx, src) })
	g.Go(func() error { return s.watchSchema(gctx, src, app, schemaEvents) })
	rt := &runtime{ctx: gctx, applier: app, src: src, load: load, tables: s.lookup, why: s.whyNotStreamed,
		size: func(ctx context.Context, id change.TableID) (source.TableSize, error) {
			return src.EstimateTable(ctx, id)
		},
		prepare: func(ctx context.Context, id change.TableID) (*change.Table, error) {
			return s.activate(ctx, src, app, id)
		}}
	if bc, ok := snk.(sink.BinaryChunks); ok {
		rt.binary = bc.TakesBinary
	}
	// Every goroutine is done before the caller closes the source and sink.
	defer func() {
		cancel()
		s.bf.detach()
		g.Wait()
	}()
	if err := s.bf.attach(gctx, rt, cp.Cursors); err != nil {
		return err
	}
	s.setState(ctx, store.StateRunning, "")
	// Objects still waiting for the first start's automatic backfill get
	// it, also when that start was interrupted before it began.
	if err := s.autoBackfill(gctx); err != nil {
		return err
	}
	s.bf.loadEnded(rt, nil) // a first start with nothing to load
	if err := s.startRefills(gctx); err != nil {
		return err
	}
	if resetAll {
		if err := s.backfillAll(gctx); err != nil {
			return err
		}
	}
	return g.Wait()
}

// destinationHealth shows a destination outage on the stream's state.
func (s *Stream) destinationHealth(err error) {
	ctx := s.bf.writeCtx()
	if err != nil {
		s.setState(ctx, store.StateRetrying, err.Error())
		return
	}
	s.setState(ctx, store.StateRunning, "")
}

// committed runs after each destination commit. The object counters are
// recorded before the backfills' progress is, and so before any event tells
// of the commit: a client that reads the counters on an event finds them
// counting what the event says was written.
func (s *Stream) committed(ctx context.Context, b *outBatch) {
	s.events.Add(int64(b.events))
	s.lag.committed(b.Position)
	for _, c := range b.chunks {
		cnt := b.counters[c.table]
		if cnt == nil {
			cnt = &objectCounts{}
			b.counters[c.table] = cnt
		}
		cnt.events += int64(c.rows)
		cnt.bytes += c.bytes
	}
	counters := make([]store.TableCounters, 0, len(b.counters))
	for id, c := range b.counters {
		counters = append(counters, store.TableCounters{Schema: id.Schema, Table: id.Name,
			Counters: store.Counters{EventsProcessed: c.events, EventsLoaded: c.events, BytesProcessed: c.bytes, BytesLoaded: c.bytes}})
	}
	s.bf.committed(context.WithoutCancel(ctx), b, counters)
}

// watchSlot measures the WAL the slot retains and warns past the threshold.
func (s *Stream) watchSlot(ctx context.Context, src source.Source) error {
	t := time.NewTicker(s.opts.SlotCheckInterval)
	defer t.Stop()
	for {
		info, err := src.LogState(ctx)
		if err == nil {
			if info.Invalidated {
				return s.slotLost(info, "was invalidated (%s)", info.InvalidatedReason)
			}
			if !info.Exists {
				return s.slotLost(info, "was dropped")
			}
			s.mu.Lock()
			s.walBytes = info.RetainedBytes
			s.mu.Unlock()
			if w := s.cfg.Source.WALWarnBytes; w > 0 && info.RetainedBytes > w {
				s.log.Warn("replication slot retains much WAL on the source", "bytes", info.RetainedBytes, "threshold", w)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// slotLost is the error of the log retention gone or invalidated (a
// replication slot, or for a source without one the binlog): what happened
// to it (a format and its arguments, after its name), and the way back.
func (s *Stream) slotLost(log source.LogState, what string, args ...any) error {
	name := cmp.Or(log.Name, "replication slot "+s.cfg.Source.Slot)
	return &source.PermanentError{Err: fmt.Errorf("%s "+what, append([]any{name}, args...)...),
		Hint: "changes since then may be lost: run `tidemark stream reset " + s.cfg.Name + "`, which " +
			cmp.Or(log.Reset, "re-creates the slot") + " and backfills every object"}
}
