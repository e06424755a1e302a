package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestSmallChunksShareACommit backfills many small tables at once under a
// writer into a destination holding stale and extra rows: chunks of
// different tables ready together go in one commit (at most a chunk's rows
// in all), and every table still converges to the source.
func TestSmallChunksShareACommit(t *testing.T) {
	t.Parallel()
	const tables = 36
	var setup, damage strings.Builder
	var ids []change.TableID
	for i := range tables {
		name := fmt.Sprintf("small%02d", i)
		fmt.Fprintf(&setup, "CREATE TABLE %s (id int PRIMARY KEY, v int NOT NULL); INSERT INTO %s SELECT g, g FROM generate_series(1, 60) g;\n", name, name)
		// The destination holds stale rows, lacks some, and has extra ones.
		fmt.Fprintf(&damage, "INSERT INTO %s SELECT g, -1 FROM generate_series(1, 60, 7) g; INSERT INTO %s VALUES (1000, 0), (-5, 0);\n", name, name)
		ids = append(ids, pubTable(name))
	}
	// 36 tables: a join needs chunks ready while the writer's lanes are
	// busy, which 12 tables gave one to three times a run, and sometimes none.
	e := newEnv(t, envOptions{dest: "postgres", setup: setup.String(), yaml: "backfill: {mode: manual, chunk_size: 1000, max_concurrent: 6}"})
	e.start()
	e.execInDest(damage.String())
	stop := e.keepWriting(e.ctx, func(ctx context.Context, conn *pgx.Conn, i int) {
		table := fmt.Sprintf("small%02d", i%tables)
		id := 1 + (i*37)%80
		switch i % 3 {
		case 0:
			_, _ = conn.Exec(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = $1", id)
		case 1:
			_, _ = conn.Exec(ctx, "INSERT INTO "+table+" VALUES ($1, 7) ON CONFLICT DO NOTHING", id)
		case 2:
			_, _ = conn.Exec(ctx, "DELETE FROM "+table+" WHERE id = $1", id)
		}
	})
	joined := func() int64 {
		e.s.bf.mu.Lock()
		defer e.s.bf.mu.Unlock()
		return e.s.bf.rt.applier.joined.Load()
	}
	joinedBefore := joined()
	if _, err := e.s.Initiate(e.ctx, ids, store.StartedByCLI, nil); err != nil {
		stop()
		t.Fatal(err)
	}
	for _, id := range ids {
		e.waitLoadedID(id)
	}
	stop()
	for _, id := range ids {
		e.assertConvergedID(id)
	}
	if n := joined() - joinedBefore; n == 0 {
		t.Errorf("no chunk shared another's commit while %d tables were backfilled %d at a time", tables, 6)
	}
}
