package stream

import (
	"sync/atomic"
	"time"
)

// chunkPace sizes backfill chunks while live changes flow, so that a
// chunk's write takes about target: a live change waits for one chunk write
// at most (handoff.go), so the chunk's write time is its worst lag. With no
// live change for a second, chunks take their configured size again.
// Workers read it; the applier feeds it.
type chunkPace struct {
	target time.Duration // 0: always the configured size
	perRow atomic.Int64  // ns per written chunk row, smoothed
	liveAt atomic.Int64  // when the last live change arrived, unix ns
}

// liveQuiet is how long after the last live change chunks grow back.
const liveQuiet = time.Second

// observe records a committed chunk write. A batch that wrote no chunk
// rows (a range its sums settled: only its cursor) teaches nothing.
func (p *chunkPace) observe(rows int, took time.Duration) {
	if p == nil || rows <= 0 || took <= 0 {
		return
	}
	cost := int64(took) / int64(rows)
	if old := p.perRow.Load(); old > 0 {
		cost = (3*old + cost) / 4 // smoothed: one slow commit does not halve chunks
	}
	p.perRow.Store(cost)
}

// live records that a live change arrived at now.
func (p *chunkPace) live(now time.Time) {
	if p != nil {
		p.liveAt.Store(now.UnixNano())
	}
}

// quiet says no live change arrived for liveQuiet: then nothing waits
// for a chunk's write, or a range's sum, to end.
func (p *chunkPace) quiet(now time.Time) bool {
	return p == nil || now.UnixNano()-p.liveAt.Load() > int64(liveQuiet)
}

// limit is the rows the next chunk may read, given the configured size:
// while live changes flow, what is written in about target, but at least a
// tenth of size (a chunk's fixed costs would otherwise dominate).
func (p *chunkPace) limit(size int, now time.Time) int {
	if p == nil || p.target <= 0 {
		return size
	}
	per := p.perRow.Load()
	if per <= 0 || p.quiet(now) {
		return size
	}
	n := int(int64(p.target) / per)
	return max(min(n, size), max(size/10, 1))
}
