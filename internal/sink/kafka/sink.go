// Package kafka is the Kafka destination: each stream's events
// (internal/event) in a topic per table, partitioned by key, written by
// an idempotent transactional producer that commits the stream's
// checkpoint to a compacted topic in the same transaction, so a
// read_committed consumer sees every change once however the daemon
// stops (docs/destinations.md, "Kafka").
package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
)

// Defaults of the destination's keys.
const (
	DefaultTopic           = "{stream}.{schema}.{table}"
	DefaultCheckpointTopic = "tidemark.checkpoints"
	// DefaultMaxMessageBytes is Kafka's default message limit.
	DefaultMaxMessageBytes = 1 << 20
)

// batchOverhead is room above the message limit for the record batch
// around a message, in the producer's and the topics' limits.
const batchOverhead = 16 << 10

// Sink writes events to Kafka topics.
type Sink struct {
	cfg      config.Kafka
	maxBytes int64 // the message limit
	conn     []kgo.Opt
	adm      *kadm.Client
	base     *kgo.Client
	enc      *event.Encoder
	now      func() time.Time

	mu      sync.Mutex
	topics  map[string]int // partitions of the topics in use
	streams map[string]*streamState
	// beforeCommit, when set, runs after a batch's records were sent and
	// before its transaction commits; an error stops Apply there with the
	// transaction left open, as a crash would.
	beforeCommit func() error
	// Replays reads tables back by replaying their topics (reader.go).
	sink.Replays[map[int32]int64]
	// fenced holds the streams this sink was made the producer of by
	// Fence (a cluster node's term); true once another producer of the
	// stream fenced it off, after which it starts no producer of its own
	// (that would fence the new owner in turn) until Fence is called again.
	fenced map[string]bool
}

type streamState struct {
	cl   *kgo.Client // transactional producer of the stream
	ckpt sink.Checkpoint
}

// Open connects to the brokers and makes sure the checkpoint topic
// exists.
func Open(ctx context.Context, d config.Destination) (*Sink, error) {
	k := d.Kafka
	if k.Topic == "" {
		k.Topic = DefaultTopic
	}
	if k.CheckpointTopic == "" {
		k.CheckpointTopic = DefaultCheckpointTopic
	}
	maxBytes := d.MaxMessageBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	conn, err := connOpts(d)
	if err != nil {
		return nil, fmt.Errorf("kafka destination: %w", err)
	}
	base, err := kgo.NewClient(conn...)
	if err != nil {
		return nil, fmt.Errorf("kafka destination: %w", err)
	}
	s := &Sink{cfg: k, maxBytes: maxBytes, conn: conn, base: base, adm: kadm.NewClient(base), now: time.Now,
		topics: map[string]int{}, streams: map[string]*streamState{}, beforeCommit: killBeforeCommit()}
	s.Replays = sink.NewReplays("kafka destination", s.catchUp)
	compact := "compact"
	if _, err := s.ensureTopic(ctx, k.CheckpointTopic, 1, map[string]*string{"cleanup.policy": &compact}); err != nil {
		base.Close()
		return nil, explain(err, d)
	}
	return s, nil
}

// UseEncoder sets how changes become events (sink.EventWriter).
func (s *Sink) UseEncoder(e *event.Encoder) { s.enc = e }

// Close ends the producers; an open transaction is left to the broker,
// which aborts it when the stream's next producer starts.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, st := range s.streams {
		st.cl.Close()
		delete(s.streams, name)
	}
	s.Clear()
	s.base.Close()
	return nil
}

// ensureTopic returns a topic's partition count, creating the topic
// with partitions (-1: the broker's default) if it does not exist.
func (s *Sink) ensureTopic(ctx context.Context, topic string, partitions int32, configs map[string]*string) (int, error) {
	if n, ok := s.topics[topic]; ok {
		return n, nil
	}
	limit := strconv.FormatInt(s.maxBytes+batchOverhead, 10)
	if configs == nil {
		configs = map[string]*string{}
	}
	configs["max.message.bytes"] = &limit
	for try := 0; ; try++ {
		details, err := s.adm.ListTopics(ctx, topic)
		if err != nil {
			return 0, fmt.Errorf("kafka destination: list topic %s: %w", topic, err)
		}
		if d, ok := details[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
			s.topics[topic] = len(d.Partitions)
			return len(d.Partitions), nil
		}
		if try > 0 {
			return 0, fmt.Errorf("kafka destination: topic %s exists but lists no partitions", topic)
		}
		resp, err := s.adm.CreateTopic(ctx, partitions, -1, configs, topic)
		switch {
		case err == nil && resp.NumPartitions > 0:
			s.topics[topic] = int(resp.NumPartitions)
			return int(resp.NumPartitions), nil
		case err != nil && !errors.Is(err, kerr.TopicAlreadyExists):
			return 0, fmt.Errorf("kafka destination: create topic %s: %w", topic, err)
		}
	}
}

// TopicName is a table's topic: the template with {stream}, {schema} and
// {table} replaced, characters Kafka does not allow in a topic name
// written as '_'.
func TopicName(template, stream string, id change.TableID) string {
	r := strings.NewReplacer("{stream}", stream, "{schema}", id.Schema, "{table}", id.Name)
	return topicChars(r.Replace(template))
}

// topicChars writes the characters Kafka does not allow in a topic name
// as '_'.
func topicChars(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			return c
		}
		return '_'
	}, s)
}

// state starts a stream's transactional producer the first time the
// stream is named and reads its checkpoint. Starting the producer fences
// an earlier one of the same stream (a daemon that was killed) and
// completes its open transaction, so the checkpoint read after it is the
// last committed one.
func (s *Sink) state(ctx context.Context, stream string) (*streamState, error) {
	if st, ok := s.streams[stream]; ok {
		return st, nil
	}
	if s.fenced[stream] {
		return nil, fmt.Errorf("kafka destination: stream %s: %w", stream, sink.ErrFenced)
	}
	opts := append(append([]kgo.Opt{}, s.conn...),
		kgo.TransactionalID(s.cfg.CheckpointTopic+"."+stream),
		kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(partitioner{kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerBatchMaxBytes(int32(s.maxBytes+batchOverhead)),
		kgo.ProducerLinger(0))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka destination: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka destination: start the transactional producer of stream %s: %w", stream, err)
	}
	c, err := s.readCheckpoint(ctx, stream)
	if err != nil {
		cl.Close()
		return nil, err
	}
	st := &streamState{cl: cl, ckpt: c}
	s.streams[stream] = st
	return st, nil
}

// Fence makes this sink the stream's producer for a cluster node's term
// (docs/cluster.md). Starting a transactional producer under the
// stream's transactional id bumps the id's producer epoch: Kafka aborts a
// former owner's open transaction and refuses its later commits
// (ProducerFenced), and the checkpoint is read after that. epoch is the
// node's lease epoch; Kafka's own producer epoch does the fencing.
func (s *Sink) Fence(ctx context.Context, stream string, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(stream)
	if s.fenced == nil {
		s.fenced = map[string]bool{}
	}
	s.fenced[stream] = false
	if _, err := s.state(ctx, stream); err != nil {
		return fmt.Errorf("fence stream %s at epoch %d: %w", stream, epoch, err)
	}
	return nil
}

// producerFenced reports whether err says a newer producer of the same
// transactional id took over.
func producerFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// drop forgets a stream's producer after a failed transaction: the next
// Apply starts another and reads the checkpoint again, whatever the
// failed commit did.
func (s *Sink) drop(stream string) {
	if st, ok := s.streams[stream]; ok {
		st.cl.Close()
		delete(s.streams, stream)
	}
}

// Checkpoint reads the stream's committed position and cursors.
func (s *Sink) Checkpoint(ctx context.Context, stream string) (sink.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(ctx, stream)
	if err != nil {
		return sink.Checkpoint{}, err
	}
	return st.ckpt, nil
}

// Apply writes a batch's events and its checkpoint in one transaction.
func (s *Sink) Apply(ctx context.Context, b *sink.Batch) error {
	if s.enc == nil {
		return errors.New("kafka destination: no event encoder was set")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(ctx, b.Stream)
	if err != nil {
		return err
	}
	recs, err := s.records(ctx, b)
	if err != nil {
		return err
	}
	next := st.ckpt.Advanced(b)
	ck, err := checkpointRecord(s.cfg.CheckpointTopic, b.Stream, next)
	if err != nil {
		return err
	}
	recs = append(recs, ck)
	if err := s.transact(ctx, st, recs); err != nil {
		s.drop(b.Stream)
		if _, term := s.fenced[b.Stream]; term && producerFenced(err) {
			s.fenced[b.Stream] = true
			return fmt.Errorf("kafka destination: stream %s: another producer of the stream took over (%w): %w", b.Stream, err, sink.ErrFenced)
		}
		return err
	}
	st.ckpt = next
	return nil
}

// transact sends records in a transaction and commits it.
func (s *Sink) transact(ctx context.Context, st *streamState, recs []*kgo.Record) error {
	if err := st.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka destination: begin transaction: %w", err)
	}
	var (
		errMu    sync.Mutex
		firstErr error
	)
	for _, r := range recs {
		st.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err == nil {
				return
			}
			errMu.Lock()
			defer errMu.Unlock()
			if firstErr == nil {
				firstErr = produceError(r, err)
			}
		})
	}
	flushErr := st.cl.Flush(ctx)
	errMu.Lock()
	err := errors.Join(firstErr, flushErr)
	errMu.Unlock()
	if err == nil && s.beforeCommit != nil {
		if err := s.beforeCommit(); err != nil {
			return err
		}
	}
	if err != nil {
		st.cl.AbortBufferedRecords(context.WithoutCancel(ctx))
		if abortErr := st.cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort); abortErr != nil {
			err = errors.Join(err, fmt.Errorf("abort: %w", abortErr))
		}
		return err
	}
	// Not cancelled with ctx: an interrupted commit has an unknown outcome.
	if err := st.cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryCommit); err != nil {
		return fmt.Errorf("kafka destination: commit: %w", err)
	}
	return nil
}

// produceError says which record failed; a message the broker finds too
// large is the batch's content, not an outage.
func produceError(r *kgo.Record, err error) error {
	if errors.Is(err, kerr.MessageTooLarge) {
		return fmt.Errorf("topic %s: a message of %d bytes: %w: %w", r.Topic, len(r.Key)+len(r.Value), err, sink.ErrRejected)
	}
	return fmt.Errorf("kafka destination: produce to %s: %w", r.Topic, err)
}
