package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
)

// fakeDaemon serves the events in events (then holds the stream open, as
// if later events were dropped) and the records in records by path.
func fakeDaemon(t *testing.T, events []string, records map[string]any) *globals {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" {
			if s := r.URL.Query().Get("stream"); s != "" && s != "s" {
				w.WriteHeader(http.StatusNotFound)
				json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found",
					"message": fmt.Sprintf("no stream %q: the configured streams are s", s)}})
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range events {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		rec, ok := records[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(rec)
	}))
	t.Cleanup(srv.Close)
	return &globals{addr: srv.URL}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func streamEvent(t *testing.T, b store.Backfill) string {
	return jsonOf(t, map[string]any{"stream": "s", "backfill": b})
}

func TestEventStreamDecodes(t *testing.T) {
	b := store.Backfill{ID: 1, Stream: "s", Schema: "public", Table: "t", Status: store.StatusActive, RowsRead: 5}
	g := fakeDaemon(t, []string{
		`{"stream":"s","state":{"name":"s","state":"paused","reason":"paused by request"}}`,
		streamEvent(t, b),
		`{"stream":"s","lag":{"over":true}}`,
		`{"kind":"instance","backfill_id":7,"instance_id":3,"task":"sales.load","state":"running","time":"2026-01-02T15:04:05Z"}`,
		`not json`,
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	es, err := g.client().subscribe(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	first, second := <-es.events, <-es.events
	if first.Backfill == nil || first.Backfill.ID != 1 || first.Backfill.RowsRead != 5 || first.Kind != "" {
		t.Errorf("first event: %+v", first)
	}
	if second.Backfill != nil || second.Kind != "instance" || second.BackfillID != 7 || second.InstanceID != 3 || second.State != "running" {
		t.Errorf("second event: %+v", second)
	}
	es.Close()
	for range es.events { // closed once the reader stops
	}

	_, err = g.client().subscribe(ctx, "shop")
	if err == nil || !strings.Contains(err.Error(), `no stream "shop"`) {
		t.Errorf("subscribe to an unknown stream: %v", err)
	}
}

// Backfill 1's last events are dropped: the read of its record ends it.
// Backfill 2 fails: the exit is an error naming it.
func TestFollowBackfills(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	one := store.Backfill{ID: 1, Stream: "s", Schema: "public", Table: "t", Status: store.StatusPending}
	two := store.Backfill{ID: 2, Stream: "s", Schema: "public", Table: "u", Status: store.StatusPending}
	oneActive := one
	oneActive.Status, oneActive.RowsRead, oneActive.RowsWritten, oneActive.Chunks = store.StatusActive, 10, 10, 2
	twoFailed := two
	twoFailed.Status, twoFailed.Error = store.StatusFailed, "boom"
	oneDone := oneActive
	oneDone.Status, oneDone.RowsRead, oneDone.RowsWritten, oneDone.Chunks, oneDone.LoadedAt = store.StatusCompleted, 30, 30, 6, &now
	events := []string{streamEvent(t, oneActive), streamEvent(t, oneActive), streamEvent(t, twoFailed)}
	records := map[string]any{"/api/v1/backfills/1": oneDone, "/api/v1/backfills/2": twoFailed}

	for _, asJSON := range []bool{true, false} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			t.Parallel()
			g := fakeDaemon(t, events, records)
			var out bytes.Buffer
			g.stdout, g.json = &out, asJSON
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			es, err := g.client().subscribe(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			defer es.Close()
			err = g.followBackfills(ctx, es, []store.Backfill{one, two})
			if err == nil || err.Error() != "backfill 2 of public.u failed: boom" {
				t.Errorf("error: %v", err)
			}
			if !asJSON {
				for _, want := range []string{"backfill 1 of public.t: pending, 0 rows read", "backfill 2 of public.u: failed: boom",
					"backfill 1 of public.t: completed, 30 rows read, 30 written, 6 chunks\n"} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("output lacks %q:\n%s", want, out.String())
					}
				}
				return
			}
			// Each change once, as a JSON line.
			var got []string
			for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				var b store.Backfill
				if err := json.Unmarshal([]byte(line), &b); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				got = append(got, fmt.Sprintf("%d %s %d", b.ID, b.Status, b.RowsWritten))
			}
			want := "1 pending 0|2 pending 0|1 active 10|2 failed 0|1 completed 30"
			if strings.Join(got, "|") != want {
				t.Errorf("lines %q, want %q", strings.Join(got, "|"), want)
			}
		})
	}
}

// The end of the batch backfill is missed: the read of its record ends it,
// and --json still ends with the backfill's final state. It prints the
// API's events, but not the copies under the deprecated kind.
func TestFollowBatchJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	ev := func(kind string, backfill, instance int64, state string) string {
		e := engine.Event{Kind: kind, BackfillID: backfill, InstanceID: instance, State: state, Time: at}
		if kind == "instance" {
			e.Task = "sales.load"
		}
		return jsonOf(t, api.BatchEvent(e))
	}
	events := []string{
		ev(engine.KindBatchBackfill, 7, 0, "running"),
		ev(api.DeprecatedBatchBackfillKind, 7, 0, "running"), // the same, for v1 clients
		ev("instance", 7, 1, "running"),
		ev("instance", 8, 5, "running"), // another backfill's
		ev("instance", 7, 1, "succeeded"),
	}
	rec := api.BatchBackfillView{ID: 7, State: store.BatchSucceeded, Instances: 1, FinishedAt: &at, States: map[string]int{"succeeded": 1}}
	g := fakeDaemon(t, events, map[string]any{"/api/v1/batch/backfills/7": rec})
	var out bytes.Buffer
	g.stdout, g.json = &out, true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	es, err := g.client().subscribe(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	if err := g.followBatch(ctx, es, api.BatchBackfillView{ID: 7, State: store.BatchRunning, Instances: 1}); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{events[0], events[2], events[4], ev(engine.KindBatchBackfill, 7, 0, "succeeded")}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant\n%s", out.String(), want)
	}
}
