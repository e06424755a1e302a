package stream

import (
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
)

// verifyObject verifies ranges of a table (nil: the whole table), in
// ranges of chunkSize rows, reading the source with scope's filter and
// columns and comparing only what they cover. A read that runs into the
// source's statement timeout is read again at half the size, down to
// timeoutFloor, as a backfill's is.
//
// The source's next chunk is read while the applier compares the last one
// with the destination: the two sides are read side by side, and a chunk
// still waits, as a backfill's does, until the stream has passed its read.
// Each read is registered before it is taken, so it gets its own window;
// a prefetched chunk whose predecessor must be read again is dropped.
func verifyObject(ctx context.Context, rt *runtime, t *change.Table, chunkSize int, ranges []keyRange, scope chunkSpec) (ObjectCheck, error) {
	v := newVerifyPass(rt, t, chunkSize, scope)
	oc := ObjectCheck{Object: config.FormatTable(t.ID), Match: true, id: t.ID}
	if ranges == nil {
		ranges = []keyRange{{}}
	}
	for n, rg := range ranges {
		if err := v.verifyRange(ctx, &oc, rg, nil, n == len(ranges)-1); err != nil {
			return oc, err
		}
	}
	return oc, nil
}

// newVerifyPass is a pass over t in reads of chunkSize rows at most.
func newVerifyPass(rt *runtime, t *change.Table, chunkSize int, scope chunkSpec) *verifyPass {
	return &verifyPass{rt: rt, t: t, size: chunkSize, floor: timeoutFloor(chunkSize), scope: scope,
		summer: rangeSummer(rt.applier, rt.src, scope)}
}

// verifyPass is one verifyObject, or one verifyTrail.
type verifyPass struct {
	rt          *runtime
	t           *change.Table
	size, floor int
	scope       chunkSpec
	started     bool // a chunk was read: the pass has begun
	// summer sums ranges on the source (nil: rows are read); while busy
	// (live changes touched the last range read), ranges are read row by
	// row all the same (verifysum.go).
	summer source.RangeSummer
	busy   bool
	// sumsDiffered marks the range being read again because its sums
	// differed: should its rows match, the sums are no use here.
	sumsDiffered bool
	// trailing marks a pass that trails a load (verifytrail.go): the
	// destination's sums are taken off the applier, which the load needs.
	trailing bool
	// wholePieces has the source sum each piece of a range whole (the
	// trail's pieces are merged chunks: a chunk's rows, give or take the
	// live changes since), without the search for its size-th key; not
	// after a statement timeout (halved), nor in a piece whose whole sum
	// had it read again (pieceSized): the piece is then read in sized
	// ranges, so that rows read again cover what a sum did, and a window
	// that overflowed over the whole piece gets a smaller one.
	wholePieces, halved, pieceSized bool
}

// retried takes a result that has the range read again, and says whether
// row by row.
func (v *verifyPass) retried(res ChunkResult) (byRows bool) {
	if res.sumFailed {
		v.stopSums("the destination could not sum a range: " + res.Reason)
	}
	v.busy = v.busy || (res.ByRows && res.Conflicts > 0)
	v.sumsDiffered = res.ByRows && res.Reason == reasonSumsDiffer
	return res.ByRows
}

// stopSums has the rest of the pass, and the stream run's later verifies,
// compare rows; the first to stop says why.
func (v *verifyPass) stopSums(why string) {
	v.summer = nil
	if v.rt.applier.noSums.CompareAndSwap(false, true) {
		v.rt.applier.log.Warn("verify compares rows from here on: "+why, logkey.Object(v.t.ID.String()))
	}
}

// verifyRange verifies the key range rg, the pass's last with last, in
// pieces ending at stops (in key order, inside rg) and at rg.High: a
// trailing verify's pieces are the chunks its run merged.
func (v *verifyPass) verifyRange(ctx context.Context, oc *ObjectCheck, rg keyRange, stops []change.Key, last bool) error {
	after := rg.Low
	v.pieceSized = false
	upto := func() change.Key { // the current piece's end
		if len(stops) > 0 {
			return stops[0]
		}
		return rg.High
	}
	var next *pendingChunk // read ahead, from next.low
	compared := compareQueue{sumsMisled: func() {
		v.stopSums("the servers' checksums differed where the rows match (different encodings?)")
	}}
	byRows := false // the range is read again row by row: its sums did not settle it
	for {
		pc := next
		if pc != nil && pc.low.Encode() != after.Encode() {
			v.rt.applier.abandon(pc) // its predecessor ended elsewhere
			pc = nil
		}
		if pc == nil {
			var err error
			if pc, err = v.read(ctx, after, upto(), byRows); err != nil {
				return err
			}
		}
		pc.passEnd = pc.ends && last && len(stops) == 0
		res, err := v.submitReadingAhead(ctx, pc, stops, rg.High, &next)
		if err == nil && res.destSum != nil {
			res = res.destSum.settle(ctx, v.rt.applier.log)
			err = res.Err
		}
		if err != nil {
			v.drop(next)
			return fmt.Errorf("verify %s: %w", v.t.ID, err)
		}
		if res.Retry {
			v.drop(next)
			next = nil
			byRows = v.retried(res)
			if pc.wholeSum {
				// Sized sums first: rows read again where a sized one
				// differs cover what it summed.
				v.pieceSized, byRows, v.sumsDiffered = true, false, false
			}
			continue
		}
		byRows = false
		if pc.read.Sum == nil {
			v.busy = res.Conflicts > 0 // no live change in the range: sum the next
			if res.compare != nil {
				res.compare.sumsDiffered, v.sumsDiffered = v.sumsDiffered, false
			}
		}
		if err := compared.record(oc); err != nil {
			v.drop(next)
			return err
		}
		compared.start(res.compare)
		switch {
		case pc.ends && len(stops) == 0:
			v.drop(next)
			return compared.record(oc)
		case pc.ends:
			after, stops, v.pieceSized = stops[0], stops[1:], false
		default:
			after = res.High
		}
	}
}

// submitReadingAhead hands pc to the applier and, while the applier
// compares it, reads the chunk after it into *next: the rest of pc's
// piece, or the next piece (stops and high as verifyRange's).
func (v *verifyPass) submitReadingAhead(ctx context.Context, pc *pendingChunk, stops []change.Key, high change.Key, next **pendingChunk) (ChunkResult, error) {
	// What the read ahead needs, taken before the applier has pc.
	var from, upto change.Key
	switch {
	case !pc.ends:
		from, upto = v.lastKey(pc.read), pc.upto
	case len(stops) > 1:
		from, upto = stops[0], stops[1]
	case len(stops) == 1:
		from, upto = stops[0], high
	}
	type submitted struct {
		res ChunkResult
		err error
	}
	done := make(chan submitted, 1)
	go func() {
		res, err := v.rt.applier.submit(ctx, pc)
		done <- submitted{res, err}
	}()
	*next = v.readAhead(ctx, from, upto)
	sub := <-done
	return sub.res, sub.err
}

// compareQueue compares a verified range's two sides in the background
// while the next range is read and taken, one range at a time.
type compareQueue struct {
	running chan rangeResult // the comparison under way, if any
	// sumsMisled is told of a range whose sums differed but whose rows
	// match.
	sumsMisled func()
}

type rangeResult struct {
	check        RangeCheck
	err          error
	sumsDiffered bool
}

// start compares c in the background; record the one before first.
func (q *compareQueue) start(c *rangeCompare) {
	if c == nil {
		return
	}
	q.running = make(chan rangeResult, 1) // buffered: an abandoned one ends
	go func(ch chan<- rangeResult) {
		check, err := c.check()
		ch <- rangeResult{check, err, c.sumsDiffered}
	}(q.running)
}

// record waits for the comparison under way, if any, and adds its check
// to oc's, in the ranges' order.
func (q *compareQueue) record(oc *ObjectCheck) error {
	if q.running == nil {
		return nil
	}
	r := <-q.running
	q.running = nil
	if r.err != nil {
		return r.err
	}
	if r.sumsDiffered && r.check.Match && q.sumsMisled != nil {
		q.sumsMisled()
	}
	oc.Ranges = append(oc.Ranges, r.check)
	oc.SourceRows += r.check.SourceRows
	oc.DestRows += r.check.DestRows
	oc.Match = oc.Match && r.check.Match
	return nil
}

// readAhead reads the chunk after the one being compared, from the key
// it ended at on (from); nil when it ended the range (no from) or the read
// failed (it is then read again in turn, where a failure counts).
func (v *verifyPass) readAhead(ctx context.Context, from, upto change.Key) *pendingChunk {
	if from == nil {
		return nil
	}
	next, err := v.read(ctx, from, upto, false)
	if err != nil {
		return nil
	}
	return next
}

// lastKey is the key of the last row a read took (a sum's last key), in
// the shape it was read in.
func (v *verifyPass) lastKey(read ChunkRead) change.Key {
	switch {
	case read.Sum != nil:
		return read.Sum.Last
	case len(read.Rows) > 0:
		t := v.t
		if read.Table != nil {
			t = read.Table
		}
		return t.RowKey(read.Rows[len(read.Rows)-1])
	}
	return nil
}

// sameKey says whether two keys are the same, value by value as text.
func sameKey(a, b change.Key) bool {
	return a != nil && b != nil && a.Encode() == b.Encode()
}

// drop abandons a chunk read ahead that will not be compared.
func (v *verifyPass) drop(pc *pendingChunk) {
	if pc != nil {
		v.rt.applier.abandon(pc)
	}
}

// read registers and reads the chunk after after, up to upto, halving the
// size on a statement timeout.
func (v *verifyPass) read(ctx context.Context, after, upto change.Key, byRows bool) (*pendingChunk, error) {
	// A verify compares with the live stream's work: while a first
	// start's load holds it back, the verify waits (snapload.go).
	if err := v.rt.load.wait(ctx); err != nil {
		return nil, err
	}
	for {
		pc := &pendingChunk{table: v.t, low: after, verify: true, scope: v.scope, passStart: !v.started, sumLater: v.trailing}
		if err := v.rt.applier.register(ctx, pc); err != nil {
			return nil, err
		}
		spec := v.scope
		spec.After, spec.Upto, spec.Limit = after, upto, v.size
		var read ChunkRead
		var err error
		whole := false // the range summed whole
		if v.summer != nil && !byRows && !v.busy {
			sum := spec
			if whole = v.wholePieces && upto != nil && !v.halved && !v.pieceSized; whole {
				sum.Limit = 0
			}
			read, err = v.summer.SumRange(ctx, v.t, sum)
			if err != nil && ctx.Err() == nil && !source.IsStatementTimeout(err) {
				// Rows are read where the source cannot sum; a real
				// failure fails that read too, and counts there.
				v.rt.applier.abandon(pc)
				v.stopSums("the source could not sum a range: " + err.Error())
				continue
			}
		} else {
			read, err = v.rt.src.ReadChunk(ctx, v.t, spec)
		}
		if err != nil {
			v.rt.applier.abandon(pc)
			if source.IsStatementTimeout(err) && whole {
				v.halved = true // summed in the pass's size from here on
				continue
			}
			if source.IsStatementTimeout(err) && v.size > v.floor {
				v.size, v.halved = max(v.floor, v.size/2), true
				continue
			}
			return nil, fmt.Errorf("verify %s: %w", v.t.ID, err)
		}
		pc.read, pc.upto, pc.ends, pc.wholeSum = read, upto, len(read.Rows) < v.size, whole
		if read.Sum != nil {
			pc.ends = read.Sum.Last == nil
		}
		if !pc.ends && upto != nil {
			// A full read that ends at the range's bound ends the range:
			// no read of the empty rest (a trail's range is a chunk's).
			pc.ends = sameKey(v.lastKey(read), upto)
		}
		v.started = true
		return pc, nil
	}
}
