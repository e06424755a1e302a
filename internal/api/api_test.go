package api_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// objects lists the stream's objects by name.
func (e *env) objects() map[string]api.ObjectView {
	e.t.Helper()
	var list []api.ObjectView
	e.ok(http.StatusOK, &list, "GET", "/api/v1/streams/"+e.name+"/objects", "")
	out := map[string]api.ObjectView{}
	for _, o := range list {
		out[o.Object] = o
	}
	return out
}

// waitLoaded waits until the objects' backfills are completed and loaded.
func (e *env) waitLoaded(objects ...string) {
	e.t.Helper()
	e.waitFor(strings.Join(objects, ", ")+" completed and loaded", func() bool {
		objs := e.objects()
		for _, name := range objects {
			o := objs[name]
			if o.Status == stream.StatusFailed {
				e.t.Fatalf("backfill of %s failed: %s", name, o.Reason)
			}
			if o.Status != stream.StatusCompleted || !o.Loaded {
				return false
			}
		}
		return true
	})
}

func (e *env) initiate(want int, body string, headers ...string) []store.Backfill {
	e.t.Helper()
	var recs []store.Backfill
	e.ok(want, &recs, "POST", "/api/v1/streams/"+e.name+"/backfills", body, headers...)
	return recs
}

func (e *env) backfills(query string) []store.Backfill {
	e.t.Helper()
	var recs []store.Backfill
	e.ok(http.StatusOK, &recs, "GET", "/api/v1/backfills?"+query, "")
	return recs
}

func TestStreamsAndObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `
		CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'x'), (2, 'y');
		CREATE TABLE nokey (v int);`})
	var list []api.StreamView
	e.ok(http.StatusOK, &list, "GET", "/api/v1/streams", "")
	if len(list) != 1 || list[0].Name != e.name || list[0].State != store.StateRunning || list[0].UpdatedAt.IsZero() {
		t.Fatalf("streams: %+v", list)
	}
	var one api.StreamView
	e.ok(http.StatusOK, &one, "GET", "/api/v1/streams/"+e.name, "")
	if one.Name != e.name || one.State != store.StateRunning {
		t.Fatalf("stream: %+v", one)
	}

	for _, r := range [][2]string{{"GET", ""}, {"GET", "/objects"}, {"POST", "/backfills"}, {"POST", "/backfills/stop"},
		{"POST", "/verify"}, {"POST", "/pause"}, {"POST", "/resume"}, {"POST", "/reset"}} {
		msg := e.fails(http.StatusNotFound, "not_found", r[0], "/api/v1/streams/nope"+r[1], `{"objects": ["public.a"]}`)
		if !strings.Contains(msg, `"nope"`) || !strings.Contains(msg, "configured streams are "+e.name) {
			t.Errorf("%s %s: message %q does not name the stream and the configured ones", r[0], r[1], msg)
		}
	}

	objs := e.objects()
	if len(objs) != 2 {
		t.Fatalf("objects: %+v", objs)
	}
	a := objs["public.a"]
	if a.Status != "-" || a.Reason != stream.ReasonManual || a.Loaded || a.BackfillID != 0 || a.Schema != "public" || a.Table != "a" {
		t.Errorf("public.a: %+v, want status - with the manual-mode reason", a)
	}
	if len(a.Columns) != 2 || a.Columns[0] != (api.ColumnView{Name: "id", Type: "integer", Key: true}) || a.Columns[1].Name != "v" || a.Columns[1].Key {
		t.Errorf("public.a columns: %+v", a.Columns)
	}
	if nk := objs["public.nokey"]; nk.Status != stream.StatusFailed || !strings.Contains(nk.Reason, "key") {
		t.Errorf("public.nokey: %+v, want failed with a reason about its key", nk)
	}

	var health map[string]string
	e.ok(http.StatusOK, &health, "GET", "/healthz", "")
	if health["status"] != "ok" {
		t.Errorf("healthz: %v", health)
	}
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/nothing", "")
	e.fails(http.StatusNotFound, "not_found", "DELETE", "/api/v1/streams", "")
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/streams/"+e.name+"/backfills", "")
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1//streams", "")
	e.fails(http.StatusNotFound, "not_found", "POST", "/api/v1/streams/"+e.name+"/./pause", "")
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/events?stream=nope", "")

	s := e.d.Streams()[0]
	e.ok(http.StatusAccepted, &one, "POST", "/api/v1/streams/"+e.name+"/pause", "")
	e.waitFor("stream paused", func() bool { return s.State().State == store.StatePaused })
	e.ok(http.StatusOK, &one, "GET", "/api/v1/streams/"+e.name, "")
	if one.State != store.StatePaused || one.Reason == "" {
		t.Errorf("paused stream: %+v", one)
	}
	e.fails(http.StatusConflict, "not_running", "POST", "/api/v1/streams/"+e.name+"/verify", "")
	e.ok(http.StatusAccepted, &one, "POST", "/api/v1/streams/"+e.name+"/resume", "")
	e.waitFor("stream running again", func() bool { return s.State().State == store.StateRunning })

	// A reset of a healthy stream reconnects it and changes no object.
	events, cancel := s.Subscribe()
	defer cancel()
	e.ok(http.StatusAccepted, &one, "POST", "/api/v1/streams/"+e.name+"/reset", "")
	e.waitFor("stream reconnected after the reset", func() bool {
		for {
			select {
			case ev := <-events:
				if ev.State != nil && ev.State.State == store.StateStarting {
					return true
				}
			default:
				return false
			}
		}
	})
	e.waitFor("stream running after the reset", func() bool { return s.State().State == store.StateRunning })
	if a := e.objects()["public.a"]; a.Status != "-" || a.Reason != stream.ReasonManual {
		t.Errorf("public.a after a reset of a healthy stream: %+v", a)
	}
	if recs := e.backfills("stream=" + e.name); len(recs) != 0 {
		t.Errorf("a reset of a healthy stream started backfills: %+v", recs)
	}
}

func TestBackfillLifecycle(t *testing.T) {
	t.Parallel()
	// slow stays Active for about 40s (200 rows, 5 per second), far longer
	// than this test needs it to; a and b fit in one chunk and complete at
	// once.
	e := newEnv(t, envOptions{backfill: "{mode: manual, chunk_size: 5, rows_per_second: 5, max_concurrent: 4}", setup: `
		CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 3);
		CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b SELECT generate_series(1, 2);
		CREATE TABLE slow (id int PRIMARY KEY); INSERT INTO slow SELECT generate_series(1, 200);`})
	bStream := "/api/v1/streams/" + e.name

	recs := e.initiate(http.StatusCreated, `{"objects": ["public.a", "b", "a"]}`, "X-Tidemark-Client", "cli")
	if len(recs) != 2 || recs[0].Table != "a" || recs[1].Table != "b" {
		t.Fatalf("initiate a, b: %+v", recs)
	}
	for _, r := range recs {
		if r.ID == 0 || r.Stream != e.name || r.Schema != "public" || r.StartedBy != store.StartedByCLI || r.Status != stream.StatusPending {
			t.Errorf("new backfill: %+v", r)
		}
	}
	slow := e.initiate(http.StatusCreated, `{"objects": ["public.slow"]}`)
	if len(slow) != 1 || slow[0].StartedBy != store.StartedByAPI {
		t.Fatalf("initiate slow: %+v", slow)
	}
	msg := e.fails(http.StatusConflict, "refused", "POST", bStream+"/backfills", `{"objects": ["public.slow"]}`)
	if !strings.Contains(msg, "public.slow") || !(strings.Contains(msg, "is pending") || strings.Contains(msg, "is active")) {
		t.Errorf("refusal %q does not name the object and its status", msg)
	}
	// A request with one refusal starts nothing.
	e.fails(http.StatusConflict, "refused", "POST", bStream+"/backfills", `{"objects": ["public.a", "public.slow"]}`)
	// An object that does not exist is a 404 naming it (issue 16), not a
	// refusal.
	msg = e.fails(http.StatusNotFound, "not_found", "POST", bStream+"/backfills", `{"objects": ["public.nope"]}`)
	if !strings.Contains(msg, "no object public.nope in stream "+e.name) {
		t.Errorf("unknown object: %q", msg)
	}

	e.waitLoaded("public.a", "public.b")
	if o := e.objects()["public.a"]; o.BackfillID != recs[0].ID || o.Reason != "" {
		t.Errorf("completed object: %+v", o)
	}
	msg = e.fails(http.StatusConflict, "refused", "POST", bStream+"/backfills/stop", `{"objects": ["public.a"]}`)
	if !strings.Contains(msg, "already completed") {
		t.Errorf("stop of a completed backfill: %q", msg)
	}
	e.fails(http.StatusNotFound, "not_found", "POST", bStream+"/backfills/stop", `{"objects": ["public.nope"]}`)
	var stopped map[string][]string
	e.ok(http.StatusOK, &stopped, "POST", bStream+"/backfills/stop", `{"objects": ["public.slow"]}`)
	if !slices.Equal(stopped["stopped"], []string{"public.slow"}) {
		t.Errorf("stop reply: %v", stopped)
	}
	if o := e.objects()["public.slow"]; o.Status != stream.StatusStopped || o.Loaded {
		t.Errorf("stopped object: %+v", o)
	}
	msg = e.fails(http.StatusConflict, "refused", "POST", bStream+"/backfills/stop", `{"objects": ["public.slow"]}`)
	if !strings.Contains(msg, "already stopped") {
		t.Errorf("second stop: %q", msg)
	}

	ids := func(recs []store.Backfill) []int64 {
		var out []int64
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	a, b, s := recs[0].ID, recs[1].ID, slow[0].ID
	for _, c := range []struct {
		query string
		want  []int64
	}{
		{"stream=" + e.name, []int64{s, b, a}},
		{"stream=" + e.name + "&object=public.a", []int64{a}},
		{"stream=" + e.name + "&object=b", []int64{b}},
		{"stream=" + e.name + "&status=completed", []int64{b, a}},
		{"stream=" + e.name + "&status=stopped", []int64{s}},
		{"stream=" + e.name + "&status=active", nil},
		{"stream=" + e.name + "&started_by=cli", []int64{b, a}},
		{"stream=" + e.name + "&started_by=api", []int64{s}},
		{"stream=" + e.name + "&started_by=cli&object=public.b&status=completed", []int64{b}},
		{"stream=" + e.name + "&limit=1", []int64{s}},
		{"stream=" + e.name + "&since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z", []int64{s, b, a}},
		{"stream=" + e.name + "&since=2999-01-01T00:00:00Z", nil},
	} {
		got := e.backfills(c.query)
		if !slices.Equal(ids(got), c.want) {
			t.Errorf("backfills?%s: ids %v, want %v", c.query, ids(got), c.want)
		}
	}
	if r := e.do("GET", "/api/v1/backfills?stream="+e.name+"&since=2999-01-01T00:00:00Z", ""); strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("an empty list is %q, want []", r.body)
	}
	// A stream that does not exist is a 404, not an empty list (issue 16).
	if msg := e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/backfills?stream=other", ""); !strings.Contains(msg, `no stream "other"`) {
		t.Errorf("backfills of an unknown stream: %q", msg)
	}

	var one store.Backfill
	e.ok(http.StatusOK, &one, "GET", fmt.Sprintf("/api/v1/backfills/%d", a), "")
	if one.ID != a || one.Status != stream.StatusCompleted || one.RowsRead != 3 || one.RowsWritten != 3 || one.LoadedAt == nil ||
		one.StartedAt == nil || one.FinishedAt == nil || one.StartedBy != store.StartedByCLI {
		t.Errorf("backfill %d: %+v", a, one)
	}
	for _, id := range []string{"abc", "0", "-1", "1.5", "99999999999999999999"} {
		e.fails(http.StatusBadRequest, "bad_request", "GET", "/api/v1/backfills/"+id, "")
	}
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/backfills/987654", "")

	// Completed and Stopped objects may be backfilled again.
	again := e.initiate(http.StatusCreated, `{"objects": ["public.a", "public.slow"]}`)
	if len(again) != 2 || again[0].ID <= s {
		t.Fatalf("initiate again: %+v", again)
	}
	e.ok(http.StatusOK, nil, "POST", bStream+"/backfills/stop", `{"objects": ["public.slow"]}`)
	e.waitLoaded("public.a")
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE a (id int PRIMARY KEY)`})
	huge := `{"objects": ["` + strings.Repeat("a", 1<<20+10) + `"]}`
	for _, route := range []string{"/backfills", "/backfills/stop", "/verify"} {
		path := "/api/v1/streams/" + e.name + route
		for _, c := range []struct{ body, code string }{
			{`{"objects": [`, "bad_request"},
			{`{"objects": ["public.a"]}{`, ""}, // trailing data is ignored
			{`{"objects": ["public.a"], "extra": 1}`, "bad_request"},
			{`{"objects": "public.a"}`, "bad_request"},
			{`{"objects": [1]}`, "bad_request"},
			{`[]`, "bad_request"},
			{`{"objects": ["public.*"]}`, "bad_request"},
			{`{"objects": ["a.b.c"]}`, "bad_request"},
			{`{"objects": [""]}`, "bad_request"},
			{`{"objects": ["public."]}`, "bad_request"},
			{`{"objects": ["\"unterminated"]}`, "bad_request"},
			{huge, "too_large"},
		} {
			r := e.do("POST", path, c.body, "Content-Type", "application/json")
			if c.code == "" {
				if r.status >= 500 {
					t.Errorf("POST %s %.60s: HTTP %d %s", route, c.body, r.status, r.body)
				}
				continue
			}
			msg, code, err := apiError(r)
			want := http.StatusBadRequest
			if c.code == "too_large" {
				want = http.StatusRequestEntityTooLarge
			}
			if err != nil || r.status != want || code != c.code {
				t.Errorf("POST %s %.60s: HTTP %d %.200s (%v), want %d %s", route, c.body, r.status, r.body, err, want, c.code)
			} else if msg == "" {
				t.Errorf("POST %s %.60s: no message", route, c.body)
			}
		}
	}
	for _, path := range []string{"/backfills", "/backfills/stop"} {
		for _, body := range []string{"", "null", `{}`, `{"objects": []}`} {
			e.fails(http.StatusBadRequest, "bad_request", "POST", "/api/v1/streams/"+e.name+path, body)
		}
	}
	verify := "/api/v1/streams/" + e.name + "/verify"
	for _, body := range []string{`{"chunk_size": -1}`, `{"chunk_size": 1000001}`, `{"chunk_size": "10"}`, `{"objects": ["x.*"]}`} {
		e.fails(http.StatusBadRequest, "bad_request", "POST", verify, body)
	}
	for _, q := range []string{"status=complete", "status=-", "limit=0", "limit=abc", "limit=100001", "since=yesterday", "until=2026-01-02", "object=a.b.c", "object=public.*"} {
		e.fails(http.StatusBadRequest, "bad_request", "GET", "/api/v1/backfills?"+q, "")
	}
}

func TestAuthTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", api: "{tokens: [{name: ci, token: tok-ci, role: operator}, {name: ops, token: tok-ops, role: operator}]}",
		setup: `CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY);`})
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer tok", "Bearer tok-ci-x", "bearer tok-ci", "Basic dG9rLWNpOg==", "tok-ci"} {
		for _, r := range [][2]string{{"GET", "/api/v1/streams"}, {"POST", "/api/v1/streams/" + e.name + "/backfills"}, {"GET", "/api/v1/events"}} {
			var headers []string
			if auth != "" {
				headers = []string{"Authorization", auth}
			}
			msg := e.fails(http.StatusUnauthorized, "unauthorized", r[0], r[1], `{"objects": ["public.a"]}`, headers...)
			if !strings.Contains(msg, "Bearer") {
				t.Errorf("401 message %q does not say how to authenticate", msg)
			}
		}
	}
	e.ok(http.StatusOK, nil, "GET", "/healthz", "")
	e.ok(http.StatusOK, nil, "GET", "/api/v1/streams", "", "Authorization", "Bearer tok-ops")
	a := e.initiate(http.StatusCreated, `{"objects": ["public.a"]}`, "Authorization", "Bearer tok-ci")
	b := e.initiate(http.StatusCreated, `{"objects": ["public.b"]}`, "Authorization", "Bearer tok-ops", "X-Tidemark-Client", "cli")
	if a[0].StartedBy != "api:ci" || b[0].StartedBy != "cli:ops" {
		t.Errorf("started_by %q and %q, want api:ci and cli:ops", a[0].StartedBy, b[0].StartedBy)
	}
	var recs []store.Backfill
	e.ok(http.StatusOK, &recs, "GET", "/api/v1/backfills?started_by=cli:ops", "", "Authorization", "Bearer tok-ci")
	if len(recs) != 1 || recs[0].ID != b[0].ID {
		t.Errorf("backfills started by cli:ops: %+v", recs)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: automatic, chunk_size: 7}", setup: `
		CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'row ' || g FROM generate_series(1, 20) g;
		CREATE TABLE b (k text PRIMARY KEY, n int); INSERT INTO b VALUES ('x', 1), ('y', 2);`})
	e.waitLoaded("public.a", "public.b")
	if recs := e.backfills("stream=" + e.name + "&started_by=automatic"); len(recs) != 2 {
		t.Fatalf("automatic backfills: %+v", recs)
	}
	path := "/api/v1/streams/" + e.name + "/verify"
	verify := func(body string) map[string]stream.ObjectCheck {
		t.Helper()
		var checks []stream.ObjectCheck
		e.ok(http.StatusOK, &checks, "POST", path, body)
		out := map[string]stream.ObjectCheck{}
		for _, c := range checks {
			out[c.Object] = c
		}
		return out
	}
	got := verify("")
	if a, b := got["public.a"], got["public.b"]; len(got) != 2 || !a.Match || !b.Match || a.SourceRows != 20 || a.DestRows != 20 ||
		len(a.Ranges) != 3 || b.SourceRows != 2 || a.Error != "" {
		t.Fatalf("verify after the backfill: %+v", got)
	}
	got = verify(`{"objects": ["public.a"], "chunk_size": 5}`)
	if a := got["public.a"]; len(got) != 1 || !a.Match || len(a.Ranges) != 5 {
		t.Fatalf("verify a in ranges of 5: %+v", got)
	}
	// An object that does not exist is a 404 naming it (issue 16), not a
	// difference.
	if msg := e.fails(http.StatusNotFound, "not_found", "POST", "/api/v1/streams/"+e.name+"/verify", `{"objects": ["public.aa"]}`); !strings.Contains(msg, "no object public.aa in stream "+e.name+"; did you mean public.a?") {
		t.Errorf("verify of an unknown object: %q", msg)
	}

	db, err := sql.Open("sqlite", "file:"+e.dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if res, err := db.ExecContext(e.ctx, `UPDATE "a" SET "v" = 'tampered' WHERE "id" = 12`); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("tampering changed %d rows", n)
	}
	got = verify(`{"objects": ["public.a", "public.b"]}`)
	a := got["public.a"]
	if a.Match || !got["public.b"].Match || a.SourceRows != 20 || a.DestRows != 20 {
		t.Fatalf("verify after tampering: %+v", got)
	}
	var bad []stream.RangeCheck
	for _, r := range a.Ranges {
		if !r.Match {
			bad = append(bad, r)
		}
	}
	if len(bad) != 1 || len(bad[0].DifferingKeys) != 1 || !slices.Equal(bad[0].DifferingKeys[0], []string{"12"}) || bad[0].SourceSum == bad[0].DestSum {
		t.Fatalf("differing ranges: %+v", bad)
	}

	// A backfill is also a reset: it repairs the tampered row.
	again := e.initiate(http.StatusCreated, `{"objects": ["public.a"]}`)
	e.waitFor("a backfilled again", func() bool {
		o := e.objects()["public.a"]
		return o.Status == stream.StatusCompleted && o.Loaded && o.BackfillID == again[0].ID
	})
	if a := verify(`{"objects": ["public.a"]}`)["public.a"]; !a.Match {
		t.Fatalf("verify after the repairing backfill: %+v", a)
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `
		CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 30);`})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/events?stream="+e.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The subscription exists once the headers arrived: nothing is missed.
	recs := e.initiate(http.StatusCreated, `{"objects": ["public.a"]}`)
	sc := bufio.NewScanner(resp.Body)
	next := func(what string, match func(stream.Event) bool) stream.Event {
		t.Helper()
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				t.Fatalf("event line %q is not data", line)
			}
			var ev stream.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if ev.Stream != e.name || (ev.Backfill == nil) == (ev.State == nil) {
				t.Fatalf("event %s", data)
			}
			if match(ev) {
				return ev
			}
		}
		t.Fatalf("events ended before %s: %v", what, sc.Err())
		return stream.Event{}
	}
	var seen []string
	ev := next("the backfill completed", func(ev stream.Event) bool {
		if ev.Backfill == nil || ev.Backfill.ID != recs[0].ID {
			return false
		}
		if len(seen) == 0 || seen[len(seen)-1] != ev.Backfill.Status {
			seen = append(seen, ev.Backfill.Status)
		}
		return ev.Backfill.Status == stream.StatusCompleted
	})
	if ev.Backfill.RowsRead != 30 || !slices.Equal(seen, []string{"pending", "active", "completed"}) {
		t.Errorf("completed event %+v after statuses %v", ev.Backfill, seen)
	}
	e.ok(http.StatusAccepted, nil, "POST", "/api/v1/streams/"+e.name+"/pause", "")
	next("the stream paused", func(ev stream.Event) bool { return ev.State != nil && ev.State.State == store.StatePaused })
	e.ok(http.StatusAccepted, nil, "POST", "/api/v1/streams/"+e.name+"/resume", "")
	next("the stream running again", func(ev stream.Event) bool { return ev.State != nil && ev.State.State == store.StateRunning })
	cancel()
	for sc.Scan() {
	}
}
