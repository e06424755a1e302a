package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// checkpointValue is a stream's checkpoint as a record of the checkpoint
// topic, keyed by the stream's name: the topic is compacted, so the last
// one is kept.
type checkpointValue struct {
	Position uint64         `json:"position"`
	Resume   string         `json:"resume,omitempty"`
	Cursors  []cursorRecord `json:"cursors,omitempty"`
}

type cursorRecord struct {
	Schema     string          `json:"schema"`
	Table      string          `json:"table"`
	BackfillID int64           `json:"backfill_id"`
	After      json.RawMessage `json:"after,omitempty"` // sink.MarshalKey's form
	Done       bool            `json:"done,omitempty"`
	Rows       int64           `json:"rows"`
}

func checkpointRecord(topic, stream string, c sink.Checkpoint) (*kgo.Record, error) {
	v := checkpointValue{Position: uint64(c.Position), Resume: c.Resume}
	for id, cur := range c.Cursors {
		after, err := sink.MarshalKey(cur.After)
		if err != nil {
			return nil, err
		}
		v.Cursors = append(v.Cursors, cursorRecord{Schema: id.Schema, Table: id.Name, BackfillID: cur.BackfillID,
			After: after, Done: cur.Done, Rows: cur.Rows})
	}
	sort.Slice(v.Cursors, func(i, j int) bool {
		a, b := v.Cursors[i], v.Cursors[j]
		return a.Schema < b.Schema || a.Schema == b.Schema && a.Table < b.Table
	})
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(stream), Value: b}, nil
}

func parseCheckpoint(b []byte) (sink.Checkpoint, error) {
	var v checkpointValue
	if err := json.Unmarshal(b, &v); err != nil {
		return sink.Checkpoint{}, err
	}
	c := sink.Checkpoint{Position: change.LSN(v.Position), Resume: v.Resume}
	for _, r := range v.Cursors {
		var after []byte
		if len(r.After) > 0 && string(r.After) != "null" {
			after = r.After
		}
		cur := sink.Cursor{BackfillID: r.BackfillID, Done: r.Done, Rows: r.Rows}
		if err := c.AddCursor(change.TableID{Schema: r.Schema, Name: r.Table}, cur, after); err != nil {
			return sink.Checkpoint{}, err
		}
	}
	return c, nil
}

// withBatch is the checkpoint after a batch: its position (unless it
// has none), and its cursors merged in (BackfillID 0 removes a table's).
func withBatch(c sink.Checkpoint, b *sink.Batch) sink.Checkpoint {
	next := sink.Checkpoint{Position: b.Position, Resume: b.Resume, Cursors: map[change.TableID]sink.Cursor{}}
	if b.Position == 0 {
		next.Position, next.Resume = c.Position, c.Resume
	}
	for id, cur := range c.Cursors {
		next.Cursors[id] = cur
	}
	for id, cur := range b.Cursors {
		if cur.BackfillID == 0 {
			delete(next.Cursors, id)
		} else {
			next.Cursors[id] = cur
		}
	}
	if len(next.Cursors) == 0 {
		next.Cursors = nil
	}
	return next
}

// readCheckpoint reads the stream's last committed checkpoint record.
func (s *Sink) readCheckpoint(ctx context.Context, stream string) (sink.Checkpoint, error) {
	var last []byte
	found := false
	err := consume(ctx, s.conn, s.adm, s.cfg.CheckpointTopic, func(r *kgo.Record) error {
		if string(r.Key) == stream {
			last, found = r.Value, true
		}
		return nil
	})
	if err != nil {
		return sink.Checkpoint{}, fmt.Errorf("kafka destination: read the checkpoint topic %s: %w", s.cfg.CheckpointTopic, err)
	}
	if !found || last == nil {
		return sink.Checkpoint{}, nil
	}
	c, err := parseCheckpoint(last)
	if err != nil {
		return sink.Checkpoint{}, fmt.Errorf("kafka destination: checkpoint of stream %s in %s: %w", stream, s.cfg.CheckpointTopic, err)
	}
	return c, nil
}
