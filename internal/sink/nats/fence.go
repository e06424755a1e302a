package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink"
)

// A NATS destination refuses a former owner's writes (docs/cluster.md,
// "Fencing").
var _ sink.Fencer = (*Sink)(nil)

// fenceSubject is the subject, under the stream's prefix, of the message
// a new owner publishes when it takes the stream over. It has one token
// after the prefix, so it is no table's.
const fenceSubject = "_fence"

// hdrEpoch is the fence message's header: the new owner's epoch.
const hdrEpoch = "Tidemark-Epoch"

// Fence makes this sink the stream's writer for a cluster node's term at
// epoch. The epoch goes into the checkpoint by compare-and-set on the
// key's revision, so a former owner's next checkpoint is refused; then a
// fence message is appended to the JetStream stream. Once fenced, every
// message this sink publishes expects the stream's last sequence to be its
// own previous message's, so a former owner's messages in flight, which
// expect the sequence before the fence message, are refused by the server
// (Nats-Expected-Last-Sequence). That needs a JetStream stream only this
// stream's subjects go to.
func (s *Sink) Fence(ctx context.Context, stream string, epoch int64) error {
	delete(s.streams, stream)
	n := namesOf(s.d, stream)
	str, err := s.ensureStream(ctx, n)
	if err != nil {
		return err
	}
	if err := exclusive(str, n); err != nil {
		return err
	}
	kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	if err := recordEpoch(ctx, kv, str, n, epoch); err != nil {
		return fmt.Errorf("nats destination: fence stream %s at epoch %d: %w", stream, epoch, err)
	}
	if err := s.publishFence(ctx, str, n, epoch); err != nil {
		return fmt.Errorf("nats destination: fence stream %s at epoch %d: %w", stream, epoch, err)
	}
	if s.epochs == nil {
		s.epochs = map[string]int64{}
	}
	s.epochs[stream] = epoch
	return nil
}

// exclusive checks that only the stream's subjects go to its JetStream
// stream: a publisher of other subjects would move the stream's last
// sequence under a fenced owner at every message.
func exclusive(str jetstream.Stream, n names) error {
	cfg := str.CachedInfo().Config
	if cfg.Mirror != nil || len(cfg.Sources) > 0 {
		return fmt.Errorf("nats destination: JetStream stream %s takes messages from other streams (a mirror or sources): %w; give the stream a JetStream stream of its own (the destination's stream key), or pin it to one node (streams[].node)",
			n.stream, sink.ErrCannotFence)
	}
	for _, subj := range cfg.Subjects {
		if !covers(n.prefix+".>", subj) {
			return fmt.Errorf("nats destination: JetStream stream %s also takes subjects %s, outside %s.>: %w; a stream that may move between cluster nodes needs a JetStream stream of its own: set the destination's stream key to a new name, or pin the stream to one node (streams[].node)",
				n.stream, subj, n.prefix, sink.ErrCannotFence)
		}
	}
	return nil
}

// recordEpoch writes epoch into the stream's checkpoint, by compare-and-set
// on its revision, unless a newer epoch is there (sink.ErrFenced).
func recordEpoch(ctx context.Context, kv jetstream.KeyValue, str jetstream.Stream, n names, epoch int64) error {
	for {
		c, rev, found, err := readCheckpoint(ctx, kv, n.key)
		if err != nil {
			return err
		}
		if c.Epoch > epoch {
			return fmt.Errorf("the checkpoint holds epoch %d: %w", c.Epoch, sink.ErrFenced)
		}
		if !found {
			// Messages already there are not this stream's to resume from.
			info, err := str.Info(ctx)
			if err != nil {
				return fmt.Errorf("stream %s: %w", n.stream, err)
			}
			c.StreamSeq = info.State.LastSeq
		}
		c.Epoch = epoch
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if found {
			_, err = kv.Update(ctx, n.key, b, rev)
		} else {
			_, err = kv.Create(ctx, n.key, b)
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue // written meanwhile: read it again
		}
		if err != nil {
			return fmt.Errorf("write checkpoint %s: %w", n.key, err)
		}
		return nil
	}
}

// publishFence appends the fence message right after the stream's last
// message as read, reading again when another message got in between.
func (s *Sink) publishFence(ctx context.Context, str jetstream.Stream, n names, epoch int64) error {
	for {
		info, err := str.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s: %w", n.stream, err)
		}
		m := &natsio.Msg{Subject: n.prefix + "." + fenceSubject, Header: natsio.Header{hdrEpoch: {strconv.FormatInt(epoch, 10)}},
			Data: []byte(`{"fence":` + strconv.FormatInt(epoch, 10) + `}`)}
		id := fmt.Sprintf("tidemark-fence-%d-%d", epoch, time.Now().UnixNano())
		_, err = s.js.PublishMsg(ctx, m, jetstream.WithMsgID(id), jetstream.WithExpectStream(n.stream),
			jetstream.WithExpectLastSequence(info.State.LastSeq))
		if wrongLastSequence(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("publish the fence message: %w", err)
		}
		return nil
	}
}

// wrongLastSequence reports whether the server refused a message because
// the stream's last sequence was not the one it expected.
func wrongLastSequence(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// checkEpoch fails with sink.ErrFenced when the stream's checkpoint holds
// an epoch newer than this sink's term; it explains a refused write of a
// fenced sink.
func (s *Sink) checkEpoch(stream string, c checkpoint) error {
	if mine, ok := s.epochs[stream]; ok && c.Epoch > mine {
		return fmt.Errorf("nats destination: stream %s: the checkpoint holds epoch %d, this node's term is %d: %w", stream, c.Epoch, mine, sink.ErrFenced)
	}
	return nil
}

// refused explains a write of a fenced sink that the server refused: a
// newer owner took the stream over (sink.ErrFenced), or something else
// wrote to the stream meanwhile, and the batch is sent again after the
// stream is read again.
func (s *Sink) refused(ctx context.Context, st *streamState, stream string, err error) error {
	if _, fenced := s.epochs[stream]; !fenced {
		return err
	}
	c, _, _, rerr := readCheckpoint(ctx, s.kv, st.key)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if ferr := s.checkEpoch(stream, c); ferr != nil {
		return fmt.Errorf("%w (%w)", ferr, err)
	}
	return err
}

// VerifyFences reads the stream's messages in order and checks that each
// message of its tables after a fence message was published in that
// fence's term (a fenced term's message ids hold its epoch): no message of
// a former owner follows a takeover. It returns how many fence messages
// there are. It reads the whole JetStream stream; tests run it.
func VerifyFences(ctx context.Context, d config.Destination, stream string) (int, error) {
	nc, err := connect(d)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	n := namesOf(d, stream)
	str, err := js.Stream(ctx, n.stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", n.stream, err)
	}
	info, err := str.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return 0, err
	}
	cons, err := str.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{n.prefix + ".>"}})
	if err != nil {
		return 0, fmt.Errorf("consumer on %s.>: %w", n.prefix, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	fences, epoch := 0, int64(0)
	for {
		m, err := nextMessage(ctx, it)
		if err != nil {
			return fences, err
		}
		meta, err := m.Metadata()
		if err != nil {
			return fences, err
		}
		h := m.Headers()
		switch {
		case h.Get(hdrEpoch) != "":
			if epoch, err = strconv.ParseInt(h.Get(hdrEpoch), 10, 64); err != nil {
				return fences, fmt.Errorf("fence message %d: %w", meta.Sequence.Stream, err)
			}
			fences++
		case epoch != 0 && h.Get(hdrPosition) != "":
			want, err := termID(m.Subject(), h, epoch)
			if err != nil {
				return fences, fmt.Errorf("message %d: %w", meta.Sequence.Stream, err)
			}
			if h.Get(natsio.MsgIdHdr) != want {
				return fences, fmt.Errorf("message %d on %s follows the fence of epoch %d but was not published in that term: a former owner's", meta.Sequence.Stream, m.Subject(), epoch)
			}
		}
		if meta.Sequence.Stream >= info.State.LastSeq || meta.NumPending == 0 {
			return fences, nil
		}
	}
}

// termID is the id a message with headers h on subject has when published
// in the term at epoch.
func termID(subject string, h natsio.Header, epoch int64) (string, error) {
	st := &streamState{fenced: true, epoch: epoch}
	key := []byte(h.Get(hdrKey))
	nums := func(a, b string) (x, y uint64, err error) {
		if x, err = strconv.ParseUint(h.Get(a), 10, 64); err == nil {
			y, err = strconv.ParseUint(h.Get(b), 10, 64)
		}
		return x, y, err
	}
	if h.Get(hdrBackfill) == "" {
		pos, index, err := nums(hdrPosition, hdrIndex)
		return st.msgID(subject, "change", key, pos, index), err
	}
	bf, chunk, err := nums(hdrBackfill, hdrChunk)
	if h.Get(hdrMark) != "" {
		return st.msgID(subject, "mark", nil, bf, chunk), err
	}
	return st.msgID(subject, "row", key, bf, chunk), err
}
