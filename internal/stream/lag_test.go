package stream

import (
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// The lag is the age of the oldest transaction received and not yet
// committed; replays add nothing, and a commit forgets what it covers.
func TestLagClock(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	var c lagClock
	if got := c.lag(t0); got != 0 {
		t.Fatalf("empty clock: lag %s", got)
	}
	c.received(100, t0)
	c.received(200, t0.Add(time.Second))
	c.received(150, t0.Add(-time.Hour)) // a replay: before the last pending
	c.received(200, t0.Add(-time.Hour))
	if got := c.lag(t0.Add(5 * time.Second)); got != 5*time.Second {
		t.Errorf("lag %s, want 5s (the oldest pending)", got)
	}
	c.committed(150)
	if got := c.lag(t0.Add(5 * time.Second)); got != 4*time.Second {
		t.Errorf("after a commit at 150: lag %s, want 4s", got)
	}
	if got := c.lag(t0); got != 0 {
		t.Errorf("source clock ahead: lag %s, want 0", got)
	}
	c.committed(200)
	if got := c.lag(t0.Add(time.Hour)); got != 0 {
		t.Errorf("all committed: lag %s, want 0", got)
	}
	c.received(300, t0)
	c.reset()
	if got := c.lag(t0.Add(time.Hour)); got != 0 {
		t.Errorf("after reset: lag %s, want 0", got)
	}
	var none *lagClock
	none.received(1, t0)
	none.committed(1)
	if got := none.lag(t0.Add(time.Hour)); got != 0 {
		t.Errorf("nil clock: lag %s", got)
	}
}

// A destination that cannot commit lets the lag grow past lag_warn: the
// stream publishes that once, and again when the destination catches up.
// The destination is held by a write lock the test takes and releases.
func TestLagWarn(t *testing.T) {
	// Not parallel: under the package's load the waits grow long. Two ways
	// the change below went unseen on loaded machines are closed: keepalive
	// batches filling the writer's queue (TestPositionOnlyBatchesJoin), and
	// the table's ending verify waiting in the applier for the locked
	// destination (TestWaitingApplierHoldsNextEvent).
	e := newEnv(t, envOptions{yaml: "lag_warn: 100ms", setup: `CREATE TABLE t (id int PRIMARY KEY, v text)`})
	e.start()
	e.exec(`INSERT INTO t VALUES (1, 'a')`)
	e.waitFor("the first change applied", func() bool { return e.s.EventsApplied() == 1 })
	// On a busy machine applying the first change can itself take longer
	// than the threshold: the lag check then says so until its next round.
	e.waitFor("caught up", func() bool { return e.s.Lag() == 0 && !e.s.LagOver() },
		func() string { return fmt.Sprintf("lag %s, over %v", e.s.Lag(), e.s.LagOver()) })

	events, cancel := e.s.Subscribe()
	defer cancel()
	db, err := sql.Open("sqlite", e.cfg.Destination.Path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(e.ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO t VALUES (2, 'b')`)
	over := waitLag(t, e, events)
	if !over.Over || over.ThresholdSeconds != 0.1 || over.LagSeconds <= 0.1 || over.Reason == "" {
		t.Errorf("lag event %+v, want over 0.1s with a reason", over)
	}
	if !e.s.LagOver() || e.s.Lag() <= 100*time.Millisecond {
		t.Errorf("over the threshold: lag %s, over %v", e.s.Lag(), e.s.LagOver())
	}
	if _, err := conn.ExecContext(e.ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	back := waitLag(t, e, events)
	if back.Over {
		t.Errorf("second lag event %+v, want back under", back)
	}
	if e.s.LagOver() || e.s.EventsApplied() != 2 {
		t.Errorf("caught up: over %v, %d events applied, want 2", e.s.LagOver(), e.s.EventsApplied())
	}
	e.assertConverged("t")
}

// waitLag returns the stream's next lag event.
func waitLag(t *testing.T, e *env, events <-chan Event) LagAlert {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case ev := <-events:
			if ev.Lag != nil {
				return *ev.Lag
			}
		case <-deadline:
			t.Fatalf("no lag event (lag %s)", e.s.Lag())
		}
	}
}
