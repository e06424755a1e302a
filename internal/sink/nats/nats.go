// Package nats is the NATS JetStream destination: each stream's events
// (internal/event) in a JetStream stream of their own, a subject per
// table, each message carrying its source position (and, for backfill
// rows, the backfill, chunk and row) in headers and a message id the
// server's duplicate window drops replays by. The checkpoint goes to a
// key-value bucket after the server acknowledged the batch; at start the
// sink reads the headers of the messages after it, so a batch sent again
// after the window has passed is not duplicated either
// (docs/destinations.md, "NATS JetStream").
package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
)

// publishWindow is how many messages are awaiting the server's
// acknowledgement at most.
const publishWindow = 256

// Sink publishes events to JetStream.
type Sink struct {
	d       config.Destination
	nc      *natsio.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	enc     *event.Encoder
	limit   int64
	now     func() time.Time
	streams map[string]*streamState
	// duplicates is the duplicate window of the streams the sink creates
	// (0: the server's default, two minutes).
	duplicates time.Duration
	// afterPublish, when set, runs after the nth message of a batch is
	// handed to the connection; an error stops the batch there, as a
	// crash would. beforeCheckpoint runs once a batch is acknowledged.
	afterPublish     func(n int) error
	beforeCheckpoint func() error
	// epochs are the terms the streams were fenced at (fence.go); a
	// stream not in it is not fenced.
	epochs map[string]int64
	// Replays reads tables back by replaying their subjects (reader.go).
	sink.Replays[uint64]
}

type streamState struct {
	names
	str  jetstream.Stream
	ckpt checkpoint
	rev  uint64
	tail *tail
	// last is the JetStream stream's last sequence as this sink knows it:
	// a fenced sink's next message expects it.
	last uint64
	// When fenced, each message of a batch but the first also expects the
	// stream's last message to be the one before it by message id, and
	// the ids hold the term's epoch: a message of a former owner then
	// never follows one of the new owner's.
	fenced bool
	epoch  int64
}

// msgID is the message id of an event of the stream (msgID), of the term
// when fenced.
func (st *streamState) msgID(subject, kind string, key []byte, nums ...uint64) string {
	if st.fenced {
		nums = append(nums, uint64(st.epoch))
	}
	return msgID(subject, kind, key, nums...)
}

// Open connects to the destination's server.
func Open(ctx context.Context, d config.Destination) (*Sink, error) {
	nc, err := connect(d)
	if err != nil {
		return nil, err
	}
	limit, err := messageLimit(nc, d)
	if err != nil {
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(time.Minute))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats destination: %w", err)
	}
	s := &Sink{d: d, nc: nc, js: js, limit: limit, now: time.Now, streams: map[string]*streamState{}}
	s.Replays = sink.NewReplays("nats destination", s.catchUp)
	return s, nil
}

// connect connects with the destination's credentials and TLS files.
func connect(d config.Destination) (*natsio.Conn, error) {
	opts := []natsio.Option{natsio.Name("tidemark"), natsio.Timeout(10 * time.Second)}
	if d.Credentials != "" {
		opts = append(opts, natsio.UserCredentials(d.Credentials))
	}
	if d.TLSCA != "" {
		opts = append(opts, natsio.RootCAs(d.TLSCA))
	}
	if d.TLSCert != "" {
		opts = append(opts, natsio.ClientCert(d.TLSCert, d.TLSKey))
	}
	nc, err := natsio.Connect(d.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats destination %s: %w", redact(d.URL), explain(err, d))
	}
	return nc, nil
}

// What a failed connection most likely means, for its message and the
// doctor's fix.
var (
	errLogin      = errors.New("the server refused the login: check the user and password in url, or the credentials file")
	errCert       = errors.New("the server's TLS certificate is not trusted: set tls_ca to the PEM file of the CA that signed it")
	errClientCert = errors.New("the server refused the client certificate, or its lack: set tls_cert and tls_key to a certificate the server's CA signed and its key")
)

// explain adds to a connection error what it means and what to do.
func explain(err error, d config.Destination) error {
	switch {
	case sink.CertUntrusted(err):
		return fmt.Errorf("%w: %w", err, errCert)
	case sink.ClientCertRefused(err),
		// Under TLS 1.3 the server checks the client's certificate after
		// the handshake, and the refusal may reach the client only as a
		// closed connection.
		d.TLSCert == "" && strings.Contains(err.Error(), "after TLS handshake"):
		return fmt.Errorf("%w: %w", err, errClientCert)
	case errors.Is(err, natsio.ErrAuthorization),
		strings.Contains(strings.ToLower(err.Error()), "authorization violation"):
		return fmt.Errorf("%w: %w", err, errLogin)
	}
	return err
}

// messageLimit is the largest message the sink sends: max_message_bytes,
// or the server's max_payload, which it may not exceed.
func messageLimit(nc *natsio.Conn, d config.Destination) (int64, error) {
	server := nc.MaxPayload()
	if d.MaxMessageBytes == 0 {
		return server, nil
	}
	if d.MaxMessageBytes > server {
		return 0, fmt.Errorf("nats destination: max_message_bytes is %d but the server accepts messages of at most %d bytes (its max_payload): lower max_message_bytes or raise max_payload", d.MaxMessageBytes, server)
	}
	return d.MaxMessageBytes, nil
}

// UseEncoder sets how changes become events (sink.EventWriter).
func (s *Sink) UseEncoder(e *event.Encoder) { s.enc = e }

// Close closes the connection and drops the replays reads held.
func (s *Sink) Close() error {
	s.Clear()
	s.nc.Close()
	return nil
}

// bucket opens the checkpoint bucket, creating it the first time.
func (s *Sink) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if s.kv != nil {
		return s.kv, nil
	}
	kv, err := s.js.KeyValue(ctx, checkpointBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: checkpointBucket,
			Description: "tidemark's stream checkpoints", Storage: jetstream.FileStorage})
	}
	if err != nil {
		return nil, fmt.Errorf("nats destination: checkpoint bucket %s: %w", checkpointBucket, err)
	}
	s.kv = kv
	return kv, nil
}

// state opens a stream's JetStream stream (creating it the first time)
// and reads its checkpoint and the messages after it.
func (s *Sink) state(ctx context.Context, stream string) (*streamState, error) {
	if st, ok := s.streams[stream]; ok {
		return st, nil
	}
	n := namesOf(s.d, stream)
	str, err := s.ensureStream(ctx, n)
	if err != nil {
		return nil, err
	}
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	// The last sequence is read before the checkpoint: a fence message
	// published after it comes after an epoch recorded after it, which
	// the checkpoint read then shows (fence.go).
	info, err := str.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("nats destination: stream %s: %w", n.stream, err)
	}
	c, rev, found, err := readCheckpoint(ctx, kv, n.key)
	if err != nil {
		return nil, fmt.Errorf("nats destination: %w", err)
	}
	if err := s.checkEpoch(stream, c); err != nil {
		return nil, err
	}
	if !found {
		// Messages already there are not this stream's to resume from.
		c = checkpoint{StreamSeq: info.State.LastSeq}
		b, _ := json.Marshal(c)
		if rev, err = kv.Create(ctx, n.key, b); err != nil {
			return nil, fmt.Errorf("nats destination: create checkpoint %s: %w", n.key, err)
		}
	}
	t, err := readTail(ctx, str, n, c.StreamSeq)
	if err != nil {
		return nil, fmt.Errorf("nats destination: %w", err)
	}
	st := &streamState{names: n, str: str, ckpt: c, rev: rev, tail: t, last: info.State.LastSeq}
	st.epoch, st.fenced = s.epochs[stream]
	s.streams[stream] = st
	return st, nil
}

// ensureStream opens the JetStream stream, creating it when missing; an
// existing one must take the stream's subjects.
func (s *Sink) ensureStream(ctx context.Context, n names) (jetstream.Stream, error) {
	str, err := s.js.Stream(ctx, n.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		str, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: n.stream, Subjects: []string{n.prefix + ".>"},
			Description: "tidemark events", Storage: jetstream.FileStorage, Duplicates: s.duplicates})
	}
	if err != nil {
		return nil, fmt.Errorf("nats destination: stream %s: %w", n.stream, err)
	}
	for _, subj := range str.CachedInfo().Config.Subjects {
		if covers(subj, n.prefix+".x.y") {
			return str, nil
		}
	}
	return nil, fmt.Errorf("nats destination: stream %s exists without the subjects %s.> (its subjects: %v): add them to it, or set subject_prefix or stream", n.stream, n.prefix, str.CachedInfo().Config.Subjects)
}

// covers says whether a subject pattern matches subject.
func covers(pattern, subject string) bool {
	p, s := splitSubject(pattern), splitSubject(subject)
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

// Checkpoint reads the stream's committed position and cursors.
func (s *Sink) Checkpoint(ctx context.Context, stream string) (sink.Checkpoint, error) {
	st, err := s.state(ctx, stream)
	if err != nil {
		return sink.Checkpoint{}, err
	}
	return st.ckpt.sink()
}

// Apply publishes a batch's events, waits for the server to acknowledge
// them, then writes the checkpoint. After an error the stream is read
// again before the next batch.
func (s *Sink) Apply(ctx context.Context, b *sink.Batch) error {
	if s.enc == nil {
		return errors.New("nats destination: no event encoder was set")
	}
	st, err := s.state(ctx, b.Stream)
	if err != nil {
		return err
	}
	if err := s.apply(ctx, st, b); err != nil {
		delete(s.streams, b.Stream)
		return err
	}
	return nil
}

func (s *Sink) apply(ctx context.Context, st *streamState, b *sink.Batch) error {
	msgs, err := s.messages(st, b)
	if err != nil {
		return err
	}
	seq, err := s.publish(ctx, st, msgs)
	if err != nil {
		return s.refused(ctx, st, b.Stream, err)
	}
	if s.beforeCheckpoint != nil {
		if err := s.beforeCheckpoint(); err != nil {
			return err
		}
	}
	prev, err := st.ckpt.sink()
	if err != nil {
		return err
	}
	next, err := fromSink(prev.Advanced(b), max(seq, st.ckpt.StreamSeq), st.ckpt.Epoch)
	if err != nil {
		return err
	}
	v, err := json.Marshal(next)
	if err != nil {
		return err
	}
	rev, err := s.kv.Update(ctx, st.key, v, st.rev)
	if err != nil {
		return s.refused(ctx, st, b.Stream, fmt.Errorf("nats destination: write checkpoint %s (another process may write this stream): %w", st.key, err))
	}
	st.ckpt, st.rev, st.tail = next, rev, nil
	if len(msgs) > 0 {
		st.last = seq
	}
	return nil
}

// publish sends the messages in order, at most publishWindow awaiting
// acknowledgement, and returns the stream sequence of the last. A fenced
// sink's messages each expect the one before to be the stream's last.
func (s *Sink) publish(ctx context.Context, st *streamState, msgs []*natsio.Msg) (uint64, error) {
	var last uint64
	pending := make([]jetstream.PubAckFuture, 0, publishWindow)
	wait := func() error {
		defer func() { pending = pending[:0] }()
		for _, f := range pending {
			select {
			case ack := <-f.Ok():
				if ack.Duplicate && st.fenced {
					// Not stored, so the next message's expectations fail:
					// the batch is sent again after the stream is read.
					return fmt.Errorf("nats destination: publish to %s: the server took message %s for a duplicate of message %d", f.Msg().Subject, f.Msg().Header.Get(natsio.MsgIdHdr), ack.Sequence)
				}
				last = max(last, ack.Sequence)
			case err := <-f.Err():
				return fmt.Errorf("nats destination: publish to %s: %w", f.Msg().Subject, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	for i, m := range msgs {
		opts := []jetstream.PublishOpt{jetstream.WithExpectStream(st.stream)}
		if st.fenced {
			opts = append(opts, jetstream.WithExpectLastSequence(st.last+uint64(i)))
			if i > 0 {
				// Not the first: a restarted server knows the last id only
				// within its duplicate window, and the first's sequence,
				// read before the fence, is refused after it anyway.
				opts = append(opts, jetstream.WithExpectLastMsgID(msgs[i-1].Header.Get(natsio.MsgIdHdr)))
			}
		}
		f, err := s.js.PublishMsgAsync(m, opts...)
		if err != nil {
			return 0, errors.Join(fmt.Errorf("nats destination: publish to %s: %w", m.Subject, err), wait())
		}
		pending = append(pending, f)
		if s.afterPublish != nil {
			if err := s.afterPublish(i + 1); err != nil {
				return 0, errors.Join(err, wait())
			}
		}
		if len(pending) == publishWindow {
			if err := wait(); err != nil {
				return 0, err
			}
		}
	}
	return last, wait()
}

// message builds one message; its value and headers must fit the limit.
func (s *Sink) message(subject string, m event.Message, h natsio.Header, id string) (*natsio.Msg, error) {
	h.Set(natsio.MsgIdHdr, id)
	if m.Key != nil {
		h.Set(hdrKey, string(m.Key))
	}
	size := int64(len(subject) + len(m.Value) + 16)
	for k, vs := range h {
		for _, v := range vs {
			size += int64(len(k) + len(v) + 4)
		}
	}
	if size > s.limit {
		return nil, sink.Rejected(m.Table, fmt.Errorf("an event of %d bytes (key %.200s) is over the destination's max_message_bytes (%d): raise max_message_bytes (and the server's max_payload) or make the value smaller on the source",
			size, m.Key, s.limit))
	}
	return &natsio.Msg{Subject: subject, Header: h, Data: m.Value}, nil
}

func num(v uint64) string { return strconv.FormatUint(v, 10) }

// messages encodes a batch, leaving out what the tail says was sent.
func (s *Sink) messages(st *streamState, b *sink.Batch) ([]*natsio.Msg, error) {
	var out []*natsio.Msg
	at := s.now().UTC()
	var txnPos, index uint64
	for _, op := range b.Ops {
		switch {
		case op.Change != nil:
			o := event.Origin{Position: b.Position, Resume: b.Resume, CommitTime: at}
			pos := uint64(b.Position)
			if op.Txn != nil {
				o.Position, o.Xid, o.CommitTime = op.Txn.CommitLSN, op.Txn.Xid, op.Txn.CommitTime
				pos = uint64(op.Txn.EndLSN)
			}
			if pos != txnPos {
				txnPos, index = pos, 0
			}
			ms, err := s.enc.Change(op.Change, o)
			if err != nil {
				return nil, sink.Rejected(op.Change.Table.ID, err)
			}
			for _, m := range ms {
				if m.Value == nil {
					continue // tombstones are for compacted logs
				}
				index++
				if st.tail.sentChange(pos, index) {
					continue
				}
				subj := st.subject(m.Table)
				h := natsio.Header{hdrPosition: {num(pos)}, hdrIndex: {num(index)}}
				msg, err := s.message(subj, m, h, st.msgID(subj, "change", m.Key, pos, index))
				if err != nil {
					return nil, err
				}
				out = append(out, msg)
			}
		case op.Chunk != nil:
			ms, err := s.chunk(st, b, op.Chunk, at)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
		}
	}
	return out, nil
}

// chunk encodes a backfill chunk's rows as "r" events and its mark.
func (s *Sink) chunk(st *streamState, b *sink.Batch, c *sink.Chunk, at time.Time) ([]*natsio.Msg, error) {
	t := c.Table
	pos := b.Position
	if pos == 0 {
		pos = change.LSN(st.ckpt.Position)
	}
	o := event.Origin{Position: pos, Resume: b.Resume, CommitTime: at}
	// The chunk is known by the rows its backfill sent before it: the
	// same when the chunk is read again after a restart.
	var start int64
	if cur, ok := b.Cursors[t.ID]; ok {
		start = max(cur.Rows-int64(len(c.Rows)), 0)
	}
	subj := st.subject(t.ID)
	sent := st.tail.chunk(chunkID{subj, c.BackfillID, start})
	headers := func() natsio.Header {
		return natsio.Header{hdrPosition: {num(uint64(pos))}, hdrBackfill: {strconv.FormatInt(c.BackfillID, 10)},
			hdrChunk: {strconv.FormatInt(start, 10)}}
	}
	var out []*natsio.Msg
	for i, r := range c.Rows {
		m, err := s.enc.Row(t, r, o)
		if err != nil {
			return nil, sink.Rejected(t.ID, err)
		}
		if sent != nil && sent.keys[string(m.Key)] {
			continue
		}
		h := headers()
		h.Set(hdrRow, strconv.Itoa(i))
		msg, err := s.message(subj, m, h, st.msgID(subj, "row", m.Key, uint64(c.BackfillID), uint64(start)))
		if err != nil {
			return nil, err
		}
		out = append(out, msg)
	}
	if sent != nil && sent.marked {
		return out, nil
	}
	mark, err := s.enc.Chunk(t, event.ChunkMark{BackfillID: c.BackfillID, Low: c.Low, High: c.High,
		Rows: len(c.Rows), Reset: !c.Keep, Last: c.Last}, o)
	if err != nil {
		return nil, sink.Rejected(t.ID, err)
	}
	h := headers()
	h.Set(hdrMark, "true")
	msg, err := s.message(subj, mark, h, st.msgID(subj, "mark", nil, uint64(c.BackfillID), uint64(start)))
	if err != nil {
		return nil, err
	}
	return append(out, msg), nil
}
