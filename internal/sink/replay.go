package sink

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// Replays holds the tables a ReplayReader is reading: each table's
// event.TableReader and how far into the destination's log its replay
// got (P: a file's batch number, a stream sequence, offsets per
// partition), so that the next read applies only what follows. The zero
// value is empty.
type Replays[P any] struct {
	m map[change.TableID]*Replay[P]
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

// Drop forgets a table's replay: the next Get starts from the beginning.
func (rs *Replays[P]) Drop(id change.TableID) { delete(rs.m, id) }

// Clear forgets every replay.
func (rs *Replays[P]) Clear() { rs.m = nil }
