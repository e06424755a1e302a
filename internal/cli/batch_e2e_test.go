package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
)

// The batch verbs against a real daemon: tasks, a preview, a backfill
// followed to its end, its instances, a log, the CSV export, and refusals
// with their exit codes.
func TestBatchEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:%d"}
tasks:
  - {name: extract, project: sales, owner: ann, type: shell, schedule: daily, command: "echo extracting ${bizdate}"}
  - {name: load, project: sales, type: shell, schedule: "daily 02:00", depends_on: [extract], command: "echo loading ${bizdate-1}"}
  - {name: broken, project: sales, type: shell, schedule: daily, command: "exit 3"}
`, filepath.Join(dir, "meta.db"), port), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg, filepath.Join(dir, "daemon.log"))
	addr := []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", port)}
	cli := func(args ...string) result { t.Helper(); return tidemark(t, append(addr, args...)...) }
	poll(t, d, "the API", func() bool { return cli("tasks").code == 0 })

	if r := cli("tasks"); !strings.Contains(r.stdout, "sales.load") || !strings.Contains(r.stdout, "daily 02:00") {
		t.Errorf("tasks: %s", r)
	}
	r := cli("batch", "preview", "extract", "--from", "2025-01-11", "--to", "2025-01-13", "--downstream", "all", "--groups", "2", "--tz", "Asia/Tokyo")
	for _, want := range []string{"6 instance(s)", "group 1: 2025-01-11, 2025-01-12", "group 2: 2025-01-13", "SCHEDULED (Asia/Tokyo)", "2025-01-12 11:00 JST", "group 1 date 1"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("preview lacks %q: %s", want, r)
		}
	}
	r = cli("batch", "backfill", "extract", "--from", "2025-01-11", "--to", "2025-01-13", "--downstream", "all", "--groups", "2", "--name", "january")
	if r.code != 0 || !strings.Contains(r.stdout, `backfill 1 "january": 6 instance(s)`) {
		t.Fatalf("backfill: %s", r)
	}
	// A batch backfill never prints as a bare "backfill N" (issue 16).
	if !strings.HasPrefix(r.stdout, `batch backfill 1 "january"`) {
		t.Errorf("a submitted batch backfill prints as %q, want batch backfill 1", r.stdout)
	}
	var b store.BatchBackfill
	poll(t, d, "backfill 1 to succeed", func() bool {
		r := cli("batch", "show", "1", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
			t.Fatalf("show --json: %v in %s", err, r)
		}
		return b.State == store.BatchSucceeded
	})
	if b.StartedBy != "cli" || b.States[store.InstanceSucceeded] != 6 {
		t.Errorf("backfill: %+v", b)
	}
	// Its start time is start_at ("run" names table backfills started together).
	if r := cli("batch", "show", "1"); !strings.Contains(r.stdout, "; to start at ") || strings.Contains(r.stdout, "run at") {
		t.Errorf("batch show 1: %s, want its start time as \"to start at\"", r)
	}
	if r := cli("batch", "list"); !strings.Contains(r.stdout, "january") || !strings.Contains(r.stdout, "succeeded 6") {
		t.Errorf("list: %s", r)
	}
	var ins []store.BatchInstance
	if err := json.Unmarshal([]byte(cli("batch", "instances", "1", "--task", "sales.load", "--json").stdout), &ins); err != nil || len(ins) != 3 {
		t.Fatalf("instances: %v %+v", err, ins)
	}
	// Its instances name it batch_backfill_id, and backfill_id, the
	// deprecated alias.
	var named []map[string]any
	if err := json.Unmarshal([]byte(cli("batch", "instances", "1", "--task", "sales.load", "--json").stdout), &named); err != nil || len(named) != 3 ||
		named[0]["batch_backfill_id"] != 1.0 || named[0]["backfill_id"] != 1.0 {
		t.Errorf("instances --json: %v %v", err, named)
	}
	for _, args := range [][]string{{"batch", "show", "1"}, {"batch", "stop", "1"}} {
		if r := cli(args...); !strings.Contains(r.stdout+r.stderr, "batch backfill 1") {
			t.Errorf("%s: %s, want it named batch backfill 1", strings.Join(args, " "), r)
		}
	}
	if r := cli("batch", "log", fmt.Sprint(ins[0].ID)); !strings.Contains(r.stdout, "loading 20250110") {
		t.Errorf("log: %s", r)
	}
	if r := cli("batch", "log", "--code", fmt.Sprint(ins[0].ID)); strings.TrimSpace(r.stdout) != "echo loading 20250110" {
		t.Errorf("log --code: %s", r)
	}
	if r := cli("batch", "export", "1"); !strings.HasPrefix(r.stdout, "id,name,project,owner") || !strings.Contains(r.stdout, "sales.extract,extract,sales,ann") {
		t.Errorf("export: %s", r)
	}

	// --wait follows pushed events to the end; the exit code says how it ended.
	r = cli("batch", "backfill", "load", "--from", "2025-02-01", "--to", "2025-02-03", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout, "batch backfill 2 succeeded") || strings.Count(r.stdout, "sales.load: succeeded") != 3 {
		t.Errorf("backfill --wait: %s", r)
	}
	r = cli("batch", "backfill", "broken", "--from", "2025-02-01", "--wait")
	if r.code != 1 || !strings.Contains(r.stdout, "sales.broken: failed") || !strings.Contains(r.stderr, "backfill 3 failed") {
		t.Errorf("backfill --wait of a failing task: %s", r)
	}

	// With --json, each event of the backfill is a JSON line, the last one
	// its end.
	r = cli("batch", "backfill", "extract", "--from", "2025-03-01", "--to", "2025-03-02", "--wait", "--json")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) < 3 {
		t.Fatalf("backfill --wait --json: %s", r)
	}
	succeeded := 0
	var ev api.BatchEventView
	for i, line := range lines {
		ev = api.BatchEventView{}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("backfill --wait --json line %d: %v in %q", i, err, line)
		}
		// The API's event: the batch backfill under its name and its
		// deprecated alias.
		if ev.BatchBackfillID != 4 || ev.BackfillID != 4 || (ev.Kind != engine.KindInstance && ev.Kind != engine.KindBatchBackfill) {
			t.Errorf("backfill --wait --json line %d: %+v", i, ev)
		}
		if ev.Kind == "instance" && ev.State == store.InstanceSucceeded {
			succeeded++
		}
	}
	if ev.Kind != engine.KindBatchBackfill || ev.State != store.BatchSucceeded || succeeded != 2 {
		t.Errorf("backfill --wait --json: %d instance(s) succeeded, ends with %+v:\n%s", succeeded, ev, r.stdout)
	}

	expect(t, 2, []string{"time_range.from", "HH:MM"}, append(addr, "batch", "preview", "extract", "--from", "2025-01-01", "--time-range", "8-9")...)
	expect(t, 2, []string{"--downstream", "1-10 or all"}, append(addr, "batch", "preview", "extract", "--from", "2025-01-01", "--downstream", "11")...)
	expect(t, 2, []string{"dates"}, append(addr, "batch", "backfill", "extract", "--from", "2025-01-05", "--to", "2025-01-01")...)
	expect(t, 2, []string{"give the data timestamps"}, append(addr, "batch", "backfill", "extract")...)
	expect(t, 4, []string{"no failed or stopped instance"}, append(addr, "batch", "rerun", "1")...)
	expect(t, 4, []string{"already ended"}, append(addr, "batch", "stop", "1")...)
}
