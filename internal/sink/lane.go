package sink

import "context"

// ChunkLaner is a destination that can open a second writer of the same
// stream: its own connection, under the same fence. The stream commits a
// merged chunk on it while the live changes that do not touch the chunk's
// key range go on committing on the first writer, so they do not wait for
// the chunk's write (docs/backfill.md, "Chunks on a connection of their
// own"). The two writers commit independently; the stream never gives
// them rows of one key at the same time, and the lane's batches carry no
// position.
type ChunkLaner interface {
	// ChunkLane opens the second writer. It is used by one goroutine at a
	// time and closed by the caller.
	ChunkLane(ctx context.Context) (Sink, error)
}
