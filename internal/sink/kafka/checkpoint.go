package kafka

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// checkpointValue is a stream's checkpoint as a record of the checkpoint
// topic, keyed by the stream's name: the topic is compacted, so the last
// one is kept.
type checkpointValue struct {
	Position uint64              `json:"position"`
	Resume   string              `json:"resume,omitempty"`
	Cursors  []sink.CursorRecord `json:"cursors,omitempty"`
}

func checkpointRecord(topic, stream string, c sink.Checkpoint) (*kgo.Record, error) {
	cursors, err := c.CursorRecords()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(checkpointValue{Position: uint64(c.Position), Resume: c.Resume, Cursors: cursors})
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
	if err := c.AddCursorRecords(v.Cursors); err != nil {
		return sink.Checkpoint{}, err
	}
	return c, nil
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
