package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// Rejections by the destination (docs/statuses.md): a sink.TableError
// names the one table whose content the destination refused (an event over
// its message limit, say). That table's object fails with the reason and
// the table is not streamed any more, as after a schema change it cannot
// follow; the rest of the batch is committed with the batch's position, so
// the other tables go on. A rejection that names no table fails the stream.

// rejectedPrefix starts the reason of an object whose content the
// destination refused: it stays failed, also across restarts, until a
// backfill of it is initiated.
const rejectedPrefix = "rejected by the destination: "

func rejectedReason(stream string, te *sink.TableError) string {
	return fmt.Sprintf("%s%v; the table is not streamed any more: once that is fixed, run `tidemark backfill initiate %s %s`",
		rejectedPrefix, te.Err, stream, te.Table)
}

// staysFailed tells an object that is not streamed, also across restarts,
// until a backfill of it is initiated: a schema change stopped it, or the
// destination refused its content.
func staysFailed(status, reason string) bool {
	return isSchemaFailure(status, reason) || status == StatusFailed && strings.HasPrefix(reason, rejectedPrefix)
}

// rejectedHint says what to do about a rejection that names no table, in
// the terms of the destination: only one that holds tables has a
// destination table to fix.
func rejectedHint(snk sink.Sink) string {
	if _, ok := snk.(sink.TableCreator); ok {
		return "a destination table no longer fits what the stream writes (changed by hand?): make the destination table match the source (see docs/schema-changes.md), or drop it and initiate a backfill, then resume the stream"
	}
	return "the destination refused what the stream writes (a limit of the destination, say): fix what the error names, then resume the stream"
}

// refusals are the tables the destination refused while the stream runs.
// The writer adds them and drops their operations from every batch it
// writes after; the applier takes them to stop the tables, and forgets one
// when it streams the table again (for a backfill). Batches the writer
// still holds then carry none of the table's changes: the applier dropped
// them while the table was stopped.
type refusals struct {
	mu     sync.Mutex
	tables map[change.TableID]bool
	fresh  []refusal // not taken by the applier yet
	wake   chan struct{}
}

type refusal struct {
	id     change.TableID
	reason string
}

func newRefusals() *refusals {
	return &refusals{tables: map[change.TableID]bool{}, wake: make(chan struct{}, 1)}
}

func (r *refusals) add(id change.TableID, reason string) {
	r.mu.Lock()
	r.tables[id] = true
	r.fresh = append(r.fresh, refusal{id, reason})
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// drop takes the operations of every refused table out of b.
func (r *refusals) drop(b *outBatch) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.tables {
		dropTable(b, id)
	}
}

// take returns the refusals the applier has not seen yet.
func (r *refusals) take() []refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.fresh
	r.fresh = nil
	return out
}

// forget streams a refused table again.
func (r *refusals) forget(id change.TableID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tables, id)
	r.fresh = slices.DeleteFunc(r.fresh, func(f refusal) bool { return f.id == id })
}

// wakeC is ready when there are refusals to take; nil (never ready)
// where refusals are not followed.
func (r *refusals) wakeC() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.wake
}

// dropTable takes a table's operations out of a batch: its changes, its
// chunks and their cursor, and what the batch reports of them once
// committed. It says whether the batch had any.
func dropTable(b *outBatch, id change.TableID) bool {
	dropped := false
	kept := b.Ops[:0]
	for _, op := range b.Ops {
		switch {
		case op.Change != nil && op.Change.Table.ID == id:
			b.changes--
			b.events--
		case op.Chunk != nil && op.Chunk.Table.ID == id:
			b.changes -= len(op.Chunk.Rows)
		default:
			kept = append(kept, op)
			continue
		}
		dropped = true
	}
	clear(b.Ops[len(kept):])
	b.Ops = kept
	if !dropped {
		return false
	}
	delete(b.Cursors, id)
	delete(b.counters, id)
	b.chunks = slices.DeleteFunc(b.chunks, func(c committedChunk) bool { return c.table == id })
	return true
}

// reject handles an Apply error that is the batch's content. One naming a
// table the batch writes fails that table's object and takes the table
// out of the batch, for the writer to apply the rest; any other fails the
// stream.
func (w *writer) reject(ctx context.Context, b *outBatch, err error) error {
	var te *sink.TableError
	if w.refused == nil || !errors.As(err, &te) || !dropTable(b, te.Table) {
		return &source.PermanentError{Err: err, Hint: w.hint}
	}
	reason := rejectedReason(b.Stream, te)
	w.log.Error("the destination refused a table's content: its object fails, the other tables go on",
		logkey.Object(te.Table.String()), logkey.Err(err))
	// Recorded before the rest is committed past the refused change: a
	// restart then does not stream the table again as if whole.
	if err := w.fail(ctx, te.Table, reason); err != nil {
		return fmt.Errorf("record the refusal of %s: %w", te.Table, err)
	}
	w.refused.add(te.Table, reason)
	return nil
}

// refuseObject records that the destination refused a table's content:
// its object fails with reason and the table is not streamed any more.
// The applier, told by refusals, ends the table's backfill (failObject).
func (s *Stream) refuseObject(ctx context.Context, id change.TableID, reason string) error {
	s.parkTable(id, reason)
	return s.st.SetObjectStatus(ctx, s.cfg.Name, id.Schema, id.Name, StatusFailed, reason)
}

// takeRefusals stops the tables the writer found refused.
func (a *applier) takeRefusals() {
	for _, r := range a.refused.take() {
		if a.schema == nil {
			continue
		}
		if _, stopped := a.schema.stopped[r.id]; !stopped {
			a.stopTable(r.id, r.reason)
		}
	}
}
