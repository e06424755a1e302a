package stream

import (
	"sync/atomic"
	"time"
)

// chunkPace sizes backfill chunks while live changes flow, so that a
// chunk's rows add about target to the write of the batch that carries
// them: a live change waits for one chunk write at most (handoff.go), so
// that is the lag a backfill adds. With no live change for a second,
// chunks take their configured size again. Workers read it; the applier
// and the writer feed it.
//
// A write's time is a fixed cost that any commit pays (its round trips,
// a sync to disk), learnt from small batches of live changes, plus a cost
// a row. Only the rows' share is paced: counting the fixed cost a row
// would make a chunk's rows look dearer the fewer they are, and a
// destination far away (a commit of a few round trips as long as target)
// would have its chunks cut to the floor for no gain in lag.
type chunkPace struct {
	target time.Duration // 0: always the configured size
	perRow atomic.Int64  // ns per written chunk row beyond the fixed cost, smoothed
	fixed  atomic.Int64  // ns any commit costs, the small batches' lower envelope; 0: unknown
	liveAt atomic.Int64  // when the last live change arrived, unix ns
}

// liveQuiet is how long after the last live change chunks grow back.
const liveQuiet = time.Second

// smallBatch is the most changes a committed batch of live changes may
// hold to tell the fixed cost of a commit.
const smallBatch = 4

// observe records a committed chunk write of rows rows (with what else
// its batch carried).
func (p *chunkPace) observe(rows int, took time.Duration) {
	if p == nil || rows <= 0 || took <= 0 {
		return
	}
	cost := max(int64(took)-p.fixed.Load(), 0) / int64(rows)
	cost = max(cost, 1)
	if old := p.perRow.Load(); old > 0 {
		cost = (3*old + cost) / 4 // smoothed: one slow commit does not halve chunks
	}
	p.perRow.Store(cost)
}

// observeCommit records a committed batch of changes live changes and no
// chunk: a small one tells what a commit costs whatever it writes. The
// estimate follows the small batches' lower envelope, falling at once and
// rising slowly, so that a batch held up by something else (a slow disk
// for a moment, the stream's start) does not count as the commit's cost.
func (p *chunkPace) observeCommit(changes int, took time.Duration) {
	if p == nil || changes > smallBatch || took <= 0 {
		return
	}
	obs := int64(took)
	old := p.fixed.Load()
	switch {
	case old == 0 || obs < old:
		p.fixed.Store(obs)
	default:
		p.fixed.Store(old + (obs-old)/16)
	}
}

// live records that a live change arrived at now.
func (p *chunkPace) live(now time.Time) {
	if p != nil {
		p.liveAt.Store(now.UnixNano())
	}
}

// limit is the rows the next chunk may read, given the configured size:
// while live changes flow, what is written in about target beyond a
// commit's fixed cost, but at least a tenth of size (a chunk's own fixed
// costs, its read and merge, would otherwise dominate).
func (p *chunkPace) limit(size int, now time.Time) int {
	if p == nil || p.target <= 0 {
		return size
	}
	per := p.perRow.Load()
	if per <= 0 || now.UnixNano()-p.liveAt.Load() > int64(liveQuiet) {
		return size
	}
	n := int(min(int64(p.target)/per, int64(size)))
	return max(n, max(size/10, 1))
}
