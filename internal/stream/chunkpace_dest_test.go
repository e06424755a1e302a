package stream

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

// TestChunksPacedByTable backfills two tables at once while a writer
// changes one of them, with a chunk write target so small that a paced
// chunk is a tenth of chunk_size. Into PostgreSQL, whose chunks go on
// lanes of their own, only the written table's chunks shrink: a live
// change of one table does not wait for another's chunk. Into SQLite,
// whose chunks go with the live changes, both tables' do.
func TestChunksPacedByTable(t *testing.T) {
	t.Parallel()
	const rows, chunk = 8000, 2000
	for _, tc := range []struct {
		dest       string
		quietPaced bool
	}{{"postgres", false}, {"sqlite", true}} {
		t.Run(tc.dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: tc.dest,
				yaml: "backfill: {mode: manual, chunk_size: 2000, max_concurrent: 2, chunk_write_target: 1ms}",
				setup: `
					CREATE TABLE busy (id int PRIMARY KEY, v int NOT NULL);
					INSERT INTO busy SELECT g, g FROM generate_series(1, 8000) g;
					CREATE TABLE quiet (id int PRIMARY KEY, v int NOT NULL);
					INSERT INTO quiet SELECT g, g FROM generate_series(1, 8000) g;`})
			e.start()
			stop := e.keepWriting(e.ctx, func(ctx context.Context, conn *pgx.Conn, i int) {
				_, _ = conn.Exec(ctx, "UPDATE busy SET v = v + 1 WHERE id = $1", 1+(i*7919)%rows)
			})
			e.backfill(pubTable("busy"), pubTable("quiet"))
			stop()
			e.assertConverged("busy")
			e.assertConverged("quiet")
			chunks := map[string]int64{}
			recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range recs {
				chunks[b.Table] = b.Chunks
			}
			t.Logf("chunks: %v", chunks)
			if chunks["busy"] <= 2*rows/chunk {
				t.Errorf("the written table took %d chunks of up to %d rows: its chunks were not paced", chunks["busy"], chunk)
			}
			switch {
			case tc.quietPaced && chunks["quiet"] <= 2*rows/chunk:
				t.Errorf("the table without live changes took %d chunks: chunks going with the live changes must all be paced", chunks["quiet"])
			case !tc.quietPaced && chunks["quiet"] > rows/chunk+4: // 5 unpaced (4 full, one empty); slack for a chunk read before a lane opened
				t.Errorf("the table without live changes took %d chunks of up to %d rows, want %d: paced for another table's changes", chunks["quiet"], chunk, rows/chunk)
			}
		})
	}
}
