package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/pgbinary"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// The applier's side of a chunk: once the stream has passed its position,
// its rows are reconciled with its window (Merge) and written in a batch of
// their own, or compared with the destination (verify).

// finish removes a chunk from the pending ones and hands its result over;
// a chunk no longer pending (abandoned, or finished) gets nothing.
func (a *applier) finish(pc *pendingChunk, r ChunkResult) {
	for i, p := range a.pending {
		if p == pc {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
			pc.result <- r
			return
		}
	}
}

// mergeReady merges, in registration order, every submitted chunk whose
// position the stream has passed, while fewer batches of merged chunks are
// in flight than the writer has chunk lanes (cfg.ChunkLanes): the others
// wait (their windows keep growing). A chunk waits too while a batch of
// its table is in flight. Chunks of other tables ready at the same moment
// join the batch while the rows they read add up to at most one chunk
// (ChunkRows, as paced for their tables), so a live change still waits for one chunk's
// worth of rows at most, and a stream of many small tables pays one
// commit for several of them rather than one each.
func (a *applier) mergeReady(ctx context.Context) error {
	for len(a.pending) > 0 && len(a.inFlight) < a.chunkLanes() {
		ready := a.nextToMerge()
		if ready == nil {
			return nil
		}
		if err := a.merge(ctx, ready); err != nil {
			return err
		}
		if err := a.joinReady(ctx, ready); err != nil {
			return err
		}
		if a.batch.chunksOpen() {
			a.sendChunks()
		}
	}
	return nil
}

// nextToMerge is the first pending chunk, in registration order, that is
// submitted, whose position the stream has passed, and that may be merged
// now: any when no batch of chunks is in flight; else one of a table none
// of them holds, and not a verify or a summed chunk: those compare with
// the destination, which must hold every chunk before them. Such a chunk
// waits for the batches in flight, and no later one is merged before it.
func (a *applier) nextToMerge() *pendingChunk {
	for _, p := range a.pending {
		if !p.submitted || a.position < p.read.Position {
			continue
		}
		switch {
		case len(a.inFlight) == 0:
			return p
		case p.verify || p.read.Sum != nil:
			return nil
		case !a.writing(p.table.ID):
			return p
		}
	}
	return nil
}

// chunkLanes is how many batches of merged chunks may be in flight.
func (a *applier) chunkLanes() int {
	n := max(1, a.cfg.ChunkLanes)
	if open := a.cfg.LanesOpen; open != nil {
		n = min(n, max(1, int(open.Load())))
	}
	return n
}

// writing tells whether a batch in flight holds a chunk or a cursor of the
// table.
func (a *applier) writing(id change.TableID) bool {
	for _, b := range a.inFlight {
		if slices.Contains(b.chunkTables, id) {
			return true
		}
	}
	return false
}

// nextReady is the first pending chunk, in registration order, that is
// submitted and whose position the stream has passed, and that ok accepts
// (nil: any).
func (a *applier) nextReady(ok func(*pendingChunk) bool) *pendingChunk {
	for _, p := range a.pending {
		if p.submitted && a.position >= p.read.Position && (ok == nil || ok(p)) {
			return p
		}
	}
	return nil
}

// joinReady merges into the batch that first's chunk opened the chunks of
// other tables that are ready, while their rows fit in one chunk.
func (a *applier) joinReady(ctx context.Context, first *pendingChunk) error {
	if !a.batch.chunksOpen() {
		return nil // first was a verify, a retry or a failure: nothing to join
	}
	// One chunk's rows, as paced for the live changes that would wait for
	// a chunk of any of the batch's tables (chunkpace.go).
	now := time.Now()
	budget := a.pace.limitFor(a.cfg.ChunkRows, first.table.ID, now)
	rows := len(first.read.Rows)
	tables := map[change.TableID]bool{first.table.ID: true}
	for {
		next := a.nextReady(func(p *pendingChunk) bool {
			// Not a summed chunk: it waits for the batch before it.
			return !p.verify && p.read.Sum == nil && !tables[p.table.ID] && !a.writing(p.table.ID) &&
				rows+len(p.read.Rows) <= min(budget, a.pace.limitFor(a.cfg.ChunkRows, p.table.ID, now))
		})
		if next == nil {
			return nil
		}
		budget = min(budget, a.pace.limitFor(a.cfg.ChunkRows, next.table.ID, now))
		rows += len(next.read.Rows)
		tables[next.table.ID] = true
		if err := a.merge(ctx, next); err != nil {
			return err
		}
		a.joined.Add(1)
	}
}

func (a *applier) merge(ctx context.Context, pc *pendingChunk) error {
	if pc.overflow {
		a.finish(pc, ChunkResult{Retry: true, Reason: "window overflow"})
		return nil
	}
	shape, err := a.conformChunk(ctx, pc)
	if err != nil {
		return err
	}
	if shape == nil { // the table was stopped by a schema change
		a.finish(pc, ChunkResult{Err: errors.New(a.schema.stopped[pc.table.ID])})
		return nil
	}
	if reshapedBinary(pc.read, shape) {
		// A widened column's binary values are in the old type's form,
		// which the new one does not read; an added column would leave
		// every row partial: the chunk is read again, in the new shape.
		a.finish(pc, ChunkResult{Retry: true, Reason: "the shape of a chunk read in binary changed", inText: true})
		return nil
	}
	if reshapedText(pc.read, shape) {
		// Its values are the old type's text, which the widened column
		// would read as another value than the source's ALTER made.
		a.finish(pc, ChunkResult{Retry: true, Reason: "a column of a chunk read in text was widened to a type whose text differs"})
		return nil
	}
	pc.table = shape
	t := pc.table
	high := pc.upto
	if (!pc.ends || pc.bounded) && len(pc.read.Rows) > 0 {
		high = t.RowKey(pc.read.Rows[len(pc.read.Rows)-1])
	}
	if sum := pc.read.Sum; sum != nil && !pc.ends {
		high = sum.Last
	}
	var window []change.Change
	for _, w := range pc.window {
		if !source.Sees(pc.read.Snapshot, w.xid, w.commit) {
			window = append(window, w.changes...)
		}
	}
	if pc.read.Sum != nil {
		if pc.verify {
			a.verifySummed(ctx, pc, high, window)
		} else {
			a.loadSummed(ctx, pc, high, window)
		}
		return nil
	}
	inRange, err := a.classify(ctx, t, window, pc.low, high)
	if err != nil {
		// The source was unreachable for a moment: read the chunk again.
		a.log.Warn("classifying window keys failed; the chunk is read again", logkey.Object(t.ID.String()), logkey.Err(err))
		a.finish(pc, ChunkResult{Retry: true, Reason: err.Error()})
		return nil
	}
	rows, conflicts, unresolved := Merge(t, pc.read.Rows, window, inRange)
	if unresolved {
		a.log.Debug("chunk row keeps destination value of an unchanged TOAST column", logkey.Object(t.ID.String()))
	}
	if pc.verify {
		cmp, err := a.verifyMerged(ctx, pc, high, rows)
		a.finish(pc, ChunkResult{High: high, Rows: len(rows), Conflicts: conflicts, compare: cmp, Err: err})
		return nil
	}
	if len(a.batch.Ops) > 0 && !a.batch.chunksOpen() {
		a.flush() // the live changes so far go first, in a batch of their own
	}
	chunk := &sink.Chunk{Table: t, Low: pc.low, High: high, Rows: rows,
		Keep: pc.scope.Filter != nil || pc.scope.Columns != nil, UpdateOnly: pc.scope.Columns != nil,
		BackfillID: pc.backfillID, Last: pc.last}
	if cols := a.cfg.DateColumns[t.ID]; len(cols) > 0 {
		chunk.Changed = sink.NewChanges(cols)
	}
	a.batch.Ops = append(a.batch.Ops, sink.Op{Chunk: chunk})
	a.batch.changes += len(rows)
	after := high
	if pc.last {
		after = pc.low
	}
	a.batch.Cursors[t.ID] = sink.Cursor{BackfillID: pc.backfillID, After: after, Done: pc.last, Rows: pc.rowsBefore + int64(len(rows))}
	a.batch.chunks = append(a.batch.chunks, committedChunk{backfillID: pc.backfillID, table: t.ID, rows: len(rows), bytes: pc.read.Bytes, applied: chunk, last: pc.last})
	a.finish(pc, ChunkResult{High: high, Rows: len(rows), Conflicts: conflicts})
	return nil
}

// sendChunks queues the batch of merged chunks: no other chunk of its
// tables is merged until it is committed, so a live change waits for one
// chunk write of its table at most.
func (a *applier) sendChunks() {
	a.batch.committed = a.chunksCommitted
	a.batch.chunkTables = slices.Collect(maps.Keys(a.batch.Cursors))
	a.inFlight = append(a.inFlight, a.batch)
	a.flush()
}

// classify decides, in one round trip at most, which keys the window's
// changes touch inside the chunk's range.
func (a *applier) classify(ctx context.Context, t *change.Table, window []change.Change, low, high change.Key) (func(change.Key) bool, error) {
	seen := map[string]bool{}
	var keys []change.Key
	add := func(k change.Key) {
		if k == nil {
			return
		}
		enc := k.Encode()
		if _, dup := seen[enc]; !dup {
			seen[enc] = false
			keys = append(keys, k)
		}
	}
	for _, c := range window {
		add(c.OldKey)
		if c.Row != nil {
			add(t.RowKey(c.Row))
		}
	}
	in, err := a.src.InRange(ctx, t, keys, low, high)
	if err != nil {
		return nil, fmt.Errorf("classify window keys of %s: %w", t.ID, err)
	}
	for i, k := range keys {
		seen[k.Encode()] = in[i]
	}
	return func(k change.Key) bool { return seen[k.Encode()] }, nil
}

// reshapedText reports whether a chunk lands in a shape where a column it
// read was widened to a type whose text differs (real to double
// precision): its text values would be read as the old type's values.
func reshapedText(read ChunkRead, to *change.Table) bool {
	from := read.Table
	if from == nil || from == to {
		return false
	}
	for _, c := range to.Columns {
		if j := matchColumn(from, c); j >= 0 && change.WidenedTextDiffers(from.Columns[j], c) {
			return true
		}
	}
	return false
}

// reshapedBinary reports whether a chunk read in binary values lands in a
// shape where a column it read has another type, a column it did not read
// is added, or a column cannot travel in binary (pgbinary.TableOK).
func reshapedBinary(read ChunkRead, to *change.Table) bool {
	from := read.Table
	if from == nil || from == to || !pgbinary.HasBinary(read.Rows) {
		return false
	}
	if !pgbinary.TableOK(to) {
		return true
	}
	for _, c := range to.Columns {
		if j := matchColumn(from, c); j < 0 || from.Columns[j].TypeOID != c.TypeOID {
			return true
		}
	}
	return false
}
