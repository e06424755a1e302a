package stream

import (
	"context"
	"sync"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink"
)

// A whole-table run's verify trails its load: each chunk's range is
// verified once the chunk is merged (the verify's read waits, as any, for
// the stream to pass it, and its comparison for the chunk's commit), while
// later chunks load. The verify that ends the run is then left with its
// last range, not the whole table (docs/backfill.md, "The verify that ends
// a backfill").

// verifyTrail is the verify of one run, fed the high key of each chunk
// merged, in key order.
type verifyTrail struct {
	mu     sync.Mutex
	highs  []change.Key // merged, not yet taken
	final  bool         // the last chunk is merged: nothing follows highs
	wake   chan struct{}
	cancel context.CancelFunc
	ended  chan struct{}
	oc     ObjectCheck
	err    error
}

// trails says whether the verify of a run covering c trails its load: a
// verify of what it covers, of a whole table (not of ranges a repair names, nor of a
// sample, whose end is known only at the end) into a destination that is
// read back without a replay held in memory between reads (an event
// destination holds the table's replay for as long as a verify's pass
// lasts).
func (m *backfills) trails(rt *runtime, c *coverage) bool {
	if !m.cfg.Verify || c.opts.ranges != nil || c.opts.SampleRows > 0 || rt.applier.dest == nil {
		return false
	}
	_, replay := rt.applier.dest.(sink.ReplayReader)
	return !replay
}

// startTrail starts the verify of run r's table, in ranges of chunk_size
// rows at most, that trails the run's load, which starts after the key
// resumed (nil: from the first); ctx ends it.
func (m *backfills) startTrail(ctx context.Context, rt *runtime, r *run, scope chunkSpec, resumed change.Key) *verifyTrail {
	ctx, cancel := context.WithCancel(ctx)
	tr := &verifyTrail{wake: make(chan struct{}, 1), cancel: cancel, ended: make(chan struct{})}
	t := r.table
	v := newVerifyPass(rt, t, m.cfg.ChunkSize, scope)
	v.trailing = true
	go tr.run(ctx, v, resumed, func(n int) error { return m.trailCompared(ctx, t.ID, n) })
	return tr
}

// merged hands the trail a merged chunk's high key (nil for the last
// chunk); final marks the run's last chunk. It never waits.
func (tr *verifyTrail) merged(high change.Key, final bool) {
	select {
	case <-tr.ended:
		return // failed: nothing takes them any more
	default:
	}
	tr.mu.Lock()
	tr.highs = append(tr.highs, high)
	tr.final = tr.final || final
	tr.mu.Unlock()
	select {
	case tr.wake <- struct{}{}:
	default:
	}
}

// next waits for the next chunks to verify: the high keys of those merged
// since the last call (several when the verify fell behind), final when
// the last of them is the run's last.
func (tr *verifyTrail) next(ctx context.Context) (highs []change.Key, final bool, err error) {
	for {
		tr.mu.Lock()
		if len(tr.highs) > 0 {
			highs, final = tr.highs, tr.final
			tr.highs = nil
			tr.mu.Unlock()
			return highs, final, nil
		}
		tr.mu.Unlock()
		select {
		case <-tr.wake:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// run verifies, chunk after chunk, what the run merged, after the rows
// it loaded before it resumed after the key resumed (if any); compared is
// told of each range compared, and how many there are (its error, a
// test's fault, fails the trail).
func (tr *verifyTrail) run(ctx context.Context, v *verifyPass, resumed change.Key, compared func(int) error) {
	defer close(tr.ended)
	tr.oc = ObjectCheck{Object: config.FormatTable(v.t.ID), Match: true, id: v.t.ID}
	low := resumed
	// The rows loaded before the run resumed are no chunk of this run's:
	// they are read in ranges of chunk_size rows.
	if resumed != nil && !tr.verify(ctx, v, keyRange{High: resumed}, nil, false, compared) {
		return
	}
	v.wholePieces = true
	for {
		highs, final, err := tr.next(ctx)
		if err != nil {
			tr.err = err
			return
		}
		high := highs[len(highs)-1]
		// A piece a chunk, so that the source sums each whole.
		if !tr.verify(ctx, v, keyRange{Low: low, High: high}, highs[:len(highs)-1], final, compared) || final {
			return
		}
		low = high
	}
}

// verify verifies rg in pieces ending at stops (verifyRange) and tells
// compared of each range compared; false when the trail failed.
func (tr *verifyTrail) verify(ctx context.Context, v *verifyPass, rg keyRange, stops []change.Key, last bool, compared func(int) error) bool {
	before := len(tr.oc.Ranges)
	if err := v.verifyRange(ctx, &tr.oc, rg, stops, last); err != nil {
		tr.err = err
		return false
	}
	for n := before + 1; n <= len(tr.oc.Ranges); n++ {
		if err := compared(n); err != nil {
			tr.err = err
			return false
		}
	}
	return true
}

// result waits for the trail to verify the run's last range and returns
// what it found, as verifyObject does.
func (tr *verifyTrail) result(ctx context.Context) (ObjectCheck, error) {
	select {
	case <-tr.ended:
		return tr.oc, tr.err
	case <-ctx.Done():
		tr.stop()
		return tr.oc, ctx.Err()
	}
}

// stop ends the trail and waits for it: the run ended otherwise.
func (tr *verifyTrail) stop() {
	tr.cancel()
	<-tr.ended
}
