package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
)

// Fault tests (faults_*_test.go): real servers, real faults, while a load
// keeps changing the source. Each ends with the destination equal to the
// source row for row.

const (
	faultRows  = 6000
	faultChunk = 200
	// faultRate makes the backfill of faultRows last about four seconds, so
	// that a fault lands in its middle.
	faultRate = 1500
	// faultPace is the load's pace: one statement at most every faultPace,
	// which the stream follows even under the race detector with other
	// tests running.
	faultPace = 10 * time.Millisecond
)

func faultTable(rows int) string {
	return fmt.Sprintf(`CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g;`, rows)
}

// faultBegan holds when each fault test began (by *testing.T), for phase.
var faultBegan sync.Map

func faultBegin(t *testing.T) {
	faultBegan.Store(t, time.Now())
	t.Cleanup(func() { faultBegan.Delete(t) })
}

// phase logs how long the test has run, at the end of each of its phases.
func (e *env) phase(what string) {
	e.t.Helper()
	if began, ok := faultBegan.Load(e.t); ok {
		e.t.Logf("%s after %s", what, time.Since(began.(time.Time)).Round(time.Millisecond))
	}
}

// faultServer starts a PostgreSQL server of the test's own: the test
// restarts it, changes its settings or breaks its slots.
func faultServer(t *testing.T, settings map[string]string) *pgserver.Server {
	t.Helper()
	own, err := pgserver.Start(context.Background(), pgserver.Options{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Stop) // registered first: runs after the stream stopped
	return own
}

// destOn moves the env's destination to a new PostgreSQL database on srv
// (before start): a test that restarts the source's server keeps its
// destination elsewhere.
func (e *env) destOn(srv *pgserver.Server) {
	e.t.Helper()
	dsn, err := srv.CreateDatabase(e.ctx, fmt.Sprintf("faultdst%d", dbSeq.Add(1)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.dest, e.dstDSN = "postgres", dsn
	e.cfg.Destination = config.Destination{Type: config.TypePostgres, DSN: dsn}
}

// faultLoad changes table t from a connection of its own until stopped:
// updates (half of them just past the active backfill's progress, so that
// they land in the chunk being read and its window), inserts of new keys
// and deletes. When the server goes away it reconnects, at each tick, until
// the server is back.
type faultLoad struct {
	writes atomic.Int64 // statements that succeeded
	maxID  atomic.Int64 // the highest key ever inserted
	stop   func() int64
}

func (e *env) faultLoad(rows int, seed uint64, pace time.Duration) *faultLoad {
	l := &faultLoad{}
	l.maxID.Store(int64(rows))
	r := rand.New(rand.NewPCG(seed, 7))
	var conn *pgx.Conn
	stop := e.paced(pace, func(ctx context.Context, i int) {
		if conn == nil || conn.IsClosed() {
			if conn != nil {
				conn.Close(ctx)
				conn = nil
			}
			c, err := pgx.Connect(ctx, e.srcDSN)
			if err != nil {
				return // the server is restarting: try again at the next tick
			}
			conn = c
		}
		top := int(l.maxID.Load())
		id := 1 + r.IntN(top)
		if r.IntN(2) == 0 {
			id = 1 + (e.backfillProgress()+r.IntN(4*faultChunk))%top
		}
		var err error
		switch op := r.IntN(10); {
		case op < 6:
			_, err = conn.Exec(ctx, "UPDATE t SET v = v + 1, note = $2 WHERE id = $1", id, fmt.Sprintf("update %d", i))
		case op < 9:
			next := l.maxID.Add(1) // taken even if the insert's outcome is unknown
			_, err = conn.Exec(ctx, "INSERT INTO t VALUES ($1, $2, 'new') ON CONFLICT (id) DO NOTHING", next, i)
		default:
			_, err = conn.Exec(ctx, "DELETE FROM t WHERE id = $1", id)
		}
		if err == nil {
			l.writes.Add(1)
		}
	})
	l.stop = func() int64 {
		if stop() && conn != nil {
			conn.Close(context.Background())
		}
		return l.writes.Load()
	}
	return l
}

// paced calls step(ctx, i) for i = 0, 1, … at most once every pace, from a
// goroutine of its own, until stop is called or the test ends; ctx ends at
// stop. stop waits for the goroutine and reports whether this call ended it
// (true once).
func (e *env) paced(pace time.Duration, step func(ctx context.Context, i int)) (stop func() bool) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			step(ctx, i)
		}
	}()
	var once sync.Once
	stop = func() (first bool) {
		once.Do(func() { cancel(); <-done; first = true })
		return first
	}
	e.t.Cleanup(func() { stop() })
	return stop
}

// backfillProgress is the rows read by the stream's active backfill (0
// without one).
func (e *env) backfillProgress() int {
	if e.s == nil {
		return 0
	}
	e.s.bf.mu.Lock()
	defer e.s.bf.mu.Unlock()
	var read int64
	for _, r := range e.s.bf.active {
		r.mu.Lock()
		read = r.rec.RowsRead
		r.mu.Unlock()
	}
	return int(read)
}

// stateLog records every state the stream publishes, from a goroutine that
// keeps draining the subscription so that none is missed.
type stateLog struct {
	mu      sync.Mutex
	seen    []store.StreamState
	changed chan struct{} // closed and replaced at each new state
}

func (e *env) stateLog() *stateLog {
	l := &stateLog{changed: make(chan struct{})}
	events, unsubscribe := e.s.Subscribe()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev := <-events:
				if ev.State == nil {
					continue
				}
				l.mu.Lock()
				l.seen = append(l.seen, *ev.State)
				close(l.changed)
				l.changed = make(chan struct{})
				l.mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	e.t.Cleanup(func() { close(stop); <-done; unsubscribe() })
	return l
}

// len is the number of states seen so far: a mark for wait and since.
func (l *stateLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// since returns the states seen from mark on.
func (l *stateLog) since(mark int) []store.StreamState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]store.StreamState(nil), l.seen[mark:]...)
}

// wait waits for the first state at or after mark with the given state and
// returns it with the mark just past it.
func (l *stateLog) wait(e *env, mark int, state string) (store.StreamState, int) {
	e.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		l.mu.Lock()
		for i := mark; i < len(l.seen); i++ {
			if l.seen[i].State == state {
				st := l.seen[i]
				l.mu.Unlock()
				return st, i + 1
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			e.t.Fatalf("timed out waiting for stream state %s; states since: %s", state, statesText(l.since(mark)))
		}
	}
}

func statesText(states []store.StreamState) string {
	var b strings.Builder
	for _, s := range states {
		fmt.Fprintf(&b, "\n  %s %q", s.State, s.Reason)
	}
	return b.String()
}

// slotState is the stream's slot as the source shows it.
type slotState struct {
	exists    bool
	confirmed change.LSN
	activePID int32 // 0: no walsender holds the slot
}

func (e *env) slotState(conn *pgx.Conn) slotState {
	e.t.Helper()
	var confirmed *string
	var pid *int32
	err := conn.QueryRow(e.ctx, `SELECT confirmed_flush_lsn::text, active_pid FROM pg_replication_slots WHERE slot_name = $1`,
		e.cfg.Source.Slot).Scan(&confirmed, &pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return slotState{}
	}
	if err != nil {
		e.t.Fatalf("read slot: %v", err)
	}
	s := slotState{exists: true}
	if confirmed != nil {
		if s.confirmed, err = change.ParseLSN(*confirmed); err != nil {
			e.t.Fatal(err)
		}
	}
	if pid != nil {
		s.activePID = *pid
	}
	return s
}

// backfillRec reads a backfill's record.
func (e *env) backfillRec(id int64) store.Backfill {
	e.t.Helper()
	b, err := e.st.GetBackfill(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// initiateT initiates a backfill of table t and returns its id.
func (e *env) initiateT() int64 {
	e.t.Helper()
	recs, err := e.s.Initiate(e.ctx, []change.TableID{{Schema: "public", Name: "t"}}, store.StartedByCLI, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return recs[0].ID
}

// waitMidBackfill waits until the backfill is active and the destination
// committed at least a third of the table's rows, and fails if it
// completed already (the fault would not land in its middle).
func (e *env) waitMidBackfill(id int64) store.Backfill {
	e.t.Helper()
	var b store.Backfill
	e.waitFor("backfill a third done", func() bool {
		b = e.backfillRec(id)
		if b.Status == StatusCompleted || b.Status == StatusFailed {
			e.t.Fatalf("backfill %s before the fault: %+v", b.Status, b)
		}
		return b.Status == StatusActive && b.RowsWritten >= faultRows/3
	})
	return b
}

// TestFaultSourceDuringBackfill breaks the source in the middle of a
// backfill while the table keeps changing: the stream retries with backoff
// (retrying, then running), the backfill continues from its committed cursor
// rather than from the start, completes, and the destination equals the
// source.
func TestFaultSourceDuringBackfill(t *testing.T) {
	restart := func(crash bool) func(e *env, own *pgserver.Server) {
		return func(e *env, own *pgserver.Server) {
			e.src.Close(e.ctx)
			if err := own.Restart(e.ctx, crash); err != nil {
				e.t.Fatal(err)
			}
			e.reconnect()
		}
	}
	cases := []struct {
		name string
		dest string // the destination; on the shared server
		own  bool   // the source on a server of its own, which the fault restarts
		// fault breaks the source; own is the source's server.
		fault func(e *env, own *pgserver.Server)
	}{
		{"clean-restart", "sqlite", true, restart(false)},
		{"crash-restart", "postgres", true, restart(true)},
		{"walsender-terminated", "postgres", false, func(e *env, _ *pgserver.Server) {
			before := e.slotState(e.src)
			if before.activePID == 0 {
				e.t.Fatal("no walsender holds the slot")
			}
			var killed bool
			if err := e.src.QueryRow(e.ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`,
				e.cfg.Source.Slot).Scan(&killed); err != nil || !killed {
				e.t.Fatalf("terminate the walsender: %v (terminated: %v)", err, killed)
			}
			// tidemark comes back with a walsender of its own.
			e.waitFor("a new walsender on the slot", func() bool {
				pid := e.slotState(e.src).activePID
				return pid != 0 && pid != before.activePID
			})
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			faultBegin(t)
			srv, own := server, (*pgserver.Server)(nil)
			if c.own {
				own = faultServer(t, nil)
				srv = own
			}
			e := newEnvOn(t, srv, envOptions{dest: c.dest, setup: faultTable(faultRows),
				yaml: fmt.Sprintf("backfill: {mode: manual, chunk_size: %d, rows_per_second: %d}", faultChunk, faultRate)})
			if c.own && c.dest == "postgres" {
				e.destOn(server)
			}
			e.start()
			load := e.faultLoad(faultRows, uint64(i), faultPace)
			id := e.initiateT()
			mid := e.waitMidBackfill(id)
			e.phase("backfill a third done")
			states := e.stateLog()
			mark := states.len()

			began := time.Now()
			c.fault(e, own)
			e.retriedAfter(states, mark, began, mid)

			e.waitLoaded("t")
			e.phase("backfill loaded")
			writes := load.stop()
			e.assertConverged("t")
			e.phase("converged")

			b := e.backfillRec(id)
			if o := e.object("t"); o.BackfillID != id {
				t.Fatalf("the object's backfill is %d, want %d: the run was replaced", o.BackfillID, id)
			}
			e.checkResumed(b, mid, load.maxID.Load(), writes)
		})
	}
}

// retriedAfter waits, from the state log's mark, for the stream to retry
// (saying when it tries next) and run again, and fails if it failed.
func (e *env) retriedAfter(states *stateLog, mark int, began time.Time, mid store.Backfill) {
	e.t.Helper()
	retry, next := states.wait(e, mark, store.StateRetrying)
	if !strings.Contains(retry.Reason, "(retrying in ") {
		e.t.Errorf("retrying reason %q does not say when the next attempt is", retry.Reason)
	}
	states.wait(e, next, store.StateRunning)
	e.t.Logf("back to running %s after the fault (read %d rows before it); states: %s", time.Since(began).Round(time.Millisecond), mid.RowsRead, statesText(states.since(mark)))
	for _, s := range states.since(mark) {
		if s.State == store.StateFailed {
			e.t.Fatalf("the stream failed on a transient fault: %q", s.Reason)
		}
	}
}

// checkResumed checks that backfill b, at mid when the fault hit, went on
// from its cursor: one pass reads each key at most once, and no key exceeds
// maxID. Chunks merged but not committed when the fault hit are read again:
// those of the moment before the fault (rows read but not written), and a
// few more merged just before it. A backfill that started over would read
// the third it had committed again.
func (e *env) checkResumed(b, mid store.Backfill, maxID, writes int64) {
	e.t.Helper()
	bound := maxID + (mid.RowsRead - mid.RowsWritten) + 5*faultChunk
	e.t.Logf("%d writes; backfill: rows_read %d (bound %d), rows_written %d, chunks %d, retries %d, window conflicts %d",
		writes, b.RowsRead, bound, b.RowsWritten, b.Chunks, b.Retries, b.WindowConflicts)
	if b.RowsRead > bound {
		e.t.Errorf("rows_read %d > %d: the backfill did not continue from its cursor", b.RowsRead, bound)
	}
	if writes == 0 {
		e.t.Error("no writes during the test")
	}
}

// dstName is the destination database's name.
func (e *env) dstName() string {
	e.t.Helper()
	u, err := url.Parse(e.dstDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
