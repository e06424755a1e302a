package engine

import (
	"context"

	"github.com/tidemark/tidemark/internal/store"
)

// LoadPageSize is loadPageSize, for the tests of paged recovery.
const LoadPageSize = loadPageSize

// Kept is what the node of instance id keeps of its attempts in memory
// (found false: no node of that id).
type Kept struct {
	Found, Record bool // Record: it holds an attempt record at all
	Rendered, Tag string
	Started       bool
	Outputs       map[string]string
}

// KeptOf reads, in the loop, what the node of instance id keeps.
func KeptOf(ctx context.Context, e *Engine, id int64) (Kept, error) {
	var k Kept
	err := e.do(ctx, func(context.Context) error {
		n := e.s.nodes[id]
		if n == nil {
			return nil
		}
		a := n.seen()
		k = Kept{Found: true, Record: n.more != nil, Rendered: a.rendered, Tag: a.tag, Started: a.startedAt != nil, Outputs: a.outputs}
		return nil
	})
	return k, err
}

// AdoptRecorded is the second half of Submit: the nodes of a backfill
// already recorded, read and handed to the loop.
func AdoptRecorded(ctx context.Context, e *Engine, rec store.BatchBackfill) error {
	return e.adoptRecorded(ctx, rec)
}
