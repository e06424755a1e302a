package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
)

// snapshotLoad is a first start's initial load in the snapshot the new
// replication slot exported (docs/backfill.md, "The initial load in the
// slot's snapshot"). The snapshot sees exactly the transactions committed
// before the slot's start, and the slot streams exactly those after it.
// The live stream waits behind a gate; until a transaction is applied, a
// chunk registered is read in the snapshot at the slot's start, merged at
// once with an empty window, and whatever the stream brings later applies
// over it. The applier decides per registration (a chunk registered after
// the first transaction is applied could miss it), so opening the gate
// early is always safe: the chunks registered from then on are read beside
// the stream, with windows, as every later backfill is.
//
// The gate opens when the load is done (no automatic run loading or
// queued), when a chunk read beside the stream waits for it (a run whose
// table the snapshot cannot show), after backfill.snapshot_max_hold, or
// when the pipeline ends. The export, which holds the source's cleanup
// horizon back, is closed once the gate is open and no read in it is
// under way.
type snapshotLoad struct {
	exp    *source.Export
	reader source.SnapshotExporter
	log    *slog.Logger
	began  time.Time
	gate   chan struct{} // closed when the stream may start
	hold   *time.Timer

	mu     sync.Mutex
	opened bool   // no new read in the snapshot
	reads  int    // reads in the snapshot under way
	why    string // why the gate opened
	// released says the export is closed: the source's horizon is free.
	released atomic.Bool
	// chunks counts the chunks read in the snapshot (tests' evidence).
	chunks atomic.Int64
}

// ensureLog creates what retains the log when it is missing; on a first
// start that backfills automatically, from a source that can, with an
// exported snapshot for the initial load (nil otherwise).
func (s *Stream) ensureLog(ctx context.Context, src source.Source, firstStart bool) (*source.Export, error) {
	ex, ok := src.(source.SnapshotExporter)
	if !ok || !firstStart || s.cfg.Backfill.Mode != config.BackfillAutomatic || s.cfg.Backfill.SnapshotMaxHold <= 0 {
		_, err := src.EnsureLog(ctx)
		return nil, err
	}
	return ex.ExportLog(ctx)
}

// startLoad is the pipeline's load in exp's snapshot (nil without one) and
// the position its applier starts at: the slot's start when the load
// reads in its snapshot, so that the chunks read there merge at once;
// else the committed position pos.
func (s *Stream) startLoad(src source.Source, exp *source.Export, pos change.LSN) (*snapshotLoad, change.LSN) {
	if exp == nil {
		return nil, pos
	}
	load := newSnapshotLoad(exp, src.(source.SnapshotExporter), s.cfg.Backfill.SnapshotMaxHold, s.log)
	s.load.Store(load)
	return load, exp.Position
}

// SnapshotHold is how long a first start's load in the replication slot's
// exported snapshot has held the live stream and the source's cleanup
// horizon back; 0 when none is held (docs/backfill.md).
func (s *Stream) SnapshotHold() time.Duration { return s.load.Load().held() }

// newSnapshotLoad holds the live stream back for at most maxHold while
// the load reads in exp's snapshot.
func newSnapshotLoad(exp *source.Export, reader source.SnapshotExporter, maxHold time.Duration, log *slog.Logger) *snapshotLoad {
	l := &snapshotLoad{exp: exp, reader: reader, log: log, began: time.Now(), gate: make(chan struct{})}
	l.hold = time.AfterFunc(maxHold, func() { l.start("backfill.snapshot_max_hold (" + maxHold.String() + ") passed") })
	return l
}

// acquire says whether a chunk may be read in the snapshot, and counts
// its read under way until release. The applier asks it only while it
// has applied no transaction. A nil load has no snapshot.
func (l *snapshotLoad) acquire() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opened {
		return false
	}
	l.reads++
	return true
}

// read reads chunk pc, granted the snapshot at its registration, there.
func (l *snapshotLoad) read(ctx context.Context, pc *pendingChunk, spec chunkSpec) (ChunkRead, error) {
	defer pc.release()
	read, err := l.reader.ReadChunkIn(ctx, l.exp, pc.table, spec)
	if err == nil {
		l.chunks.Add(1)
	}
	return read, err
}

// release ends a read's claim on the snapshot: the last one after the gate
// opened closes the export.
func (l *snapshotLoad) release() {
	l.mu.Lock()
	l.reads--
	done := l.opened && l.reads == 0
	l.mu.Unlock()
	if done {
		l.releaseExport()
	}
}

// releaseExport closes the export, freeing the source's horizon.
func (l *snapshotLoad) releaseExport() {
	l.exp.Close()
	l.released.Store(true)
}

// held is how long the export has held the source's horizon back; 0 once
// it is released. A nil load holds nothing.
func (l *snapshotLoad) held() time.Duration {
	if l == nil || l.released.Load() {
		return 0
	}
	return time.Since(l.began)
}

// reason says why the gate opened ("" while it is closed).
func (l *snapshotLoad) reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

// start opens the gate, once, saying why.
func (l *snapshotLoad) start(why string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.opened {
		l.mu.Unlock()
		return
	}
	l.opened, l.why = true, why
	reads := l.reads
	l.mu.Unlock()
	l.hold.Stop()
	close(l.gate)
	l.log.Info("the live stream starts after the load in the slot's snapshot", "why", why, "held", time.Since(l.began).Round(time.Millisecond))
	if reads == 0 {
		l.releaseExport()
	}
}

// wait returns once the stream may start, or with ctx's error.
func (l *snapshotLoad) wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	select {
	case <-l.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the load with the pipeline: reads still in the snapshot fail.
func (l *snapshotLoad) close() {
	if l == nil {
		return
	}
	l.start("the stream stopped")
	l.releaseExport()
}

// leaveSnapshot says whether a chunk's failed read in the snapshot sends
// its run beside the stream from here on: the table is not as the
// snapshot shows it, the snapshot is gone, or the source refused the read
// for good (where an error that persists beside the stream is the run's).
func (m *backfills) leaveSnapshot(ctx context.Context, r *run, c *coverage, pc *pendingChunk, err error) bool {
	if !pc.inSnapshot || ctx.Err() != nil || !errors.Is(err, source.ErrNotInSnapshot) && !m.permanent(err) {
		return false
	}
	c.snapshot = false
	m.log.Info("backfill reads beside the stream, not in the slot's snapshot", logkey.Backfill(r.rec.ID), logkey.Object(r.table.ID.String()), logkey.Err(err))
	return true
}
