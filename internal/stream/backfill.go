package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// chunkSource reads chunks for backfill workers.
type chunkSource interface {
	ReadChunk(ctx context.Context, t *change.Table, spec chunkSpec) (ChunkRead, error)
	// CheckFilter says whether a backfill's filter is a valid condition
	// on the table: a *rowfilter.Error for a column the table lacks,
	// source.ErrFilter when the source refused it.
	CheckFilter(ctx context.Context, t *change.Table, filter *rowfilter.Filter) error
}

// chunkSpec is what one chunk read asks for: up to Limit rows with key in
// (After, Upto] matching Filter, with the key and Columns (nil: all).
type chunkSpec = source.ReadOptions

// BackfillConfig tunes backfills.
type BackfillConfig struct {
	MaxConcurrent int
	ChunkSize     int
	RowsPerSecond float64
	Verify        bool // end each backfill with a verify of what it covered
	Retry         retryPolicy
}

// run is one backfill of one object.
type run struct {
	mu     sync.Mutex
	rec    store.Backfill
	table  *change.Table
	cancel context.CancelFunc
	// rate wakes a worker pacing its reads when the run's limit changed.
	rate     chan struct{}
	rateOnce sync.Once
	// identical says the destination's range of the run's latest chunk
	// committed already held its rows: the next chunks try range sums
	// (loadsum.go).
	identical atomic.Bool
	// progressStored says a chunk's progress was recorded (r.mu): a row
	// estimate found after it needs a write of its own.
	progressStored bool
	// loading says the run counts in backfills.loading (m.mu).
	loading bool
}

// rateChanged is the channel SetRowsPerSecond signals.
func (r *run) rateChanged() chan struct{} {
	r.rateOnce.Do(func() { r.rate = make(chan struct{}, 1) })
	return r.rate
}

// runtime is what a running stream lends the backfills: the applier and the
// source, valid until ctx ends.
type runtime struct {
	ctx     context.Context
	applier *applier
	src     chunkSource
	// load is a first start's load in the slot's snapshot (nil: none).
	load   *snapshotLoad
	tables func(change.TableID) *change.Table
	// why says why a table of the stream is not streamed ("" if it is).
	why func(change.TableID) string
	// size sizes a table on the source (nil: no estimates).
	size func(context.Context, change.TableID) (source.TableSize, error)
	// prepare streams a table the stream does not stream, before its
	// backfill starts (nil: such a backfill fails).
	prepare func(context.Context, change.TableID) (*change.Table, error)
	// binary says whether the destination takes a table's chunk values in
	// the source's binary form (sink.BinaryChunks; nil: never).
	binary func(*change.Table) bool
}

// binaryRead says whether a chunk of t read with scope may ask for binary
// values: the destination takes them for t, and the chunk writes whole
// rows that nothing but the destination reads (no column subset, no dates
// noted from its rows for lineage).
func (rt *runtime) binaryRead(t *change.Table, scope chunkSpec) bool {
	return rt.binary != nil && scope.Columns == nil && len(rt.applier.cfg.DateColumns[t.ID]) == 0 && rt.binary(t)
}

// backfills owns the object statuses of one stream: the queue of pending
// backfills, the active ones (at most MaxConcurrent) and their records.
type backfills struct {
	stream string
	st     *store.Store
	log    *slog.Logger
	cfg    BackfillConfig
	notify func(store.Backfill)
	// permanent tells errors a retry cannot cure.
	permanent func(error) bool
	// check refuses backfills whose destination tables do not fit (see
	// Stream.precheck); nil checks nothing.
	check func(ctx context.Context, ids []change.TableID, startedBy string) []string

	mu     sync.Mutex
	queue  []*run
	active map[change.TableID]*run
	byID   map[int64]*run // runs whose rows are not all loaded yet
	rt     *runtime
	loaded bool // the store's unfinished runs were loaded
	// loading counts the runs reading while a first start's load in the
	// slot's snapshot holds the stream back (snapload.go).
	loading int
	wg      sync.WaitGroup
	// wake looks at the queue again at wakeAt, for runs with a start time.
	wake   *time.Timer
	wakeAt time.Time
	// hook holds chunks for tests (failpoint.go); nil outside them.
	hook atomic.Pointer[chunkHook]
	// trailFault is a test-only fault in a trailing verify (nil: none).
	trailFault atomic.Pointer[trailFault]
	// term is the context of the cluster term the stream runs in (RunAs),
	// kept for the writes made outside any caller's context, so that they
	// carry its fence (store.WithWriteFence); none outside a cluster.
	term atomic.Pointer[context.Context]
}

// writeCtx is the context of writes made outside any caller's context.
func (m *backfills) writeCtx() context.Context {
	if c := m.term.Load(); c != nil {
		return *c
	}
	return context.Background()
}

func newBackfills(stream string, st *store.Store, log *slog.Logger, cfg BackfillConfig, notify func(store.Backfill)) *backfills {
	return &backfills{stream: stream, st: st, log: log, cfg: cfg, notify: notify, permanent: source.IsPermanent,
		active: map[change.TableID]*run{}, byID: map[int64]*run{}}
}

// Initiate starts backfills of several objects, as one run when asOneRun
// (see store.Run). It refuses the whole request when one of them may not
// start, naming each refusal.
func (m *backfills) initiate(ctx context.Context, ids []change.TableID, startedBy string, opts map[string]any, asOneRun bool) ([]store.Backfill, error) {
	if m.check != nil {
		if refusals := m.check(ctx, ids, startedBy); len(refusals) > 0 {
			return nil, &RefusedError{Msg: strings.Join(refusals, "; ")}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ids = dedupe(ids)
	objs := make([]store.Object, len(ids))
	var refusals []string
	for i, id := range ids {
		o, err := m.st.GetObject(ctx, m.stream, id.Schema, id.Name)
		if errors.Is(err, store.ErrNotFound) {
			refusals = append(refusals, fmt.Sprintf("%s is not an object of stream %s", id, m.stream))
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := CanInitiate(id.String(), o.Status); err != nil {
			refusals = append(refusals, err.Error())
		}
		objs[i] = o
	}
	if len(refusals) > 0 {
		return nil, &RefusedError{Msg: strings.Join(refusals, "; ")}
	}
	// The run is recorded only once nothing is refused, before its members
	// so that each can name it.
	var runID int64
	if asOneRun && len(ids) > 0 {
		grp := store.Run{Stream: m.stream, StartedBy: startedBy}
		if err := m.st.CreateRun(ctx, &grp); err != nil {
			return nil, fmt.Errorf("record the run of %d backfills: %w", len(ids), err)
		}
		runID = grp.ID
	}
	var out []store.Backfill
	for i, id := range ids {
		rec := store.Backfill{Stream: m.stream, Schema: id.Schema, Table: id.Name, StartedBy: startedBy, Options: opts, Status: StatusPending, RunID: runID}
		if err := m.st.CreateBackfill(ctx, &rec); err != nil {
			return out, fmt.Errorf("record backfill of %s: %w", id, err)
		}
		o := objs[i]
		o.Status, o.Reason, o.Loaded, o.BackfillID = StatusPending, pendingReason(rec), false, rec.ID
		if err := m.st.PutObject(ctx, o); err != nil {
			return out, err
		}
		r := &run{rec: rec}
		m.queue = append(m.queue, r)
		m.byID[rec.ID] = r
		out = append(out, rec)
		m.logInitiated(rec)
		m.notify(rec)
	}
	m.scheduleLocked()
	return out, nil
}

// stop stops pending or active backfills of several objects.
func (m *backfills) stop(ctx context.Context, ids []change.TableID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var refusals []string
	for _, id := range ids {
		o, err := m.st.GetObject(ctx, m.stream, id.Schema, id.Name)
		if err != nil {
			refusals = append(refusals, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		if err := CanStop(id.String(), o.Status); err != nil {
			refusals = append(refusals, err.Error())
		}
	}
	if len(refusals) > 0 {
		return &RefusedError{Msg: strings.Join(refusals, "; ")}
	}
	for _, id := range ids {
		r := m.active[id]
		if r != nil {
			delete(m.active, id)
			r.cancel()
		} else {
			for i, q := range m.queue {
				if q.rec.Schema == id.Schema && q.rec.Table == id.Name {
					r = q
					m.queue = append(m.queue[:i], m.queue[i+1:]...)
					break
				}
			}
		}
		if r == nil {
			continue
		}
		delete(m.byID, r.rec.ID)
		if err := m.finishLocked(ctx, r, StatusStopped, ""); err != nil {
			return err
		}
	}
	m.scheduleLocked()
	return nil
}

// finishLocked ends a run in a final status and records it on the object.
func (m *backfills) finishLocked(ctx context.Context, r *run, status, errMsg string) error {
	r.mu.Lock()
	now := time.Now().UTC()
	r.rec.Status, r.rec.Error, r.rec.FinishedAt = status, errMsg, &now
	rec := r.rec
	// The record and its object's status in one store write.
	_, err := m.st.UpdateBackfillAndObject(ctx, rec, store.RunObjectChange{Status: status, Reason: errMsg})
	r.mu.Unlock()
	if err != nil {
		return err
	}
	m.logFinish(rec)
	m.notify(rec)
	return nil
}

// logInitiated tells who initiated a backfill, with its options and run
// when it has them.
func (m *backfills) logInitiated(rec store.Backfill) {
	args := []any{logkey.Backfill(rec.ID), logkey.Object(change.TableID{Schema: rec.Schema, Name: rec.Table}.String()), "started_by", rec.StartedBy}
	if len(rec.Options) > 0 {
		args = append(args, "options", rec.Options)
	}
	if rec.RunID != 0 {
		args = append(args, logkey.Run(rec.RunID))
	}
	m.log.Info("backfill initiated", args...)
}

// logFinish tells the end of a backfill at info level (a failure at warn):
// the rows read and the time it took (what was written, and the verify,
// follow once the destination committed it).
func (m *backfills) logFinish(rec store.Backfill) {
	args := []any{logkey.Backfill(rec.ID), logkey.Object(change.TableID{Schema: rec.Schema, Name: rec.Table}.String()),
		"rows_read", rec.RowsRead}
	if rec.StartedAt != nil && rec.FinishedAt != nil {
		args = append(args, "seconds", rec.FinishedAt.Sub(*rec.StartedAt).Round(time.Millisecond).Seconds())
	}
	if rec.Verify != nil {
		args = append(args, "verify", rec.Verify.Status)
	}
	switch rec.Status {
	case StatusCompleted:
		m.log.Info("backfill completed", args...)
	case StatusFailed:
		m.log.Warn("backfill failed", append(args, "reason", rec.Error)...)
	default:
		m.log.Info("backfill "+rec.Status, args...)
	}
}

// attach lends the backfills a running stream. Active and pending runs are
// resumed: an active one continues from the cursor the destination committed
// with its last chunk, or from the start when it has none.
func (m *backfills) attach(ctx context.Context, rt *runtime, cursors map[change.TableID]sink.Cursor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rt = rt
	if !m.loaded {
		if err := m.loadLocked(ctx); err != nil {
			return err
		}
		m.loaded = true
	}
	m.reconcileWrittenLocked(cursors)
	if err := m.reconcileCompletedLocked(ctx, cursors); err != nil {
		return err
	}
	for id, r := range m.active {
		if c, ok := cursors[id]; ok && c.BackfillID == r.rec.ID && c.Done {
			delete(m.active, id)
			if err := m.completeLocked(ctx, r, true); err != nil {
				return err
			}
			continue
		}
		m.startLocked(r, cursors[id])
	}
	m.scheduleLocked()
	return nil
}

// reconcileWrittenLocked takes each unfinished run's rows written from the
// cursor the destination committed with its rows. The store records a
// commit after it happened, so a daemon killed in between left the store
// short by the chunks it committed last. A column subset's cursor counts the
// rows it read, some of which the destination may have lacked, so its
// figure is left as recorded; a repair's counts its current pass only, so
// it is only ever raised.
func (m *backfills) reconcileWrittenLocked(cursors map[change.TableID]sink.Cursor) {
	for id, r := range m.byID {
		r.mu.Lock()
		rec := r.rec
		r.mu.Unlock()
		c, ok := cursors[change.TableID{Schema: rec.Schema, Name: rec.Table}]
		if !ok || c.BackfillID != id || c.Rows <= rec.RowsWritten || optionsOf(rec).Columns != nil {
			continue
		}
		m.log.Info("rows written taken from the destination's cursor", logkey.Backfill(id),
			"recorded", rec.RowsWritten, "committed", c.Rows)
		m.update(r, func(b *store.Backfill) { b.RowsWritten = c.Rows })
	}
}

// reconcileCompletedLocked settles runs that read everything but whose last
// chunk was not known to be committed when the stream stopped: the
// destination's cursor says whether it was. If it was not, the run is active
// again and resumes from its cursor.
func (m *backfills) reconcileCompletedLocked(ctx context.Context, cursors map[change.TableID]sink.Cursor) error {
	for id, r := range m.byID {
		r.mu.Lock()
		rec := r.rec
		r.mu.Unlock()
		if rec.Status != StatusCompleted || rec.LoadedAt != nil {
			continue
		}
		tid := change.TableID{Schema: rec.Schema, Name: rec.Table}
		if c, ok := cursors[tid]; ok && c.BackfillID == id && c.Done {
			delete(m.byID, id)
			now := time.Now().UTC()
			r.mu.Lock()
			r.rec.LoadedAt = &now
			r.mu.Unlock()
			m.persist(r)
			if err := m.markLoaded(ctx, rec); err != nil {
				return err
			}
			continue
		}
		if _, busy := m.active[tid]; busy {
			continue // a newer run of the object is active
		}
		r.mu.Lock()
		r.rec.Status, r.rec.FinishedAt = StatusActive, nil
		r.mu.Unlock()
		m.active[tid] = r
	}
	return nil
}

// loadLocked rebuilds the queue and the active set from the store after a
// restart of the daemon.
func (m *backfills) loadLocked(ctx context.Context) error {
	recs, err := m.st.ListBackfills(ctx, store.BackfillFilter{Stream: m.stream, Limit: 100000})
	if err != nil {
		return err
	}
	if err := m.endInterruptedVerifies(ctx, recs); err != nil {
		return err
	}
	// A run's loaded time and its object's loaded flag are two writes: a
	// daemon killed between them left the object behind. The newest run of
	// each object says what the object should show.
	newest := map[change.TableID]bool{}
	for _, rec := range recs { // newest first
		id := change.TableID{Schema: rec.Schema, Name: rec.Table}
		if newest[id] {
			continue
		}
		newest[id] = true
		if rec.Status == StatusCompleted && rec.LoadedAt != nil {
			if err := m.markLoaded(ctx, rec); err != nil {
				return err
			}
		}
	}
	for i := len(recs) - 1; i >= 0; i-- { // oldest first
		rec := recs[i]
		id := change.TableID{Schema: rec.Schema, Name: rec.Table}
		if m.byID[rec.ID] != nil {
			continue // initiated in this process, already queued
		}
		switch {
		case rec.Status == StatusActive:
			m.active[id] = &run{rec: rec}
			m.byID[rec.ID] = m.active[id]
		case rec.Status == StatusPending:
			r := &run{rec: rec}
			m.queue = append(m.queue, r)
			m.byID[rec.ID] = r
		case rec.Status == StatusCompleted && rec.LoadedAt == nil:
			m.byID[rec.ID] = &run{rec: rec}
		}
	}
	return nil
}

// detach takes the running stream away: workers stop where they are and are
// resumed by the next attach.
func (m *backfills) detach() {
	m.mu.Lock()
	m.rt = nil
	for _, r := range m.active {
		if r.cancel != nil {
			r.cancel()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *backfills) scheduleLocked() {
	if m.rt == nil {
		return
	}
	now := time.Now()
	for i := 0; i < len(m.queue) && len(m.active) < m.cfg.MaxConcurrent; {
		r := m.queue[i]
		id := change.TableID{Schema: r.rec.Schema, Name: r.rec.Table}
		if m.active[id] != nil {
			i++ // one run per object at a time
			continue
		}
		if ok, at := due(r, now); !ok {
			m.wakeAtLocked(at)
			i++ // waits for its start time; later runs may go first
			continue
		}
		m.queue = append(m.queue[:i], m.queue[i+1:]...)
		m.active[id] = r
		m.startLocked(r, sink.Cursor{})
	}
}

func dedupe(ids []change.TableID) []change.TableID {
	seen := map[change.TableID]bool{}
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// startLocked starts a worker for an active run from a committed cursor.
func (m *backfills) startLocked(r *run, cur sink.Cursor) {
	id := change.TableID{Schema: r.rec.Schema, Name: r.rec.Table}
	ctx, cancel := context.WithCancel(m.rt.ctx)
	r.cancel = cancel
	r.table = m.rt.tables(id)
	var after change.Key
	var rowsBefore int64
	if cur.BackfillID == r.rec.ID {
		after, rowsBefore = cur.After, cur.Rows
	}
	if after != nil {
		m.log.Info("backfill resumed from its cursor", logkey.Backfill(r.rec.ID), logkey.Object(id.String()), "rows_done", rowsBefore)
	} else {
		m.log.Info("backfill started", logkey.Backfill(r.rec.ID), logkey.Object(id.String()), "started_by", r.rec.StartedBy)
	}
	rt := m.rt
	if rt.load != nil {
		r.loading = true
		m.loading++
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		m.work(ctx, rt, r, after, rowsBefore)
	}()
}

// forget drops what was loaded from the store, so that the next attach
// reads the unfinished runs again. It is called between terms of a
// cluster node's lease, when no pipeline is attached.
func (m *backfills) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue, m.loaded = nil, false
	m.active, m.byID = map[change.TableID]*run{}, map[int64]*run{}
}

// loadEnded notes that run r (nil: none, as a first start that initiated
// nothing asks) reads no more. When a first start's load in the slot's
// snapshot has no run left reading or due to start, the stream starts
// (snapload.go).
func (m *backfills) loadEnded(rt *runtime, r *run) {
	if rt.load == nil {
		return
	}
	m.mu.Lock()
	if r != nil && r.loading {
		r.loading = false
		m.loading--
	}
	settled := m.loadSettledLocked()
	m.mu.Unlock()
	// A stream that stops ends the load with its pipeline, saying so.
	if settled && rt.ctx.Err() == nil {
		rt.load.start("the load is done")
	}
}

func (m *backfills) loadSettledLocked() bool {
	if m.loading > 0 {
		return false
	}
	now := time.Now()
	for _, r := range m.queue {
		if ok, _ := due(r, now); ok {
			return false
		}
	}
	return true
}
