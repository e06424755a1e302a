package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/console"
	"github.com/tidemark/tidemark/internal/metrics"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types streams open
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// idleServer is an API over two streams that never run (their source is
// unreachable and Run is never called), with objects recorded as a first
// start in manual mode would, so initiate and stop reach the store, and a
// running batch engine over three no-op tasks, with metrics.
//
// Requests built with httptest.NewRequest name the host example.com, which
// the server allows; opts come after that.
func idleServer(tb testing.TB, tokens []config.Token, opts ...api.Option) *api.Server {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	cfg, err := config.Parse(fmt.Appendf(nil, `
streams:
  - name: alpha
    source: {dsn: "postgres://nobody@127.0.0.1:1/none"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: {mode: manual}
  - name: beta
    source: {dsn: "postgres://nobody@127.0.0.1:1/none"}
    destination: {type: sqlite, path: "%s"}
    include: ["*.*"]
tasks:
  - {name: a, project: p, owner: ann, output: p.out, type: noop, schedule: daily, outputs: {rows: "0"}}
  - {name: b, project: p, type: noop, schedule: hourly, depends_on: [a]}
  - {name: c, project: q, type: noop, schedule: "weekly mon", depends_on: [p.b], paused: true}
`, filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")), nil)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	var streams []*stream.Stream
	for _, sc := range cfg.Streams {
		s := stream.New(sc, st, log, stream.Options{})
		if err := s.MarkNotStarted(ctx); err != nil {
			tb.Fatal(err)
		}
		streams = append(streams, s)
		for _, obj := range [][2]string{{"public", "a"}, {"public", "b"}, {"my.schema", "T x"}} {
			o := store.Object{Stream: sc.Name, Schema: obj[0], Table: obj[1], Reason: stream.ReasonManual,
				Columns: []store.ColumnInfo{{Name: "id", Type: "integer", Key: true}}}
			if err := st.PutObject(ctx, o); err != nil {
				tb.Fatal(err)
			}
		}
	}
	reg := metrics.New(log)
	if err := reg.Register(metrics.NewCollector(metrics.Sources{Streams: streams, Store: st, Batch: true})); err != nil {
		tb.Fatal(err)
	}
	opts = append([]api.Option{api.WithMetrics(reg), api.WithHosts("127.0.0.1:0", []string{"example.com"})}, opts...)
	return api.New(streams, idleEngine(tb, cfg, st, log), st, tokens, log, opts...)
}

// idleEngine runs a batch engine over the configuration's tasks until the
// test ends.
func idleEngine(tb testing.TB, cfg *config.Config, st *store.Store, log *slog.Logger) *engine.Engine {
	tb.Helper()
	g, err := dag.New(cfg.Tasks)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := engine.New(engine.Options{Store: st, Graph: g, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	<-e.Ready()
	return e
}

// flushRecorder ends the request once the handler flushes, so that the
// event stream returns after its headers.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushed func()
}

func (r *flushRecorder) Flush() {
	r.ResponseRecorder.Flush()
	r.flushed()
}

func FuzzAPIRequests(f *testing.F) {
	srv := idleServer(f, nil)
	objects := func(names ...string) string {
		b, _ := json.Marshal(api.ObjectsRequest{Objects: names})
		return string(b)
	}
	for _, seed := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/readyz", ""},
		{"GET", "/metrics", ""},
		{"GET", "/api/v1/streams", ""},
		{"GET", "/api/v1/streams/alpha", ""},
		{"GET", "/api/v1/streams/nope", ""},
		{"GET", "/api/v1/streams/alpha/objects", ""},
		{"GET", "/api/v1/streams/beta/objects?x=1", ""},
		{"POST", "/api/v1/streams/alpha/backfills", objects("public.a", "b")},
		{"POST", "/api/v1/streams/beta/backfills", objects(`"my.schema"."T x"`)},
		{"POST", "/api/v1/streams/alpha/backfills", objects("public.*")},
		{"POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.a"], "x": 1}`},
		{"POST", "/api/v1/streams/alpha/backfills", `{"objects": [`},
		{"POST", "/api/v1/streams/alpha/backfills", `null`},
		{"POST", "/api/v1/streams/alpha/backfills/stop", objects("public.a")},
		{"POST", "/api/v1/streams/alpha/backfills/stop", objects("public.b", "public.nope")},
		{"POST", "/api/v1/streams/alpha/verify", ""},
		{"POST", "/api/v1/streams/alpha/verify", `{"objects": ["public.a"], "chunk_size": 10}`},
		{"POST", "/api/v1/streams/alpha/verify", `{"chunk_size": -5}`},
		{"POST", "/api/v1/streams/alpha/pause", ""},
		{"POST", "/api/v1/streams/alpha/resume", ""},
		{"POST", "/api/v1/streams/beta/reset", ""},
		{"GET", "/api/v1/backfills", ""},
		{"GET", "/api/v1/backfills?stream=alpha&object=public.a&status=pending&started_by=api&limit=5", ""},
		{"GET", "/api/v1/backfills?since=2026-01-02T15:04:05Z&until=2027-01-02T15:04:05%2B02:00", ""},
		{"GET", "/api/v1/backfills?limit=-1&object=%22", ""},
		{"GET", "/api/v1/backfills/1", ""},
		{"GET", "/api/v1/backfills/999999", ""},
		{"GET", "/api/v1/backfills/x", ""},
		{"GET", "/api/v1/events", ""},
		{"GET", "/api/v1/events?stream=beta", ""},
		{"GET", "/api/v1/events?stream=nope", ""},
		{"GET", "/api/v1/audit", ""},
		{"GET", "/api/v1/audit?kind=stream&object=public.a&state=pending&started_by=api&since=2026-01-01T00:00:00Z&limit=3&format=csv", ""},
		{"GET", "/api/v1/audit?state=succeeded&task=p.a&until=2100-01-01T00:00:00Z", ""},
		{"GET", "/api/v1/audit?kind=batch&stream=alpha&limit=0&format=xml&x=1", ""},
		{"CONNECT", "tidemark:443", ""},
		{"GET", "http://tidemark/api/v1/streams", ""},
		{"HEAD", "/api/v1/streams", ""},
		{"OPTIONS", "*", ""},
		{"DELETE", "/api/v1/streams/alpha", ""},
		{"PUT", "/api/v1/streams/alpha/backfills", objects("public.a")},
		{"GET", "/api/v1/streams/%61lpha/objects", ""},
		{"GET", "/api/v1//streams", ""},
		{"POST", "/api/v1/streams/alpha/./backfills", objects("public.a")},
		{"GET", "/api/v1/streams/../v1/streams", ""},
		{"GET", "/", ""},
		{"GET", "//", ""},
		{"GET", "/api/v1/streams/", ""},
		{"GET", "/api/v1/tasks", ""},
		{"GET", "/api/v1/tasks/p.b", ""},
		{"POST", "/api/v1/batch/preview?tz=Europe/Paris&limit=5", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-03"}, "scope": {"mode": "list", "downstream": -1}, "groups": 2}`},
		{"POST", "/api/v1/batch/preview", `{"task": "b", "dates": {"mode": "cycle", "from": "2025-01-01", "to": "2025-02-28", "weekdays": [1], "month_days": [-1]}, "time_range": {"from": "08:00", "to": "09:30"}}`},
		{"POST", "/api/v1/batch/preview", `{"task": "a", "dates": {"mode": "custom", "list": ["2025-01-01", "1899-12-31"]}, "scope": {"mode": "mass", "coverage": "end_points", "values": ["q.c"]}}`},
		{"POST", "/api/v1/batch/backfills", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-01"}, "paused": "run", "order": "desc"}`},
		{"POST", "/api/v1/batch/backfills", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-01"}, "run_at": "2020-01-01T00:00:00Z"}`},
		{"GET", "/api/v1/batch/backfills?state=running&since=2026-01-01T00:00:00Z", ""},
		{"GET", "/api/v1/batch/backfills/1", ""},
		{"POST", "/api/v1/batch/backfills/1/stop", ""},
		{"POST", "/api/v1/batch/backfills/1/rerun", `{"instances": [1, 1, 2]}`},
		{"GET", "/api/v1/batch/backfills/1/instances?state=failed&after=0&limit=3", ""},
		{"GET", "/api/v1/batch/backfills/1/nodes.csv", ""},
		{"GET", "/api/v1/batch/instances?scheduled=true", ""},
		{"GET", "/api/v1/batch/instances/1/log?attempt=2", ""},
		{"POST", "/api/v1/batch/instances/1/mark-succeeded", ""},
		{"POST", "/api/v1/batch/instances/1/stop", ""},
		{"GET", "/ui/", ""},
		{"GET", "/ui/js/app.js", ""},
		{"GET", "/ui/../api/v1/streams", ""},
		{"POST", "/ui/", "{}"},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		// The request as the HTTP server would read it from the wire; what
		// it would reject never reaches the API. It comes from loopback with
		// a JSON body, as the CLI's do, so that it reaches the handlers.
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: 127.0.0.1:7420\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, len(body))
		req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(strings.NewReader(raw), bytes.NewReader(body))))
		if err != nil {
			return // not a request the server would accept from the wire
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: cancel}
		srv.ServeHTTP(rec, req.WithContext(ctx))
		// The streams never run, so the daemon is not ready: /readyz says
		// so with a 503.
		notReady := req.URL.Path == "/readyz" && rec.Code == http.StatusServiceUnavailable
		if rec.Code >= 500 && !notReady {
			t.Fatalf("%s %q %q: HTTP %d %s", method, path, body, rec.Code, rec.Body)
		}
		ct := rec.Header().Get("Content-Type")
		if (ct == "text/event-stream" || strings.HasPrefix(ct, "text/csv")) && rec.Code == http.StatusOK {
			return
		}
		if req.URL.Path == "/metrics" && strings.HasPrefix(ct, "text/plain") && rec.Code == http.StatusOK {
			return
		}
		// The console is static files and its redirect, not the API: any
		// answer but a 5xx (checked above) is its own.
		if req.URL.Path == "/" || strings.HasPrefix(req.URL.Path, console.Prefix) {
			return
		}
		if ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q %q: HTTP %d with %q body %q, want JSON", method, path, body, rec.Code, ct, rec.Body)
		}
	})
}
