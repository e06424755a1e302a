package cli_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// `tidemark audit` against a real daemon with a stream and recurring
// tasks: a stream backfill and two batch backfills (one failing) in one
// trail, newest first, as CSV, as a table and as JSON, filtered; and bad
// filters with the usage exit code.
func TestAuditEndToEnd(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 10) g`)
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:%d"}
streams:
  - name: s
    source: {dsn: "%s", status_interval: 1s}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: {mode: manual}
    batch: {max_delay: 20ms}
    retry: {initial: 50ms, max: 1s}
tasks:
  - {name: extract, project: sales, type: shell, schedule: daily, command: "echo extracting ${bizdate}"}
  - {name: broken, project: sales, type: shell, schedule: daily, command: "exit 3"}
`, filepath.Join(dir, "meta.db"), port, dsn, filepath.Join(dir, "dest.db")), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg, filepath.Join(dir, "daemon.log"))
	addr := []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", port)}
	cli := func(args ...string) result { t.Helper(); return tidemark(t, append(addr, args...)...) }
	poll(t, d, "the API", func() bool { return cli("tasks").code == 0 })
	poll(t, d, "public.t discovered", func() bool { return strings.Contains(cli("objects", "s").stdout, "public.t") })

	// Oldest first: the stream backfill (1), extract (batch 1), broken (batch 2).
	expect(t, 0, []string{"backfill 1 of public.t: pending"}, append(addr, "backfill", "initiate", "s", "public.t")...)
	poll(t, d, "the backfill of public.t to complete", func() bool {
		var recs []api.AuditRecord
		r := cli("audit", "--kind", "stream", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			t.Fatalf("audit --json: %v in %s", err, r)
		}
		return len(recs) == 1 && recs[0].State == store.StatusCompleted
	})
	if r := cli("batch", "backfill", "extract", "--from", "2025-01-11", "--to", "2025-01-12", "--wait"); r.code != 0 || !strings.Contains(r.stdout, "backfill 1 succeeded") {
		t.Fatalf("batch backfill extract: %s", r)
	}
	if r := cli("batch", "backfill", "broken", "--from", "2025-01-11", "--wait"); r.code != 1 || !strings.Contains(r.stderr, "backfill 2 failed") {
		t.Fatalf("batch backfill broken: %s", r)
	}

	// CSV: the header row, then one row per backfill, newest first.
	r := cli("audit", "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if r.code != 0 || err != nil {
		t.Fatalf("audit --format csv: %v in %s", err, r)
	}
	header := []string{"kind", "id", "name", "object", "stream", "task", "state", "started_by",
		"created_at", "started_at", "finished_at", "error", "options", "figures"}
	if len(rows) != 4 || !slices.Equal(rows[0], header) {
		t.Fatalf("audit --format csv: %q", rows)
	}
	col := func(row []string, name string) string { return row[slices.Index(header, name)] }
	for i, want := range [][]string{
		{"batch", "2", "sales.broken", "failed", "cli"},
		{"batch", "1", "sales.extract", "succeeded", "cli"},
		{"stream", "1", "", "completed", "cli"},
	} {
		row := rows[i+1]
		if got := []string{col(row, "kind"), col(row, "id"), col(row, "task"), col(row, "state"), col(row, "started_by")}; !slices.Equal(got, want) {
			t.Errorf("CSV row %d: %q, want %q", i+1, got, want)
		}
		if col(row, "created_at") == "" || col(row, "finished_at") == "" {
			t.Errorf("CSV row %d lacks its times: %q", i+1, row)
		}
	}
	stream := rows[3]
	var figures api.StreamFigures
	if col(stream, "name") != "s/public.t" || col(stream, "object") != "public.t" || col(stream, "stream") != "s" || col(stream, "options") != "" ||
		json.Unmarshal([]byte(col(stream, "figures")), &figures) != nil || figures.RowsRead != 10 || figures.RowsWritten != 10 {
		t.Errorf("CSV stream row: %q", stream)
	}
	var batchFigures api.BatchFigures
	var request map[string]any
	if extract := rows[2]; json.Unmarshal([]byte(col(extract, "figures")), &batchFigures) != nil || batchFigures.Instances != 2 ||
		batchFigures.States[store.InstanceSucceeded] != 2 || json.Unmarshal([]byte(col(extract, "options")), &request) != nil || request["task"] != "extract" {
		t.Errorf("CSV batch row: %q", extract)
	}
	if col(rows[1], "error") == "" {
		t.Errorf("CSV row of the failed backfill has no error: %q", rows[1])
	}

	// The table: a header and one line per backfill, newest first.
	r = cli("audit")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 {
		t.Fatalf("audit: %s", r)
	}
	for i, want := range [][]string{
		{"KIND", "ID", "NAME", "STATE", "STARTED BY", "CREATED", "FINISHED", "FIGURES", "ERROR"},
		{"batch", "broken_", "failed", "cli", "1 (failed 1)", "instance(s) failed"},
		{"batch", "extract_", "succeeded", "cli", "2 (succeeded 2)"},
		{"stream", "s/public.t", "completed", "cli", "10 read, 10 written, 1 chunk(s)", " B"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("audit line %d %q lacks %q", i, lines[i], w)
			}
		}
	}

	// JSON, by --json or --format json, and the filters.
	var recs []api.AuditRecord
	if err := json.Unmarshal([]byte(cli("audit", "--json").stdout), &recs); err != nil || len(recs) != 3 || recs[2].Kind != api.AuditStream {
		t.Errorf("audit --json: %v %+v", err, recs)
	}
	if a, b := cli("audit", "--json"), cli("audit", "--format", "json"); a.stdout != b.stdout || a.code != 0 {
		t.Errorf("--json %s differs from --format json %s", a, b)
	}
	for _, c := range []struct {
		args []string
		want int // data rows
	}{
		{[]string{"--kind", "batch"}, 2},
		{[]string{"--kind", "stream", "--stream", "s", "--object", "t"}, 1},
		{[]string{"--state", "failed"}, 1},
		{[]string{"--state", "completed", "--started-by", "cli"}, 1},
		{[]string{"--task", "sales.extract"}, 1},
		{[]string{"--started-by", "api"}, 0},
		{[]string{"--since", "2000-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z", "--limit", "2"}, 2},
		{[]string{"--since", "2100-01-01T00:00:00Z"}, 0},
	} {
		r := cli(append([]string{"audit", "--format", "csv"}, c.args...)...)
		rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		if r.code != 0 || err != nil || len(rows) != 1+c.want {
			t.Errorf("audit %s: %d rows (%v), want %d: %s", strings.Join(c.args, " "), len(rows)-1, err, c.want, r)
		}
	}

	expect(t, 2, []string{"use stream or batch"}, append(addr, "audit", "--kind", "tables")...)
	expect(t, 2, []string{"not a batch backfill state"}, append(addr, "audit", "--kind", "batch", "--state", "completed")...)
	expect(t, 2, []string{"RFC 3339"}, append(addr, "audit", "--since", "yesterday")...)
	expect(t, 2, []string{"1 to 100000"}, append(addr, "audit", "--limit", "0")...)
	expect(t, 2, []string{"one or the other"}, append(addr, "audit", "--task", "sales.extract", "--object", "t")...)
	expect(t, 2, []string{"use table, json or csv"}, append(addr, "audit", "--format", "xml")...)
	expect(t, 2, []string{"--json and --format csv"}, append(addr, "audit", "--json", "--format", "csv")...)
	expect(t, 2, []string{"wrong number of arguments"}, append(addr, "audit", "extra")...)

	// Actions: every request that changed something, with who sent it —
	// here the CLI's initiations and batch backfills above, then a pause and
	// a resume of the stream.
	expect(t, 0, nil, append(addr, "stream", "pause", "s")...)
	expect(t, 0, nil, append(addr, "stream", "resume", "s")...)
	r = cli("audit", "--kind", "action")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) < 3 || !strings.Contains(lines[1], "POST /api/v1/streams/s/resume") ||
		!strings.Contains(lines[2], "POST /api/v1/streams/s/pause") || !strings.Contains(lines[1], "done") ||
		!strings.Contains(lines[1], "cli") || !strings.Contains(lines[1], "HTTP 202") {
		t.Errorf("audit --kind action: %s", r)
	}
	if !strings.Contains(r.stdout, "POST /api/v1/streams/s/backfills") {
		t.Errorf("audit --kind action lacks the initiation: %s", r)
	}
}
