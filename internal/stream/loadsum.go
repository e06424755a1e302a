package stream

import (
	"context"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// A backfill over a destination that already holds the source's rows (a
// re-backfill, a run resumed over what it wrote before) need not send
// them: where the source and the destination compute the same range
// checksum (verifysum.go), a chunk is first summed on the source, in the
// snapshot its rows would be read in, and the applier sums the
// destination's range when it merges the chunk. Equal sums, with no live
// change of the window in the range, say the destination's range is the
// source's at the merge (the argument of verifysum.go), so the chunk
// writes nothing but its cursor. Otherwise its rows are read and written
// as any chunk's. Which chunks are summed: docs/backfill.md, "Ranges the
// destination already holds".

// sumsFailedAfter is how many chunks of a run may turn out to differ from
// their sums, beyond an eighth of those that matched, before the run reads
// rows only: a destination that differs throughout, or whose sums never
// agree with the source's (a column of another type), costs a few sums.
const sumsFailedAfter = 2

// maxSumScale bounds how many chunks' worth of rows one sum covers: a
// range that sums equal doubles the next one's size, up to this many
// (fewer round trips and transactions a row on both servers), and one
// that differs or that live changes touch brings it back to one chunk.
// While live changes flow a sum covers one chunk, paced as a chunk's
// write: the destination's sum holds the applier.
const maxSumScale = 8

// loadSums is a run's use of range sums for its chunks.
type loadSums struct {
	matched, differed int
	off               bool // the run reads rows only from now on
	scale             int  // chunks' worth of rows the next sum covers (0: 1)
}

// try says whether the next chunk is summed first: sums are on, the
// range before was found equal (by its sum, or when written row by row,
// as identical is told), and the chunk is not read again row by row.
func (s *loadSums) try(identical, byRows bool) bool {
	return !s.off && identical && !byRows
}

// rows is how many rows the next sum covers, given a chunk's.
func (s *loadSums) rows(chunk int) int {
	return chunk * max(s.scale, 1)
}

// rowsAfterMatch is how many rows the sum after the one under way
// covers, should that one match: a sum read ahead is used only then.
func (s *loadSums) rowsAfterMatch(chunk int) int {
	return chunk * min(max(s.scale, 1)*2, maxSumScale)
}

// result takes in how a summed chunk went: settled (the sums matched),
// or read again row by row because its sums differed (differed) or for
// another reason (live changes touched it). A range of several chunks
// (several) that differs is not counted against the sums: its first
// chunk is written row by row, the next summed at one chunk's size.
func (s *loadSums) result(settled, differed, several bool) {
	switch {
	case settled:
		s.matched++
		s.scale = min(max(s.scale, 1)*2, maxSumScale)
	case differed && several:
		s.scale = 1
	case differed:
		s.differed++
		s.off = s.differed > sumsFailedAfter+s.matched/8
	default:
		s.scale = 1 // live changes flow here: small ranges
	}
}

// loadSummed settles a backfill chunk that was summed, over (pc.low,
// high]: with the destination's range equal to the source's, the batch
// takes the chunk's cursor and no rows; otherwise the chunk is read
// again row by row (ChunkResult.ByRows).
func (a *applier) loadSummed(ctx context.Context, pc *pendingChunk, high change.Key, window []change.Change) {
	byRows := func(reason string, conflicts int) {
		a.finish(pc, ChunkResult{Retry: true, ByRows: true, Reason: reason, Conflicts: conflicts})
	}
	t := pc.table
	ds, ok := a.dest.(sink.RangeSummer)
	if !ok {
		byRows("the destination cannot sum a range", 0)
		return
	}
	if reason, conflicts := a.sumsCannotSettle(ctx, pc, high, window); reason != "" {
		byRows(reason, conflicts)
		return
	}
	if err := a.flushAndWait(ctx); err != nil {
		a.finish(pc, ChunkResult{Err: err})
		return
	}
	rows, sum, err := ds.SumRange(ctx, t, pc.low, high)
	if err != nil && ctx.Err() != nil {
		a.finish(pc, ChunkResult{Err: ctx.Err()})
		return
	}
	if err != nil {
		// As a verify's: the rest of the stream's run compares rows; an
		// outage fails the row-by-row write too, and counts there.
		if a.noSums.CompareAndSwap(false, true) {
			a.log.Warn("backfills and verifies read rows from here on: the destination could not sum a range",
				logkey.Object(t.ID.String()), logkey.Err(err))
		}
		byRows(err.Error(), 0)
		return
	}
	if rows != pc.read.Sum.Rows || sum != pc.read.Sum.Sum {
		a.loadSumsDiffered.Add(1)
		byRows(reasonSumsDiffer, 0)
		return
	}
	after := high
	if pc.last {
		after = pc.low
	}
	a.batch.Cursors[t.ID] = sink.Cursor{BackfillID: pc.backfillID, After: after, Done: pc.last, Rows: pc.rowsBefore + int64(rows)}
	a.batch.chunks = append(a.batch.chunks, committedChunk{backfillID: pc.backfillID, table: t.ID, rows: rows, last: pc.last})
	a.loadedBySums.Add(1)
	a.finish(pc, ChunkResult{High: high, Rows: rows})
}

// aheadSum is a run's next chunk, registered and summed while the applier
// settles the chunk before it (whose destination sum holds the applier):
// the two servers sum side by side, as a verify's reads do.
type aheadSum struct {
	pc    *pendingChunk
	limit int
	done  chan struct{}
	err   error // the sum's, once done
}

// sumAhead registers the chunk after last, up to upto, and sums it in the
// background; nil when the run sums no more or the stream detached.
func (m *backfills) sumAhead(ctx context.Context, rt *runtime, r *run, c *coverage, last, upto change.Key) *aheadSum {
	summer := c.summer(rt, r, false)
	if summer == nil {
		return nil
	}
	pc := &pendingChunk{table: r.table, backfillID: r.rec.ID, low: last, scope: c.scope}
	if err := rt.applier.register(ctx, pc); err != nil {
		return nil
	}
	m.atChunkStage(ctx, r.table.ID, chunkRegistered)
	spec := c.scope
	size := m.cfg.ChunkSize
	if rt.applier.pace.quiet(time.Now()) {
		size = c.sums.rowsAfterMatch(size)
	}
	spec.After, spec.Upto, spec.Limit = last, upto, m.paced(rt, c, size, nil)
	a := &aheadSum{pc: pc, limit: spec.Limit, done: make(chan struct{})}
	go func(t *change.Table) {
		defer close(a.done)
		pc.read, a.err = summer.SumRange(ctx, t, spec)
	}(r.table)
	return a
}

// take is the chunk summed ahead, with the rows it was summed for, when
// it starts at after and its rows are not asked for; otherwise it is
// dropped and take returns nil. A sum that ran into the source's
// statement timeout is dropped with its error, for the run to read
// smaller chunks; one that failed otherwise is read again in turn, where
// a failure counts.
func (a *aheadSum) take(rt *runtime, after change.Key, byRows bool) (*pendingChunk, int, error) {
	if a == nil {
		return nil, 0, nil
	}
	<-a.done
	starts := sameKey(a.pc.low, after) && !byRows
	if !starts || a.err != nil || a.pc.read.Sum == nil {
		rt.applier.abandon(a.pc)
		if starts && source.IsStatementTimeout(a.err) {
			return nil, a.limit, a.err
		}
		return nil, 0, nil
	}
	return a.pc, a.limit, nil
}

// drop abandons a chunk summed ahead that is not taken.
func (a *aheadSum) drop(rt *runtime) {
	if a != nil {
		<-a.done
		rt.applier.abandon(a.pc)
	}
}
