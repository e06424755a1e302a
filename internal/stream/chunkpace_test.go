package stream

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

func TestChunkPace(t *testing.T) {
	now := time.Now()
	p := &chunkPace{target: 20 * time.Millisecond}
	if n := p.limit(10000, now); n != 10000 {
		t.Fatalf("before any chunk was written: %d rows, want the configured 10000", n)
	}
	p.observe(10000, 50*time.Millisecond) // 5 µs a row
	if n := p.limit(10000, now); n != 10000 {
		t.Fatalf("without live changes: %d rows, want 10000", n)
	}
	p.live(now)
	if n := p.limit(10000, now); n != 4000 {
		t.Fatalf("live changes, 5 µs a row, 20 ms target: %d rows, want 4000", n)
	}
	p.observe(4000, 400*time.Millisecond) // a slow one: 100 µs a row, smoothed
	if n := p.limit(10000, now); n != 1000 {
		t.Fatalf("after a slow write: %d rows, want the floor of a tenth, 1000", n)
	}
	if n := p.limit(10000, now.Add(2*time.Second)); n != 10000 {
		t.Fatalf("two seconds after the last live change: %d rows, want 10000", n)
	}
	var off *chunkPace
	off.live(now)
	off.observe(1, time.Second)
	if n := off.limit(500, now); n != 500 {
		t.Fatalf("no pace: %d rows, want 500", n)
	}
}

// TestChunkPaceFarDestination: a destination whose every commit costs
// 100 ms (round trips to a far server), 5 µs a row beyond that: chunks
// settle where their rows add the 20 ms target, 4,000 rows, not at the
// floor (counting the commit's cost a row, they shrank, each smaller
// chunk's rows looking dearer, down to a tenth of chunk_size).
func TestChunkPaceFarDestination(t *testing.T) {
	now := time.Now()
	p := &chunkPace{target: 20 * time.Millisecond}
	p.live(now)
	for range 3 {
		p.observeCommit(2, 100*time.Millisecond)
	}
	n := 10000
	for range 40 {
		p.observe(n, 100*time.Millisecond+time.Duration(n)*5*time.Microsecond)
		n = p.limit(10000, now)
	}
	if n < 3900 || n > 4100 {
		t.Fatalf("chunks settled at %d rows, want about 4000", n)
	}
	// The fixed cost follows the small commits' lower envelope: one held
	// up for two seconds barely moves it, a faster one lowers it at once,
	// and a large batch tells nothing.
	p.observeCommit(1, 2*time.Second)
	if f := time.Duration(p.fixed.Load()); f > 300*time.Millisecond {
		t.Errorf("after one slow commit the fixed cost is %v, want it near 100ms", f)
	}
	p.observeCommit(0, 50*time.Millisecond)
	p.observeCommit(500, time.Millisecond)
	if f := time.Duration(p.fixed.Load()); f != 50*time.Millisecond {
		t.Errorf("after a 50 ms commit and a large batch's 1 ms the fixed cost is %v, want 50ms", f)
	}
}

// TestChunkPaceLearnsCommitCost: the stream's writer tells the pace what
// its small commits of live changes cost, the fixed cost chunks are paced
// beyond (a single-row transaction at a time, each its own small batch).
func TestChunkPaceLearnsCommitCost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic}", setup: `CREATE TABLE t (id int PRIMARY KEY, v int);`})
	e.start()
	pace := e.s.bf.rt.applier.pace
	for i := 1; pace.fixed.Load() == 0; i++ {
		if i > 50 {
			t.Fatalf("after %d single-row transactions replicated, the pace knows no commit cost", i-1)
		}
		e.exec("INSERT INTO t VALUES ($1, 0)", i)
		id := change.TableID{Schema: "public", Name: "t"}
		e.waitFor(fmt.Sprintf("row %d in the destination", i), func() bool { return e.destCount(id) == i })
	}
}
