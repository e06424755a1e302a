package stream

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/kafkatest"
	"github.com/tidemark/tidemark/internal/natsserver"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/sink"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types streams open
	"github.com/tidemark/tidemark/internal/store"
)

var server *pgserver.Server

func TestMain(m *testing.M) {
	code := pgserver.RunTests(m, &server)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var dbSeq atomic.Int64

var waitTimeout = 2 * time.Minute

// env is one test's source database, destination, metadata store and
// running stream.
type env struct {
	t      *testing.T
	ctx    context.Context
	src    *pgx.Conn
	srcDSN string
	cfg    config.Stream
	st     *store.Store
	s      *Stream
	stop   func()
	dest   string // "sqlite" or "postgres"
	dstDSN string
	// hook, when set, is the stream's chunk hook from its start.
	hook *chunkHook
}

type envOptions struct {
	dest  string // "sqlite" (default), "postgres", "files", "nats" or "kafka"
	setup string // SQL run on the source before the stream starts
	yaml  string // extra stream keys
	// destKeys are extra destination keys (kafka, nats, files), e.g.
	// "max_message_bytes: 1024".
	destKeys string
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	return newEnvOn(t, server, o)
}

// newEnvOn builds an env on a given server (tests that restart a server
// use one of their own).
func newEnvOn(t *testing.T, server *pgserver.Server, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := dbSeq.Add(1)
	srcDSN, err := server.CreateDatabase(ctx, fmt.Sprintf("src%d", n))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	// Registered before start registers the stream's stop, so it runs after it.
	t.Cleanup(func() { dropSlots(t, srcDSN) })
	if o.setup != "" {
		if _, err := conn.Exec(ctx, o.setup); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	e := &env{t: t, ctx: ctx, src: conn, srcDSN: srcDSN, dest: o.dest}
	dir := t.TempDir()
	destYAML := e.destYAML(server, dir, n, o.destKeys)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
streams:
  - name: s%d
    source: {type: postgres, dsn: "%s", status_interval: 1s}
    destination: %s
    include: ["public.*"]
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 200ms}
%s`, n, srcDSN, destYAML, indent(o.yaml))), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg.Streams[0]
	e.st, err = store.Open(ctx, "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	return e
}

// destYAML is the destination of the test's stream, of type e.dest
// (sqlite when empty), in dir or on a server started for the test (a
// PostgreSQL database on server), with the extra keys keys.
func (e *env) destYAML(server *pgserver.Server, dir string, n int64, keys string) string {
	y := e.destYAMLOf(server, dir, n)
	if keys != "" {
		y = strings.TrimSuffix(y, "}") + ", " + keys + "}"
	}
	return y
}

func (e *env) destYAMLOf(server *pgserver.Server, dir string, n int64) string {
	t := e.t
	t.Helper()
	switch e.dest {
	case "postgres":
		var err error
		if e.dstDSN, err = server.CreateDatabase(e.ctx, fmt.Sprintf("dst%d", n)); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`{type: postgres, dsn: "%s"}`, e.dstDSN)
	case "kafka":
		c, err := kafkatest.Start(e.ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		return fmt.Sprintf(`{type: kafka, brokers: ["%s"], partitions: 3}`, c.Addr)
	case "files":
		return fmt.Sprintf(`{type: files, path: "%s"}`, filepath.Join(dir, "files"))
	case "nats":
		srv, err := natsserver.Start(e.ctx, natsserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Registered before the stream's stop, so it runs after it.
		t.Cleanup(srv.Stop)
		return fmt.Sprintf(`{type: nats, url: "%s"}`, srv.URL())
	}
	return fmt.Sprintf(`{type: sqlite, path: "%s"}`, filepath.Join(dir, "dest.db"))
}

// dropSlots drops the replication slots of a test's source database when
// the test ends: the package's tests share a server whose
// max_replication_slots would otherwise run out. A walsender can hold its
// slot a moment after the stream closed the connection, so it is ended
// first, waiting (up to 10 s) until it has exited.
func dropSlots(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return // the server is gone, and its slots with it
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"SELECT pg_terminate_backend(active_pid, 10000) FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NOT NULL",
		"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database()",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Logf("drop the replication slots of the test's database: %v", err)
			return
		}
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// start runs the stream until the test ends or stop is called.
func (e *env) start() {
	e.t.Helper()
	level := slog.LevelWarn
	if os.Getenv("TIDEMARK_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	e.startLogged(slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: level})))
}

// startLogged is start with a logger of the test's choosing.
func (e *env) startLogged(log *slog.Logger) {
	e.t.Helper()
	e.s = New(e.cfg, e.st, log, Options{ProbeInterval: 2 * time.Millisecond, SlotCheckInterval: 200 * time.Millisecond, LagCheckInterval: 10 * time.Millisecond})
	if e.hook != nil {
		e.s.bf.hook.Store(e.hook)
	}
	if err := e.s.MarkNotStarted(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.s.Run(ctx)
	}()
	e.stop = func() { cancel(); <-done }
	e.t.Cleanup(e.stop)
	e.waitState(store.StateRunning)
}

// execInDest runs statements in the destination itself.
func (e *env) execInDest(stmts ...string) {
	e.t.Helper()
	if e.dest == "postgres" {
		conn := e.textConn(e.dstDSN)
		for _, s := range stmts {
			if _, err := conn.Exec(e.ctx, s); err != nil {
				e.t.Fatalf("%s: %v", s, err)
			}
		}
		return
	}
	db, err := sql.Open("sqlite", "file:"+e.cfg.Destination.Path+"?_pragma=busy_timeout(20000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(e.ctx, s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitFor waits until cond holds, re-checking on every stream event and at
// least every 50ms, and fails the test after a minute.
func (e *env) waitFor(what string, cond func() bool, detail ...func() string) {
	e.t.Helper()
	e.waitForWithin(waitTimeout, what, cond, detail...)
}

// waitForWithin is waitFor with a deadline of its own, for the few waits
// whose work grows with the machine's load (a large table backfilled under
// a writer).
func (e *env) waitForWithin(limit time.Duration, what string, cond func() bool, detail ...func() string) {
	e.t.Helper()
	events, cancel := e.s.Subscribe()
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	for !cond() {
		select {
		case <-events:
		case <-tick.C:
		case <-deadline:
			more := ""
			for _, d := range detail {
				more += ": " + d()
			}
			e.t.Fatalf("timed out waiting for %s (stream state %+v)%s", what, e.s.State(), more)
		}
	}
}

// throttled is cond evaluated at most as often as it takes: after an
// evaluation that took d, the next d report false without evaluating. A
// comparison of whole tables, run on every event while the stream catches
// up, otherwise takes a core (under the race detector) from the stream it
// waits for.
func throttled(cond func() bool) func() bool {
	var next time.Time
	return func() bool {
		start := time.Now()
		if start.Before(next) {
			return false
		}
		ok := cond()
		next = time.Now().Add(time.Since(start))
		return ok
	}
}

func (e *env) waitState(state string) {
	e.t.Helper()
	e.waitFor("stream state "+state, func() bool { return e.s.State().State == state })
}

// reconnect opens a new source connection (after a server restart).
func (e *env) reconnect() {
	e.t.Helper()
	conn, err := pgx.Connect(e.ctx, e.srcDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	e.src = conn
	e.t.Cleanup(func() { conn.Close(context.Background()) })
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.src.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) object(table string) store.Object {
	e.t.Helper()
	return e.objectOf(change.TableID{Schema: "public", Name: table})
}

// waitLoaded waits until an object's backfill is Completed and loaded.
func (e *env) waitLoaded(table string) store.Object {
	e.t.Helper()
	return e.waitLoadedID(change.TableID{Schema: "public", Name: table})
}

// readableSink is a destination the tests read back.
type readableSink interface {
	sink.Sink
	sink.Reader
}

// connectDest is a connection to the test's PostgreSQL destination,
// closed when the test ends.
func (e *env) connectDest() *pgx.Conn {
	e.t.Helper()
	conn, err := pgx.Connect(e.ctx, e.dstDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// openDest opens the destination the way the stream does.
func (e *env) openDest() readableSink {
	e.t.Helper()
	snk, err := openSink(e.ctx, &e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { snk.Close() })
	r, ok := snk.(readableSink)
	if !ok {
		e.t.Fatalf("destination %s cannot be read back", e.cfg.Destination.Type)
	}
	return r
}

// sourceRows reads a table from the source as text rows keyed by key text.
func (e *env) sourceRows(t *change.Table) map[string]change.Row {
	e.t.Helper()
	out := map[string]change.Row{}
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = pgx.Identifier{c.Name}.Sanitize()
	}
	res := e.src.PgConn().ExecParams(e.ctx, "SELECT "+strings.Join(cols, ",")+" FROM "+pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize(), nil, nil, nil, nil).Read()
	if res.Err != nil {
		e.t.Fatal(res.Err)
	}
	for _, raw := range res.Rows {
		r := make(change.Row, len(raw))
		for i, v := range raw {
			if v == nil {
				r[i] = change.Null
			} else {
				r[i] = change.Text(string(v))
			}
		}
		out[t.RowKey(r).Encode()] = r
	}
	return out
}

// assertConverged waits until the destination equals the source row for
// row: the stream catches up asynchronously, so the comparison is retried
// on every event until it holds, and the last difference is reported.
func (e *env) assertConverged(table string) {
	e.t.Helper()
	e.assertConvergedID(change.TableID{Schema: "public", Name: table})
}

func diffRows(t *change.Table, want map[string]change.Row, got []change.Row) string {
	seen := map[string]bool{}
	var problems []string
	for _, r := range got {
		k := t.RowKey(r).Encode()
		seen[k] = true
		w, ok := want[k]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("extra row %v", r))
		case !slices.Equal(w, r):
			problems = append(problems, fmt.Sprintf("row %v, want %v", r, w))
		}
	}
	for k, w := range want {
		if !seen[k] {
			problems = append(problems, fmt.Sprintf("missing row %v", w))
		}
	}
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("… %d differences in all", len(problems)))
	}
	return strings.Join(problems, "; ")
}
