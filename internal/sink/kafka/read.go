package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
)

// consume reads a topic's records as a read_committed consumer sees
// them, from the start of each partition to its last stable offset now,
// calling fn for each in its partition's order. Control records (the
// transaction markers) are kept to see where a partition ends, not
// passed to fn; records of aborted transactions are never read.
func consume(ctx context.Context, conn []kgo.Opt, adm *kadm.Client, topic string, fn func(*kgo.Record) error) error {
	_, err := consumeFrom(ctx, conn, adm, topic, nil, fn)
	return err
}

// consumeFrom is consume from the offsets of after (the next offset of
// each partition it names; the partition's start for the others). It
// returns the offsets it read up to, to resume from.
func consumeFrom(ctx context.Context, conn []kgo.Opt, adm *kadm.Client, topic string, after map[int32]int64, fn func(*kgo.Record) error) (map[int32]int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	from := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	reached := map[int32]int64{}
	for p, e := range ends[topic] {
		if e.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, e.Err)
		}
		st, _ := starts.Lookup(topic, p)
		first := max(st.Offset, after[p])
		reached[p] = max(first, e.Offset)
		if e.Offset > first {
			from[p] = kgo.NewOffset().At(first)
			end[p] = e.Offset
		}
	}
	if len(from) == 0 {
		return reached, nil
	}
	opts := append(append([]kgo.Opt{}, conn...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) { fetchErr = fmt.Errorf("%s partition %d: %w", t, p, err) })
		if fetchErr != nil {
			return nil, fetchErr
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			last, open := end[r.Partition]
			if !open {
				continue
			}
			if r.Offset < last && !r.Attrs.IsControl() {
				if err := fn(r); err != nil {
					return nil, err
				}
			}
			// At or past the end: compaction may have removed the record
			// (or marker) at last-1 itself.
			if r.Offset >= last-1 {
				delete(end, r.Partition)
			}
		}
	}
	return reached, nil
}

// ReadTable is the reference consumer of a Kafka destination: it reads a
// table's topic read_committed, each partition in order into a replica
// of its own (a partition's chunk marks reset its own keys), and returns
// the replicas merged: the table as a consumer of the topic holds it.
// Each watch sees the records' values as they are applied.
func ReadTable(ctx context.Context, d config.Destination, stream string, t *change.Table, watch ...event.Watch) (*event.Replica, error) {
	keyCols := make([]string, len(t.Key))
	for i, kc := range t.KeyColumns() {
		keyCols[i] = kc.Name
	}
	parts := map[int32]*event.Replica{}
	err := ReadEvents(ctx, d, stream, t.ID, func(r *kgo.Record) error {
		rep, ok := parts[r.Partition]
		if !ok {
			rep = event.NewReplica(keyCols)
			parts[r.Partition] = rep
		}
		for _, w := range watch {
			w(r.Value)
		}
		if err := rep.Apply(r.Value); err != nil {
			return fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := event.NewReplica(keyCols)
	for _, rep := range parts {
		out.Merge(rep)
	}
	return out, nil
}

// ReadEvents calls fn with every record of a table's topic a
// read_committed consumer sees now, each partition in order.
func ReadEvents(ctx context.Context, d config.Destination, stream string, id change.TableID, fn func(*kgo.Record) error) error {
	k := d.Kafka
	if k.Topic == "" {
		k.Topic = DefaultTopic
	}
	conn, err := connOpts(d)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return err
	}
	defer cl.Close()
	topic := TopicName(k.Topic, stream, id)
	if err := consume(ctx, conn, kadm.NewClient(cl), topic, fn); err != nil {
		return fmt.Errorf("read topic %s: %w", topic, err)
	}
	return nil
}
