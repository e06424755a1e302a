package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// Snapshot is what the applier needs of the snapshot a chunk was read in.
type Snapshot = source.Snapshot

// ChunkRead is a chunk as a backfill worker read it from the source.
type ChunkRead = source.Chunk

// ChunkResult tells a worker what became of its chunk.
type ChunkResult struct {
	// Retry asks the worker to read the same chunk again; Reason says why.
	Retry     bool
	Reason    string
	High      change.Key // the chunk's inclusive upper bound (nil for the last)
	Rows      int        // rows written for the range
	Conflicts int        // window changes reconciled with the chunk
	// ByRows asks a verify or a backfill to read the chunk again row by
	// row: its sums could not settle it (verifysum.go, loadsum.go).
	ByRows bool
	Err    error
	// sumFailed says the destination could not sum the range: verifies
	// compare rows from then on.
	sumFailed bool
	// inText asks the retry to read text: the binary values read did not
	// fit the table's shape when merged (reshapedBinary).
	inText bool
	// compare is a verified chunk's two sides, for the verify to compare.
	compare *rangeCompare
	// destSum is a summed chunk's destination sum still to come: the
	// verify settles the range with it (verifysum.go).
	destSum *destSum
}

// positionSource is what the applier needs of the source while merging.
type positionSource interface {
	WantPosition(change.LSN)
	InRange(ctx context.Context, t *change.Table, keys []change.Key, low, high change.Key) ([]bool, error)
}

// rangeReader reads destination rows for verify; the applier only calls it
// while the writer is idle.
type rangeReader = sink.Reader

// readerOf is the destination as a rangeReader, nil when it cannot be read
// back (verify is refused before it would be needed).
func readerOf(snk sink.Sink) rangeReader {
	if r, ok := snk.(sink.Reader); ok {
		return r
	}
	return nil
}

// pendingChunk is a chunk between registration and merge. Registration
// happens before the chunk's snapshot is taken; every transaction the
// applier processes afterwards lands in the window.
type pendingChunk struct {
	table  *change.Table
	regSeq uint64
	// regCommit is the highest commit position of the transactions the
	// applier processed before the chunk registered: a snapshot whose rule
	// is a log position must see it (see raced).
	regCommit change.LSN
	// floor is the highest snapshot xmin known when the chunk registered:
	// the chunk's own snapshot, taken later, sees every id below it.
	floor      uint64
	backfillID int64
	submitted  bool
	read       ChunkRead
	low        change.Key
	// ends marks a chunk that reaches the end of its key range: its range
	// ends at upto (nil: the end of the table), not at its last row.
	ends bool
	upto change.Key
	// bounded marks a chunk that ends a run at its last row (a sample)
	// rather than at the end of its range.
	bounded bool
	// last marks the run's final chunk: its cursor is done.
	last bool
	// scope is the filter and column subset the chunk was read with: then
	// the destination's rows outside it are left alone.
	scope      chunkSpec
	rowsBefore int64
	verify     bool // compare with the destination instead of writing
	// wantSnapshot asks that the chunk be read in the slot's exported
	// snapshot, and inSnapshot, set at registration, grants it; release
	// ends its claim on the snapshot, once its read is done or it is
	// abandoned before.
	wantSnapshot, inSnapshot bool
	release                  func()
	window                   []windowTxn
	changes                  int
	overflow                 bool
	result                   chan ChunkResult
	// passStart and passEnd mark a verify's first and last read of its
	// table: a destination read by replay starts afresh at the first and
	// drops its replay after the last.
	passStart, passEnd bool
	// sumLater has a verify's destination sum taken in a snapshot and
	// run off the applier (a verify that trails a load: the load writes
	// on meanwhile); otherwise the applier sums it itself.
	sumLater bool
	// wholeSum marks a verify's sum of a whole piece, bounded by a merged
	// chunk's high key rather than by its size (verifypass.go).
	wholeSum bool
}

type windowTxn struct {
	xid     uint32
	commit  change.LSN
	changes []change.Change
}

type applierRequest struct {
	table    *tableRequest // see schemawatch.go
	register *pendingChunk
	ack      chan struct{}
	submit   *pendingChunk
	abandon  *pendingChunk
}

// applierConfig tunes the applier.
type applierConfig struct {
	BatchChanges int
	// ChunkRows is the backfill's chunk size: small chunks ready together
	// share one destination commit up to that many rows read.
	ChunkRows        int
	BatchDelay       time.Duration
	WindowMaxChanges int
	// RaceHorizon is how long an applied transaction's id is remembered to
	// detect a chunk snapshot that missed it (see docs/backfill.md).
	RaceHorizon time.Duration
	// DateColumns are the columns whose values in the rows a chunk changes
	// are recorded, by table (docs/lineage.md).
	DateColumns map[change.TableID][]string
	// LateData are the columns whose values in the rows a live change
	// touches are checked for late data, by table.
	LateData map[change.TableID][]config.LateRule
	// ChunkLanes is how many batches of merged chunks may be in flight at
	// once, of tables apart: the writer's chunk lanes (lane.go). At most
	// one when 0.
	ChunkLanes int
	// LanesOpen, when set, lowers that bound to the lanes the writer could
	// open (a destination refusing connections).
	LanesOpen *atomic.Int32
}

// applier is the single goroutine that orders everything the destination
// receives: transactions in commit order, and merged chunks at the point of
// the stream where they are correct. It hands batches to the writer.
type applier struct {
	done <-chan struct{} // closed when the applier's run ends
	// noSums is set once the servers' range sums failed or misled a
	// verify: the run's later verifies compare rows (verifysum.go).
	noSums   atomic.Bool
	cfg      applierConfig
	stream   string
	src      positionSource
	dest     rangeReader
	log      *slog.Logger
	events   <-chan change.Event
	requests chan applierRequest
	out      chan<- *outBatch
	lag      *lagClock    // told each batch's first transaction; may be nil
	schema   *schemaState // nil: shapes are not followed (tests)
	regen    *regenerator // nil: no generated column is read (tests)
	refused  *refusals    // tables the destination refused; nil: not followed (tests)

	skipUpTo change.LSN // transactions ending at or below it are replays
	position change.LSN
	resume   string // the source's resume token at position
	seq      uint64
	applied  map[uint32]appliedTxn
	order    []uint32  // applied xids, oldest first, for forgetting
	lastSnap time.Time // when a chunk's snapshot last pruned applied
	horizon  uint64    // the highest xmin of a submitted chunk's snapshot
	pending  []*pendingChunk
	batch    *outBatch
	lastSent change.LSN

	// lastCommit is the highest commit position of a transaction processed
	// (replays excluded), for the position rule of raced.
	lastCommit change.LSN

	// outq holds the batches ready for the writer, oldest first (see
	// handoff.go); inFlight are the batches of merged chunks until each is
	// committed, and the writer tells their commits on chunksCommitted.
	outq            []*outBatch
	inFlight        []*outBatch
	chunksCommitted chan *outBatch
	// held are the next events, taken while the applier waited for a
	// commit (flushAndWait) so the lag clock hears of a transaction; run
	// handles them before reading on.
	held []change.Event
	// handling is the transaction whose schema change is being made: a
	// wait for a commit meanwhile counts it on the lag clock.
	handling *change.Txn
	// joined counts the chunks merged into a batch another chunk opened
	// (joinReady), for tests.
	joined atomic.Int64
	// summedLater counts the ranges whose destination sum was taken in a
	// snapshot off the applier (verifysum.go): a test's evidence.
	summedLater atomic.Int64
	// loadedBySums counts the backfill chunks whose range its sums found
	// equal, so that nothing was written (loadsum.go).
	loadedBySums atomic.Int64
	// loadSumsDiffered counts the backfill chunks whose sums differed, so
	// that their rows were read and written.
	loadSumsDiffered atomic.Int64
	pace             *chunkPace // learns chunk write times; nil: not paced
	// load is a first start's load in the slot's snapshot (nil: none).
	load *snapshotLoad
}

type appliedTxn struct {
	seq uint64
	at  time.Time
}

// outBatch is a sink batch plus what to report once it is committed.
type outBatch struct {
	sink.Batch
	changes  int
	events   int  // changes of the source's transactions (not chunk rows)
	timed    bool // its first transaction was told to the lag clock
	counters map[change.TableID]*objectCounts
	chunks   []committedChunk
	done     chan struct{} // closed once committed, when someone waits
	took     time.Duration // the writer's Apply, set before done is closed
	// committed is told the batch once it is committed (the applier's
	// batches of merged chunks); nil: no one is.
	committed chan<- *outBatch
	// chunkTables are the tables of a batch of merged chunks, noted when
	// it is sent: the applier's own copy, as the writer may drop a
	// refused table's cursor from the batch meanwhile.
	chunkTables []change.TableID
}

// chunksOpen tells whether merged chunks wait in b, not yet sent.
func (b *outBatch) chunksOpen() bool { return len(b.chunks) > 0 }

type objectCounts struct{ events, bytes int64 }

type committedChunk struct {
	backfillID int64
	table      change.TableID
	rows       int
	bytes      int64
	applied    *sink.Chunk // as Apply left it; nil for a range its sums found equal
	last       bool
}

func newApplier(done <-chan struct{}, cfg applierConfig, stream string, src positionSource, dest rangeReader, log *slog.Logger, events <-chan change.Event, out chan<- *outBatch, start change.LSN) *applier {
	return &applier{
		done: done, cfg: cfg, stream: stream, src: src, dest: dest, log: log, events: events, out: out,
		requests: make(chan applierRequest), chunksCommitted: make(chan *outBatch, max(1, cfg.ChunkLanes)),
		skipUpTo: start, position: start, lastSent: start,
		applied: map[uint32]appliedTxn{},
	}
}

// register opens a chunk's window. It returns once the applier has recorded
// it, so the caller may take the chunk's snapshot right after.
func (a *applier) register(ctx context.Context, pc *pendingChunk) error {
	pc.result = make(chan ChunkResult, 1)
	ack := make(chan struct{})
	select {
	case a.requests <- applierRequest{register: pc, ack: ack}:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.done:
		return errApplierGone
	}
	select {
	case <-ack:
		return nil
	case <-a.done:
		return errApplierGone
	case <-ctx.Done():
		a.abandon(pc) // it may be registered already
		return ctx.Err()
	}
}

// errApplierGone: the stream stopped while a chunk was on its way.
var errApplierGone = fmt.Errorf("the stream stopped meanwhile: %w", ErrNotRunning)

// submit hands over a registered chunk's read and waits for its merge.
func (a *applier) submit(ctx context.Context, pc *pendingChunk) (ChunkResult, error) {
	select {
	case a.requests <- applierRequest{submit: pc}:
	case <-ctx.Done():
		a.abandon(pc)
		return ChunkResult{}, ctx.Err()
	case <-a.done:
		return ChunkResult{}, errApplierGone
	}
	select {
	case r := <-pc.result:
		return r, r.Err
	case <-a.done:
		return ChunkResult{}, errApplierGone
	case <-ctx.Done():
		a.abandon(pc)
		return ChunkResult{}, ctx.Err()
	}
}

// run processes events and chunk requests until ctx ends or events closes.
// A batch with changes goes as soon as the writer is idle (handoff.go);
// one that only moves the position is queued at the latest cfg.BatchDelay
// after it first did: the flush timer is armed then.
func (a *applier) run(ctx context.Context) error {
	a.batch = a.newBatch()
	ticker := time.NewTicker(a.cfg.BatchDelay)
	defer ticker.Stop()
	flush := time.NewTimer(a.cfg.BatchDelay)
	flush.Stop()
	defer flush.Stop()
	armed := false
	arm := func() {
		if !armed && a.pendingOutput() {
			flush.Reset(a.cfg.BatchDelay)
			armed = true
		}
	}
	for {
		if len(a.held) > 0 {
			if err := a.handleHeld(ctx); err != nil {
				return err
			}
			arm()
			continue
		}
		next, out := a.nextOut()
		events := a.events
		if len(a.outq) >= maxQueued {
			events = nil // back-pressure: the writer is behind
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case out <- next:
			a.handedOver(next)
		case b := <-a.chunksCommitted:
			if err := a.chunkCommitted(ctx, b); err != nil {
				return err
			}
			arm()
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if err := a.handleEvent(ctx, ev); err != nil {
				return err
			}
			arm()
		case req := <-a.requests:
			if err := a.handleRequest(ctx, req); err != nil {
				return err
			}
			arm()
		case <-flush.C:
			armed = false
			// The batch may have been written meanwhile (it filled up): then
			// this writes what came since, a little early.
			if a.pendingOutput() {
				a.flush()
			}
			arm()
		case <-a.refused.wakeC():
			a.takeRefusals()
		case <-ticker.C:
			a.forgetOldXids()
		}
	}
}

// pendingOutput says whether the batch holds something to write: changes,
// chunks, or a position the destination has not been told.
func (a *applier) pendingOutput() bool {
	return len(a.batch.Ops) > 0 || a.position > a.lastSent
}

func (a *applier) newBatch() *outBatch {
	return &outBatch{
		Batch:    sink.Batch{Stream: a.stream, Cursors: map[change.TableID]sink.Cursor{}},
		counters: map[change.TableID]*objectCounts{},
	}
}

func (a *applier) handleEvent(ctx context.Context, ev change.Event) error {
	if ev.Txn != nil {
		txn := ev.Txn
		if txn.EndLSN <= a.skipUpTo {
			return nil // replayed: the destination already has it
		}
		a.handling = txn
		err := a.conformTxn(ctx, txn)
		a.handling = nil
		if err != nil {
			return err
		}
		if err := a.regen.fill(ctx, txn); err != nil {
			return err
		}
		a.seq++
		a.applied[txn.Xid] = appliedTxn{seq: a.seq, at: time.Now()}
		a.lastCommit = max(a.lastCommit, txn.CommitLSN)
		a.order = append(a.order, txn.Xid)
		for _, p := range a.pending {
			a.addToWindow(p, txn)
		}
		for i := range txn.Changes {
			c := &txn.Changes[i]
			op := sink.Op{Change: c, Txn: txn}
			if rules := a.cfg.LateData[c.Table.ID]; len(rules) > 0 {
				op.Changed = sink.NewChanges(lateColumns(rules))
			}
			a.batch.Ops = append(a.batch.Ops, op)
			cnt := a.counter(c.Table.ID)
			cnt.events++
			cnt.bytes += int64(c.Bytes)
		}
		a.batch.changes += len(txn.Changes)
		a.batch.events += len(txn.Changes)
		a.pace.live(time.Now(), txn.Changes)
		if !a.batch.timed {
			a.batch.timed = true
			a.lag.received(txn.EndLSN, txn.CommitTime)
		}
		if txn.EndLSN > a.position {
			a.position, a.resume = txn.EndLSN, ev.Resume
		}
	} else if ev.Progress > a.position {
		a.position, a.resume = ev.Progress, ev.Resume
	}
	if err := a.mergeReady(ctx); err != nil {
		return err
	}
	if a.batch.changes >= a.cfg.BatchChanges {
		a.flush()
	}
	return nil
}

func (a *applier) counter(id change.TableID) *objectCounts {
	c := a.batch.counters[id]
	if c == nil {
		c = &objectCounts{}
		a.batch.counters[id] = c
	}
	return c
}

func (a *applier) addToWindow(p *pendingChunk, txn *change.Txn) {
	if p.overflow {
		return
	}
	var mine []change.Change
	for _, c := range txn.Changes {
		if c.Table.ID != p.table.ID {
			continue
		}
		// A change of another shape than the chunk's is translated when
		// the chunk is merged (conformChunk).
		mine = append(mine, c)
	}
	if len(mine) == 0 {
		return
	}
	p.window = append(p.window, windowTxn{xid: txn.Xid, commit: txn.CommitLSN, changes: mine})
	p.changes += len(mine)
	if p.changes > a.cfg.WindowMaxChanges {
		// Bounded memory: drop the window and have the chunk read again.
		p.overflow, p.window = true, nil
	}
}

func (a *applier) handleRequest(ctx context.Context, req applierRequest) error {
	if tr := req.table; tr != nil {
		tr.result <- a.handleTable(ctx, tr)
		return nil
	}
	if pc := req.register; pc != nil {
		pc.regSeq, pc.floor, pc.regCommit = a.seq, a.horizon, a.lastCommit
		// No transaction applied yet: the chunk's window holds every one
		// the slot streams, so the snapshot at its start will do.
		if pc.wantSnapshot && a.seq == 0 && a.load.acquire() {
			pc.inSnapshot, pc.release = true, sync.OnceFunc(a.load.release)
		}
		a.pending = append(a.pending, pc)
		close(req.ack)
		return nil
	}
	if pc := req.abandon; pc != nil {
		if pc.release != nil {
			pc.release()
		}
		a.finish(pc, ChunkResult{Retry: true, Reason: "read failed"})
		return nil
	}
	pc := req.submit
	pc.submitted = true
	if reason := a.raced(pc); reason != "" {
		a.finish(pc, ChunkResult{Retry: true, Reason: reason})
		return nil
	}
	if pc.read.Position > a.position {
		// Read beside the stream: it must run for the chunk to merge.
		a.load.start("a chunk read beside the stream waits for it")
	}
	a.src.WantPosition(pc.read.Position)
	return a.mergeReady(ctx)
}

// raced tells whether the chunk's snapshot missed a transaction that the
// applier had already passed on before the chunk was registered: its commit
// was in the log (and applied) but not yet visible to new snapshots, for
// example while it waited for a synchronous standby. Such a transaction may
// be listed as in progress, or have an id at or past the snapshot's xmax.
// The chunk would overwrite its rows with older ones, so it is read again.
//
// A snapshot whose rule is a log position (MySQL, MariaDB) has the same
// race: with two-phase commit a transaction is written to the binlog, and
// sent to replicas, before the engine commits it and before the position
// of new consistent snapshots moves past it (MariaDB signals the binlog's
// readers before it takes LOCK_commit_ordered). A transaction applied
// before registration but committed after the snapshot's position is in
// neither the rows nor the window, so the chunk is read again.
func (a *applier) raced(pc *pendingChunk) string {
	if pc.overflow {
		return fmt.Sprintf("the table changed shape, or more than %d times, while the chunk was pending", a.cfg.WindowMaxChanges)
	}
	snap := pc.read.Snapshot
	if p, ok := snap.(source.PositionSnapshot); ok {
		if pc.regCommit != 0 && !p.SeesCommit(pc.regCommit) {
			return fmt.Sprintf("a transaction committed at %d was applied before the chunk's snapshot (at %d) saw it", pc.regCommit, pc.read.Position)
		}
		return ""
	}
	defer a.prune(snap)
	for i := len(a.order) - 1; i >= 0; i-- {
		xid := a.order[i]
		t, ok := a.applied[xid]
		if ok && t.seq <= pc.regSeq && !snap.VisibleXid(xid) {
			return fmt.Sprintf("transaction %d was applied before it became visible to the chunk's snapshot", xid)
		}
	}
	return ""
}

// prune forgets applied transactions that neither this snapshot nor any
// pending chunk's future snapshot can miss: ids below this snapshot's xmin
// and below the floor of every chunk still waiting for its snapshot.
func (a *applier) prune(snap Snapshot) {
	a.lastSnap = time.Now()
	a.horizon = max(a.horizon, snap.Horizon())
	limit := snap.Horizon()
	for _, p := range a.pending {
		if !p.submitted {
			limit = min(limit, p.floor)
		}
	}
	kept := a.order[:0]
	for _, xid := range a.order {
		if snap.Widen(xid) < limit {
			delete(a.applied, xid)
			continue
		}
		kept = append(kept, xid)
	}
	a.order = kept
}

// forgetOldXids bounds the memory of applied transactions while no chunk
// prunes it (no backfill is running): those older than RaceHorizon go.
func (a *applier) forgetOldXids() {
	if time.Since(a.lastSnap) < a.cfg.RaceHorizon {
		return
	}
	horizon := time.Now().Add(-a.cfg.RaceHorizon)
	n := 0
	for _, xid := range a.order {
		t, ok := a.applied[xid]
		if ok && !t.at.Before(horizon) {
			break
		}
		delete(a.applied, xid)
		n++
	}
	a.order = a.order[n:]
}

// abandon drops a registered chunk that will not be submitted or whose
// result nobody waits for. Dropping a chunk already finished does nothing.
func (a *applier) abandon(pc *pendingChunk) {
	select {
	case a.requests <- applierRequest{abandon: pc}:
	case <-a.done:
	}
}
