package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/metrics"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types streams open
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// daemonState is a metadata store and two streams that never run (their
// source is unreachable), as a daemon holds them before it runs.
type daemonState struct {
	st      *store.Store
	streams []*stream.Stream
}

func newDaemonState(t *testing.T) daemonState {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse(fmt.Appendf(nil, `
streams:
  - name: alpha
    source: {dsn: "postgres://nobody@127.0.0.1:1/none"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
  - name: beta
    source: {dsn: "postgres://nobody@127.0.0.1:1/none"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
`, filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d := daemonState{st: st}
	for _, sc := range cfg.Streams {
		s := stream.New(sc, st, slog.New(slog.DiscardHandler), stream.Options{})
		if err := s.MarkNotStarted(t.Context()); err != nil {
			t.Fatal(err)
		}
		d.streams = append(d.streams, s)
	}
	return d
}

// The collector reads stream states from the streams and object, backfill
// and batch figures from the store; objects of streams no longer configured
// are left out.
func TestCollector(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t)
	ctx := t.Context()
	b := &store.Backfill{Stream: "alpha", Schema: "public", Table: "orders", StartedBy: "cli", Status: store.StatusCompleted}
	must(t, d.st.CreateBackfill(ctx, b))
	b.RowsRead, b.RowsWritten, b.Chunks = 120, 118, 3
	must(t, d.st.UpdateBackfill(ctx, *b))
	failed := &store.Backfill{Stream: "alpha", Schema: "public", Table: "bad", StartedBy: "automatic", Status: store.StatusFailed}
	must(t, d.st.CreateBackfill(ctx, failed))
	must(t, d.st.PutObject(ctx, store.Object{Stream: "alpha", Schema: "public", Table: "orders", Status: store.StatusCompleted, Loaded: true, BackfillID: b.ID}))
	must(t, d.st.PutObject(ctx, store.Object{Stream: "alpha", Schema: "public", Table: "bad", Status: store.StatusFailed, Reason: "no key", BackfillID: failed.ID}))
	must(t, d.st.PutObject(ctx, store.Object{Stream: "gone", Schema: "public", Table: "old"}))
	runAt := time.Now().Add(time.Hour)
	bb := &store.BatchBackfill{Name: "nightly_1", Task: "p.a", StartedBy: "cli", RunAt: runAt}
	inst := store.BatchInstance{Task: "p.a", BizTime: runAt, BizEnd: runAt.Add(time.Hour), Scheduled: runAt, ResourceGroup: "default"}
	must(t, d.st.CreateBatchBackfill(ctx, bb, []store.BatchInstance{inst, inst}, nil))
	inst.BizTime = inst.BizTime.Add(time.Hour)
	_, _, err := d.st.EnsureScheduledInstance(ctx, inst, nil)
	must(t, err)

	c := metrics.NewCollector(metrics.Sources{Streams: d.streams[:1], Store: d.st, Batch: true})
	want := fmt.Sprintf(`
# HELP tidemark_backfill_rows_written Rows the object's latest backfill run wrote to the destination.
# TYPE tidemark_backfill_rows_written gauge
tidemark_backfill_rows_written{object="public.bad",stream="alpha"} 0
tidemark_backfill_rows_written{object="public.orders",stream="alpha"} 118
# HELP tidemark_backfills Backfills of the stream's tables by status, every backfill ever recorded.
# TYPE tidemark_backfills gauge
tidemark_backfills{status="active",stream="alpha"} 0
tidemark_backfills{status="completed",stream="alpha"} 1
tidemark_backfills{status="failed",stream="alpha"} 1
tidemark_backfills{status="pending",stream="alpha"} 0
tidemark_backfills{status="stopped",stream="alpha"} 0
# HELP tidemark_backfill_runs Deprecated: tidemark_backfills under its old name, removed in the next release.
# TYPE tidemark_backfill_runs gauge
tidemark_backfill_runs{status="active",stream="alpha"} 0
tidemark_backfill_runs{status="completed",stream="alpha"} 1
tidemark_backfill_runs{status="failed",stream="alpha"} 1
tidemark_backfill_runs{status="pending",stream="alpha"} 0
tidemark_backfill_runs{status="stopped",stream="alpha"} 0
# HELP tidemark_batch_backfill_instances Instances of each batch backfill that has not ended (waiting, running or blocked), by instance state.
# TYPE tidemark_batch_backfill_instances gauge
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="blocked"} 0
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="dry_run"} 0
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="failed"} 0
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="running"} 0
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="stopped"} 0
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="succeeded"} 0
tidemark_batch_backfill_instances{backfill="nightly_1",backfill_id="%[1]d",state="waiting"} 2
# HELP tidemark_object_status The object's backfill status: 1 for the current status (none: no backfill), 0 for the others.
# TYPE tidemark_object_status gauge
tidemark_object_status{object="public.bad",status="active",stream="alpha"} 0
tidemark_object_status{object="public.bad",status="completed",stream="alpha"} 0
tidemark_object_status{object="public.bad",status="failed",stream="alpha"} 1
tidemark_object_status{object="public.bad",status="none",stream="alpha"} 0
tidemark_object_status{object="public.bad",status="pending",stream="alpha"} 0
tidemark_object_status{object="public.bad",status="stopped",stream="alpha"} 0
tidemark_object_status{object="public.orders",status="active",stream="alpha"} 0
tidemark_object_status{object="public.orders",status="completed",stream="alpha"} 1
tidemark_object_status{object="public.orders",status="failed",stream="alpha"} 0
tidemark_object_status{object="public.orders",status="none",stream="alpha"} 0
tidemark_object_status{object="public.orders",status="pending",stream="alpha"} 0
tidemark_object_status{object="public.orders",status="stopped",stream="alpha"} 0
# HELP tidemark_stream_events_total Changes from the source's log committed to the destination (not backfilled rows).
# TYPE tidemark_stream_events_total counter
tidemark_stream_events_total{stream="alpha"} 0
# HELP tidemark_stream_snapshot_hold_seconds How long a first start's initial load in the replication slot's exported snapshot has held the live stream and the source's cleanup horizon (xmin) back; 0 when none is held.
# TYPE tidemark_stream_snapshot_hold_seconds gauge
tidemark_stream_snapshot_hold_seconds{stream="alpha"} 0
# HELP tidemark_stream_state The stream's lifecycle state: 1 for the current state, 0 for the others.
# TYPE tidemark_stream_state gauge
tidemark_stream_state{state="failed",stream="alpha"} 0
tidemark_stream_state{state="not_started",stream="alpha"} 1
tidemark_stream_state{state="paused",stream="alpha"} 0
tidemark_stream_state{state="retrying",stream="alpha"} 0
tidemark_stream_state{state="running",stream="alpha"} 0
tidemark_stream_state{state="starting",stream="alpha"} 0
`, bb.ID)
	names := []string{"tidemark_backfill_rows_written", "tidemark_backfills", "tidemark_backfill_runs", "tidemark_batch_backfill_instances",
		"tidemark_object_status", "tidemark_stream_events_total", "tidemark_stream_snapshot_hold_seconds", "tidemark_stream_state"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	counts := `
# HELP tidemark_batch_instances Task instances by state: of batch backfills (kind backfill) and of the recurring schedule (kind schedule).
# TYPE tidemark_batch_instances gauge
`
	for _, kind := range []string{"backfill", "schedule"} {
		for _, state := range []string{"blocked", "dry_run", "failed", "running", "stopped", "succeeded", "waiting"} {
			n := 0
			if state == "waiting" {
				n = map[string]int{"backfill": 2, "schedule": 1}[kind]
			}
			counts += fmt.Sprintf("tidemark_batch_instances{kind=%q,state=%q} %d\n", kind, state, n)
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(counts), "tidemark_batch_instances"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(metrics.NewCollector(metrics.Sources{Streams: d.streams, Store: d.st}), "tidemark_batch_backfills"); n != 0 {
		t.Errorf("%d batch series without tasks", n)
	}
}

// Each daemon has a registry of its own: two side by side neither clash
// nor share what they observe.
func TestRegistriesAreSeparate(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t)
	one, two := metrics.New(nil), metrics.New(nil)
	for _, r := range []*metrics.Registry{one, two} {
		must(t, r.Register(metrics.NewCollector(metrics.Sources{Streams: d.streams, Store: d.st})))
	}
	one.ObserveHTTP("GET /api/v1/streams/{stream}", 200, 3*time.Millisecond)
	one.ObserveStore("select objects", time.Millisecond)
	count := func(r *metrics.Registry, name string) int {
		t.Helper()
		n, err := testutil.GatherAndCount(r.Gatherer(), name)
		must(t, err)
		return n
	}
	if count(one, "tidemark_http_request_duration_seconds") != 1 || count(two, "tidemark_http_request_duration_seconds") != 0 {
		t.Error("a request observed in one registry shows in the other, or not in its own")
	}
	if count(one, "tidemark_store_query_duration_seconds") != 1 || count(two, "tidemark_stream_state") != 12 {
		t.Error("store durations or stream states missing")
	}
	if count(two, "go_goroutines") != 1 || count(two, "process_start_time_seconds") != 1 {
		t.Error("no Go or process collector")
	}

	rec := httptest.NewRecorder()
	one.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.Contains(string(body), `tidemark_http_request_duration_seconds_count{code="200",route="GET /api/v1/streams/{stream}"} 1`) {
		t.Errorf("HTTP %d:\n%s", rec.Code, body)
	}
}

// A store that cannot be read leaves its metrics out of the scrape; the
// streams' metrics are still served.
func TestScrapeWithoutStore(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t)
	r := metrics.New(slog.New(slog.DiscardHandler))
	must(t, r.Register(metrics.NewCollector(metrics.Sources{Streams: d.streams, Store: d.st, Timeout: time.Second})))
	d.st.Close()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil).WithContext(context.Background()))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, `tidemark_stream_state{state="not_started",stream="beta"} 1`) || strings.Contains(body, "tidemark_object_status") {
		t.Errorf("HTTP %d:\n%s", rec.Code, body)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
