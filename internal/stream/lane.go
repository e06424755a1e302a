package stream

import (
	"context"
	"maps"

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
//     rows;
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
	// held are the live changes kept for after the chunks' commit.
	held heldChanges
}

// heldChanges are the source transactions that touch a chunk in flight,
// or a key or table such a transaction touched before them, kept in
// order while the writer commits the others beside the lane; at is the
// position written meanwhile (the writer's before the first was held),
// and batches the batches committed in part since, reported committed
// once the held transactions are.
type heldChanges struct {
	ops     []sink.Op
	tables  map[change.TableID]bool
	keys    map[change.TableID]map[string]bool
	batches []*outBatch
}

// maxHeld bounds the changes held for a chunk that does not commit (a
// locked row, an outage): past it the writer waits for the lane.
const maxHeld = 10_000

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

// beside commits b while the lane writes, if it may: its transactions
// that touch a chunk in flight are held for after the lane's commit (the
// writer's position stays where it was meanwhile), the others committed
// now. It reports false when b must wait for the lane: someone waits for
// it, it carries chunks or a cursor of a table in flight, its source's
// positions carry a resume token (whose value before a held transaction
// is not known), it carries cursors while changes are held, or too much
// is held already.
func (w *writer) beside(ctx context.Context, b *outBatch) (bool, error) {
	if b.done != nil || len(b.chunks) > 0 || hasChunk(b) {
		return false, nil
	}
	for id := range b.Cursors {
		if _, busy := w.lane.ranges[id]; busy {
			return false, nil
		}
	}
	free, held, hold := w.split(b)
	h := &w.lane.held
	holding := len(held) > 0 || len(h.batches) > 0
	if holding && (b.Resume != "" || len(b.Cursors) > 0 || len(h.ops)+len(held) > maxHeld) {
		return false, nil
	}
	if len(held) == 0 && len(h.batches) == 0 {
		if err := w.apply(ctx, w.sink, b, false); err != nil {
			return true, err
		}
		w.position = max(w.position, b.Position)
		w.reportCommitted(ctx, b)
		return true, nil
	}
	hold()
	if len(free) > 0 {
		part := &outBatch{Batch: sink.Batch{Stream: b.Stream, Ops: free}}
		if err := w.apply(ctx, w.sink, part, true); err != nil {
			return true, err
		}
	}
	h.ops = append(h.ops, held...)
	h.batches = append(h.batches, b)
	return true, nil
}

// split divides b's changes, whole source transactions at a time, into
// those that may commit beside the lane and those held; hold records
// what the held ones touch, for the transactions after them.
func (w *writer) split(b *outBatch) (free, held []sink.Op, hold func()) {
	h := &w.lane.held
	local := holdSet{tables: map[change.TableID]bool{}, keys: map[change.TableID]map[string]bool{}}
	sets := []holdSet{{tables: h.tables, keys: h.keys}, local}
	for start := 0; start < len(b.Ops); {
		end := start + 1
		for end < len(b.Ops) && b.Ops[end].Txn != nil && b.Ops[end].Txn == b.Ops[start].Txn {
			end++
		}
		txn := b.Ops[start:end]
		start = end
		if !w.touchesLane(txn, sets) {
			free = append(free, txn...)
			continue
		}
		held = append(held, txn...)
		for _, op := range txn {
			if c := op.Change; c != nil {
				local.add(c)
			}
		}
	}
	return free, held, func() {
		if h.tables == nil {
			h.tables, h.keys = map[change.TableID]bool{}, map[change.TableID]map[string]bool{}
		}
		maps.Copy(h.tables, local.tables)
		for id, ks := range local.keys {
			if h.keys[id] == nil {
				h.keys[id] = map[string]bool{}
			}
			maps.Copy(h.keys[id], ks)
		}
	}
}

// holdSet is what held changes touch: tables truncated (held whole from
// then on), and keys.
type holdSet struct {
	tables map[change.TableID]bool
	keys   map[change.TableID]map[string]bool
}

func (s holdSet) add(c *change.Change) {
	id := c.Table.ID
	if c.Kind == change.Truncate {
		s.tables[id] = true
	}
	for _, k := range changeKeys(c) {
		if s.keys[id] == nil {
			s.keys[id] = map[string]bool{}
		}
		s.keys[id][k.Encode()] = true
	}
}

// touchesLane reports whether a transaction's changes touch a chunk in
// flight, or what held changes touch: a key of theirs, a table one
// truncated, or for a truncate any of its table's.
func (w *writer) touchesLane(txn []sink.Op, sets []holdSet) bool {
	for _, op := range txn {
		c := op.Change
		if c == nil {
			return true // not a row change: nothing to reason about, hold it
		}
		id := c.Table.ID
		ranges, busy := w.lane.ranges[id]
		for _, s := range sets {
			if s.tables[id] || c.Kind == change.Truncate && len(s.keys[id]) > 0 {
				return true
			}
		}
		if busy && c.Kind == change.Truncate {
			return true
		}
		for _, k := range changeKeys(c) {
			enc := k.Encode()
			for _, s := range sets {
				if s.keys[id][enc] {
					return true
				}
			}
			for _, r := range ranges {
				if r.holds(k) {
					return true
				}
			}
		}
	}
	return false
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
	return w.releaseHeld(ctx)
}

// releaseHeld commits the held transactions, with the position of the
// last batch they came from, and reports those batches committed.
func (w *writer) releaseHeld(ctx context.Context) error {
	h := w.lane.held
	if len(h.batches) == 0 {
		return nil
	}
	last := h.batches[len(h.batches)-1]
	b := &outBatch{Batch: sink.Batch{Stream: last.Stream, Ops: h.ops, Position: last.Position, Resume: last.Resume}}
	if err := w.apply(ctx, w.sink, b, false); err != nil {
		return err
	}
	w.lane.held = heldChanges{}
	w.position = max(w.position, last.Position)
	for _, hb := range h.batches {
		w.reportCommitted(ctx, hb)
	}
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
		if err := w.lane.sink.Close(); err != nil {
			w.log.Debug("close the destination's chunk connection", logkey.Err(err))
		}
		w.lane.sink = nil
	}
}
