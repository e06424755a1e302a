package stream

import (
	"context"
	"slices"

	"github.com/tidemark/tidemark/internal/change"
)

// maxQueued bounds the batches the applier holds for a busy writer; past it
// the applier stops reading changes until the writer catches up.
const maxQueued = 4

// The applier hands batches to the writer over an unbuffered channel, so a
// send succeeds exactly when the writer is idle. Full batches, chunks and
// the ones the flush timer closes wait in outq, in order; when outq is
// empty, the batch being filled goes as soon as the writer is idle (group
// commit): a live change waits for the destination, not for a schedule.

// chunkCommitted learns from a committed batch of merged chunks and
// merges the chunks that waited for it.
func (a *applier) chunkCommitted(ctx context.Context, b *outBatch) error {
	a.pace.observe(b.changes, b.took)
	a.inFlight = slices.DeleteFunc(a.inFlight, func(f *outBatch) bool { return f == b })
	return a.mergeReady(ctx)
}

// flush closes the batch being filled and queues it for the writer. A
// batch that only moves the position joins a queued one that only did too:
// while the writer is stuck (a locked destination), keepalives would
// otherwise fill the queue, the applier would stop reading, and a change
// not received would show no lag.
func (a *applier) flush() {
	b := a.batch
	b.Position, b.Resume = a.position, a.resume
	if n := len(a.outq); n > 0 && b.positionOnly() && a.outq[n-1].positionOnly() {
		a.outq[n-1].Position, a.outq[n-1].Resume = b.Position, b.Resume
	} else {
		a.outq = append(a.outq, b)
	}
	a.lastSent = a.position
	a.batch = a.newBatch()
}

// positionOnly tells whether b carries nothing but a position: no changes,
// chunks or cursors, and no one waiting for its commit.
func (b *outBatch) positionOnly() bool {
	return len(b.Ops) == 0 && len(b.Cursors) == 0 && len(b.chunks) == 0 && len(b.counters) == 0 &&
		b.done == nil && b.BeforeCommit == nil
}

// nextOut is the batch to offer the writer now, and the channel to offer
// it on (nil, which never sends, when there is none).
func (a *applier) nextOut() (*outBatch, chan<- *outBatch) {
	if len(a.outq) > 0 {
		return a.outq[0], a.out
	}
	if len(a.batch.Ops) > 0 {
		a.batch.Position, a.batch.Resume = a.position, a.resume
		return a.batch, a.out
	}
	return nil, nil
}

// handedOver records that the writer took b.
func (a *applier) handedOver(b *outBatch) {
	if len(a.outq) > 0 && a.outq[0] == b {
		a.outq = a.outq[1:]
		return
	}
	a.lastSent = b.Position
	a.batch = a.newBatch()
}

// flushAndWait hands everything so far to the writer and waits for its
// commit (verify and schema changes need the destination up to date).
func (a *applier) flushAndWait(ctx context.Context) error {
	if t := a.handling; t != nil {
		// Its own schema change waits: it is received, not yet batched.
		a.lag.holding(t.EndLSN, t.CommitTime)
	}
	done := make(chan struct{})
	a.batch.done = done
	a.flush()
	for len(a.outq) > 0 {
		select {
		case a.out <- a.outq[0]:
			a.outq = a.outq[1:]
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	events := a.events
	if a.holdsTxn() {
		events = nil
	}
	for {
		select {
		case <-done:
			return nil
		case ev, ok := <-events:
			if !ok || a.hold(ev) {
				events = nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// hold keeps an event that arrived while the applier waited for a commit,
// for run to handle next. Positions are kept as the latest (handling each
// would only move the position), and the first transaction ends the
// taking: the lag clock counts it from then, so a destination that cannot
// commit (locked, down) shows a growing lag even while the applier waits
// on it in a verify or a schema change. It says whether that was the
// transaction.
func (a *applier) hold(ev change.Event) bool {
	if n := len(a.held); ev.Txn == nil && n > 0 && a.held[n-1].Txn == nil {
		a.held[n-1] = ev
		return false
	}
	a.held = append(a.held, ev)
	if txn := ev.Txn; txn != nil {
		if txn.EndLSN > a.skipUpTo {
			a.lag.holding(txn.EndLSN, txn.CommitTime)
		}
		return true
	}
	return false
}

// holdsTxn tells whether a transaction is held: the applier takes no more.
func (a *applier) holdsTxn() bool {
	n := len(a.held)
	return n > 0 && a.held[n-1].Txn != nil
}

// handleHeld handles the events hold kept, in order.
func (a *applier) handleHeld(ctx context.Context) error {
	for len(a.held) > 0 {
		ev := a.held[0]
		a.held = a.held[1:]
		if err := a.handleEvent(ctx, ev); err != nil {
			return err
		}
	}
	a.held = nil
	return nil
}
