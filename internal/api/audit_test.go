package api_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// auditRow is an audit record with its figures kept as JSON.
type auditRow struct {
	api.AuditRecord
	Figures json.RawMessage `json:"figures"`
}

// key is "kind id", e.g. "stream 3".
func (r auditRow) key() string { return fmt.Sprintf("%s %d", r.Kind, r.ID) }

func (e *env) audit(query string) []auditRow {
	e.t.Helper()
	var rows []auditRow
	e.ok(http.StatusOK, &rows, "GET", "/api/v1/audit?"+query, "")
	return rows
}

func keys(rows []auditRow) string {
	var ks []string
	for _, r := range rows {
		ks = append(ks, r.key())
	}
	return strings.Join(ks, ", ")
}

// compact is raw as compact JSON, "" for none.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) > 0 && json.Compact(&b, raw) != nil {
		return "not JSON: " + string(raw)
	}
	return b.String()
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

const auditTasks = `  - {name: extract, project: sales, type: noop, schedule: daily}
  - {name: broken, project: sales, type: shell, schedule: daily, command: "echo cannot, \"really\" >&2; exit 3"}
`

// The audit trail over a daemon with a stream and recurring tasks: two
// stream backfills and two batch backfills, started alternately by the CLI
// and the API, listed newest first, filtered by kind, state, who, object,
// task and time, limited after the merge, as JSON and as CSV; and every
// bad filter refused.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", tasks: auditTasks,
		setup: `CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 20);
			CREATE TABLE b (id int PRIMARY KEY, note text); INSERT INTO b VALUES (1, 'x'), (2, 'y')`})
	submit := func(body string, wantState string, headers ...string) store.BatchBackfill {
		t.Helper()
		var sub api.SubmitResponse
		e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills", body, headers...)
		var b store.BatchBackfill
		e.waitFor("batch backfill "+sub.Backfill.Name+" to end", func() bool {
			e.ok(http.StatusOK, &b, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", sub.Backfill.ID), "")
			return b.FinishedAt != nil
		})
		if b.State != wantState {
			t.Fatalf("batch backfill %+v, want it %s", b, wantState)
		}
		return b
	}

	// Oldest first: s1 (cli), b1 (cli), s2 (api), b2 (api, failed).
	s1 := e.initiate(http.StatusCreated, `{"objects": ["public.a"]}`, "X-Tidemark-Client", "cli")[0]
	e.waitLoaded("public.a")
	// A name with a comma, quotes and a line break, for the CSV's quoting.
	b1 := submit(`{"name": "january, \"q1\"\nrerun", "task": "extract", "dates": {"from": "2025-01-01", "to": "2025-01-02"}}`, store.BatchSucceeded, "X-Tidemark-Client", "cli")
	s2 := e.initiate(http.StatusCreated, `{"objects": ["b"]}`)[0]
	e.waitLoaded("public.b")
	b2 := submit(`{"task": "sales.broken", "dates": {"from": "2025-01-01", "to": "2025-01-01"}}`, store.BatchFailed)
	S1, S2 := fmt.Sprintf("stream %d", s1.ID), fmt.Sprintf("stream %d", s2.ID)
	B1, B2 := fmt.Sprintf("batch %d", b1.ID), fmt.Sprintf("batch %d", b2.ID)

	all := e.audit("")
	if got, want := keys(all), strings.Join([]string{B2, S2, B1, S1}, ", "); got != want {
		t.Fatalf("audit trail %s, want %s", got, want)
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Errorf("record %d (%s) is newer than record %d (%s)", i, all[i].CreatedAt, i-1, all[i-1].CreatedAt)
		}
	}
	byKey := map[string]auditRow{}
	for _, r := range all {
		byKey[r.key()] = r
	}
	// The records of each kind, field by field.
	if r := byKey[S1]; r.Name != e.name+"/public.a" || r.Object != "public.a" || r.Stream != e.name || r.Task != "" ||
		r.State != store.StatusCompleted || r.StartedBy != "cli" || !r.CreatedAt.Equal(s1.CreatedAt) ||
		r.StartedAt == nil || r.FinishedAt == nil || r.Error != "" || r.Options != nil ||
		!jsonEqual(r.Figures, []byte(`{"rows_read": 20, "rows_written": 20, "bytes": `+strconv.FormatInt(e.backfill(s1.ID).Bytes, 10)+`, "chunks": 1}`)) {
		t.Errorf("stream record %+v (figures %s)", r, r.Figures)
	}
	if r := byKey[S2]; r.Name != e.name+"/public.b" || r.State != store.StatusCompleted || r.StartedBy != "api" {
		t.Errorf("stream record %+v", r)
	}
	var opts map[string]any
	if r := byKey[B1]; r.Name != "january, \"q1\"\nrerun" || r.Task != "sales.extract" || r.Object != "" || r.Stream != "" ||
		r.State != store.BatchSucceeded || r.StartedBy != "cli" || !r.CreatedAt.Equal(b1.CreatedAt) || r.FinishedAt == nil ||
		json.Unmarshal(r.Options, &opts) != nil || opts["task"] != "extract" || opts["dates"] == nil ||
		!jsonEqual(r.Figures, []byte(`{"instances": 2, "states": {"succeeded": 2}}`)) {
		t.Errorf("batch record %+v (options %s, figures %s)", r, r.Options, r.Figures)
	}
	if r := byKey[B2]; r.Task != "sales.broken" || r.State != store.BatchFailed || r.StartedBy != "api" || r.Error == "" ||
		!jsonEqual(r.Figures, []byte(`{"instances": 1, "states": {"failed": 1}}`)) {
		t.Errorf("batch record %+v (figures %s)", r, r.Figures)
	}

	at := func(r auditRow) string { return url.QueryEscape(r.CreatedAt.Format(time.RFC3339Nano)) }
	for _, c := range []struct{ query, want string }{
		{"kind=stream", S2 + ", " + S1},
		{"kind=batch", B2 + ", " + B1},
		{"state=completed", S2 + ", " + S1},
		{"state=succeeded", B1},
		{"state=failed", B2},
		{"kind=stream&state=failed", ""},
		{"state=stopped", ""},
		{"started_by=cli", B1 + ", " + S1},
		{"started_by=api", B2 + ", " + S2},
		{"started_by=api&kind=stream", S2},
		{"started_by=api:ci", ""},
		{"stream=" + e.name, S2 + ", " + S1},
		{"object=a", S1},
		{"object=public.b&state=completed&started_by=api", S2},
		{"task=sales.broken", B2},
		{"task=sales.extract&state=succeeded&started_by=cli", B1},
		{"since=" + at(byKey[B1]), B2 + ", " + S2 + ", " + B1},
		{"until=" + at(byKey[B1]), S1},
		{"since=" + at(byKey[S2]) + "&until=" + at(byKey[B2]), S2},
		{"since=2100-01-01T00:00:00Z", ""},
		{"until=2000-01-01T00:00:00%2B02:00", ""},
		{"limit=1", B2},
		{"limit=3", B2 + ", " + S2 + ", " + B1},
		{"limit=100000", B2 + ", " + S2 + ", " + B1 + ", " + S1},
		{"kind=stream&limit=1", S2},
		{"started_by=cli&limit=1", B1},
		{"format=json", B2 + ", " + S2 + ", " + B1 + ", " + S1},
	} {
		if got := keys(e.audit(c.query)); got != c.want {
			t.Errorf("audit?%s = [%s], want [%s]", c.query, got, c.want)
		}
	}
	if r := e.do("GET", "/api/v1/audit?state=stopped", ""); strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("no match: %s, want []", r.body)
	}
	// A stream that does not exist is a 404, not an empty trail (issue 16).
	if msg := e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/audit?stream=nope", ""); !strings.Contains(msg, `no stream "nope"`) {
		t.Errorf("audit of an unknown stream: %q", msg)
	}

	// CSV: a header row and one row per record, as the JSON has them.
	r := e.do("GET", "/api/v1/audit?format=csv", "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		r.header.Get("Content-Disposition") != `attachment; filename="tidemark-audit.csv"` {
		t.Fatalf("CSV: HTTP %d %v %s", r.status, r.header, r.body)
	}
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v in %s", err, r.body)
	}
	header := []string{"kind", "id", "name", "object", "stream", "task", "state", "started_by",
		"created_at", "started_at", "finished_at", "error", "options", "figures"}
	if len(rows) != 1+len(all) || !slices.Equal(rows[0], header) {
		t.Fatalf("CSV rows %q, want the header %q and %d records", rows, header, len(all))
	}
	timeCell := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	for i, rec := range all {
		row := rows[i+1]
		want := []string{rec.Kind, strconv.FormatInt(rec.ID, 10), rec.Name, rec.Object, rec.Stream, rec.Task, rec.State, rec.StartedBy,
			timeCell(&rec.CreatedAt), timeCell(rec.StartedAt), timeCell(rec.FinishedAt), rec.Error}
		if !slices.Equal(row[:12], want) {
			t.Errorf("CSV row %d = %q, want %q", i+1, row[:12], want)
		}
		if row[12] != compact(rec.Options) {
			t.Errorf("CSV row %d options %q, want %s compact", i+1, row[12], rec.Options)
		}
		if !jsonEqual([]byte(row[13]), rec.Figures) || row[13] != compact(rec.Figures) {
			t.Errorf("CSV row %d figures %q, want %s compact", i+1, row[13], rec.Figures)
		}
	}
	// Accept: text/csv asks for the same CSV; format wins over Accept.
	if r2 := e.do("GET", "/api/v1/audit", "", "Accept", "text/csv"); r2.status != http.StatusOK || !bytes.Equal(r2.body, r.body) {
		t.Errorf("Accept: text/csv: HTTP %d %s, want the CSV", r2.status, r2.body)
	}
	for _, c := range []struct{ query, accept string }{{"format=json", "text/csv"}, {"", "application/json, text/csv"}, {"", "*/*"}} {
		r2 := e.do("GET", "/api/v1/audit?"+c.query, "", "Accept", c.accept)
		var recs []auditRow
		if r2.header.Get("Content-Type") != "application/json" || json.Unmarshal(r2.body, &recs) != nil || len(recs) != len(all) {
			t.Errorf("audit?%s with Accept %q: %v %s, want JSON", c.query, c.accept, r2.header, r2.body)
		}
	}
	r = e.do("GET", "/api/v1/audit?format=csv&kind=batch&limit=1", "")
	if rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll(); err != nil || len(rows) != 2 || rows[1][0] != "batch" || rows[1][1] != strconv.FormatInt(b2.ID, 10) {
		t.Errorf("filtered CSV: %q (%v)", rows, err)
	}

	// Bad filters: 400 bad_request saying what is accepted.
	for _, c := range []struct{ query, want string }{
		{"kind=tables", "use stream or batch"},
		{"kind=Stream", "use stream or batch"},
		{"state=done", "pending, active, completed, stopped or failed (stream backfills) or waiting, running, succeeded, failed, stopped or blocked (batch backfills)"},
		{"kind=batch&state=active", "not a batch backfill state"},
		{"kind=stream&state=succeeded", "not a stream backfill status: use pending"},
		{"task=sales.extract&state=completed", "not a batch backfill state"},
		{"object=public.a&state=running", "not a stream backfill status"},
		{"kind=batch&stream=" + e.name, "kind=batch"},
		{"kind=batch&object=public.a", "kind=batch"},
		{"kind=stream&task=sales.extract", "kind=stream"},
		{"task=sales.extract&stream=" + e.name, "one or the other"},
		{"object=public.*", "not an object name"},
		{"object=a.b.c", "not an object name"},
		{"since=yesterday", "RFC 3339"},
		{"until=2026-01-02", "RFC 3339"},
		{"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "not after since"},
		{"since=2026-01-02T00:00:00Z&until=2026-01-02T00:00:00Z", "not after since"},
		{"limit=0", "1 to 100000"},
		{"limit=100001", "1 to 100000"},
		{"limit=many", "1 to 100000"},
		{"format=xml", "use json or csv"},
		{"who=cli", "unknown parameter \"who\""},
		{"kind=stream&kind=batch", "give it once"},
	} {
		msg := e.fails(http.StatusBadRequest, "bad_request", "GET", "/api/v1/audit?"+c.query, "")
		if !strings.Contains(msg, c.want) {
			t.Errorf("audit?%s: %q, want %q in it", c.query, msg, c.want)
		}
	}
}

// backfill is one stream backfill run.
func (e *env) backfill(id int64) store.Backfill {
	e.t.Helper()
	var b store.Backfill
	e.ok(http.StatusOK, &b, "GET", fmt.Sprintf("/api/v1/backfills/%d", id), "")
	return b
}

// The audit route asks for a token like the others.
func TestAuditNeedsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", api: "{tokens: [{name: ci, token: tok-ci, role: viewer}]}"})
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/audit", "")
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/audit?format=csv", "", "Authorization", "Bearer nope")
	var recs []auditRow
	e.ok(http.StatusOK, &recs, "GET", "/api/v1/audit", "", "Authorization", "Bearer tok-ci")
	if recs == nil || len(recs) != 0 {
		t.Errorf("audit of nothing = %#v, want []", recs)
	}
}
