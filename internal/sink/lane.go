package sink

import "context"

// ChunkLaner is a destination that can open more writers of the same
// stream: each on its own connection, under the same fence. The stream
// commits merged chunks on them while the live changes that do not touch
// the chunks' key ranges go on committing on the first writer, so they do
// not wait for the chunks' writes (docs/backfill.md, "Chunks on a
// connection of their own"). The writers commit independently; the stream
// never gives two of them rows of one key at the same time, nor chunks of
// one table, and the lanes' batches carry no position.
type ChunkLaner interface {
	// ChunkLane opens another writer. Each is used by one goroutine at a
	// time and closed by the caller.
	ChunkLane(ctx context.Context) (Sink, error)
}
