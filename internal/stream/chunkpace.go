package stream

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// chunkPace sizes backfill chunks while live changes flow, so that a
// chunk's write takes about target: a live change waits for one chunk write
// at most (handoff.go), so the chunk's write time is its worst lag. With no
// live change for a second, chunks take their configured size again.
//
// While chunks are written on lanes of their own (lane.go), a live change
// waits only for a chunk of its own table (in its key range, or any, when
// only the source knows the table's key order), and only the chunks of
// tables with live changes in the last tableLiveQuiet are paced: a table
// nobody writes loads in whole chunks beside a busy one. The first change
// of a table quiet that long may wait for one whole chunk of it, and hold
// the changes after it, as any change does after a quiet second without
// lanes. A summed chunk is paced by every live change, lanes or not: the
// applier takes the destination's sum, and every change waits.
//
// Workers read it; the applier feeds it.
type chunkPace struct {
	target time.Duration // 0: always the configured size
	perRow atomic.Int64  // ns per written chunk row, smoothed
	liveAt atomic.Int64  // when the last live change arrived, unix ns
	// lanes, when set, is how many chunk lanes the writer has open (the
	// destination has lanes); above 0, chunks are paced table by table.
	lanes *atomic.Int32

	mu          sync.Mutex
	tableLiveAt map[change.TableID]int64 // each table's last live change, unix ns
}

// liveQuiet is how long after the last live change chunks grow back;
// tableLiveQuiet, how long after the last of its table, on lanes: a table
// written now and then is paced as one written throughout.
const (
	liveQuiet      = time.Second
	tableLiveQuiet = time.Minute
)

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

// live records that a transaction's live changes arrived at now.
func (p *chunkPace) live(now time.Time, changes []change.Change) {
	if p == nil || len(changes) == 0 {
		return
	}
	at := now.UnixNano()
	p.liveAt.Store(at)
	if p.lanes == nil {
		return // no lanes: only the last change of any table paces chunks
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tableLiveAt == nil {
		p.tableLiveAt = map[change.TableID]int64{}
	}
	var last *change.Table
	for i := range changes {
		if t := changes[i].Table; t != nil && t != last {
			p.tableLiveAt[t.ID] = at
			last = t
		}
	}
}

// quiet says no live change arrived for liveQuiet: then nothing waits
// for a chunk's write, or a range's sum, to end.
func (p *chunkPace) quiet(now time.Time) bool {
	return p == nil || now.UnixNano()-p.liveAt.Load() > int64(liveQuiet)
}

// quietFor says no live change is likely to wait for a chunk of table id
// to be written: none of that table arrived for tableLiveQuiet, when chunks
// go on lanes; none of any table for liveQuiet, when they go with the live
// changes.
func (p *chunkPace) quietFor(id change.TableID, now time.Time) bool {
	if p == nil || p.lanes == nil || p.lanes.Load() <= 0 {
		return p.quiet(now)
	}
	p.mu.Lock()
	at := p.tableLiveAt[id]
	p.mu.Unlock()
	return now.UnixNano()-at > int64(tableLiveQuiet)
}

// limit is the rows the next summed chunk may read, given the configured
// size: while live changes flow, what is written in about target, but at
// least a tenth of size (a chunk's fixed costs would otherwise dominate).
func (p *chunkPace) limit(size int, now time.Time) int {
	if p.quiet(now) {
		return size
	}
	return p.paced(size)
}

// limitFor is limit for a chunk of rows of table id.
func (p *chunkPace) limitFor(size int, id change.TableID, now time.Time) int {
	if p.quietFor(id, now) {
		return size
	}
	return p.paced(size)
}

// paced is what is written in about target, between a tenth of size and
// size.
func (p *chunkPace) paced(size int) int {
	if p.target <= 0 {
		return size
	}
	per := p.perRow.Load()
	if per <= 0 {
		return size
	}
	n := int(int64(p.target) / per)
	return max(min(n, size), max(size/10, 1))
}
