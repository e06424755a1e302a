package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/daemon"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types streams open
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// scrape reads /metrics as Prometheus would.
func (e *env) scrape() scraped {
	e.t.Helper()
	r := e.do("GET", "/metrics", "")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		e.t.Fatalf("GET /metrics: HTTP %d %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(r.body)))
	if err != nil {
		e.t.Fatalf("parse /metrics: %v", err)
	}
	return scraped{t: e.t, fams: fams}
}

type scraped struct {
	t    testing.TB
	fams map[string]*dto.MetricFamily
}

// value is the value of the series of name with exactly labels (name,
// value pairs): a gauge's or counter's value, a histogram's count. ok is
// false when there is no such series.
func (s scraped) value(name string, labels ...string) (v float64, ok bool) {
	f := s.fams[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if w, ok := want[l.GetName()]; !ok || w != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// want fails the test unless the series has the value.
func (s scraped) want(v float64, name string, labels ...string) {
	s.t.Helper()
	got, ok := s.value(name, labels...)
	if !ok {
		s.t.Errorf("no series %s%v", name, labels)
	} else if got != v {
		s.t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

// wantSome fails the test unless the series exists with a value above 0.
func (s scraped) wantSome(name string, labels ...string) {
	s.t.Helper()
	if got, ok := s.value(name, labels...); !ok || got <= 0 {
		s.t.Errorf("%s%v = %v (present %v), want above 0", name, labels, got, ok)
	}
}

func (e *env) readiness(want int) api.Readiness {
	e.t.Helper()
	var r api.Readiness
	e.ok(want, &r, "GET", "/readyz", "")
	return r
}

// A completed backfill as metrics: the rows written equal the table's, the
// stream's state, an applied change, a route's request durations and the
// store's query durations; the daemon is ready while running or paused.
func TestMetricsOfAStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: `CREATE TABLE items (id int PRIMARY KEY, v text);
		INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 250) g;`})
	e.waitLoaded("public.items")
	e.exec(`INSERT INTO items VALUES (1000, 'after')`)
	str := e.d.Streams()[0]
	e.waitFor("the change applied", func() bool { return str.EventsApplied() == 1 })

	m := e.scrape()
	obj := []string{"stream", e.name, "object", "public.items"}
	m.want(250, "tidemark_backfill_rows_written", obj...)
	m.want(250, "tidemark_backfill_rows_read", obj...)
	m.wantSome("tidemark_backfill_chunks", obj...)
	m.want(1, "tidemark_object_status", append(obj, "status", "completed")...)
	m.want(0, "tidemark_object_status", append(obj, "status", "failed")...)
	m.want(1, "tidemark_object_loaded", obj...)
	m.want(1, "tidemark_backfills", "stream", e.name, "status", "completed")
	m.want(0, "tidemark_backfills", "stream", e.name, "status", "failed")
	m.want(1, "tidemark_backfill_runs", "stream", e.name, "status", "completed") // the deprecated name
	m.want(1, "tidemark_stream_state", "stream", e.name, "state", "running")
	m.want(0, "tidemark_stream_state", "stream", e.name, "state", "failed")
	m.want(1, "tidemark_stream_events_total", "stream", e.name)
	m.want(0, "tidemark_stream_lag_over_threshold", "stream", e.name)
	if _, ok := m.value("tidemark_stream_lag_seconds", "stream", e.name); !ok {
		t.Error("no tidemark_stream_lag_seconds")
	}
	if _, ok := m.value("tidemark_stream_wal_retained_bytes", "stream", e.name); !ok {
		t.Error("no tidemark_stream_wal_retained_bytes")
	}
	// waitLoaded asked for the objects: its route, by pattern.
	m.wantSome("tidemark_http_request_duration_seconds", "route", "GET /api/v1/streams/{stream}/objects", "code", "200")
	m.wantSome("tidemark_store_query_duration_seconds", "operation", "select objects")
	m.wantSome("tidemark_store_query_duration_seconds", "operation", "update backfills")
	m.wantSome("go_goroutines")
	if _, ok := m.fams["tidemark_batch_backfills"]; ok {
		t.Error("batch metrics without tasks")
	}
	for name := range m.fams {
		if strings.Contains(name, "http_request") && strings.Contains(fmt.Sprint(m.fams[name]), e.name+"/objects") {
			t.Errorf("%s has a raw path as a label", name)
		}
	}

	if r := e.readiness(http.StatusOK); r.Status != "ready" || len(r.Reasons) != 0 {
		t.Errorf("running: readiness %+v", r)
	}
	e.ok(http.StatusAccepted, nil, "POST", "/api/v1/streams/"+e.name+"/pause", "")
	e.waitFor("stream paused", func() bool { return str.State().State == store.StatePaused })
	if r := e.readiness(http.StatusOK); r.Status != "ready" {
		t.Errorf("paused by request: readiness %+v", r)
	}
	e.scrape().want(1, "tidemark_stream_state", "stream", e.name, "state", "paused")
	e.scrape().wantSome("tidemark_http_request_duration_seconds", "route", "POST /api/v1/streams/{stream}/pause", "code", "202")
	e.scrape().wantSome("tidemark_http_request_duration_seconds", "route", "GET /readyz", "code", "200")
}

// A stream whose source database does not exist fails: the daemon is not
// ready, and says which stream, but not why: the reason is behind a token.
func TestReadyzFailedStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startDaemon(t, fmt.Sprintf(`
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:0"}
streams:
  - name: gone
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    retry: {initial: 20ms, max: 200ms}
`, filepath.Join(dir, "meta.db"), server.DSN("no_such_database"), filepath.Join(dir, "dest.db")))
	str := e.d.Streams()[0]
	e.waitFor("stream failed", func() bool { return str.State().State == store.StateFailed })
	r := e.readiness(http.StatusServiceUnavailable)
	// The stream's reason stays behind a token: it may quote row values.
	if r.Status != "not_ready" || len(r.Reasons) != 1 || r.Reasons[0] != "stream gone: failed" {
		t.Errorf("failed stream: readiness %+v, want only \"stream gone: failed\"", r)
	}
	var v api.StreamView
	e.ok(http.StatusOK, &v, "GET", "/api/v1/streams/gone", "")
	if !strings.Contains(v.Reason, "no_such_database") {
		t.Errorf("the stream's view lacks its reason: %+v", v)
	}
	m := e.scrape()
	m.want(1, "tidemark_stream_state", "stream", "gone", "state", "failed")
	m.want(0, "tidemark_stream_state", "stream", "gone", "state", "running")
	m.wantSome("tidemark_http_request_duration_seconds", "route", "GET /readyz", "code", "503")
}

// Before the streams and the batch engine run, the API is not ready.
func TestReadyzBeforeRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.Parse(fmt.Appendf(nil, `
streams:
  - name: idle
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
tasks:
  - {name: a, type: noop, schedule: daily}
`, server.DSN("postgres"), filepath.Join(dir, "dest.db")), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	s := stream.New(cfg.Streams[0], st, log, stream.Options{})
	if err := s.MarkNotStarted(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New([]*stream.Stream{s}, unstartedEngine(t, cfg, st), st, nil, log))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r api.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	want := []string{"stream idle: not_started", "batch engine: recovering the instances a previous run left"}
	if resp.StatusCode != http.StatusServiceUnavailable || r.Status != "not_ready" || strings.Join(r.Reasons, "|") != strings.Join(want, "|") {
		t.Errorf("HTTP %d %+v, want 503 not_ready with %q", resp.StatusCode, r, want)
	}
}

// A succeeded batch backfill counted by state, and one waiting for its run
// time with its instances by state.
func TestMetricsOfBatchBackfills(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, batchTasks)
	var sub api.SubmitResponse
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills",
		`{"task": "extract", "dates": {"from": "2025-01-11", "to": "2025-01-13"}, "scope": {"mode": "list", "downstream": -1}}`)
	e.waitFor("backfill to succeed", func() bool {
		var b store.BatchBackfill
		e.ok(http.StatusOK, &b, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", sub.Backfill.ID), "")
		return b.State == store.BatchSucceeded
	})
	var later api.SubmitResponse
	runAt := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	e.ok(http.StatusCreated, &later, "POST", "/api/v1/batch/backfills",
		`{"task": "report", "dates": {"from": "2025-01-01", "to": "2025-01-02"}, "run_at": "`+runAt+`"}`)

	m := e.scrape()
	m.want(1, "tidemark_batch_backfills", "state", "succeeded")
	m.want(1, "tidemark_batch_backfills", "state", "waiting")
	m.want(0, "tidemark_batch_backfills", "state", "failed")
	m.want(9, "tidemark_batch_instances", "kind", "backfill", "state", "succeeded")
	m.want(2, "tidemark_batch_instances", "kind", "backfill", "state", "waiting")
	id := fmt.Sprint(later.Backfill.ID)
	m.want(2, "tidemark_batch_backfill_instances", "backfill_id", id, "backfill", later.Backfill.Name, "state", "waiting")
	m.want(0, "tidemark_batch_backfill_instances", "backfill_id", id, "backfill", later.Backfill.Name, "state", "succeeded")
	if _, ok := m.value("tidemark_batch_backfill_instances", "backfill_id", fmt.Sprint(sub.Backfill.ID), "backfill", sub.Backfill.Name, "state", "succeeded"); ok {
		t.Error("an ended backfill is listed by id")
	}
	m.wantSome("tidemark_store_query_duration_seconds", "operation", "tx batch_write")
	m.wantSome("tidemark_http_request_duration_seconds", "route", "POST /api/v1/batch/backfills", "code", "201")
	e.readiness(http.StatusOK)
}

// startDaemon runs a daemon of the configuration until the test ends and
// returns once its API listens.
func startDaemon(t *testing.T, yaml string) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	d, err := daemon.New(ctx, cfg, slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("daemon stopped with %v", err)
		}
	})
	select {
	case <-d.Ready:
	case err := <-done:
		t.Fatalf("daemon ended before it listened: %v", err)
	}
	return &env{t: t, ctx: ctx, base: "http://" + d.Addr, d: d, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

// unstartedEngine is a batch engine over the configured tasks that is
// never run.
func unstartedEngine(t *testing.T, cfg *config.Config, st *store.Store) *engine.Engine {
	t.Helper()
	g, err := dag.New(cfg.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{Store: st, Graph: g, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
