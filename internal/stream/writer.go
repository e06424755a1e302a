package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/store"
)

// writer commits batches to the destination, in order, one at a time but
// for the merged chunks a chunk lane writes beside them (lane.go). A
// failed Apply is retried with backoff (the batch is idempotent) while the
// stream keeps its replication connection alive; nothing is confirmed to the
// source until the destination committed it.
type writer struct {
	sink      sink.Sink
	in        <-chan *outBatch
	confirm   func(change.LSN)
	committed func(context.Context, *outBatch)
	log       *slog.Logger
	retry     retryPolicy
	// health is told when a connection to the destination fails and when
	// it recovers.
	health *destHealth
	// refused holds the tables the destination refused (refuse.go), whose
	// operations are dropped; fail records such a table's object failed.
	// nil: every rejection fails the stream.
	refused *refusals
	fail    func(ctx context.Context, id change.TableID, reason string) error
	// hint says what to do about a rejection that fails the stream.
	hint string
	// record stores the dates the batches' chunks change (changed.go);
	// nil: they are not recorded (tests).
	record func(context.Context, []store.ChangedDate) error
	// recordLate stores late data (changed.go) by the late rules; nil:
	// none is recorded (tests).
	recordLate func(context.Context, []store.ChangedDate) error
	late       map[change.TableID][]config.LateRule
	// keyOrder compares a table's keys in the source's order, nil for a
	// table whose order only the source knows; nil: none is known.
	keyOrder func(t *change.Table) func(a, b change.Key) int
	// lanes write chunks beside the live changes (lane.go); position is
	// the highest position committed on the writer's own connection.
	lanes    chunkLanes
	position change.LSN
}

func (w *writer) run(ctx context.Context) error {
	laneCtx, cancelLane := context.WithCancel(ctx)
	defer func() {
		cancelLane()
		w.closeLanes()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-w.lanes.done: // nil (never ready) until a lane opens
			if err := w.laneEnded(ctx, d); err != nil {
				return err
			}
		case b, ok := <-w.in:
			if !ok {
				return w.waitLanes(ctx)
			}
			if err := w.take(ctx, laneCtx, b); err != nil {
				return err
			}
		}
	}
}

// take commits b: on a chunk lane when it carries chunks (lane.go), else
// on the writer's connection, beside the lanes' chunks when it may
// overtake them, after them when not.
func (w *writer) take(ctx, laneCtx context.Context, b *outBatch) error {
	if w.onLane(b) {
		l, err := w.laneFor(ctx, b)
		if err != nil {
			return err
		}
		if l != nil {
			if b.Position > w.position {
				// The position is the writer's: committed here first.
				pos := &outBatch{Batch: sink.Batch{Stream: b.Stream, Position: b.Position, Resume: b.Resume}}
				if err := w.apply(ctx, w.sink, pos, false); err != nil {
					return err
				}
				w.position = b.Position
			}
			w.startLane(laneCtx, l, b)
			return nil
		}
	}
	for !w.overtakes(b) {
		waited, err := w.waitLane(ctx)
		if err != nil {
			return err
		}
		if !waited {
			break // no lane is busy: nothing to wait for
		}
	}
	if err := w.apply(ctx, w.sink, b, false); err != nil {
		return err
	}
	w.position = max(w.position, b.Position)
	w.reportCommitted(ctx, b)
	return nil
}

// reportCommitted tells the source and the stream that b is committed.
func (w *writer) reportCommitted(ctx context.Context, b *outBatch) {
	chunkCommitted(b) // a test-only failpoint; inert unless set
	w.confirm(b.Position)
	// What was committed is recorded even when the stream is stopping.
	w.committed(context.WithoutCancel(ctx), b)
	if b.done != nil {
		close(b.done)
	}
	if b.committed != nil {
		b.committed <- b // buffered for every batch in flight
	}
}

// apply commits b on snk, retrying outages; a lane's batch goes without
// its position (positionless; lane.go).
func (w *writer) apply(ctx context.Context, snk sink.Sink, b *outBatch, positionless bool) error {
	w.refused.drop(b)
	delay := w.retry.Initial
	outage := false
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := w.recordChanged(ctx, b)
		if err != nil {
			err = errRecordChanged(err)
		} else {
			batch := b.Batch
			if positionless {
				batch.Position, batch.Resume = 0, ""
			}
			err = snk.Apply(ctx, &batch)
		}
		if err == nil {
			b.took = time.Since(start) // the attempt that committed, not an outage before it
			if outage {
				w.health.recovered(snk)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, sink.ErrFenced) {
			// Another node runs the stream now: no outage to show, and no
			// point in trying again.
			return err
		}
		if errors.Is(err, sink.ErrRejected) {
			if err := w.reject(ctx, b, err); err != nil {
				return err
			}
			continue // the rest of the batch, at once
		}
		outage = true
		w.log.Warn("destination apply failed; retrying", "attempt", attempt, "retry_in", delay, logkey.Err(err))
		w.health.failed(snk, fmt.Errorf("destination: %w", err))
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = w.retry.next(delay)
	}
}

// retryPolicy is exponential backoff between Initial and Max.
type retryPolicy struct {
	Initial, Max time.Duration
}

// backoff is the delay before the n-th retry in a row (n from 1).
func (p retryPolicy) backoff(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d = p.next(d)
	}
	return min(d, p.Max)
}

func (p retryPolicy) next(d time.Duration) time.Duration {
	d *= 2
	if d > p.Max {
		d = p.Max
	}
	return d
}
