package stream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestVerifyFindsOneChangedValue damages one value of a large table in the
// destination while the stream is live and writes keep flowing: verify
// agrees everywhere else and points at that key's range.
func TestVerifyFindsOneChangedValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 5000}", setup: `
		CREATE TABLE big (id bigint PRIMARY KEY, v int NOT NULL, note text);
		INSERT INTO big SELECT g, g, 'note ' || g FROM generate_series(1, 50000) g;
		CREATE TABLE other (id int PRIMARY KEY); INSERT INTO other SELECT generate_series(1, 100);`})
	t0 := time.Now()
	e.start()
	e.waitLoaded("big")
	e.waitLoaded("other")
	t.Logf("loaded %s", time.Since(t0))
	stop := e.writerOutside(e.ctx)
	defer stop()
	t0 = time.Now()
	checks, err := e.s.Verify(e.ctx, nil, 1000)
	t.Logf("first verify %s", time.Since(t0))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.Match {
			t.Fatalf("verify of an intact destination differs: %+v", c)
		}
	}
	dst, err := pgx.Connect(e.ctx, e.dstDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(e.ctx)
	if _, err := dst.Exec(e.ctx, `UPDATE big SET note = 'damaged' WHERE id = 31337`); err != nil {
		t.Fatal(err)
	}
	checks, err = e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "big"}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	bad := badRanges(checks[0])
	if checks[0].Match || len(bad) != 1 || len(bad[0].DifferingKeys) != 1 || !slices.Equal(bad[0].DifferingKeys[0], []string{"31337"}) {
		t.Fatalf("verify after damaging id 31337: match=%v differing ranges %+v", checks[0].Match, bad)
	}
	if fmt.Sprint(bad[0].Low) != "[31000]" || fmt.Sprint(bad[0].High) != "[32000]" {
		t.Errorf("differing range (%v, %v], want (31000, 32000]", bad[0].Low, bad[0].High)
	}
	// A backfill repairs it.
	if _, err := e.s.Initiate(e.ctx, []change.TableID{{Schema: "public", Name: "big"}}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("big")
	checks, err = e.s.Verify(e.ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.Match {
			t.Fatalf("verify after the repairing backfill differs: %+v", c)
		}
	}
}

// writerOutside keeps changing rows of big other than the damaged one.
func (e *env) writerOutside(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pace := time.NewTicker(time.Millisecond) // a steady load the stream can follow
		defer pace.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			<-pace.C
			id := 1 + (i*7919)%30000
			_, _ = e.src.Exec(ctx, "UPDATE big SET v = v + 1 WHERE id = $1", id)
		}
	}()
	return func() { cancel(); <-done }
}
