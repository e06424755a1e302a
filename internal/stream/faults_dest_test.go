package stream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// destOutage cuts a PostgreSQL destination off: no new connections to its
// database, and every session but the observer's terminated. The observer
// (a connection the test opened before) keeps reading the checkpoint.
type destOutage struct {
	e        *env
	admin    *pgx.Conn // on the destination's server, outside its database
	observer *pgx.Conn // on the destination's database
	db       string
}

func (e *env) destOutage() *destOutage {
	e.t.Helper()
	if e.dest != "postgres" {
		e.t.Fatal("a destination outage needs a postgres destination")
	}
	o := &destOutage{e: e, db: e.dstName()}
	var err error
	if o.observer, err = pgx.Connect(e.ctx, e.dstDSN); err != nil {
		e.t.Fatal(err)
	}
	admin := strings.Replace(e.dstDSN, "/"+o.db+"?", "/postgres?", 1)
	if o.admin, err = pgx.Connect(e.ctx, admin); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		o.observer.Close(context.Background())
		o.admin.Close(context.Background())
	})
	return o
}

func (o *destOutage) begin() {
	o.e.t.Helper()
	if _, err := o.admin.Exec(o.e.ctx, "ALTER DATABASE "+pgx.Identifier{o.db}.Sanitize()+" WITH ALLOW_CONNECTIONS false"); err != nil {
		o.e.t.Fatal(err)
	}
	var observer uint32
	if err := o.observer.QueryRow(o.e.ctx, "SELECT pg_backend_pid()").Scan(&observer); err != nil {
		o.e.t.Fatal(err)
	}
	var n int
	if err := o.admin.QueryRow(o.e.ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> $2`,
		o.db, observer).Scan(&n); err != nil {
		o.e.t.Fatal(err)
	}
	if n == 0 {
		o.e.t.Fatal("the stream had no session on the destination")
	}
}

func (o *destOutage) end() {
	o.e.t.Helper()
	if _, err := o.admin.Exec(o.e.ctx, "ALTER DATABASE "+pgx.Identifier{o.db}.Sanitize()+" WITH ALLOW_CONNECTIONS true"); err != nil {
		o.e.t.Fatal(err)
	}
}

// position is the source position the destination committed.
func (o *destOutage) position() change.LSN {
	o.e.t.Helper()
	var pos int64
	if err := o.observer.QueryRow(o.e.ctx, `SELECT "position" FROM "_tidemark"."checkpoint" WHERE "stream" = $1`, o.e.cfg.Name).Scan(&pos); err != nil {
		o.e.t.Fatalf("read the destination's checkpoint: %v", err)
	}
	return change.LSN(uint64(pos))
}

// checkConfirmed checks that the slot is confirmed no further than the
// destination committed. The slot is read first: the checkpoint only moves
// forward, so a confirmation past it would show.
func (o *destOutage) checkConfirmed(src *pgx.Conn) slotState {
	o.e.t.Helper()
	slot := o.e.slotState(src)
	if pos := o.position(); slot.confirmed > pos {
		o.e.t.Fatalf("the slot is confirmed up to %s, past the destination's checkpoint %s", slot.confirmed, pos)
	}
	return slot
}

// TestFaultDestinationOutage: the destination is unreachable for longer
// than the source's wal_sender_timeout while changes keep coming. The
// stream shows retrying with a destination reason, confirms nothing past
// what the destination committed, keeps its replication connection (the
// same walsender throughout, no restart of the stream), and catches up when
// the destination returns.
func TestFaultDestinationOutage(t *testing.T) {
	t.Parallel()
	faultBegin(t)
	// The source database has a wal_sender_timeout of its own (the shared
	// server's is a minute): its walsenders drop a client silent for longer.
	const senderTimeout = 2 * time.Second
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic}", setup: faultTable(1000) + fmt.Sprintf(`
		DO $$ BEGIN EXECUTE format('ALTER DATABASE %%I SET wal_sender_timeout = %%L', current_database(), '%s'); END $$;`, senderTimeout)})
	e.start()
	e.waitLoaded("t")
	e.phase("loaded")
	out := e.destOutage()
	load := e.faultLoad(1000, 42, time.Millisecond)
	e.waitFor("changes committed", func() bool { return e.s.EventsApplied() > 100 })
	walsender := out.checkConfirmed(e.src).activePID
	if walsender == 0 {
		t.Fatal("no walsender holds the slot")
	}
	states := e.stateLog()
	mark := states.len()

	out.begin()
	began, writesBefore := time.Now(), load.writes.Load()
	retry, _ := states.wait(e, mark, store.StateRetrying)
	if !strings.HasPrefix(retry.Reason, "destination: ") {
		t.Fatalf("retrying reason %q does not name the destination", retry.Reason)
	}
	// The outage lasts three wal_sender_timeouts, and until the source wrote
	// enough transactions to fill the stream's buffers (1024 events and the
	// batches in flight): its reader then blocks on them, and only its status
	// updates keep the connection alive.
	applied := e.s.EventsApplied()
	polls := 0
	for time.Since(began) < 3*senderTimeout || load.writes.Load()-writesBefore < 1500 {
		if time.Since(began) > waitTimeout {
			t.Fatalf("only %d writes during the outage", load.writes.Load()-writesBefore)
		}
		slot := out.checkConfirmed(e.src)
		if slot.activePID != walsender {
			t.Fatalf("the walsender changed from %d to %d during the outage: the replication connection was dropped", walsender, slot.activePID)
		}
		if got := e.s.State(); got.State != store.StateRetrying || !strings.HasPrefix(got.Reason, "destination: ") {
			t.Fatalf("stream state %+v during the outage, want retrying with the destination's reason", got)
		}
		polls++
		time.Sleep(100 * time.Millisecond) // a bounded poll of the servers
	}
	if n := e.s.EventsApplied(); n != applied {
		t.Fatalf("%d changes applied while the destination was unreachable", n-applied)
	}
	t.Logf("outage of %s, %d writes meanwhile, %d polls", time.Since(began).Round(time.Millisecond), load.writes.Load()-writesBefore, polls)

	out.end()
	_, next := states.wait(e, mark, store.StateRunning)
	e.phase("running again")
	writes := load.stop()
	e.assertConverged("t")
	e.phase("converged")
	slot := out.checkConfirmed(e.src)
	if slot.activePID != walsender {
		t.Fatalf("the walsender changed from %d to %d: the replication connection was dropped", walsender, slot.activePID)
	}
	for _, s := range states.since(mark) {
		if s.State != store.StateRetrying && s.State != store.StateRunning {
			t.Fatalf("state %s %q during or after the outage: the stream restarted; states: %s", s.State, s.Reason, statesText(states.since(mark)))
		}
	}
	// Once caught up, the confirmations reach the source again.
	caughtUp := out.position()
	e.waitFor("the slot confirmed past the outage", func() bool {
		return out.checkConfirmed(e.src).confirmed >= caughtUp
	})
	t.Logf("%d writes in all; states after recovery: %s", writes, statesText(states.since(next)))
}

// logRecorder keeps the records a logger handles, and passes them on.
type logRecorder struct {
	slog.Handler
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newLogRecorder(h slog.Handler) logRecorder {
	return logRecorder{Handler: h, mu: &sync.Mutex{}, recs: &[]slog.Record{}}
}

func (l logRecorder) Handle(ctx context.Context, r slog.Record) error {
	l.mu.Lock()
	*l.recs = append(*l.recs, r.Clone())
	l.mu.Unlock()
	return l.Handler.Handle(ctx, r)
}

func (l logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return logRecorder{Handler: l.Handler.WithAttrs(as), mu: l.mu, recs: l.recs}
}

func (l logRecorder) WithGroup(name string) slog.Handler {
	return logRecorder{Handler: l.Handler.WithGroup(name), mu: l.mu, recs: l.recs}
}

// find returns the attributes of the records with the message.
func (l logRecorder) find(msg string) []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range *l.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
		out = append(out, attrs)
	}
	return out
}

// TestFaultRetainedWAL: while the stream cannot confirm (its destination is
// unreachable) and the source writes, the WAL its slot retains grows in the
// stream's view (the API's retained_wal_bytes), and past
// source.wal_warn_bytes tidemark warns; once the destination is back, the
// confirmations let the source release it.
func TestFaultRetainedWAL(t *testing.T) {
	t.Parallel()
	faultBegin(t)
	const threshold = 8 << 20
	own := faultServer(t, nil)
	// other.junk is not streamed: its WAL is the slot's to keep, not the
	// stream's to apply.
	e := newEnvOn(t, own, envOptions{dest: "postgres", yaml: "backfill: {mode: manual}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, v int);
		CREATE SCHEMA other; CREATE TABLE other.junk (id int, pad text);`})
	e.cfg.Source.WALWarnBytes = threshold
	rec := newLogRecorder(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.startLogged(slog.New(rec))
	const warning = "replication slot retains much WAL on the source"
	e.exec(`INSERT INTO t VALUES (1, 1)`)
	e.assertConverged("t")
	e.waitFor("retained WAL measured", func() bool { return e.s.RetainedWAL() > 0 })
	before := e.s.RetainedWAL()
	if before >= threshold {
		t.Fatalf("retained WAL %d before the test wrote any: over the threshold already", before)
	}
	if w := rec.find(warning); len(w) > 0 {
		t.Fatalf("warned under the threshold: %v", w)
	}

	out := e.destOutage()
	out.begin()
	e.waitState(store.StateRetrying)
	// About 25 MB of WAL, three times the threshold.
	e.exec(`INSERT INTO other.junk SELECT g, md5(g::text) || repeat('x', 400) FROM generate_series(1, 50000) g`)
	e.exec(`INSERT INTO t VALUES (2, 2)`)
	var written int64
	if err := e.src.QueryRow(e.ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`,
		e.cfg.Source.Slot).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written < 2*threshold {
		t.Fatalf("the source retains only %d bytes: the test wrote too little WAL", written)
	}
	e.waitFor("retained WAL grown in the stream's view", func() bool { return e.s.RetainedWAL() >= written })
	e.waitFor("the retained-WAL warning", func() bool { return len(rec.find(warning)) > 0 })
	w := rec.find(warning)[0]
	if got := w["bytes"].Int64(); got <= threshold {
		t.Errorf("warned at %d bytes, not past the threshold %d", got, threshold)
	}
	if got := w["threshold"].Int64(); got != threshold {
		t.Errorf("warning's threshold %d, want %d", got, threshold)
	}
	t.Logf("retained WAL %d before, %d after writing; warning %v", before, e.s.RetainedWAL(), w)

	// Back: the stream confirms again, and a checkpoint (which logs the
	// running transactions the slot's restart position moves to) lets the
	// server release the WAL.
	out.end()
	e.waitState(store.StateRunning)
	e.assertConverged("t")
	e.waitFor("retained WAL released", func() bool {
		e.exec("CHECKPOINT")
		return e.s.RetainedWAL() < threshold
	}, func() string { return "retained " + slog.Int64Value(e.s.RetainedWAL()).String() })
}
