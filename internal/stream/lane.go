package stream

import (
	"context"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
)

// A merged chunk's batch is written on a connection of its own, the chunk
// lane (sink.ChunkLaner), while the writer goes on committing the live
// changes that follow it on the first. A live change thus waits for a
// chunk's write only when it touches the chunk's key range.
//
// Why the destination ends as if every batch had been applied in order:
//
//   - the lane starts a chunk's batch only once every batch before it is
//     committed (the writer applies the others one at a time, and starts
//     the lane between two of them), so the chunk is written over
//     everything before it, as in one writer;
//   - while the lane writes, the writer commits only batches whose changes
//     lie outside the key ranges of the chunks in flight (their keys
//     before and after, compared in the source's order: keyOrder) and that
//     touch no cursor of those tables; the first batch that does not
//     waits for the lane, and every later one after it. The rows the lane
//     writes and the rows the writer writes are then disjoint, and on
//     each side applied in stream order, so the two orders give the same
//     rows. No change of the ranges lies between the chunk's merge point
//     and a batch committed beside it, so the destination then holds the
//     source's rows as of that batch: it still only passes through states
//     the source had (a unique index or a foreign key the destination
//     adds sees no state the source never had);
//   - the lane's batch carries the chunks' cursors but no position. The
//     stream's position is the writer's alone, and the writer has
//     committed the chunk batch's position before the lane starts: a
//     restart resumes from a position every change before which is
//     committed, and a chunk the lane did not commit is read again from
//     its cursor, in a new snapshot, with every change since.
//
// A table whose key order only the source knows (a collation, a numeric)
// has no keyOrder: any change of it waits for the lane. Batches someone
// waits for (a verify, a schema change) wait for it too, so that the
// destination is whole when they are committed.

// chunkLane is the writer's second connection and the batch on it.
type chunkLane struct {
	sink sink.Sink // nil until the first chunk (opened lazily)
	// busy is the batch being written, nil when the lane is idle; its
	// ranges by table while it is.
	busy   *outBatch
	ranges map[change.TableID][]laneRange
	done   chan laneDone
}

type laneRange struct {
	low, high change.Key
	cmp       func(a, b change.Key) int // nil: the order is the source's alone
}

type laneDone struct {
	b   *outBatch
	err error
}

// useLane reports whether b goes on the chunk lane, opening it if needed.
func (w *writer) useLane(ctx context.Context, b *outBatch) bool {
	laner, ok := w.sink.(sink.ChunkLaner)
	if !ok || !hasChunk(b) {
		return false
	}
	if w.lane.sink == nil {
		l, err := laner.ChunkLane(ctx)
		if err != nil {
			// The chunk is written on the writer's connection, as
			// without a lane; the next chunk tries again.
			w.log.Warn("could not open the destination's chunk connection; chunks are written with the live changes", logkey.Err(err))
			return false
		}
		w.lane.sink, w.lane.done = l, make(chan laneDone, 1)
	}
	return true
}

func hasChunk(b *outBatch) bool {
	for _, op := range b.Ops {
		if op.Chunk != nil {
			return true
		}
	}
	return false
}

// startLane writes b on the lane, in a goroutine of its own; its end
// arrives on w.lane.done. The writer has committed b's position first.
func (w *writer) startLane(ctx context.Context, b *outBatch) {
	w.lane.busy = b
	w.lane.ranges = map[change.TableID][]laneRange{}
	for _, op := range b.Ops {
		if c := op.Chunk; c != nil {
			r := laneRange{low: c.Low, high: c.High}
			if w.keyOrder != nil {
				r.cmp = w.keyOrder(c.Table)
			}
			w.lane.ranges[c.Table.ID] = append(w.lane.ranges[c.Table.ID], r)
		}
	}
	for id := range b.Cursors {
		if _, ok := w.lane.ranges[id]; !ok {
			w.lane.ranges[id] = []laneRange{{}} // no order: all of it
		}
	}
	l := w.lane.sink
	go func() {
		w.lane.done <- laneDone{b: b, err: w.apply(ctx, l, b, true)}
	}()
}

// overtakes reports whether b may be committed while the lane writes: no
// one waits for it, it carries no chunk and no cursor of a table in
// flight, and none of its changes may touch a chunk's range (a truncate
// of the table, or a key before or after inside it).
func (w *writer) overtakes(b *outBatch) bool {
	if b.done != nil || len(b.chunks) > 0 || hasChunk(b) {
		return false
	}
	for id := range b.Cursors {
		if _, busy := w.lane.ranges[id]; busy {
			return false
		}
	}
	for _, op := range b.Ops {
		c := op.Change
		if c == nil {
			continue
		}
		ranges, busy := w.lane.ranges[c.Table.ID]
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

// waitLane waits for the lane's batch and reports it committed.
func (w *writer) waitLane(ctx context.Context) error {
	if w.lane.busy == nil {
		return nil
	}
	select {
	case d := <-w.lane.done:
		return w.laneEnded(ctx, d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// laneEnded reports the lane's batch committed, or fails with its error.
func (w *writer) laneEnded(ctx context.Context, d laneDone) error {
	w.lane.busy, w.lane.ranges = nil, nil
	if d.err != nil {
		return d.err
	}
	w.reportCommitted(ctx, d.b)
	return nil
}

// closeLane waits for the lane's goroutine to end (its context is
// cancelled by then, or it ends on its own) and closes its connection.
func (w *writer) closeLane() {
	if w.lane.busy != nil {
		<-w.lane.done
		w.lane.busy = nil
	}
	if w.lane.sink != nil {
		w.health.forget(w.lane.sink)
		if err := w.lane.sink.Close(); err != nil {
			w.log.Debug("close the destination's chunk connection", logkey.Err(err))
		}
		w.lane.sink = nil
	}
}
