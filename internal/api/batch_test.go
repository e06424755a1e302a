package api_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// newBatchEnv runs a daemon with recurring tasks and no stream.
func newBatchEnv(t *testing.T, tasks string) *env {
	t.Helper()
	e := startDaemon(t, fmt.Sprintf(`
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:0"}
log: {level: warn}
resource_groups: [{name: default, concurrency: 4}, {name: big, concurrency: 2}]
tasks:
%s`, filepath.Join(t.TempDir(), "meta.db"), tasks))
	<-e.d.Batch().Ready()
	return e
}

const batchTasks = `
  - {name: extract, project: sales, owner: ann, output: sales.raw, type: shell, schedule: daily, command: "echo extracted ${bizdate}; echo rows=7 >> $TIDEMARK_OUTPUT", outputs: {rows: "0"}}
  - {name: load, project: sales, type: shell, schedule: "daily 01:30", timezone: Europe/Paris, depends_on: [extract], command: "echo loaded ${outputs.extract.rows} for ${bizdate}"}
  - {name: report, project: sales, type: noop, schedule: daily, depends_on: [load]}
`

// The batch routes end to end: tasks, a preview with times in two zones,
// a submitted backfill followed to its end, its instances, a log with the
// rendered code, the node list as CSV, and who started it.
func TestBatchBackfillThroughTheAPI(t *testing.T) {
	e := newBatchEnv(t, batchTasks)
	var tasks []api.TaskView
	e.ok(http.StatusOK, &tasks, "GET", "/api/v1/tasks", "")
	if len(tasks) != 3 || tasks[0].ID != "sales.extract" || tasks[1].Timezone != "Europe/Paris" || strings.Join(tasks[0].Downstream, ",") != "sales.load" {
		t.Fatalf("tasks = %+v", tasks)
	}
	req := `{"task": "extract", "dates": {"from": "2025-01-11", "to": "2025-01-13"}, "scope": {"mode": "list", "downstream": -1}, "groups": 2}`
	var p api.PlanView
	e.ok(http.StatusOK, &p, "POST", "/api/v1/batch/preview?tz=Asia/Shanghai", req)
	if p.Count != 9 || len(p.Groups) != 2 || strings.Join(p.Groups[0], ",") != "2025-01-11,2025-01-12" || p.Timezone != "Asia/Shanghai" {
		t.Fatalf("preview = %+v", p)
	}
	var load api.PlannedInstance
	for _, in := range p.Instances {
		if in.Task == "sales.load" && in.Date == "2025-01-11" {
			load = in
		}
	}
	if load.ScheduledTask != "2025-01-12 01:30 CET" || load.ScheduledUser != "2025-01-12 08:30 CST" || len(load.WaitsFor) != 1 {
		t.Errorf("load's preview = %+v, want scheduled 01:30 CET / 08:30 CST waiting for extract", load)
	}

	var sub api.SubmitResponse
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills", req, "X-Tidemark-Client", "cli")
	id := sub.Backfill.ID
	if sub.Backfill.StartedBy != "cli" || !strings.HasPrefix(sub.Backfill.Name, "extract_") {
		t.Errorf("backfill = %+v, want started by cli and named after the task", sub.Backfill)
	}
	var b store.BatchBackfill
	e.waitFor("backfill to succeed", func() bool {
		e.ok(http.StatusOK, &b, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", id), "")
		return b.State == store.BatchSucceeded
	})
	if b.States[store.InstanceSucceeded] != 9 {
		t.Fatalf("states = %v, want 9 succeeded", b.States)
	}
	var list []store.BatchBackfill
	e.ok(http.StatusOK, &list, "GET", "/api/v1/batch/backfills?task=sales.extract&started_by=cli", "")
	if len(list) != 1 || list[0].ID != id {
		t.Errorf("filtered list = %+v", list)
	}
	var ins []store.BatchInstance
	e.ok(http.StatusOK, &ins, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d/instances?task=sales.load", id), "")
	if len(ins) != 3 {
		t.Fatalf("load instances = %d, want 3", len(ins))
	}
	var lv api.LogView
	e.ok(http.StatusOK, &lv, "GET", fmt.Sprintf("/api/v1/batch/instances/%d/log", ins[0].ID), "")
	if !strings.Contains(lv.Log, "loaded 7 for 20250111") || lv.Attempt != 1 {
		t.Errorf("log = %+v, want the upstream's output rendered", lv)
	}
	if ins[0].Rendered != "echo loaded 7 for 20250111" {
		t.Errorf("rendered = %q", ins[0].Rendered)
	}
	r := e.do("GET", fmt.Sprintf("/api/v1/batch/backfills/%d/nodes.csv", id), "")
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || r.status != http.StatusOK || len(rows) != 4 || rows[1][0] != "sales.extract" || rows[1][3] != "ann" || rows[1][7] != "3" {
		t.Errorf("nodes.csv = %q (%v)", r.body, err)
	}
}

// Refusals: each says what is wrong with which field, with the right status.
func TestBatchRefusals(t *testing.T) {
	e := newBatchEnv(t, batchTasks)
	future := time.Now().AddDate(0, 0, 3).Format(time.DateOnly)
	for _, c := range []struct {
		body, code, want string
	}{
		{`{"task": "nope", "dates": {"from": "2025-01-01", "to": "2025-01-02"}}`, "bad_request", "nope"},
		{`{"task": "extract", "dates": {"from": "2025-01-05", "to": "2025-01-02"}}`, "bad_request", "dates"},
		{`{"task": "extract", "dates": {"from": "2025-01-01", "to": "` + future + `"}}`, "bad_request", "no cycle yet"},
		{`{"task": "extract", "dates": {"from": "2025-01-01", "to": "2025-01-02"}, "groups": 13}`, "bad_request", "groups"},
		{`{"task": "extract", "dates": {"from": "2025-01-01", "to": "2025-01-02"}, "resource_group": "gpu"}`, "bad_request", "resource_group"},
		{`{"task": "extract", "dates": {"from": "2000-01-01", "to": "2025-01-02"}, "scope": {"mode": "list", "downstream": -1}}`, "confirm", "confirm"},
		{`{"task": "extract", "dates": {"from": "2025-01-01"}, "bogus": 1}`, "bad_request", "bogus"},
	} {
		msg := e.fails(http.StatusBadRequest, c.code, "POST", "/api/v1/batch/backfills", c.body)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: message %q does not mention %q", c.body, msg, c.want)
		}
	}
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/batch/backfills/99", "")
	e.fails(http.StatusNotFound, "not_found", "POST", "/api/v1/batch/backfills/99/stop", "")
	e.fails(http.StatusBadRequest, "bad_request", "GET", "/api/v1/batch/instances/x", "")
	e.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/tasks/nope", "")

	var sub api.SubmitResponse
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills", `{"task": "report", "dates": {"from": "2025-01-01", "to": "2025-01-01"}}`)
	var b store.BatchBackfill
	e.waitFor("backfill to succeed", func() bool {
		e.ok(http.StatusOK, &b, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", sub.Backfill.ID), "")
		return b.State == store.BatchSucceeded
	})
	e.fails(http.StatusConflict, "refused", "POST", fmt.Sprintf("/api/v1/batch/backfills/%d/stop", sub.Backfill.ID), "")
	e.fails(http.StatusConflict, "refused", "POST", fmt.Sprintf("/api/v1/batch/backfills/%d/rerun", sub.Backfill.ID), "")
}
