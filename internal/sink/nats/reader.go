package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/sink"
)

var _ sink.ReplayReader = (*Sink)(nil)

// catchUp brings a table's replay up to the subject's last message
// (reads of the embedded sink.Replays: ReadRange and ReadKeys apply the
// messages after the last one an earlier read applied, up to the last
// the server holds now): At is the stream sequence of the last message
// it applied.
func (s *Sink) catchUp(ctx context.Context, r *sink.Replay[uint64]) error {
	_, st, err := sink.OnlyStream(s.streams)
	if err != nil {
		return err
	}
	at, err := replaySubject(ctx, st.str, st.subject(r.Table.ID), r.At, func(data []byte) error { return r.Reader.Apply(0, data) })
	if err != nil {
		return err
	}
	r.At = at
	return nil
}

// replaySubject calls fn with the data of each message of subj after
// stream sequence after, up to the last the server holds now, in order,
// and returns the sequence of the last (after when there are none).
func replaySubject(ctx context.Context, str jetstream.Stream, subj string, after uint64, fn func([]byte) error) (uint64, error) {
	last, err := str.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return after, nil
	}
	if err != nil {
		return after, fmt.Errorf("last message on %s: %w", subj, err)
	}
	if last.Sequence <= after {
		return after, nil
	}
	cons, err := str.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1})
	if err != nil {
		return after, fmt.Errorf("consumer on %s: %w", subj, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return after, err
	}
	defer it.Stop()
	for {
		m, err := nextMessage(ctx, it)
		if err != nil {
			return after, fmt.Errorf("read %s up to message %d: %w", subj, last.Sequence, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return after, err
		}
		if err := fn(m.Data()); err != nil {
			return after, fmt.Errorf("%s message %d: %w", subj, meta.Sequence.Stream, err)
		}
		// The last message may have gone (max_age, a purge) since it was
		// asked for: none pending ends the read as well.
		if meta.Sequence.Stream >= last.Sequence || meta.NumPending == 0 {
			return meta.Sequence.Stream, nil
		}
	}
}

// nextWait bounds the wait for a message known to be in the stream, so a
// read whose messages were deleted meanwhile fails instead of hanging.
const nextWait = 30 * time.Second

func nextMessage(ctx context.Context, it jetstream.MessagesContext) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, nextWait)
	defer cancel()
	m, err := it.Next(jetstream.NextContext(ctx))
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("no message within %s: were the stream's messages deleted or purged? %w", nextWait, err)
	}
	return m, err
}
