package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// work runs one backfill: chunk by chunk in key order through what it
// covers, each chunk registered with the applier before it is read and
// merged at its log position; then it verifies what it covered. It returns
// when the backfill is complete, failed, stopped or the stream detaches
// (ctx ends).
func (m *backfills) work(ctx context.Context, rt *runtime, r *run, after change.Key, rowsBefore int64) {
	defer m.loadEnded(rt, r)
	// Only a table the stream captured before its slot was created can be
	// read in the slot's snapshot: ensureTable may capture it only now.
	captured := r.table != nil
	if !m.ensureTable(ctx, rt, r) {
		return
	}
	r.mu.Lock()
	c := &coverage{opts: optionsOf(r.rec), rowsBefore: rowsBefore, sampled: r.rec.RowsRead,
		fresh:    after == nil && rowsBefore == 0 && r.rec.RowsRead == 0,
		snapshot: rt.load != nil && captured && r.rec.StartedBy == store.StartedByAutomatic}
	r.mu.Unlock()
	var err error
	if c.scope, err = scopeOf(c.opts); err != nil {
		m.fail(r, err)
		return
	}
	if !m.activate(ctx, r) {
		return // stopped before it started
	}
	// The estimate (a source query and a record update) is taken once the
	// first chunk is read, beside its merge (estimateOnce). It is in
	// before the run completes.
	defer c.waitEstimate()
	c.pace = pacer{start: time.Now(), rate: m.rate(r)}
	if r.rec.StartedBy == StartedByReset {
		// A lost slot's reset backfills a destination that held the
		// rows until then: sum from the first chunk (loadsum.go).
		r.identical.Store(true)
	}
	if m.trails(rt, c) {
		c.trail = m.startTrail(ctx, rt, r, c.scope, after)
		defer c.trail.stop() // a run that ends otherwise drops it
	}
	ranges := c.opts.ranges
	if ranges == nil {
		ranges = []keyRange{{Low: after}}
	} else {
		c.rowsBefore = 0 // a repair reads its few ranges again from the first
	}
	for i, rg := range ranges {
		done, ok := m.fill(ctx, rt, r, c, rg, i == len(ranges)-1)
		if !ok {
			return
		}
		if done {
			break
		}
	}
	c.waitEstimate()
	// Before the verify, which waits for the live stream: the last run of
	// a first start's load lets it start here.
	m.loadEnded(rt, r)
	if m.allRead(ctx, r) {
		m.verifyEnd(ctx, rt, r, c)
	} else {
		m.persist(r) // stopped meanwhile: the last chunk's progress went with no record
	}
}

// coverage is a run's way through what it covers.
type coverage struct {
	opts       BackfillOptions
	scope      chunkSpec // what each read asks beyond its key range
	rowsBefore int64     // rows applied, as the destination's cursor counts them
	sampled    int64     // rows read
	pace       pacer
	// sampleEnd is the key a sample ended at.
	sampleEnd change.Key
	// ceiling caps the chunk size once a read ran into the source's
	// statement timeout (0: no cap).
	ceiling int
	// trail is the run's verify as it loads (nil: it verifies at its end).
	trail *verifyTrail
	// sums is the run's use of range sums, and ahead the next chunk's sum
	// read while the applier settles the one before (loadsum.go).
	sums  loadSums
	ahead *aheadSum
	// fresh says the run starts from its beginning (nothing read or
	// committed before); read that a chunk was read; exact that the run's
	// estimate is the rows it read; estimating, once set, waits for the
	// source's estimate (estimateOnce).
	fresh, read, exact bool
	estimating         *sync.WaitGroup
	// snapshot asks that chunks be read in the slot's exported snapshot
	// (snapload.go): a first start's automatic run, until a read there
	// fails.
	snapshot bool
}

// waitEstimate waits for the source's estimate, if one was asked.
func (c *coverage) waitEstimate() {
	if c.estimating != nil {
		c.estimating.Wait()
	}
}

// estimateOnce takes the run's row estimate from the source, in the
// background, once a chunk pc is read that is not the run's last. A run
// whose first chunk is its last (read from the start: nothing read or
// committed before, c.fresh) asks the source nothing: it records what it read as its estimate
// (exact). In a stream of many small tables the query was a source
// transaction a table, and before that a tenth of each table's time.
func (m *backfills) estimateOnce(ctx context.Context, rt *runtime, r *run, c *coverage, pc *pendingChunk) {
	first := !c.read
	c.read = true
	switch {
	case c.estimating != nil:
	case pc.last && (c.exact || first && c.fresh):
		c.exact = true // a read again of that chunk keeps it
	default:
		c.exact = false
		id := r.table.ID // r.table changes as chunks are read
		c.estimating = &sync.WaitGroup{}
		c.estimating.Go(func() { m.recordEstimate(ctx, rt, r, id) })
	}
}

// summer is the source's range checksum when the run's next chunk is to
// be summed first (loadsum.go), nil when its rows are read: a run of
// every row and column (no sample), into a destination that sums as the
// source does, whose range before was found equal.
func (c *coverage) summer(rt *runtime, r *run, byRows bool) source.RangeSummer {
	if c.opts.SampleRows > 0 || !c.sums.try(r.identical.Load(), byRows) {
		return nil
	}
	return rangeSummer(rt.applier, rt.src, c.scope)
}

// readChunk reads the chunk spec bounds: summed by summer (loadsum.go),
// or its rows when summer is nil. Where the source cannot sum, the rows
// are read and the run sums no more; a real failure fails that read too,
// and counts there.
func (m *backfills) readChunk(ctx context.Context, rt *runtime, r *run, c *coverage, summer source.RangeSummer, pc *pendingChunk, spec chunkSpec) (ChunkRead, error) {
	if pc.inSnapshot {
		return rt.load.read(ctx, pc, spec)
	}
	if summer != nil {
		read, err := summer.SumRange(ctx, r.table, spec)
		if err == nil || ctx.Err() != nil || source.IsStatementTimeout(err) {
			return read, err
		}
		m.log.Debug("the source could not sum a chunk's range; reading rows", logkey.Backfill(r.rec.ID), logkey.Err(err))
		c.sums.off = true
	}
	return rt.src.ReadChunk(ctx, r.table, spec)
}

// rowsRead is how many source rows a chunk read covers.
func rowsRead(read ChunkRead) int64 {
	if read.Sum != nil {
		return int64(read.Sum.Rows)
	}
	return int64(len(read.Rows))
}

// fill reads one key range of a run, chunk by chunk. done says the run has
// read all it covers (its final range, or a sample's last row); ok is false
// when the run ended otherwise (failed, stopped, the stream detached).
func (m *backfills) fill(ctx context.Context, rt *runtime, r *run, c *coverage, rg keyRange, final bool) (done, ok bool) {
	after := rg.Low
	rd := readState{delay: m.cfg.Retry.Initial}
	defer func() { c.ahead.drop(rt); c.ahead = nil }()
	for {
		pc, limit, ok := m.nextRead(ctx, rt, r, c, rg, after, &rd)
		if !ok {
			return false, false
		}
		if pc == nil {
			continue // a failed read, to be tried again
		}
		read := pc.read
		if read.Table != nil {
			r.table = read.Table // the shape it was read in: the next read starts from it
		}
		m.atChunkStage(ctx, r.table.ID, chunkRead)
		pc.upto, pc.rowsBefore = rg.High, c.rowsBefore
		if read.Sum != nil {
			pc.ends = read.Sum.Last == nil
			if !pc.ends {
				c.ahead = m.sumAhead(ctx, rt, r, c, read.Sum.Last, rg.High)
			}
		} else {
			pc.ends = len(read.Rows) < limit
		}
		pc.last = pc.ends && final
		if !pc.ends && sampleEnds(c.opts, c.sampled+int64(len(read.Rows))) {
			// The sample's last chunk: it ends at its last row, and the
			// destination's rows past it are left alone.
			pc.ends, pc.last, pc.bounded = true, true, true
		}
		m.estimateOnce(ctx, rt, r, c, pc)
		res, err := rt.applier.submit(ctx, pc)
		if err != nil {
			if ctx.Err() == nil {
				m.fail(r, err)
			}
			return false, false
		}
		if read.Sum != nil {
			differed := res.ByRows && res.Reason == reasonSumsDiffer
			c.sums.result(!res.Retry, differed, limit > m.cfg.ChunkSize)
			if differed {
				// Not identical: the next chunk sums only once a range
				// written row by row is found identical again.
				r.identical.Store(false)
			}
		}
		if res.Retry {
			if !m.retryChunk(ctx, r, res, &rd) {
				return false, false
			}
			continue
		}
		rd.retries = 0
		n := rowsRead(read)
		progress := func(b *store.Backfill) {
			b.RowsRead += n
			b.Bytes += read.Bytes
			b.WindowConflicts += int64(res.Conflicts)
		}
		if pc.last {
			// The run's end is recorded next (allRead), and this with it:
			// a store write fewer a table.
			r.mu.Lock()
			progress(&r.rec)
			if c.exact {
				r.rec.RowsEstimate = r.rec.RowsRead
			}
			r.mu.Unlock()
		} else {
			m.update(r, func(b *store.Backfill) {
				progress(b)
				r.progressStored = true
			})
		}
		c.pace.rows += n
		c.sampled += n
		after, c.rowsBefore = res.High, c.rowsBefore+int64(res.Rows)
		if pc.bounded {
			c.sampleEnd = res.High
		}
		if c.trail != nil {
			c.trail.merged(res.High, pc.last)
		}
		if pc.ends {
			return pc.last, true
		}
		if !m.throttle(ctx, r, &c.pace) {
			return false, false
		}
	}
}

// readState is how a run's next chunk is to be read.
type readState struct {
	delay   time.Duration // before the next try of a read that failed
	retries int           // chunk reads in a row that had to be read again
	inText  bool          // in text: its binary values did not fit
	byRows  bool          // row by row: its sums did not settle it
}

// nextRead registers and reads the run's chunk after after, or takes the
// one summed ahead when it starts there; limit is the rows it was read
// for. pc is nil after a failed read that is to be tried again; ok is
// false when the worker is to end.
func (m *backfills) nextRead(ctx context.Context, rt *runtime, r *run, c *coverage, rg keyRange, after change.Key, rd *readState) (pc *pendingChunk, limit int, ok bool) {
	ahead := c.ahead
	c.ahead = nil
	taken, n, err := ahead.take(rt, after, rd.byRows)
	if err != nil {
		return nil, 0, m.readFailed(ctx, r, c, n, err, &rd.delay)
	}
	if taken != nil {
		return taken, n, true
	}
	pc = &pendingChunk{table: r.table, backfillID: r.rec.ID, low: after, scope: c.scope, wantSnapshot: c.snapshot}
	if err := rt.applier.register(ctx, pc); err != nil {
		return nil, 0, false
	}
	m.atChunkStage(ctx, r.table.ID, chunkRegistered)
	summer := c.summer(rt, r, rd.byRows)
	if pc.inSnapshot {
		summer = nil // a sum is taken in a snapshot of its own
	}
	spec := pc.scope
	spec.After, spec.Upto, spec.Limit = after, rg.High, m.chunkLimit(rt, r, c, summer != nil)
	spec.Binary = !rd.inText && rt.binaryRead(r.table, spec)
	read, err := m.readChunk(ctx, rt, r, c, summer, pc, spec)
	rd.inText, rd.byRows = false, false
	if err != nil {
		rt.applier.abandon(pc)
		if m.leaveSnapshot(ctx, r, c, pc, err) {
			return nil, 0, true // read again at once, beside the stream
		}
		return nil, 0, m.readFailed(ctx, r, c, spec.Limit, err, &rd.delay)
	}
	rd.delay = m.cfg.Retry.Initial
	pc.read = read
	return pc, spec.Limit, true
}

// chunkLimit is how many rows the run's next chunk reads (summed: sums),
// paced.
func (m *backfills) chunkLimit(rt *runtime, r *run, c *coverage, summed bool) int {
	size := m.cfg.ChunkSize
	if !summed {
		return m.paced(rt, c, size, r.table)
	}
	if rt.applier.pace.quiet(time.Now()) {
		size = c.sums.rows(size)
	}
	return m.paced(rt, c, size, nil)
}

// paced is size as paced while live changes flow (the live changes that
// would wait for a chunk of rows of table t; any, for a sum: t nil), below
// a statement timeout's ceiling, up to a sample's end.
func (m *backfills) paced(rt *runtime, c *coverage, size int, t *change.Table) int {
	if t == nil {
		size = rt.applier.pace.limit(size, time.Now())
	} else {
		size = rt.applier.pace.limitFor(size, t.ID, time.Now())
	}
	if c.ceiling > 0 {
		size = min(size, c.ceiling)
	}
	return sampleLimit(c.opts, size, c.sampled)
}

// retryChunk prepares the read again of a chunk the applier handed back;
// false when the worker is to end.
func (m *backfills) retryChunk(ctx context.Context, r *run, res ChunkResult, rd *readState) bool {
	if res.ByRows {
		// Its sums did not settle the range: its rows are read now, at
		// once (not a retry: nothing failed).
		rd.byRows = true
		return true
	}
	m.log.Debug("chunk read again", logkey.Backfill(r.rec.ID), "reason", res.Reason)
	rd.inText = res.inText
	m.update(r, func(b *store.Backfill) { b.Retries++ })
	rd.retries++
	return rd.retries <= 1 || sleep(ctx, m.cfg.Retry.backoff(rd.retries-1))
}

// readFailed handles a chunk read of limit rows that failed: an error no
// retry cures fails the run; a read that ran into the source's statement
// timeout is read again at half the size, down to timeoutFloor, then fails
// the run; any other is retried after delay, which grows. It returns false
// when the worker is to end.
func (m *backfills) readFailed(ctx context.Context, r *run, c *coverage, limit int, err error, delay *time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if source.IsStatementTimeout(err) {
		if floor := timeoutFloor(m.cfg.ChunkSize); limit > floor {
			c.ceiling = max(floor, limit/2)
			m.log.Warn("chunk read ran into the statement timeout; reading smaller chunks", logkey.Backfill(r.rec.ID),
				logkey.Object(r.table.ID.String()), "rows", limit, "next_rows", c.ceiling)
			m.update(r, func(b *store.Backfill) { b.Retries++ })
			return true
		}
		m.fail(r, fmt.Errorf("%w; chunks of %d rows took as long, the smallest tidemark reads: raise source.read_timeouts.statement of stream %s (or make the table quicker to read)", err, limit, m.stream))
		return false
	}
	if m.permanent(err) {
		m.fail(r, err)
		return false
	}
	m.log.Warn("chunk read failed; retrying", logkey.Backfill(r.rec.ID), logkey.Object(r.table.ID.String()), logkey.Err(err))
	m.update(r, func(b *store.Backfill) { b.Retries++ })
	if !sleep(ctx, *delay) {
		return false
	}
	*delay = m.cfg.Retry.next(*delay)
	return true
}

// timeoutFloor is the smallest chunk a read that runs into the statement
// timeout is halved to: a sixteenth of chunk_size. Each try costs up to the
// timeout, so the halving stops after four.
func timeoutFloor(chunkSize int) int { return max(1, chunkSize/16) }

// ensureTable gives a run its table, streaming the table first when it is
// not (new, stopped by a schema change, or unstreamable at the start) and
// its destination table fits. It fails the run and returns false when the
// table cannot be backfilled.
func (m *backfills) ensureTable(ctx context.Context, rt *runtime, r *run) bool {
	if r.table == nil && rt.prepare != nil {
		t, err := rt.prepare(ctx, change.TableID{Schema: r.rec.Schema, Name: r.rec.Table})
		if err != nil {
			if ctx.Err() == nil {
				m.fail(r, err)
			}
			return false
		}
		r.table = t
	}
	if r.table == nil {
		id := change.TableID{Schema: r.rec.Schema, Name: r.rec.Table}
		why := rt.why(id)
		if why == "" {
			why = fmt.Sprintf("table %s is not streamed: it is excluded, or no longer exists on the source", id)
		}
		m.fail(r, errors.New(why))
		return false
	}
	return true
}

// activate records a starting run as Active, unless it was stopped in the
// meantime (Stop holds the lock while it records Stopped).
func (m *backfills) activate(ctx context.Context, r *run) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := change.TableID{Schema: r.rec.Schema, Name: r.rec.Table}
	if ctx.Err() != nil || m.active[id] != r {
		return false
	}
	err := m.updateWithObject(m.writeCtx(), r, func(b *store.Backfill) {
		b.Status = StatusActive
		if b.StartedAt == nil {
			now := time.Now().UTC()
			b.StartedAt = &now
		}
	}, store.RunObjectChange{Status: StatusActive})
	if err != nil && !errors.Is(err, context.Canceled) {
		m.log.Error("record backfill active", logkey.Backfill(r.rec.ID), logkey.Err(err))
	}
	return true
}

// allRead records a run that read its last chunk as Completed (unless it
// was stopped meanwhile: then it returns false) and lets the next pending
// run start.
func (m *backfills) allRead(ctx context.Context, r *run) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active[r.table.ID] != r {
		return false // stopped meanwhile
	}
	delete(m.active, r.table.ID)
	if !m.cfg.Verify {
		// No ending verify: said with the Completed record, not in a store
		// write of its own.
		r.mu.Lock()
		r.rec.Verify = &store.VerifySummary{Status: VerifyOff}
		r.mu.Unlock()
	}
	if err := m.completeLocked(context.WithoutCancel(ctx), r, false); err != nil {
		m.log.Error("record completed backfill", logkey.Backfill(r.rec.ID), logkey.Err(err))
	}
	m.scheduleLocked()
	return true
}

// maxPaceWait caps how far ahead of its pace a run may be made to wait.
const maxPaceWait = 100 * 365 * 24 * time.Hour

// pacer is a run's read pace: rows read since start at rate (0: no limit).
type pacer struct {
	start time.Time
	rows  int64
	rate  float64
}

// throttle waits until the rows read are within the run's rows per second;
// a limit changed meanwhile (SetRowsPerSecond) takes effect at once and
// paces from then on. It returns false when ctx ended.
func (m *backfills) throttle(ctx context.Context, r *run, p *pacer) bool {
	for {
		if rate := m.rate(r); rate != p.rate {
			*p = pacer{start: time.Now(), rate: rate}
		}
		if p.rate <= 0 {
			return ctx.Err() == nil
		}
		// In float seconds, capped: a tiny rate stored before rates were
		// bounded must pace slowly, not overflow into no limit.
		due := min(float64(p.rows)/p.rate, maxPaceWait.Seconds())
		wait := time.Until(p.start.Add(time.Duration(due * float64(time.Second))))
		if wait <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			return true
		case <-r.rateChanged():
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// completeLocked marks a run Completed (every row read and merged); loaded
// says the destination has also committed its last chunk.
func (m *backfills) completeLocked(ctx context.Context, r *run, loaded bool) error {
	if loaded {
		r.mu.Lock()
		now := time.Now().UTC()
		r.rec.LoadedAt = &now
		r.mu.Unlock()
		delete(m.byID, r.rec.ID)
	}
	if err := m.finishLocked(ctx, r, StatusCompleted, ""); err != nil {
		return err
	}
	if loaded {
		return m.markLoaded(ctx, r.rec)
	}
	return nil
}

func (m *backfills) markLoaded(ctx context.Context, rec store.Backfill) error {
	_, err := m.st.MarkRunObjectLoaded(ctx, m.stream, rec.Schema, rec.Table, rec.ID)
	return err
}

func (m *backfills) fail(r *run, err error) {
	m.log.Error("backfill failed", logkey.Backfill(r.rec.ID), logkey.Object(r.rec.Schema+"."+r.rec.Table), logkey.Err(err))
	m.mu.Lock()
	defer m.mu.Unlock()
	id := change.TableID{Schema: r.rec.Schema, Name: r.rec.Table}
	if m.active[id] != r {
		return // ended meanwhile (stopped, or failed by a schema change)
	}
	delete(m.active, id)
	delete(m.byID, r.rec.ID)
	if e := m.finishLocked(m.writeCtx(), r, StatusFailed, err.Error()); e != nil {
		m.log.Error("record failed backfill", logkey.Backfill(r.rec.ID), logkey.Err(e))
	}
	m.scheduleLocked()
}

// persist writes a run's record as it is.
func (m *backfills) persist(r *run) { m.update(r, func(*store.Backfill) {}) }

// update changes a run's record and persists it.
func (m *backfills) update(r *run, f func(*store.Backfill)) {
	r.mu.Lock()
	f(&r.rec)
	rec := r.rec
	err := m.st.UpdateBackfill(m.writeCtx(), rec)
	r.mu.Unlock()
	if err != nil {
		m.log.Error("record backfill progress", logkey.Backfill(rec.ID), logkey.Err(err))
		return
	}
	m.notify(rec)
}

// updateWithObject changes a run's record as update does, and its object's
// as o says, in one store write (UpdateBackfillAndObject); m.mu is held.
func (m *backfills) updateWithObject(ctx context.Context, r *run, f func(*store.Backfill), o store.RunObjectChange) error {
	r.mu.Lock()
	f(&r.rec)
	rec := r.rec
	_, err := m.st.UpdateBackfillAndObject(ctx, rec, o)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	m.notify(rec)
	return nil
}

// committed records what a destination commit loaded for each backfill,
// and the commit's counters (cs) with the runs it loaded whole: one store
// write (Store.RecordCommit) where there were one and one a run. The
// counters are written before any run's record tells of the commit (the
// console shows them together).
func (m *backfills) committed(ctx context.Context, b *outBatch, cs []store.TableCounters) {
	var loaded []*run
	var progress []func()
	for _, c := range b.chunks {
		m.mu.Lock()
		r := m.byID[c.backfillID]
		m.mu.Unlock()
		if r == nil {
			continue
		}
		if c.applied != nil {
			r.identical.Store(c.applied.Identical)
		}
		written := func(rec *store.Backfill) {
			rec.RowsWritten += int64(c.rows)
			if c.applied != nil {
				// Less a column subset's rows the destination lacked.
				rec.RowsWritten -= c.applied.Skipped
				rec.RowsRemoved += c.applied.Removed
			}
			rec.Chunks++
			if c.last {
				now := time.Now().UTC()
				rec.LoadedAt = &now
			}
		}
		if !c.last {
			progress = append(progress, func() { m.update(r, written) })
			continue
		}
		// A batch holds one chunk of a table at most (applier.writing):
		// no run is here twice, and its lock is taken once below.
		if slices.Contains(loaded, r) {
			m.log.Error("a commit held two last chunks of one backfill", logkey.Backfill(c.backfillID))
			continue
		}
		r.mu.Lock()
		written(&r.rec)
		r.mu.Unlock()
		loaded = append(loaded, r)
	}
	if len(loaded) == 0 {
		m.recordCounters(ctx, cs)
	} else {
		m.recordLoaded(ctx, cs, loaded)
	}
	for _, f := range progress {
		f()
	}
}

// recordLoaded records the runs a commit loaded whole, and their objects
// loaded, with the commit's counters.
func (m *backfills) recordLoaded(ctx context.Context, cs []store.TableCounters, loaded []*run) {
	m.mu.Lock() // initiate reads and writes the objects under it
	defer m.mu.Unlock()
	recs := make([]store.Backfill, len(loaded))
	for i, r := range loaded {
		delete(m.byID, r.rec.ID)
		r.mu.Lock() // each run's record is written in the order it changes
		recs[i] = r.rec
	}
	err := m.st.RecordCommit(ctx, m.stream, time.Now().UTC(), cs, recs)
	written := recs
	if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) {
		// A refused part (a node fenced out, a run removed) costs the
		// others nothing: each is written alone, the counters without
		// the fence. (Any other error may come after the commit did:
		// writing the counters again could count them twice.)
		m.log.Warn("record a commit's counters and loaded backfills together; recording them one by one", logkey.Err(err))
		m.recordCounters(ctx, cs)
		written = m.recordRunsLoaded(ctx, recs)
	} else if err != nil {
		// The commit may have happened: its counters are not written
		// again, the runs are (writing one twice changes nothing).
		m.log.Error("record a commit's counters and loaded backfills; recording the backfills alone", "backfills", len(recs), logkey.Err(err))
		written = m.recordRunsLoaded(ctx, recs)
	}
	for _, r := range loaded {
		r.mu.Unlock()
	}
	for _, rec := range written {
		m.notify(rec)
	}
}

// recordRunsLoaded records each run loaded, with its object, in a store
// write of its own, and returns those written.
func (m *backfills) recordRunsLoaded(ctx context.Context, recs []store.Backfill) []store.Backfill {
	var written []store.Backfill
	for _, rec := range recs {
		if _, err := m.st.UpdateBackfillAndObject(ctx, rec, store.RunObjectChange{Loaded: true}); err != nil {
			m.log.Error("record loaded backfill", logkey.Backfill(rec.ID), logkey.Err(err))
			continue
		}
		written = append(written, rec)
	}
	return written
}

// recordCounters adds a commit's counters to the objects'. They go
// without the write fence: they add up (a frozen node may add those of a
// batch the destination then refused), and are written after every
// destination commit.
func (m *backfills) recordCounters(ctx context.Context, cs []store.TableCounters) {
	if err := m.st.AddTablesCounters(store.WithoutWriteFence(ctx), m.stream, time.Now().UTC(), cs); err != nil {
		m.log.Error("record object counters", "objects", len(cs), logkey.Err(err))
	}
}
