package sinktest

import (
	"context"
	"maps"
	"sync"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/sink"
)

// MemoryType is the destination type RegisterMemory adds.
const MemoryType = "memory"

var registerMemory sync.Once

// RegisterMemory registers destination type "memory": a destination with
// the core only (no table creation, range replacement, read back or
// alter), which tests use to see options needing those refused. Its
// checkpoints live in the process, per stream; the rows it is given are
// counted and dropped. Only tests register it.
func RegisterMemory() {
	registerMemory.Do(func() {
		sink.Register(sink.Type{
			Name:     MemoryType,
			Title:    "in-memory",
			Validate: func(*config.Checker, string, *config.Destination) {},
			Open:     func(context.Context, config.Destination) (sink.Sink, error) { return memory, nil },
			Doctor: func(_ context.Context, in sink.DoctorInput) sink.DoctorReport {
				cp, _ := memory.Checkpoint(context.Background(), in.Stream)
				return sink.DoctorReport{Known: true, Position: cp.Position, Resume: cp.Resume,
					Checks: []check.Check{check.Passed("stream "+in.Stream+": destination", "in memory; "+in.Position(cp.Position, cp.Resume))}}
			},
			Example: (*Memory)(nil),
		})
	})
}

// memory is the one Memory every stream of the process writes to.
var memory = &Memory{checkpoints: map[string]sink.Checkpoint{}}

// Memory is the core of a destination and nothing more.
type Memory struct {
	mu          sync.Mutex
	checkpoints map[string]sink.Checkpoint
	rows        int64
}

// Checkpoint returns what the stream committed.
func (m *Memory) Checkpoint(_ context.Context, stream string) (sink.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := m.checkpoints[stream]
	cp.Cursors = maps.Clone(cp.Cursors)
	return cp, nil
}

// Apply counts the batch's rows and commits its position and cursors.
func (m *Memory) Apply(_ context.Context, b *sink.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range b.Ops {
		if op.Chunk != nil {
			m.rows += int64(len(op.Chunk.Rows))
		} else {
			m.rows++
		}
	}
	cp := m.checkpoints[b.Stream]
	cp.Position, cp.Resume = b.Position, b.Resume
	if cp.Cursors == nil {
		cp.Cursors = map[change.TableID]sink.Cursor{}
	}
	for id, c := range b.Cursors {
		if c.BackfillID == 0 {
			delete(cp.Cursors, id)
		} else {
			cp.Cursors[id] = c
		}
	}
	m.checkpoints[b.Stream] = cp
	return nil
}

// Close does nothing: the checkpoints outlive a stream's restart.
func (m *Memory) Close() error { return nil }
