package stream

import (
	"context"
	"sync/atomic"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
)

// A merged chunk's batch is written on a connection of its own, a chunk
// lane (sink.ChunkLaner), while the writer goes on committing the live
// changes that follow it on the first. A live change thus waits for a
// chunk's write only when it touches the chunk's key range. There are up
// to chunkLaneCount lanes; batches on two of them never share a table.
//
// Why the destination ends as if every batch had been applied in order:
//
//   - a lane starts a chunk's batch only once every batch before it is
//     committed but the other lanes' (the writer applies the others one
//     at a time, and starts a lane between two of them), which hold other
//     tables: the chunk is written over everything of its table before
//     it, as in one writer;
//   - while lanes write, the writer commits only batches whose changes
//     lie outside the key ranges of the chunks in flight (their keys
//     before and after, compared in the source's order: keyOrder) and that
//     touch no cursor of those tables; the first batch that does not
//     waits for the lanes it touches, and every later one after it. The
//     rows each connection writes are then disjoint from the others', and
//     on each side applied in stream order, so any order of their commits
//     gives the same rows. No change of the ranges lies between a chunk's
//     merge point and a batch committed beside it, so the destination then
//     holds the source's rows as of that batch: it still only passes
//     through states the source had (a unique index or a foreign key the
//     destination adds sees no state the source never had);
//   - a lane's batch carries the chunks' cursors but no position. The
//     stream's position is the writer's alone, and the writer has
//     committed the chunk batch's position before the lane starts: a
//     restart resumes from a position every change before which is
//     committed, and a chunk no lane committed is read again from its
//     cursor, in a new snapshot, with every change since. One table's
//     batches go one after the other, so its cursor never goes back.
//
// A table whose key order only the source knows (a collation, a numeric)
// has no keyOrder: any change of it waits for the lanes writing that
// table. Batches someone waits for (a verify, a schema change) wait for
// every lane, so that the destination is whole when they are committed.

// maxChunkLanes bounds a stream's chunk connections to the destination,
// whatever backfill.max_concurrent is.
const maxChunkLanes = 4

// chunkLaneCount is how many chunk lanes a stream writing to snk opens at
// most: one per concurrent backfill (whose chunks are of tables apart), up
// to maxChunkLanes; one for a destination without lanes, whose chunk
// batches the writer commits one at a time.
func chunkLaneCount(snk sink.Sink, maxConcurrent int) int {
	if _, ok := snk.(sink.ChunkLaner); !ok {
		return 1
	}
	return min(max(1, maxConcurrent), maxChunkLanes)
}

// chunkLane is one of the writer's chunk connections and the batch on it.
type chunkLane struct {
	sink sink.Sink
	// busy is the batch being written, nil when the lane is idle; its
	// ranges by table while it is.
	busy   *outBatch
	ranges map[change.TableID][]laneRange
}

// chunkLanes are the writer's chunk connections, opened as chunks come, at
// most max (at least one). Batches on two lanes never share a table.
type chunkLanes struct {
	open []*chunkLane
	max  int
	done chan laneDone // nil (never ready) until the first lane opens
	// usable, when set, tells the applier how many batches of chunks it
	// may have in flight: max, or the lanes open when the destination
	// refused one (applierConfig.LanesOpen).
	usable *atomic.Int32
}

// tell sets usable to n.
func (l *chunkLanes) tell(n int) {
	if l.usable != nil {
		l.usable.Store(int32(n))
	}
}

type laneRange struct {
	low, high change.Key
	cmp       func(a, b change.Key) int // nil: the order is the source's alone
}

type laneDone struct {
	lane *chunkLane
	b    *outBatch
	err  error
}

// onLane reports whether b is a batch for a chunk lane: it carries chunks
// and the destination can open lanes.
func (w *writer) onLane(b *outBatch) bool {
	_, ok := w.sink.(sink.ChunkLaner)
	return ok && hasChunk(b)
}

func hasChunk(b *outBatch) bool {
	for _, op := range b.Ops {
		if op.Chunk != nil {
			return true
		}
	}
	return false
}

// laneFor waits until b may be written beside the lanes' batches (it
// shares no table with them) and a lane is idle, and returns that lane,
// opened if needed; nil when no lane could be opened: b is then written
// on the writer's connection, as without lanes.
func (w *writer) laneFor(ctx context.Context, b *outBatch) (*chunkLane, error) {
	for {
		if w.besideLanes(b) {
			if l := w.idleLane(ctx); l != nil {
				return l, nil
			}
		}
		waited, err := w.waitLane(ctx)
		if err != nil || !waited {
			return nil, err // nothing to wait for: no lane opens
		}
	}
}

// idleLane is an idle lane, a new one if none is and fewer than the most
// are open; nil when every lane is busy or none could be opened.
func (w *writer) idleLane(ctx context.Context) *chunkLane {
	for _, l := range w.lanes.open {
		if l.busy == nil {
			return l
		}
	}
	if len(w.lanes.open) >= max(1, w.lanes.max) {
		return nil
	}
	snk, err := w.sink.(sink.ChunkLaner).ChunkLane(ctx)
	if err != nil {
		// The applier sends no more chunk batches than can be written
		// beside the live changes: one at a time without a lane.
		w.lanes.tell(len(w.lanes.open))
		if len(w.lanes.open) == 0 {
			// The chunk is written on the writer's connection; the next
			// chunk tries again.
			w.log.Warn("could not open the destination's chunk connection; chunks are written with the live changes", logkey.Err(err))
			return nil
		}
		// Perhaps the destination's connection limit: the lanes open do.
		w.log.Warn("could not open another chunk connection to the destination; chunks go on those open", "open", len(w.lanes.open), logkey.Err(err))
		w.lanes.max = len(w.lanes.open)
		return nil
	}
	w.lanes.tell(w.lanes.max)
	if w.lanes.done == nil {
		w.lanes.done = make(chan laneDone, max(1, w.lanes.max))
	}
	l := &chunkLane{sink: snk}
	w.lanes.open = append(w.lanes.open, l)
	return l
}

// startLane writes b on l, in a goroutine of its own; its end arrives on
// w.lanes.done. The writer has committed b's position first.
func (w *writer) startLane(ctx context.Context, l *chunkLane, b *outBatch) {
	l.busy = b
	l.ranges = map[change.TableID][]laneRange{}
	for _, op := range b.Ops {
		if c := op.Chunk; c != nil {
			r := laneRange{low: c.Low, high: c.High}
			if w.keyOrder != nil {
				r.cmp = w.keyOrder(c.Table)
			}
			l.ranges[c.Table.ID] = append(l.ranges[c.Table.ID], r)
		}
	}
	for id := range b.Cursors {
		if _, ok := l.ranges[id]; !ok {
			l.ranges[id] = []laneRange{{}} // no order: all of it
		}
	}
	go func() {
		w.lanes.done <- laneDone{lane: l, b: b, err: w.apply(ctx, l.sink, b, true)}
	}()
}

// busy tells whether a lane writes a batch.
func (w *writer) busy() bool {
	for _, l := range w.lanes.open {
		if l.busy != nil {
			return true
		}
	}
	return false
}

// besideLanes reports whether the chunk batch b may be written while the
// lanes write theirs: it shares no table with them, so the rows each
// writes are disjoint (chunks of one table go one batch after the other).
func (w *writer) besideLanes(b *outBatch) bool {
	for _, l := range w.lanes.open {
		for _, op := range b.Ops {
			if c := op.Chunk; c != nil && l.ranges[c.Table.ID] != nil {
				return false
			}
		}
		for id := range b.Cursors {
			if l.ranges[id] != nil {
				return false
			}
		}
	}
	return true
}

// overtakes reports whether b may be committed while the lanes write: no
// one waits for it, it carries no chunk and no cursor of a table in
// flight, and none of its changes may touch a chunk's range (a truncate
// of the table, or a key before or after inside it).
func (w *writer) overtakes(b *outBatch) bool {
	if b.done != nil || len(b.chunks) > 0 || hasChunk(b) {
		return false
	}
	for _, l := range w.lanes.open {
		if l.busy != nil && !l.overtakenBy(b) {
			return false
		}
	}
	return true
}

// overtakenBy reports whether b's cursors and changes stay clear of the
// lane's tables and ranges.
func (l *chunkLane) overtakenBy(b *outBatch) bool {
	for id := range b.Cursors {
		if _, busy := l.ranges[id]; busy {
			return false
		}
	}
	for _, op := range b.Ops {
		c := op.Change
		if c == nil {
			continue
		}
		ranges, busy := l.ranges[c.Table.ID]
		if !busy {
			continue
		}
		if c.Kind == change.Truncate {
			return false
		}
		for _, k := range changeKeys(c) {
			for _, r := range ranges {
				if r.holds(k) {
					return false
				}
			}
		}
	}
	return true
}

// changeKeys are the keys a change touches: before and after.
func changeKeys(c *change.Change) []change.Key {
	var out []change.Key
	if c.OldKey != nil {
		out = append(out, c.OldKey)
	}
	if c.Row != nil {
		out = append(out, c.Table.RowKey(c.Row))
	}
	return out
}

// holds reports whether k may lie in the range: surely outside it only
// when the order is known. The low bound counts as inside: a margin that
// costs a wait at most.
func (r laneRange) holds(k change.Key) bool {
	if k == nil {
		return false
	}
	if r.cmp == nil {
		return true
	}
	return (r.low == nil || r.cmp(k, r.low) >= 0) && (r.high == nil || r.cmp(k, r.high) <= 0)
}

// waitLane waits for one lane's batch and reports it committed; waited is
// false when no lane was busy.
func (w *writer) waitLane(ctx context.Context) (waited bool, err error) {
	if !w.busy() {
		return false, nil
	}
	select {
	case d := <-w.lanes.done:
		return true, w.laneEnded(ctx, d)
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// waitLanes waits for every lane's batch.
func (w *writer) waitLanes(ctx context.Context) error {
	for {
		if waited, err := w.waitLane(ctx); err != nil || !waited {
			return err
		}
	}
}

// laneEnded reports the lane's batch committed, or fails with its error.
func (w *writer) laneEnded(ctx context.Context, d laneDone) error {
	d.lane.busy, d.lane.ranges = nil, nil
	if d.err != nil {
		return d.err
	}
	w.reportCommitted(ctx, d.b)
	return nil
}

// closeLanes waits for the lanes' goroutines to end (their context is
// cancelled by then, or they end on their own) and closes their
// connections.
func (w *writer) closeLanes() {
	for w.busy() {
		d := <-w.lanes.done
		d.lane.busy = nil
	}
	for _, l := range w.lanes.open {
		w.health.forget(l.sink)
		if err := l.sink.Close(); err != nil {
			w.log.Debug("close the destination's chunk connection", logkey.Err(err))
		}
	}
	w.lanes.open = nil
}
