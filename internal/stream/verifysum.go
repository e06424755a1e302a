package stream

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// A verify whose source and destination compute the same range checksum
// (source.RangeSummer, sink.RangeSummer of one SumKind) compares a range by
// its row count and checksum, each computed by its own server, and reads
// rows only for a range that cannot be settled so.
//
// The source sums the range in the snapshot a chunk read would take, and
// the applier sums the destination's range when it merges the chunk (the
// stream past the snapshot's position, everything before committed), as it
// reads the destination's rows for a row-by-row comparison. The chunk's
// window holds the changes the applier took from its registration to this
// merge; those the snapshot did not see are what separates the snapshot's
// rows from the destination's at the merge. When none of them falls in the
// range, the snapshot's rows of the range are its rows at the merge, so the
// two sums must agree. When one does, the sums differ, or the table's shape
// changed under the read, the range is read again row by row, which merges
// the window and names the keys that differ: a sum can only turn a range
// over to the row-by-row comparison, never settle one whose values (as
// their types print them) differ, short of a 64-bit hash collision.

// reasonSumsDiffer is the reason of a retry row by row whose sums differ.
const reasonSumsDiffer = "the range's checksums differ"

// rangeSummer is the source's range checksum when verify can use it for a
// scope (nil: compare row by row). A filter or a column subset selects
// rows or values the servers' sums do not; an event destination gives
// values back in its events' form; and sums that failed or misled once
// are not tried again in the stream's run.
func rangeSummer(a *applier, src chunkSource, scope chunkSpec) source.RangeSummer {
	ss, ok := src.(source.RangeSummer)
	if !ok || scope.Filter != nil || scope.Columns != nil || a.noSums.Load() {
		return nil
	}
	dest := a.dest
	ds, ok := dest.(sink.RangeSummer)
	if !ok || ds.SumKind() != ss.SumKind() {
		return nil
	}
	if _, events := dest.(sink.EventWriter); events {
		return nil
	}
	return ss
}

// verifySummed settles a summed chunk of the range (pc.low, high]: a match
// when the destination's sum equals the source's, otherwise a retry row by
// row (ChunkResult.ByRows).
func (a *applier) verifySummed(ctx context.Context, pc *pendingChunk, high change.Key, window []change.Change) {
	t := pc.table
	if reason, conflicts := a.sumsCannotSettle(ctx, pc, high, window); reason != "" {
		// Conflicts tells the verify that live changes flow here.
		a.finish(pc, ChunkResult{Retry: true, ByRows: true, Conflicts: conflicts, Reason: reason})
		return
	}
	if err := a.flushAndWait(ctx); err != nil {
		a.finish(pc, ChunkResult{Err: err})
		return
	}
	ds, ok := a.dest.(sink.RangeSummer)
	if !ok {
		a.finish(pc, ChunkResult{Err: fmt.Errorf("verify %s: the destination cannot sum a range", t.ID)})
		return
	}
	if rr, ok := a.dest.(sink.ReplayReader); ok {
		if pc.passStart {
			rr.EndReads(t.ID)
		}
		if pc.passEnd {
			defer rr.EndReads(t.ID)
		}
	}
	d := &destSum{t: t, low: pc.low, high: high, src: pc.read.Sum}
	if later, ok := ds.(sink.SnapshotSummer); ok && pc.sumLater {
		// The destination as committed now, summed on a connection of
		// its own: the stream goes on writing meanwhile, and the verify
		// settles the range when the sum is in (settle). Should no
		// snapshot be had (its connections busy or unreachable), the
		// applier sums as for any verify.
		wait, err := later.SumLater(ctx, t, pc.low, high)
		if err == nil {
			a.summedLater.Add(1)
			d.wait = wait
			a.finish(pc, ChunkResult{High: high, destSum: d})
			return
		}
		a.log.Debug("no snapshot to sum a range in; summing it now", logkey.Object(t.ID.String()), logkey.Err(err))
	}
	d.rows, d.sum, d.err = ds.SumRange(ctx, t, pc.low, high)
	a.finish(pc, d.result(a.log))
}

// sumsCannotSettle says why a summed chunk's range (pc.low, high] must be
// read row by row whatever the sums say ("" when they can settle it):
// the table's shape changed under the read, or a change of its window
// falls in it (conflicts counts those).
func (a *applier) sumsCannotSettle(ctx context.Context, pc *pendingChunk, high change.Key, window []change.Change) (reason string, conflicts int) {
	t := pc.table
	if pc.read.Table != nil && pc.read.Table != t && !newTranslation(pc.read.Table, t).identity {
		return "the table's shape changed under the read", 0
	}
	touched, err := a.windowTouches(ctx, t, window, pc.low, high)
	if err != nil {
		return err.Error(), 0
	}
	if touched > 0 {
		return "live changes touched the range", touched
	}
	return "", 0
}

// destSum is the destination's side of a summed range, to hold against
// the source's.
type destSum struct {
	t         *change.Table
	low, high change.Key
	src       *source.RangeSum
	// wait waits for a sum taken later (sink.SnapshotSummer); nil once
	// rows, sum and err hold it.
	wait func(context.Context) (int, string, error)
	rows int
	sum  string
	err  error
}

// settle waits for the destination's sum, if it is still to come, and
// says what became of the range, as the applier does for a sum it took
// itself.
func (d *destSum) settle(ctx context.Context, log *slog.Logger) ChunkResult {
	if d.wait != nil {
		d.rows, d.sum, d.err = d.wait(ctx)
		d.wait = nil
		if d.err != nil && ctx.Err() != nil {
			return ChunkResult{Err: ctx.Err()}
		}
	}
	return d.result(log)
}

// result is the range's result once the destination's sum is in: a
// match, or a retry row by row.
func (d *destSum) result(log *slog.Logger) ChunkResult {
	if d.err != nil {
		// A destination that cannot sum (a role that may not run the
		// hash functions, say) is compared row by row from here on; an
		// outage fails the row-by-row read too, and counts there.
		log.Debug("the destination could not sum a range", logkey.Object(d.t.ID.String()), logkey.Err(d.err))
		return ChunkResult{Retry: true, ByRows: true, Reason: d.err.Error(), sumFailed: true}
	}
	if d.rows != d.src.Rows || d.sum != d.src.Sum {
		return ChunkResult{Retry: true, ByRows: true, Reason: reasonSumsDiffer}
	}
	check := RangeCheck{Low: keyText(d.low), High: keyText(d.high), SourceRows: d.src.Rows, DestRows: d.rows,
		SourceSum: d.src.Sum, DestSum: d.sum, Match: true, ComparedBy: ComparedByChecksums}
	return ChunkResult{High: d.high, Rows: d.rows, compare: &rangeCompare{t: d.t, summed: &check}}
}

// windowTouches counts the window's changes that fall in the key range
// (low, high]: a truncate always does.
func (a *applier) windowTouches(ctx context.Context, t *change.Table, window []change.Change, low, high change.Key) (int, error) {
	if len(window) == 0 {
		return 0, nil
	}
	var inRange func(change.Key) bool
	n := 0
	for _, c := range window {
		if c.Kind == change.Truncate {
			n++
			continue
		}
		if inRange == nil {
			var err error
			if inRange, err = a.classify(ctx, t, window, low, high); err != nil {
				return 0, err
			}
		}
		if (c.OldKey != nil && inRange(c.OldKey)) || (c.Row != nil && inRange(t.RowKey(c.Row))) {
			n++
		}
	}
	return n, nil
}
