package stream

import (
	"testing"
	"time"
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
