package kafka

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/sink"
)

var (
	_ sink.ReplayReader = (*Sink)(nil)
	_ sink.Fencer       = (*Sink)(nil)
)

// catchUp brings a table's replay up to the topic's last stable offsets
// (reads of the embedded sink.Replays: ReadRange and ReadKeys apply,
// read_committed, each partition's records after the offset an earlier
// read reached into a replica per partition, whose chunk marks reset its
// own keys): At holds, per partition, the next offset to read.
func (s *Sink) catchUp(ctx context.Context, r *sink.Replay[map[int32]int64]) error {
	s.mu.Lock()
	stream, _, err := sink.OnlyStream(s.streams)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	topic := TopicName(s.cfg.Topic, stream, r.Table.ID)
	// A client of its own: the sink's caches the metadata it read before
	// the table's topic was created.
	cl, err := kgo.NewClient(s.conn...)
	if err != nil {
		return err
	}
	defer cl.Close()
	at, err := consumeFrom(ctx, s.conn, kadm.NewClient(cl), topic, maps.Clone(r.At), func(rec *kgo.Record) error {
		if err := r.Reader.Apply(rec.Partition, rec.Value); err != nil {
			return fmt.Errorf("%s partition %d offset %d: %w", topic, rec.Partition, rec.Offset, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read topic %s: %w", topic, err)
	}
	r.At = at
	return nil
}
