package sink

import (
	"maps"

	"github.com/tidemark/tidemark/internal/change"
)

// Advanced is the checkpoint after b is applied on top of c: b's position
// and resume token (c's when b has no position) and c's cursors with b's
// merged in, a cursor with BackfillID 0 removing its table's. A
// destination that keeps its checkpoint as one value writes this.
func (c Checkpoint) Advanced(b *Batch) Checkpoint {
	next := Checkpoint{Position: b.Position, Resume: b.Resume, Cursors: maps.Clone(c.Cursors)}
	if b.Position == 0 {
		next.Position, next.Resume = c.Position, c.Resume
	}
	for id, cur := range b.Cursors {
		if cur.BackfillID == 0 {
			delete(next.Cursors, id)
			continue
		}
		if next.Cursors == nil {
			next.Cursors = map[change.TableID]Cursor{}
		}
		next.Cursors[id] = cur
	}
	return next
}
