package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// checkpoint is a stream's value in the checkpoint bucket: the source
// position and cursors of the last batch the server acknowledged, and the
// stream sequence of its last message. Messages of the stream's subjects
// after that sequence belong to a batch that did not finish (tail). Epoch
// is the term of the cluster node that fenced the stream last (fence.go).
type checkpoint struct {
	Epoch     int64               `json:"epoch,omitempty"`
	Position  uint64              `json:"position"`
	Resume    string              `json:"resume,omitempty"`
	StreamSeq uint64              `json:"stream_seq"`
	Cursors   []sink.CursorRecord `json:"cursors,omitempty"`
}

func (c checkpoint) sink() (sink.Checkpoint, error) {
	out := sink.Checkpoint{Position: change.LSN(c.Position), Resume: c.Resume}
	return out, out.AddCursorRecords(c.Cursors)
}

// fromSink is the checkpoint holding cp, its last message at seq, of the
// term at epoch.
func fromSink(cp sink.Checkpoint, seq uint64, epoch int64) (checkpoint, error) {
	cursors, err := cp.CursorRecords()
	return checkpoint{Epoch: epoch, Position: uint64(cp.Position), Resume: cp.Resume, StreamSeq: seq, Cursors: cursors}, err
}

// readCheckpoint reads a stream's checkpoint and its revision; found is
// false for a stream that never wrote one.
func readCheckpoint(ctx context.Context, kv jetstream.KeyValue, key string) (c checkpoint, rev uint64, found bool, err error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return c, 0, false, nil
	}
	if err != nil {
		return c, 0, false, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return c, 0, false, fmt.Errorf("checkpoint %s in bucket %s: %w (the value is damaged: delete it to reset the stream)", key, checkpointBucket, err)
	}
	return c, e.Revision(), true, nil
}

// tail is what the server holds of a batch that did not finish: sent
// again, its messages are left out, so that a restart after the duplicate
// window has passed sends none twice either.
type tail struct {
	// lastPos and lastIndex are the latest change message's.
	lastPos, lastIndex uint64
	chunks             map[chunkID]*chunkTail
}

type chunkID struct {
	subject  string
	backfill int64
	start    int64
}

type chunkTail struct {
	keys   map[string]bool
	marked bool
}

// sentChange says whether the change message at (pos, index) was sent.
func (t *tail) sentChange(pos, index uint64) bool {
	return t != nil && (pos < t.lastPos || pos == t.lastPos && index <= t.lastIndex)
}

func (t *tail) chunk(id chunkID) *chunkTail {
	if t == nil {
		return nil
	}
	return t.chunks[id]
}

// add notes a message of the unfinished batch from its headers.
func (t *tail) add(subject string, h natsio.Header) error {
	// nums reads two numeric headers.
	nums := func(a, b string) (x, y uint64, err error) {
		if x, err = strconv.ParseUint(h.Get(a), 10, 64); err == nil {
			y, err = strconv.ParseUint(h.Get(b), 10, 64)
		}
		if err != nil {
			err = fmt.Errorf("message on %s: headers %s and %s: %w", subject, a, b, err)
		}
		return x, y, err
	}
	if h.Get(hdrBackfill) == "" {
		pos, idx, err := nums(hdrPosition, hdrIndex)
		if err != nil {
			return err
		}
		if pos > t.lastPos || pos == t.lastPos && idx > t.lastIndex {
			t.lastPos, t.lastIndex = pos, idx
		}
		return nil
	}
	bf, start, err := nums(hdrBackfill, hdrChunk)
	if err != nil {
		return err
	}
	id := chunkID{subject, int64(bf), int64(start)}
	c := t.chunks[id]
	if c == nil {
		c = &chunkTail{keys: map[string]bool{}}
		t.chunks[id] = c
	}
	if h.Get(hdrMark) != "" {
		c.marked = true
	} else {
		c.keys[h.Get(hdrKey)] = true
	}
	return nil
}

// readTail reads the headers of the stream's messages after the
// checkpoint's last one, newest first, on the stream's subjects.
func readTail(ctx context.Context, str jetstream.Stream, n names, after uint64) (*tail, error) {
	info, err := str.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", n.stream, err)
	}
	t := &tail{chunks: map[chunkID]*chunkTail{}}
	for seq := info.State.LastSeq; seq > after && seq >= info.State.FirstSeq && seq > 0; seq-- {
		m, err := str.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: read message %d: %w", n.stream, seq, err)
		}
		if !strings.HasPrefix(m.Subject, n.prefix+".") || m.Header.Get(hdrPosition) == "" {
			continue
		}
		if err := t.add(m.Subject, m.Header); err != nil {
			return nil, fmt.Errorf("stream %s: %w", n.stream, err)
		}
	}
	return t, nil
}
