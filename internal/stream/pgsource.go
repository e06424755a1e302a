package stream

import (
	"context"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source/pg"
)

// pgChunks adapts the PostgreSQL source to the backfill workers.
type pgChunks struct{ src *pg.Source }

func (p pgChunks) ReadChunk(ctx context.Context, t *change.Table, spec chunkSpec) (ChunkRead, error) {
	c, err := p.src.ReadChunk(ctx, t, spec)
	if err != nil {
		return ChunkRead{}, err
	}
	return ChunkRead{Rows: c.Rows, Snapshot: c.Snapshot, Position: c.Position, Bytes: c.Bytes, Table: c.Table}, nil
}

func (p pgChunks) CheckFilter(ctx context.Context, t *change.Table, filter *rowfilter.Filter) error {
	return p.src.CheckFilter(ctx, t, filter)
}

// readTimeouts are a source's read timeouts as the PostgreSQL source takes
// them.
func readTimeouts(src config.Source) pg.ReadTimeouts {
	rt := src.ReadTimeouts
	return pg.ReadTimeouts{Statement: rt.Statement, Lock: rt.Lock, IdleInTransaction: rt.IdleInTransaction}
}
