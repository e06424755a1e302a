package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
)

// everyPartition marks a record sent to a partition chosen here, not by
// its key: a chunk mark or a truncate goes to every partition of the
// table's topic, so a consumer of one partition sees it.
type everyPartition struct{}

// partitioner sends keyed records where Kafka's default partitioner
// would (murmur2 of the key), so each key stays in order, and marks to
// the partition set on them.
type partitioner struct{ keys kgo.Partitioner }

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	return topicPartitioner{p.keys.ForTopic(t)}
}

type topicPartitioner struct{ keys kgo.TopicPartitioner }

func (topicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (p topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil && r.Context.Value(everyPartition{}) != nil {
		return int(r.Partition)
	}
	return p.keys.Partition(r, n)
}

var markCtx = context.WithValue(context.Background(), everyPartition{}, true)

// records encodes a batch's operations as records, in order.
func (s *Sink) records(ctx context.Context, b *sink.Batch) ([]*kgo.Record, error) {
	var out []*kgo.Record
	at := s.now().UTC()
	var named change.TableID // the table topic names, a chunk's rows all alike
	var topic string
	add := func(m event.Message, all bool) error {
		if topic == "" || m.Table != named {
			named, topic = m.Table, TopicName(s.cfg.Topic, b.Stream, m.Table)
		}
		if size := len(m.Key) + len(m.Value); int64(size) > s.maxBytes {
			return sink.Rejected(m.Table, fmt.Errorf("an event of %d bytes (key %.200s) is over the destination's max_message_bytes (%d): raise max_message_bytes (and the broker's message.max.bytes) or make the value smaller on the source",
				size, m.Key, s.maxBytes))
		}
		n, err := s.ensureTopic(ctx, topic, int32(s.partitions()), nil)
		if err != nil {
			return err
		}
		if !all {
			out = append(out, &kgo.Record{Topic: topic, Key: m.Key, Value: m.Value})
			return nil
		}
		for p := range n {
			out = append(out, &kgo.Record{Topic: topic, Key: m.Key, Value: m.Value, Partition: int32(p), Context: markCtx})
		}
		return nil
	}
	for _, op := range b.Ops {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch {
		case op.Change != nil:
			msgs, err := s.enc.Change(op.Change, b.Origin(op, at))
			if err != nil {
				return nil, sink.Rejected(op.Change.Table.ID, err)
			}
			for _, m := range msgs {
				// A truncate has no key: every partition must see it.
				if err := add(m, m.Key == nil); err != nil {
					return nil, err
				}
			}
		case op.Chunk != nil:
			if err := s.chunkRecords(b, op.Chunk, at, add); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// chunkRecords adds a chunk's rows as "r" events, then its mark on every
// partition.
func (s *Sink) chunkRecords(b *sink.Batch, c *sink.Chunk, at time.Time, add func(event.Message, bool) error) error {
	o := b.Origin(sink.Op{}, at)
	for _, r := range c.Rows {
		m, err := s.enc.Row(c.Table, r, o)
		if err != nil {
			return sink.Rejected(c.Table.ID, err)
		}
		if err := add(m, false); err != nil {
			return err
		}
	}
	mark, err := s.enc.Chunk(c.Table, event.ChunkMark{BackfillID: c.BackfillID, Low: c.Low, High: c.High,
		Rows: len(c.Rows), Reset: !c.Keep, Last: c.Last}, o)
	if err != nil {
		return sink.Rejected(c.Table.ID, err)
	}
	return add(mark, true)
}

// partitions is the count of the topics the destination creates; -1 is
// the broker's default.
func (s *Sink) partitions() int64 {
	if s.cfg.Partitions > 0 {
		return s.cfg.Partitions
	}
	return -1
}
