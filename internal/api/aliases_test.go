package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The renamed fields and routes of API v1 and the deprecated aliases that
// keep their old names (docs/api.md, "Words and deprecated aliases").
var (
	fieldAliases = []struct{ schema, name, alias string }{
		{"InitiateRequest", "start_at", "run_at"},
		{"SubmitResponse", "batch_backfill", "backfill"},
		{"BatchInstance", "batch_backfill_id", "backfill_id"},
		{"BatchEvent", "batch_backfill_id", "backfill_id"},
		{"PlanRequest", "start_at", "run_at"},
		{"PlanView", "start_at", "run_at"},
		{"BatchBackfill", "start_at", "run_at"},
	}
	routeAliases = [][2]string{ // the route, its deprecated alias
		{"GET /api/v1/runs/{id}", "GET /api/v1/streams/{stream}/runs/{id}"},
		{"POST /api/v1/runs/{id}/stop", "POST /api/v1/streams/{stream}/runs/{id}/stop"},
	}
)

// TestOpenAPIDeprecatedAliases: the document describes each renamed field
// and route under both names, the old one deprecated and saying which
// replaces it.
func TestOpenAPIDeprecatedAliases(t *testing.T) {
	d := openapiDoc(t)
	schemas := d.obj("schemas", d.obj("components", d.root["components"])["schemas"])
	for _, a := range fieldAliases {
		props := d.obj(a.schema+" properties", d.obj(a.schema, schemas[a.schema])["properties"])
		name, alias := d.obj(a.name, props[a.name]), d.obj(a.alias, props[a.alias])
		if name["deprecated"] == true {
			t.Errorf("%s.%s is deprecated: it is the name to use", a.schema, a.name)
		}
		if alias["deprecated"] != true || !strings.Contains(alias["description"].(string), "`"+a.name+"`") {
			t.Errorf("%s.%s: %v, want deprecated: true and a description naming `%s`", a.schema, a.alias, alias, a.name)
		}
	}
	ops := d.operations()
	for _, r := range routeAliases {
		op, old := ops[r[0]], ops[r[1]]
		if op == nil || old == nil {
			t.Errorf("%s or %s is not documented", r[0], r[1])
			continue
		}
		_, path, _ := strings.Cut(r[0], " ")
		if op["deprecated"] == true || old["deprecated"] != true || !strings.Contains(old["summary"].(string), path) {
			t.Errorf("%s must be deprecated in favour of %s, named in its summary: %v", r[1], r[0], old["summary"])
		}
	}
}

// TestDeprecatedAliasesAnswer: the API accepts and sends each renamed field
// under both names with the same value, and each route alias answers as
// the route does.
func TestDeprecatedAliasesAnswer(t *testing.T) {
	srv := idleServer(t, nil)
	call := func(method, target, body string, want int) []byte {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Fatalf("%s %s: HTTP %d, want %d: %s", method, target, rec.Code, want, rec.Body)
		}
		return rec.Body.Bytes()
	}
	decode := func(raw []byte, v any) {
		t.Helper()
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}

	// start_at, or run_at: the same start time, sent back under both.
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	for _, c := range []struct{ stream, field string }{{"alpha", "start_at"}, {"beta", "run_at"}} {
		var recs []struct {
			Status  string         `json:"status"`
			Options map[string]any `json:"options"`
		}
		decode(call("POST", "/api/v1/streams/"+c.stream+"/backfills", `{"objects": ["public.a"], "`+c.field+`": "`+at+`"}`, http.StatusCreated), &recs)
		if len(recs) != 1 || recs[0].Status != "pending" || recs[0].Options["start_at"] != at || recs[0].Options["run_at"] != at {
			t.Errorf("initiated with %s %s: %+v, want options start_at and run_at both %s", c.field, at, recs, at)
		}
	}
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	if body := call("POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.b"], "start_at": "`+at+`", "run_at": "`+later+`"}`, http.StatusBadRequest); !strings.Contains(string(body), "differ") {
		t.Errorf("start_at and run_at differing: %s", body)
	}

	// A run under /api/v1/runs and under its stream, the deprecated alias.
	var members []struct {
		RunID int64 `json:"run_id"`
	}
	decode(call("POST", "/api/v1/streams/beta/backfills", `{"objects": ["public.b", "\"my.schema\".\"T x\""], "as_one_run": true}`, http.StatusCreated), &members)
	if len(members) != 2 || members[0].RunID == 0 {
		t.Fatalf("initiated as one run: %+v", members)
	}
	id := strconv.FormatInt(members[0].RunID, 10)
	var run, alias map[string]any
	decode(call("GET", "/api/v1/runs/"+id, "", http.StatusOK), &run)
	decode(call("GET", "/api/v1/streams/beta/runs/"+id, "", http.StatusOK), &alias)
	if !reflect.DeepEqual(run, alias) || run["stream"] != "beta" {
		t.Errorf("GET /api/v1/runs/%s: %v; its alias under the stream: %v", id, run, alias)
	}
	call("GET", "/api/v1/streams/alpha/runs/"+id, "", http.StatusNotFound) // beta's
	decode(call("POST", "/api/v1/runs/"+id+"/stop", "", http.StatusOK), &run)
	if run["status"] != "stopped" {
		t.Errorf("run %s after its stop: %v", id, run)
	}
	call("POST", "/api/v1/streams/beta/runs/"+id+"/stop", "", http.StatusConflict) // ended

	// A batch backfill is batch_backfill and backfill; its instances name
	// it as batch_backfill_id and backfill_id.
	var sub map[string]json.RawMessage
	decode(call("POST", "/api/v1/batch/backfills", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-02"}}`, http.StatusCreated), &sub)
	if string(sub["batch_backfill"]) == "" || string(sub["batch_backfill"]) != string(sub["backfill"]) {
		t.Fatalf("submitted: batch_backfill %s, backfill %s, want the same object", sub["batch_backfill"], sub["backfill"])
	}

	// A batch backfill's start_at, or run_at: the same time in the plan
	// and the batch backfill, under both names.
	for i, field := range []string{"start_at", "run_at"} {
		type times struct {
			StartAt string `json:"start_at"`
			RunAt   string `json:"run_at"`
		}
		var got struct {
			BatchBackfill times `json:"batch_backfill"`
			Plan          times `json:"plan"`
		}
		decode(call("POST", "/api/v1/batch/backfills", `{"task": "a", "dates": {"from": "2025-02-0`+strconv.Itoa(i+1)+`", "to": "2025-02-0`+strconv.Itoa(i+1)+`"}, "`+field+`": "`+at+`"}`, http.StatusCreated), &got)
		for what, v := range map[string][2]string{"batch_backfill": {got.BatchBackfill.StartAt, got.BatchBackfill.RunAt}, "plan": {got.Plan.StartAt, got.Plan.RunAt}} {
			if start, err := time.Parse(time.RFC3339, v[0]); err != nil || start.Format(time.RFC3339) != at || v[1] != v[0] {
				t.Errorf("batch backfill submitted with %s %s: its %s has start_at %q, run_at %q", field, at, what, v[0], v[1])
			}
		}
	}
	if body := call("POST", "/api/v1/batch/preview", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-01"}, "start_at": "`+at+`", "run_at": "`+later+`"}`, http.StatusBadRequest); !strings.Contains(string(body), "differ") {
		t.Errorf("a batch request's start_at and run_at differing: %s", body)
	}
	var bf struct {
		ID int64 `json:"id"`
	}
	decode(sub["batch_backfill"], &bf)
	var ins []struct {
		BatchBackfillID int64 `json:"batch_backfill_id"`
		BackfillID      int64 `json:"backfill_id"`
	}
	decode(call("GET", "/api/v1/batch/backfills/"+strconv.FormatInt(bf.ID, 10)+"/instances", "", http.StatusOK), &ins)
	if len(ins) == 0 {
		t.Fatal("the batch backfill has no instances")
	}
	for _, in := range ins {
		if in.BatchBackfillID != bf.ID || in.BackfillID != bf.ID {
			t.Errorf("an instance of batch backfill %d: batch_backfill_id %d, backfill_id %d", bf.ID, in.BatchBackfillID, in.BackfillID)
		}
	}
}

// TestEventsSendBothNames: the event stream sends a backfill's start time
// and a batch event's batch backfill under both names too.
func TestEventsSendBothNames(t *testing.T) {
	srv := httptest.NewServer(idleServer(t, nil))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	post := func(path, body string) {
		t.Helper()
		r, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: HTTP %d", path, r.StatusCode)
		}
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	post("/api/v1/streams/alpha/backfills", `{"objects": ["public.a"], "start_at": "`+at+`"}`)
	post("/api/v1/batch/backfills", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-01"}}`)

	var sawBackfill, sawBatch bool
	var batchKinds []string // of the batch backfill's events, in order
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for !(sawBackfill && sawBatch && len(batchKinds) >= 2) && lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Backfill *struct {
				Options map[string]any `json:"options"`
			} `json:"backfill"`
			Kind            string `json:"kind"`
			BatchBackfillID int64  `json:"batch_backfill_id"`
			BackfillID      int64  `json:"backfill_id"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch {
		case ev.Backfill != nil:
			if ev.Backfill.Options["start_at"] != at || ev.Backfill.Options["run_at"] != at {
				t.Errorf("a backfill event's options: %v, want start_at and run_at %s", ev.Backfill.Options, at)
			}
			sawBackfill = true
		case ev.Kind != "":
			if ev.BatchBackfillID == 0 || ev.BackfillID != ev.BatchBackfillID {
				t.Errorf("a batch event: %s, want batch_backfill_id and backfill_id the same", data)
			}
			if ev.Kind != "instance" {
				batchKinds = append(batchKinds, ev.Kind)
			}
			sawBatch = true
		}
	}
	if !sawBackfill || !sawBatch || len(batchKinds) < 2 {
		t.Fatalf("the event stream ended (%v) before a backfill event (%v), a batch event (%v) and two of the batch backfill (%v)", lines.Err(), sawBackfill, sawBatch, batchKinds)
	}
	// A batch backfill's change comes as batch_backfill, then again under
	// its deprecated kind.
	if batchKinds[0] != "batch_backfill" || batchKinds[1] != "backfill" {
		t.Errorf("a batch backfill's change was sent as kinds %v, want batch_backfill then its deprecated alias backfill", batchKinds)
	}
}
