package stream

import (
	"sync/atomic"
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
	p.live(now, []change.Change{{Table: &change.Table{ID: change.TableID{Schema: "s", Name: "t"}}}})
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
	off.live(now, nil)
	off.observe(1, time.Second)
	if n := off.limit(500, now); n != 500 {
		t.Fatalf("no pace: %d rows, want 500", n)
	}
}

// With chunk lanes, only a table with live changes has its chunks paced:
// a live change of another table overtakes them. Without lanes, or with
// none open, every live change paces every chunk; a sum is paced by any.
func TestChunkPaceByTable(t *testing.T) {
	now := time.Now()
	busy := &change.Table{ID: change.TableID{Schema: "s", Name: "busy"}}
	idle := change.TableID{Schema: "s", Name: "idle"}
	lanes := &atomic.Int32{}
	p := &chunkPace{target: 20 * time.Millisecond, lanes: lanes}
	p.observe(10000, 50*time.Millisecond) // 5 µs a row: 4,000 rows in 20 ms
	p.live(now, []change.Change{{Table: busy}, {Table: busy}})

	lanes.Store(2)
	if n := p.limitFor(10000, busy.ID, now); n != 4000 {
		t.Fatalf("lanes open, the table with live changes: %d rows, want 4000", n)
	}
	if n := p.limitFor(10000, idle, now); n != 10000 {
		t.Fatalf("lanes open, a table without live changes: %d rows, want 10000", n)
	}
	if n := p.limit(10000, now); n != 4000 {
		t.Fatalf("lanes open, a sum: %d rows, want 4000 (the applier takes it, every change waits)", n)
	}
	if n := p.limitFor(10000, busy.ID, now.Add(2*time.Second)); n != 4000 {
		t.Fatalf("lanes open, two seconds after the table's last change: %d rows, want 4000 (a table written now and then)", n)
	}
	if n := p.limitFor(10000, busy.ID, now.Add(2*time.Minute)); n != 10000 {
		t.Fatalf("lanes open, two minutes after the table's last change: %d rows, want 10000", n)
	}

	lanes.Store(0) // the destination refused every lane
	if n := p.limitFor(10000, idle, now); n != 4000 {
		t.Fatalf("no lane open, a table without live changes: %d rows, want 4000", n)
	}
	p.lanes = nil // a destination without lanes
	if n := p.limitFor(10000, idle, now); n != 4000 {
		t.Fatalf("no lanes, a table without live changes: %d rows, want 4000", n)
	}
}
