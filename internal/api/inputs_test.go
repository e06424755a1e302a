package api_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// TestConsoleOddPaths sends the console's router paths that once answered
// 500 (the overlong UTF-8 encoding of ".."), and their friends: each gets a
// 4xx, never a file from outside the console.
func TestConsoleOddPaths(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		path     string
		status   int
		location string
	}{
		{"/ui/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", http.StatusBadRequest, ""},
		{"/ui/%c0%ae%c0%ae/", http.StatusBadRequest, ""},
		{"/ui/%e0%80%ae%e0%80%ae/x", http.StatusBadRequest, ""},
		{"/ui/%00", http.StatusBadRequest, ""},
		{"/ui/index.html%00", http.StatusBadRequest, ""},
		{"/ui/%1b]0;pwned%07", http.StatusBadRequest, ""},
		{"/ui/..%5c..%5cx", http.StatusBadRequest, ""},
		{"/ui/" + strings.Repeat("%c0%ae", 3000), http.StatusBadRequest, ""},
		{"/ui/" + strings.Repeat("a/", 600), http.StatusBadRequest, ""},
		{"/ui/%2e%2e/etc/passwd", http.StatusBadRequest, ""},
		{"/ui/%2e%2e/%2e%2e/%2e%2e/etc/passwd", http.StatusBadRequest, ""},
		{"/ui/a/%2e%2e/index.html", http.StatusBadRequest, ""},
		{"/ui/index.html", http.StatusMovedPermanently, "./"},
		{"/ui/nothing.js", http.StatusNotFound, ""},
	} {
		resp, err := client.Get(e.base + c.path)
		if err != nil {
			t.Fatalf("GET %.60s: %v", c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("GET %.60s: %d (Location %q) %.80q, want %d (Location %q)",
				c.path, resp.StatusCode, resp.Header.Get("Location"), body, c.status, c.location)
		}
		if strings.Contains(string(body), "root:") {
			t.Errorf("GET %.60s: served a file outside the console", c.path)
		}
	}
}

// TestAuditCSVNeutralisesFormulas stores backfills whose name, starter and
// error start with what a spreadsheet runs as a formula, and reads them
// back as CSV (each such cell behind a single quote) and as JSON (as
// stored).
func TestAuditCSVNeutralisesFormulas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", tasks: "  - {name: extract, type: noop, schedule: daily}\n"})
	formula := `=HYPERLINK("http://evil.example","x")`
	var sub api.SubmitResponse
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills",
		`{"name": "`+strings.ReplaceAll(formula, `"`, `\"`)+`", "task": "extract", "dates": {"from": "2025-01-01", "to": "2025-01-01"}}`)
	now := time.Now()
	rec := store.Backfill{Stream: e.name, Schema: "public", Table: "gone", Status: store.StatusFailed,
		StartedBy: "@SUM(1+1)", Error: "-2+3+cmd|' /C calc'!A0", StartedAt: &now, FinishedAt: &now}
	if err := e.d.Store().CreateBackfill(e.ctx, &rec); err != nil {
		t.Fatal(err)
	}
	tabbed := store.Backfill{Stream: e.name, Schema: "public", Table: "gone", Status: store.StatusFailed,
		StartedBy: "+1", Error: "\tleading tab", StartedAt: &now, FinishedAt: &now}
	if err := e.d.Store().CreateBackfill(e.ctx, &tabbed); err != nil {
		t.Fatal(err)
	}
	cr := store.Backfill{Stream: e.name, Schema: "public", Table: "gone", Status: store.StatusFailed,
		StartedBy: "api", Error: "\r=1+1", StartedAt: &now, FinishedAt: &now}
	if err := e.d.Store().CreateBackfill(e.ctx, &cr); err != nil {
		t.Fatal(err)
	}

	r := e.do("GET", "/api/v1/audit?format=csv", "")
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if r.status != http.StatusOK || err != nil {
		t.Fatalf("audit as CSV: %d %v %s", r.status, err, r.body)
	}
	got := map[string][]string{}
	for _, row := range rows[1:] {
		got[row[0]+" "+row[1]] = row
		for i, c := range row {
			if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
				t.Errorf("%s %s: cell %s %q is a formula", row[0], row[1], rows[0][i], c)
			}
		}
	}
	col := func(key, name string) string { return got[key][slices.Index(rows[0], name)] }
	for _, c := range []struct{ key, col, want string }{
		{fmt.Sprintf("batch %d", sub.Backfill.ID), "name", "'" + formula},
		{fmt.Sprintf("stream %d", rec.ID), "started_by", "'@SUM(1+1)"},
		{fmt.Sprintf("stream %d", rec.ID), "error", "'-2+3+cmd|' /C calc'!A0"},
		{fmt.Sprintf("stream %d", tabbed.ID), "started_by", "'+1"},
		{fmt.Sprintf("stream %d", tabbed.ID), "error", "'\tleading tab"},
		{fmt.Sprintf("stream %d", cr.ID), "error", "'\r=1+1"},
		{fmt.Sprintf("stream %d", cr.ID), "started_by", "api"},
	} {
		if g := col(c.key, c.col); g != c.want {
			t.Errorf("%s %s: %q, want %q", c.key, c.col, g, c.want)
		}
	}
	// JSON is data: the values as stored.
	for _, row := range e.audit("kind=stream") {
		if row.ID == rec.ID && (row.StartedBy != rec.StartedBy || row.Error != rec.Error) {
			t.Errorf("audit as JSON: %+v", row.AuditRecord)
		}
	}

	// The node list's cells too.
	r = e.do("GET", fmt.Sprintf("/api/v1/batch/backfills/%d/nodes.csv", sub.Backfill.ID), "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "default.extract,extract,default") {
		t.Errorf("nodes.csv: %d %s", r.status, r.body)
	}
}

// TestRateAndSampleBounds sends an initiate's and a rate change's numbers
// at both ends of their ranges and past them: 1e-12 rows per second was
// accepted and paced as no limit.
func TestRateAndSampleBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)`})
	e.waitFor("public.t discovered", func() bool { _, ok := e.objects()["public.t"]; return ok })
	path := "/api/v1/streams/" + e.name + "/backfills"
	for _, body := range []string{
		`{"objects": ["t"], "rows_per_second": 1e-12}`,
		`{"objects": ["t"], "rows_per_second": 0.999}`,
		`{"objects": ["t"], "rows_per_second": -1}`,
		`{"objects": ["t"], "rows_per_second": 1000000001}`,
		`{"objects": ["t"], "rows_per_second": 1e308}`,
		`{"objects": ["t"], "sample_rows": 1000000000001}`,
		`{"objects": ["t"], "sample_rows": -1}`,
	} {
		if msg := e.fails(http.StatusBadRequest, "bad_request", "POST", path, body); !strings.Contains(msg, " to 1000000000") {
			t.Errorf("%s: %q does not name the range", body, msg)
		}
	}
	for _, body := range []string{`{"objects": ["t"], "rows_per_second": 1e999}`, `{"objects": ["t"], "rows_per_second": NaN}`,
		`{"objects": ["t"], "sample_rows": 99999999999999999999}`} {
		e.fails(http.StatusBadRequest, "bad_request", "POST", path, body)
	}
	// The upper ends, on a run kept pending.
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	b := e.initiate(http.StatusCreated, `{"objects": ["t"], "rows_per_second": 1000000000, "sample_rows": 1000000000000, "run_at": "`+later+`"}`)[0]
	patch := fmt.Sprintf("/api/v1/backfills/%d", b.ID)
	for _, rate := range []string{"1", "1000000000", "0", "12.5"} {
		e.ok(http.StatusOK, nil, "PATCH", patch, `{"rows_per_second": `+rate+`}`)
	}
	for _, rate := range []string{"1e-12", "0.5", "-1", "1000000000.5", "1e999", "NaN", `"Inf"`} {
		e.fails(http.StatusBadRequest, "bad_request", "PATCH", patch, `{"rows_per_second": `+rate+`}`)
	}
}
