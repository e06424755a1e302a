package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/daemon"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/stream"
)

// server is the package's throwaway PostgreSQL. Fuzz worker processes run
// only FuzzAPIRequests, which needs none, so they do not start one.
var server *pgserver.Server

func TestMain(m *testing.M) {
	flag.Parse()
	var code int
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		code = m.Run() // fuzz workers need no server
	} else {
		code = pgserver.RunTests(m, &server)
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitTimeout bounds every wait for the daemon.
const waitTimeout = 2 * time.Minute

var seq atomic.Int64

// env is one test's source database, SQLite destination and metadata store,
// and a running daemon serving the API on a loopback port.
type env struct {
	t      testing.TB
	ctx    context.Context
	name   string // the stream's name; slot names are per server, so unique per test
	src    *pgx.Conn
	dest   string // the SQLite destination file
	base   string // http://host:port
	d      *daemon.Daemon
	client *http.Client
}

type envOptions struct {
	setup    string // SQL run on the source before the daemon starts
	backfill string // the stream's backfill key, flow style
	api      string // the api key, flow style; listen is always 127.0.0.1:0
	tasks    string // recurring tasks, the items of the tasks key (block style, indented 2); {{stream}} is the stream's name
	// destination is the stream's destination key, flow style; empty is
	// the SQLite file dest.
	destination string
	// cluster, when set, makes the daemon the cluster node of that name,
	// on a PostgreSQL metadata store of its own, the stream pinned to it.
	cluster string
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := seq.Add(1)
	srcDSN, err := server.CreateDatabase(ctx, fmt.Sprintf("api_src%d", n))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if o.setup != "" {
		if _, err := conn.Exec(ctx, o.setup); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	dir := t.TempDir()
	e := &env{t: t, ctx: ctx, name: fmt.Sprintf("api%d", n), src: conn, dest: filepath.Join(dir, "dest.db"),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	if o.backfill == "" {
		o.backfill = "{mode: automatic}"
	}
	if o.destination == "" {
		o.destination = fmt.Sprintf(`{type: sqlite, path: "%s"}`, e.dest)
	}
	apiYAML := `{listen: "127.0.0.1:0"}`
	if o.api != "" {
		apiYAML = strings.Replace(o.api, "{", `{listen: "127.0.0.1:0", `, 1)
	}
	meta, clusterYAML := "sqlite://"+filepath.Join(dir, "meta.db"), ""
	if o.cluster != "" {
		if meta, err = server.CreateDatabase(ctx, fmt.Sprintf("api_meta%d", n)); err != nil {
			t.Fatal(err)
		}
		clusterYAML = fmt.Sprintf("cluster: {node: %s, lease: 3s}", o.cluster)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `
metadata: "%s"
api: %s
log: {level: warn}
%s
streams:
  - name: %s
    source: {dsn: "%s", status_interval: 1s}
    destination: %s
    include: ["public.*"]
    backfill: %s
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 200ms}
    node: %q
%s`, meta, apiYAML, clusterYAML, e.name, srcDSN, o.destination, o.backfill, o.cluster, tasksYAML(strings.ReplaceAll(o.tasks, "{{stream}}", e.name))), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: the log writer closes after the
	// daemon has stopped.
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.d, err = daemon.New(ctx, cfg, log, stream.Options{ProbeInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Slots are per server, and a server has a few: drop this test's once
	// the daemon has stopped (cleanups run last-registered first).
	t.Cleanup(func() { dropSlot(t, conn, "tidemark_"+e.name) })
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.d.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon stopped with %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("daemon did not stop within %s", waitTimeout)
		}
	})
	select {
	case <-e.d.Ready:
	case err := <-done:
		t.Fatalf("daemon ended before it listened: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("daemon did not listen")
	}
	e.base = "http://" + e.d.Addr
	e.waitFor("stream running", func() bool { return e.d.Streams()[0].State().State == "running" })
	if o.tasks != "" {
		<-e.d.Batch().Ready()
	}
	return e
}

// tasksYAML is the tasks key holding tasks, or nothing.
func tasksYAML(tasks string) string {
	if tasks == "" {
		return ""
	}
	return "tasks:\n" + tasks
}

// dropSlot drops a replication slot of the database conn is connected to,
// waiting until its walsender has let go of it.
func dropSlot(t testing.TB, conn *pgx.Conn, slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // 55006: the slot is still active
			if err != nil {
				t.Errorf("drop replication slot %s: %v", slot, err)
			}
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Errorf("drop replication slot %s: %v", slot, err)
			return
		}
	}
}

// testWriter logs to the test until the test's cleanup closes it.
type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// waitFor waits until cond holds, checking again on every event of the
// daemon's streams and at least every 50ms.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	for _, s := range e.d.Streams() {
		ch, cancel := s.Subscribe()
		defer cancel()
		go func() {
			for {
				select {
				case <-ch:
					select {
					case wake <- struct{}{}:
					default:
					}
				case <-done:
					return
				}
			}
		}()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for !cond() {
		select {
		case <-wake:
		case <-tick.C:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// reply is an HTTP response read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; headers are name, value pairs.
func (e *env) do(method, path, body string, headers ...string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // as every client sends; headers may replace it
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if h := req.Header.Get("Host"); h != "" {
		req.Host = h // the client sends req.Host, never a Host header
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// ok sends a request and decodes its body into out, failing unless the
// status is want.
func (e *env) ok(want int, out any, method, path, body string, headers ...string) {
	e.t.Helper()
	r := e.do(method, path, body, headers...)
	if r.status != want {
		e.t.Fatalf("%s %s: HTTP %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
}

// fails sends a request that must fail with status and code; it returns the
// error message.
func (e *env) fails(status int, code, method, path, body string, headers ...string) string {
	e.t.Helper()
	r := e.do(method, path, body, headers...)
	msg, gotCode, err := apiError(r)
	if err != nil || r.status != status || gotCode != code {
		e.t.Fatalf("%s %s: HTTP %d %q, want %d with code %q (%v)", method, path, r.status, r.body, status, code, err)
	}
	return msg
}

// apiError decodes the API's error body.
func apiError(r reply) (msg, code string, err error) {
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		return "", "", fmt.Errorf("content type %q", ct)
	}
	var body struct {
		Error *struct {
			Code    string        `json:"code"`
			Message string        `json:"message"`
			Unknown []api.Unknown `json:"unknown"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return "", "", err
	}
	if body.Error == nil || body.Error.Code == "" || body.Error.Message == "" {
		return "", "", fmt.Errorf("no error code and message")
	}
	return body.Error.Message, body.Error.Code, nil
}

func (e *env) exec(sql string) {
	e.t.Helper()
	if _, err := e.src.Exec(e.ctx, sql); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}
