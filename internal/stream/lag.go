package stream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// lagClock measures how far the destination is behind the source: the age
// of the oldest transaction the stream received and the destination has not
// committed yet (by the source's commit time), 0 when it committed
// everything received. The applier tells it the first transaction of each
// batch, the writer each commit; between the two a batch ages. A change the
// applier took while it waited for a commit ages from then (holding).
//
// A nil *lagClock does nothing and measures 0.
type lagClock struct {
	mu sync.Mutex
	// pending holds the first transaction of each batch not yet committed,
	// in log order.
	pending []pendingTxn
	// held is a transaction the applier took while it waited for the
	// destination to commit, and has not handled yet (zero: none).
	held pendingTxn
}

type pendingTxn struct {
	end change.LSN // its end position
	at  time.Time  // its commit time on the source
}

// received records the first transaction of a batch. One at or before a
// transaction already pending (replayed after a restart) adds nothing.
func (c *lagClock) received(end change.LSN, at time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.pending); n > 0 && c.pending[n-1].end >= end {
		return
	}
	c.pending = append(c.pending, pendingTxn{end: end, at: at})
}

// committed forgets the transactions the destination committed: those
// ending at or before pos.
func (c *lagClock) committed(pos change.LSN) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(c.pending) && c.pending[n].end <= pos {
		n++
	}
	c.pending = append(c.pending[:0], c.pending[n:]...)
	if c.held.end <= pos {
		c.held = pendingTxn{}
	}
}

// holding records a transaction the applier took while it waited for the
// destination to commit, before it handles it and tells received. The
// oldest one held counts until a commit covers it.
func (c *lagClock) holding(end change.LSN, at time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held.end == 0 {
		c.held = pendingTxn{end: end, at: at}
	}
}

// reset forgets every pending transaction: the stream starts over on a new
// replication slot, whose positions say nothing of the old ones.
func (c *lagClock) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.held = nil, pendingTxn{}
}

// lag is the age at now of the oldest pending transaction; a source clock
// ahead of ours reads as no lag rather than a negative one.
func (c *lagClock) lag(now time.Time) time.Duration {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	oldest := c.held.at
	if len(c.pending) > 0 && (oldest.IsZero() || c.pending[0].at.Before(oldest)) {
		oldest = c.pending[0].at
	}
	if oldest.IsZero() {
		return 0
	}
	return max(now.Sub(oldest), 0)
}

// LagAlert is the event of a stream's lag crossing streams[].lag_warn, in
// either direction.
type LagAlert struct {
	// Over is true when the lag went over the threshold, false when it came
	// back under.
	Over             bool    `json:"over"`
	LagSeconds       float64 `json:"lag_seconds"`
	ThresholdSeconds float64 `json:"threshold_seconds"`
	Reason           string  `json:"reason"`
}

// Lag is how far the destination is behind the source: the age of the
// oldest change the stream received and the destination has not committed
// yet, 0 when it is caught up. While the stream is not running it counts
// only the changes received before it stopped.
func (s *Stream) Lag() time.Duration { return s.lag.lag(time.Now()) }

// LagOver reports whether the lag is over streams[].lag_warn: it turns
// true and false with the stream's lag events.
func (s *Stream) LagOver() bool { return s.lagOver.Load() }

// EventsApplied is the number of changes from the source's log that the
// destination committed since the stream was built (backfilled rows are not
// counted).
func (s *Stream) EventsApplied() int64 { return s.events.Load() }

// watchLag checks the lag every LagCheckInterval until ctx ends, and when
// it crosses streams[].lag_warn logs and publishes it once, and again when
// it comes back under.
func (s *Stream) watchLag(ctx context.Context) {
	warn := s.cfg.LagWarn
	if warn <= 0 {
		return
	}
	t := time.NewTicker(s.opts.LagCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lag := s.Lag()
		over := lag > warn
		if over == s.lagOver.Load() {
			continue
		}
		s.lagOver.Store(over)
		alert := &LagAlert{Over: over, LagSeconds: lag.Seconds(), ThresholdSeconds: warn.Seconds()}
		if over {
			alert.Reason = fmt.Sprintf("the destination is %s behind the source, over lag_warn (%s)", lag.Round(time.Millisecond), warn)
			s.log.Warn("the destination lags behind the source", "lag", lag.Round(time.Millisecond), "threshold", warn)
		} else {
			alert.Reason = fmt.Sprintf("the destination is back within lag_warn (%s) of the source", warn)
			s.log.Info("the destination caught up with the source", "lag", lag.Round(time.Millisecond), "threshold", warn)
		}
		s.publish(Event{Stream: s.cfg.Name, Lag: alert})
	}
}
