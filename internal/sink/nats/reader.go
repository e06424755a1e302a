package nats

import (
	"context"
	"errors"
	"fmt"

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
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return after, fmt.Errorf("read %s: %w", subj, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return after, err
		}
		if err := fn(m.Data()); err != nil {
			return after, fmt.Errorf("%s message %d: %w", subj, meta.Sequence.Stream, err)
		}
		if meta.Sequence.Stream >= last.Sequence {
			return meta.Sequence.Stream, nil
		}
	}
}
