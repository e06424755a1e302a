package nats

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
)

// ReadTable is the reference consumer of a NATS destination: it replays
// the subject of a stream's table, from the first message to the last
// the server holds now, into event.Replica, which then holds the table as
// a consumer of the subject would. Each watch sees the messages' values
// as they are applied.
func ReadTable(ctx context.Context, d config.Destination, stream string, t *change.Table, watch ...event.Watch) (*event.Replica, error) {
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
	str, err := js.Stream(ctx, n.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", n.stream, err)
	}
	apply := func(value []byte) error {
		for _, w := range watch {
			w(value)
		}
		return r.Apply(value)
	}
	if _, err := replaySubject(ctx, str, n.subject(t.ID), 0, apply); err != nil {
		return nil, fmt.Errorf("stream %s: %w", n.stream, err)
	}
	return r, nil
}
