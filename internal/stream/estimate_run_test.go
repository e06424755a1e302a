package stream

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestRunEstimate: a run of several chunks records the source's row
// estimate of its table; a run whose first chunk reads all it covers
// takes no estimate from the source and records what it read (a filtered
// run of a table the source counts at 500 rows records its 10).
func TestRunEstimate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, chunk_size: 100}", setup: `
		CREATE TABLE many (id int PRIMARY KEY, v int NOT NULL);
		INSERT INTO many SELECT g, g FROM generate_series(1, 500) g;
		CREATE TABLE few (id int PRIMARY KEY, v int NOT NULL);
		INSERT INTO few SELECT g, g FROM generate_series(1, 500) g;
		ANALYZE many, few;`})
	e.start()
	e.backfill(pubTable("many"))
	recs, err := e.s.InitiateWith(e.ctx, []change.TableID{pubTable("few")}, store.StartedByCLI, BackfillOptions{Filter: "id <= 10"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("few")
	all, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Backfill{}
	for _, b := range all {
		got[b.Table] = b
	}
	if b := got["many"]; b.RowsEstimate != 500 || b.RowsRead != 500 || b.Chunks < 5 {
		t.Errorf("a run of several chunks: estimate %d, read %d in %d chunks; want the source's 500", b.RowsEstimate, b.RowsRead, b.Chunks)
	}
	if b := got["few"]; b.ID != recs[0].ID || b.RowsEstimate != 10 || b.RowsRead != 10 {
		t.Errorf("a run read in its first chunk: estimate %d, read %d; want the 10 rows it read", b.RowsEstimate, b.RowsRead)
	}
}

// TestSmallTableStoreWrites: a table read in one chunk costs its
// backfill three store writes once initiated: Active, Completed, and the
// commit that loaded it with the commit's counters (with the ending verify
// off, as in a stream's initial load of many tables). Each is a sync of a
// SQLite store, and in a stream of many small tables they bounded how
// many tables a second were loaded.
func TestSmallTableStoreWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, verify: false}", setup: `
		CREATE TABLE small (id int PRIMARY KEY, v int NOT NULL);
		INSERT INTO small SELECT g, g FROM generate_series(1, 300) g;`})
	e.start()
	var mu sync.Mutex
	var writes []string
	e.st.Observe(func(op string, _ time.Duration) {
		if strings.HasPrefix(op, "select") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		writes = append(writes, op)
	})
	recs, err := e.s.Initiate(e.ctx, []change.TableID{pubTable("small")}, store.StartedByCLI, nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	initiated := len(writes)
	mu.Unlock()
	e.waitLoaded("small")
	e.assertConverged("small")
	b, err := e.st.GetBackfill(e.ctx, recs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if b.RowsRead != 300 || b.RowsWritten != 300 || b.RowsEstimate != 300 || b.Chunks != 1 || b.LoadedAt == nil {
		t.Errorf("the run's record: %+v, want 300 rows read, written and estimated in one chunk, loaded", b)
	}
	mu.Lock()
	defer mu.Unlock()
	// Completed (after the merge) and the commit's record (after the
	// destination's commit) may come in either order.
	run := slices.Sorted(slices.Values(writes[initiated:]))
	want := []string{"tx record_commit", "tx update_backfill_object", "tx update_backfill_object"}
	if !slices.Equal(run, want) {
		t.Errorf("the run's store writes: %q, want %q", run, want)
	}
}
