package sink

import (
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// Replays is a ReplayReader's reading: it holds, per table read, an
// event.TableReader and how far into the destination's log its replay
// got (P: a file's batch number, a stream sequence, offsets per
// partition), and on each read has the destination's catch-up apply only
// what follows. A sink embeds it (NewReplays) to be a ReplayReader.
type Replays[P any] struct {
	name    string // the destination, for errors: "files destination"
	catchUp func(context.Context, *Replay[P]) error
	m       map[change.TableID]*Replay[P]
}

// NewReplays makes the reading of a destination named name (for errors):
// catchUp applies what the destination wrote since a replay's At and
// moves At.
func NewReplays[P any](name string, catchUp func(context.Context, *Replay[P]) error) Replays[P] {
	return Replays[P]{name: name, catchUp: catchUp}
}

// Replay is one table's replay.
type Replay[P any] struct {
	Table  *change.Table
	Reader *event.TableReader
	// At is how far the replay got; the zero P before anything is read.
	At P
}

// Get returns the table's replay, a new one when it has none or the
// table's shape changed since (a new *change.Table). A key whose source
// order a replay cannot reproduce fails with ErrKeyOrder.
func (rs *Replays[P]) Get(t *change.Table) (*Replay[P], error) {
	if r := rs.m[t.ID]; r != nil && r.Table == t {
		return r, nil
	}
	tr, err := event.NewTableReader(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyOrder, err)
	}
	if rs.m == nil {
		rs.m = map[change.TableID]*Replay[P]{}
	}
	r := &Replay[P]{Table: t, Reader: tr}
	rs.m[t.ID] = r
	return r, nil
}

// ReadRange reads t's rows in (low, high] (Reader), from its replay
// caught up with the destination. A catch-up that fails drops the
// replay: part of what it applied may be missing.
func (rs *Replays[P]) ReadRange(ctx context.Context, t *change.Table, low, high change.Key) ([]change.Row, error) {
	r, err := rs.caughtUp(ctx, t)
	if err != nil {
		return nil, err
	}
	return r.Reader.ReadRange(low, high)
}

// ReadKeys reads t's rows with the given keys (Reader), as ReadRange.
func (rs *Replays[P]) ReadKeys(ctx context.Context, t *change.Table, keys []change.Key) ([]change.Row, error) {
	r, err := rs.caughtUp(ctx, t)
	if err != nil {
		return nil, err
	}
	return r.Reader.ReadKeys(keys)
}

func (rs *Replays[P]) caughtUp(ctx context.Context, t *change.Table) (*Replay[P], error) {
	r, err := rs.Get(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rs.name, err)
	}
	if err := rs.catchUp(ctx, r); err != nil {
		rs.EndReads(t.ID)
		return nil, fmt.Errorf("%s: replay %s: %w", rs.name, t.ID, err)
	}
	return r, nil
}

// EndReads forgets a table's replay (ReplayReader): the next read
// replays from the start.
func (rs *Replays[P]) EndReads(id change.TableID) { delete(rs.m, id) }

// Clear forgets every replay.
func (rs *Replays[P]) Clear() { rs.m = nil }

// OnlyStream is the one stream of a destination's streams, which reads
// replay: a sink is opened for one stream, and reads do not name it.
func OnlyStream[V any](streams map[string]V) (string, V, error) {
	for name, v := range streams {
		if len(streams) == 1 {
			return name, v, nil
		}
	}
	var zero V
	return "", zero, fmt.Errorf("a read needs the one stream the destination serves; it has %d", len(streams))
}
