package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The write load of BenchmarkBackfillUnderLoad and the lag probe that
// measures, the same way for every replication method, how long an update
// committed on the source takes to become visible on the destination.
//
// The writer is pgbench-like: conns connections each run, on a fixed
// schedule (not in bursts), autocommitted random-key updates that write
// clock_timestamp() into updated_at and return it. One update in
// sampleEvery becomes a probe: its key, the updated_at it wrote and the
// time its commit returned to the client. A poller on the destination
// looks every pollEvery for the rows of the oldest outstanding probes (at
// most pollKeys) in one query; a probe is seen once its row's updated_at
// is at or past the value the probe wrote (both methods apply a key's
// updates in commit order, so a later update of the same key implies this
// one). Both servers run on this machine: one clock.
//
// A probe's lag is the time from its commit to the end of the first poll
// that showed it: an upper bound, but for the commit's own reply to the
// client (a local round trip). The change became visible after the start
// of the poll before (if that one asked for it): the mean time from the
// start of one poll to the end of the next that saw something is the
// measurement's resolution.

// updateSQL is the load's statement. amount changes too so that the
// update is a real one whatever the clock does.
const updateSQL = `UPDATE t SET amount = amount + 0.01, updated_at = clock_timestamp() WHERE id = $1 RETURNING updated_at`

// loadSpec is the write load and its probe.
type loadSpec struct {
	rate        float64       // updates a second, all connections together
	conns       int           // writer connections
	keys        int64         // keys are 1..keys
	sampleEvery int64         // one update in sampleEvery is a probe
	pollEvery   time.Duration // the destination poller's period
}

// probe is one sampled update.
type probe struct {
	key       int64
	wrote     time.Time // the updated_at it wrote (the source's clock_timestamp())
	committed time.Time // when its autocommitted UPDATE returned
	lastMiss  time.Time // start of the last poll that did not see it
	seen      time.Time // end of the first poll that saw it (zero: never)
}

// lag is the measured lag: an upper bound.
func (p *probe) lag() time.Duration { return p.seen.Sub(p.committed) }

// load is a running write load with its poller.
type load struct {
	spec     loadSpec
	started  time.Time
	cancel   context.CancelFunc // stops the writers
	writers  sync.WaitGroup
	werr     error
	werrOnce sync.Once
	updates  atomic.Int64
	maxLate  atomic.Int64 // largest schedule slip of an update, ns
	samples  chan *probe
	stopped  time.Time

	pollDone  chan struct{}
	pollErr   error
	pollStop  chan struct{} // closed to give up on outstanding probes
	probes    []*probe      // every probe, in the order the poller got them
	polls     int
	pollTime  time.Duration // total time inside poll queries
	pollGapMx time.Duration // largest gap between two polls' starts
	trace     []pollTrace

	lagDone chan struct{}
	own     []time.Duration // the replicator's own lag figure, sampled
}

// startLoad connects the writers to srcDSN and the poller to dstDSN and
// starts both. ownLag, if not nil, is sampled every 10ms while the load
// runs (tidemark's Stream.Lag).
func startLoad(ctx context.Context, spec loadSpec, srcDSN, dstDSN string, ownLag func() time.Duration) (*load, error) {
	l := &load{spec: spec, samples: make(chan *probe, 1<<16), pollDone: make(chan struct{}), pollStop: make(chan struct{})}
	poller, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		return nil, fmt.Errorf("connect the lag poller: %w", err)
	}
	// The poll must stay a primary key lookup as the table grows: a
	// destination table that starts empty (a backfill's) would otherwise
	// keep a generic plan made while it was empty (autovacuum is off, so
	// nothing invalidates it), which scans the whole table once it has
	// filled: hundreds of milliseconds a poll instead of one.
	if _, err := poller.Exec(ctx, "SET plan_cache_mode = force_custom_plan; SET enable_seqscan = off"); err != nil {
		poller.Close(ctx)
		return nil, fmt.Errorf("set up the lag poller: %w", err)
	}
	conns := make([]*pgx.Conn, 0, spec.conns)
	for range spec.conns {
		c, err := pgx.Connect(ctx, srcDSN)
		if err == nil {
			conns = append(conns, c)
			// Prepared now, not on the first scheduled update.
			_, err = c.Prepare(ctx, "upd", updateSQL)
		}
		if err != nil {
			for _, c := range conns {
				c.Close(ctx)
			}
			poller.Close(ctx)
			return nil, fmt.Errorf("set up a writer: %w", err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	l.started = time.Now()
	interval := time.Duration(float64(spec.conns) / spec.rate * float64(time.Second))
	for i, c := range conns {
		l.writers.Add(1)
		go func() {
			defer l.writers.Done()
			defer c.Close(context.WithoutCancel(ctx))
			first := l.started.Add(time.Duration(i) * interval / time.Duration(spec.conns))
			if err := l.write(wctx, c, first, interval, rand.New(rand.NewPCG(uint64(i), 1000))); err != nil {
				l.werrOnce.Do(func() { l.werr = err })
			}
		}()
	}
	go func() {
		defer close(l.pollDone)
		defer poller.Close(context.WithoutCancel(ctx))
		l.pollErr = l.poll(ctx, poller)
	}()
	if ownLag != nil {
		l.lagDone = make(chan struct{})
		go func() {
			defer close(l.lagDone)
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case <-t.C:
					l.own = append(l.own, ownLag())
				}
			}
		}()
	}
	return l, nil
}

// write runs one connection's share of the schedule: an update every
// interval from first on. A late update (the server was slow) goes at
// once; the schedule does not shift.
func (l *load) write(ctx context.Context, c *pgx.Conn, first time.Time, interval time.Duration, rng *rand.Rand) error {
	timer := time.NewTimer(0)
	<-timer.C
	for next := first; ; next = next.Add(interval) {
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			}
		} else if late := int64(-d); late > l.maxLate.Load() {
			l.maxLate.Store(late) // racy max across writers: good enough for a figure
		}
		if ctx.Err() != nil {
			return nil
		}
		key := 1 + rng.Int64N(l.spec.keys)
		var wrote time.Time
		if err := c.QueryRow(ctx, "upd", key).Scan(&wrote); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("update key %d: %w", key, err)
		}
		committed := time.Now()
		if n := l.updates.Add(1); n%l.spec.sampleEvery == 0 {
			select {
			case l.samples <- &probe{key: key, wrote: wrote, committed: committed}:
			default:
				return errors.New("the lag poller fell 65,536 probes behind")
			}
		}
	}
}

// pollKeys bounds the probes one poll looks up: the oldest outstanding
// ones. A lookup of every outstanding probe costs the destination server
// a primary key probe each; with seconds of lag that is a thousand and
// more every few milliseconds, which competes with the replication being
// measured and (on a loaded machine) makes each poll take hundreds of
// milliseconds, blurring the measurement. Both methods apply changes in
// commit order, so the oldest probes show first; when a poll sees all the
// probes it asked about, the next one goes at once, without waiting for
// the tick, and asks for up to sweepKeys probes: one destination commit
// can show a thousand probes at once. A probe that is not polled keeps the
// bracket of its last poll: its lower bound is never inferred from other
// probes.
const (
	pollKeys  = 64
	sweepKeys = 1024
)

// poll looks up the oldest outstanding probes' rows on the destination
// every pollEvery until the writers stopped and every probe was seen, or
// pollStop closes.
func (l *load) poll(ctx context.Context, conn *pgx.Conn) error {
	var queue []*probe // unseen probes in the order they committed (near enough)
	writing := true
	tick := time.NewTicker(l.spec.pollEvery)
	defer tick.Stop()
	var keys []int64
	var asked []*probe
	var lastStart time.Time
	sweep := false // the last poll saw all it asked about: poll again now
	for {
		if !sweep {
			select {
			case <-tick.C:
			case <-l.pollStop:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	drain:
		for {
			select {
			case p, ok := <-l.samples:
				if !ok {
					writing = false
					break drain
				}
				l.probes = append(l.probes, p)
				queue = append(queue, p)
			default:
				break drain
			}
		}
		if len(queue) == 0 {
			if !writing {
				return nil
			}
			sweep = false
			continue
		}
		n := pollKeys
		if sweep {
			n = sweepKeys
		}
		asked = append(asked[:0], queue[:min(len(queue), n)]...)
		keys = keys[:0]
		for _, p := range asked {
			keys = append(keys, p.key)
		}
		start := time.Now()
		rows, err := conn.Query(ctx, "SELECT id, updated_at FROM t WHERE id = ANY($1)", keys)
		if err != nil {
			return fmt.Errorf("poll the destination: %w", err)
		}
		found := map[int64]time.Time{}
		for rows.Next() {
			var id int64
			var at *time.Time
			if err := rows.Scan(&id, &at); err != nil {
				rows.Close()
				return fmt.Errorf("poll the destination: %w", err)
			}
			if at != nil {
				found[id] = *at
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("poll the destination: %w", err)
		}
		end := time.Now()
		l.polls++
		l.pollTime += end.Sub(start)
		if !lastStart.IsZero() {
			l.pollGapMx = max(l.pollGapMx, start.Sub(lastStart))
		}
		lastStart = start
		seen := 0
		for _, p := range asked {
			if at, ok := found[p.key]; ok && !at.Before(p.wrote) {
				p.seen = end
				seen++
			} else {
				p.lastMiss = start
			}
		}
		kept := queue[:0]
		for _, p := range queue {
			if p.seen.IsZero() {
				kept = append(kept, p)
			}
		}
		clear(queue[len(kept):])
		queue = kept
		sweep = seen == len(asked) && len(queue) > 0
		l.trace = append(l.trace, pollTrace{start: start, end: end, keys: len(keys), found: seen})
	}
}

// stop ends the writers, then waits up to patience for the poller to see
// every probe.
func (l *load) stop(patience time.Duration) error {
	l.cancel()
	l.writers.Wait()
	l.stopped = time.Now()
	if l.lagDone != nil {
		<-l.lagDone
	}
	close(l.samples)
	t := time.NewTimer(patience)
	defer t.Stop()
	select {
	case <-l.pollDone:
	case <-t.C:
		close(l.pollStop)
		<-l.pollDone
	}
	if l.werr != nil {
		return l.werr
	}
	return l.pollErr
}

// elapsed is how long the writers ran.
func (l *load) elapsed() time.Duration { return l.stopped.Sub(l.started) }

// rate is the update rate the writers achieved.
func (l *load) rate() float64 { return float64(l.updates.Load()) / l.elapsed().Seconds() }

// pollTrace is one poll, for TIDEMARK_BENCH_LAG_TRACE.
type pollTrace struct {
	start, end  time.Time
	keys, found int
}

// writeTrace writes the polls and the probes as CSV lines to path (times
// in ms since the load started).
func (l *load) writeTrace(path string) error {
	var b strings.Builder
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return fmt.Sprintf("%.3f", float64(t.Sub(l.started))/1e6)
	}
	for _, p := range l.trace {
		fmt.Fprintf(&b, "poll,%s,%s,%d,%d\n", at(p.start), at(p.end), p.keys, p.found)
	}
	for _, p := range l.probes {
		fmt.Fprintf(&b, "probe,%d,%s,%s,%s\n", p.key, at(p.committed), at(p.lastMiss), at(p.seen))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// lagStats summarizes the probes committed in [from, to).
type lagStats struct {
	probes, unseen     int
	p50, p90, p99, max time.Duration
	missed             int           // probes some poll missed before one saw them
	resolution         time.Duration // see load.resolution
}

func (l *load) stats(from, to time.Time) lagStats {
	var lags []time.Duration
	var s lagStats
	for _, p := range l.probes {
		if p.committed.Before(from) || !p.committed.Before(to) {
			continue
		}
		s.probes++
		if p.seen.IsZero() {
			s.unseen++
			continue
		}
		lags = append(lags, p.lag())
		if !p.lastMiss.IsZero() {
			s.missed++
		}
	}
	if len(lags) == 0 {
		return s
	}
	slices.Sort(lags)
	s.p50, s.p90, s.p99, s.max = quantile(lags, 0.5), quantile(lags, 0.9), quantile(lags, 0.99), lags[len(lags)-1]
	s.resolution = l.resolution(from, to)
	return s
}

// resolution is the mean, over the polls started in [from, to) that saw a
// probe, of the time from the start of the poll before to the end of that
// one: a change that became visible was seen within that time by a poll
// asking for it.
func (l *load) resolution(from, to time.Time) time.Duration {
	var sum time.Duration
	n := 0
	for i := 1; i < len(l.trace); i++ {
		p := l.trace[i]
		if p.found == 0 || p.start.Before(from) || !p.start.Before(to) {
			continue
		}
		sum += p.end.Sub(l.trace[i-1].start)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// longestSweep is the longest stretch of back-to-back polls that each saw
// every probe they asked about: how long the poller took to look at all
// the probes one destination commit made visible.
func (l *load) longestSweep() time.Duration {
	var longest time.Duration
	var from time.Time
	for _, p := range l.trace {
		if p.found == p.keys && p.keys >= pollKeys {
			if from.IsZero() {
				from = p.start
			}
			longest = max(longest, p.end.Sub(from))
		} else {
			from = time.Time{}
		}
	}
	return longest
}

// ownStats is the p99 and max of the replicator's own lag samples.
func (l *load) ownStats() (p99, mx time.Duration, ok bool) {
	if len(l.own) == 0 {
		return 0, 0, false
	}
	s := slices.Clone(l.own)
	slices.Sort(s)
	return quantile(s, 0.99), s[len(s)-1], true
}

// quantile is the nearest-rank q-quantile of sorted s.
func quantile(s []time.Duration, q float64) time.Duration {
	i := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
