package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
)

// ReadTable is the reference consumer of a NATS destination: it replays
// the subject of a stream's table, from the first message to the last
// the server holds now, into event.Replica, which then holds the table as
// a consumer of the subject would.
func ReadTable(ctx context.Context, d config.Destination, stream string, t *change.Table) (*event.Replica, error) {
	keyCols := make([]string, len(t.Key))
	for i, kc := range t.KeyColumns() {
		keyCols[i] = kc.Name
	}
	r := event.NewReplica(keyCols)
	nc, err := connect(d)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	n := namesOf(d, stream)
	subj := n.subject(t.ID)
	str, err := js.Stream(ctx, n.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", n.stream, err)
	}
	last, err := str.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: last message on %s: %w", n.stream, subj, err)
	}
	cons, err := str.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return nil, fmt.Errorf("stream %s: consumer on %s: %w", n.stream, subj, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("stream %s: read %s: %w", n.stream, subj, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		if err := r.Apply(m.Data()); err != nil {
			return nil, fmt.Errorf("%s message %d: %w", subj, meta.Sequence.Stream, err)
		}
		if meta.Sequence.Stream >= last.Sequence {
			return r, nil
		}
	}
}
