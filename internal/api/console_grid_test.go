package api_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
)

// TestConsoleBatchGrid: a batch backfill's page shows its instances as a
// task × date grid. A failing one is a red cell, what it holds back is
// marked held, the DAG's nodes take their task's latest state, a click on
// a cell opens its log, the failure banner points at the Re-run button,
// and the grid follows the re-run to the end. A year of ten tasks (3,650
// instances) is one grid of 3,650 cells: no list rows in the document, a
// page under 2,000 pixels high (the list made it 13,000) and no wider than
// the window.
func TestConsoleBatchGrid(t *testing.T) {
	t.Parallel()
	ready := filepath.Join(t.TempDir(), "ready")
	var chain strings.Builder
	for i := range 10 {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf(", depends_on: [c%d]", i-1)
		}
		fmt.Fprintf(&chain, "  - {name: c%d, project: year, type: noop, schedule: daily%s}\n", i, dep)
	}
	e := newBatchEnv(t, chain.String()+fmt.Sprintf(`
  - {name: flaky, project: ops, type: shell, schedule: daily, command: "test -f %s || { echo no input for ${bizdate} >&2; exit 3; }; echo ran ${bizdate}"}
  - {name: after, project: ops, type: shell, schedule: daily, depends_on: [flaky], command: "echo after ${bizdate}"}
`, ready))
	b := newBrowser(t, e)
	b.waitJS(`document.getElementById("live").dataset.state === "live"`)

	// Six instances start as the list; ?view=grid asks for the grid.
	var sub api.SubmitResponse
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills",
		`{"task": "ops.flaky", "dates": {"from": "2025-01-11", "to": "2025-01-13"}, "scope": {"mode": "list", "downstream": -1}, "groups": 1}`)
	bf := sub.Backfill
	b.open(fmt.Sprintf("#/batch/%d", bf.ID), `[data-backfill-state]`)
	if n := batchCount(b, `table.bf-grid`); n != 0 {
		t.Errorf("a backfill of 6 instances starts as the grid")
	}
	b.open(fmt.Sprintf("#/batch/%d?view=grid", bf.ID), `table.bf-grid`)
	cell := func(task, date string) string {
		return `document.querySelector('table.bf-grid tr[data-task="` + task + `"] [data-date="` + date + `"]')`
	}
	node := func(task string) string {
		return `document.querySelector('.bf-dag svg.dag g.node[data-task="` + task + `"]')`
	}
	b.waitJS(`document.querySelector('[data-backfill-state="failed"]') !== null && ` +
		cell("ops.flaky", "2025-01-11") + `?.dataset.state === "failed" && ` +
		cell("ops.after", "2025-01-11") + `?.dataset.held !== undefined && ` + cell("ops.flaky", "2025-01-12") + `?.dataset.held !== undefined && ` +
		node("ops.flaky") + `?.dataset.state === "failed" && ` + node("ops.after") + `?.dataset.held !== undefined`)
	if got := jsValue[string](b, `[...document.querySelectorAll("table.bf-grid tbody tr")].map((r) => r.dataset.task + ":" + r.querySelectorAll("[data-instance]").length).join(" ")`); got != "ops.flaky:3 ops.after:3" {
		t.Errorf("grid rows %q, want ops.flaky and ops.after with 3 dates each", got)
	}
	if got := jsValue[string](b, `getComputedStyle(`+cell("ops.flaky", "2025-01-11")+`).backgroundColor`); got != "rgb(217, 54, 54)" {
		t.Errorf("the failed cell's colour is %s, want the failed red", got)
	}
	if got := jsValue[string](b, `getComputedStyle(`+cell("ops.flaky", "2025-01-12")+`).backgroundImage`); !strings.Contains(got, "repeating-linear-gradient") {
		t.Errorf("the held cell's background is %q, want it hatched", got)
	}
	hover := `(() => { const c = ` + cell("ops.flaky", "2025-01-12") + `; c.dispatchEvent(new MouseEvent("mouseover", {bubbles: true})); return c.title; })()`
	if tip := jsValue[string](b, hover); !strings.Contains(tip, "held: 2025-01-11 failed in group 1") {
		t.Errorf("the held cell's tooltip %q does not say why", tip)
	}
	if got := jsValue[string](b, `getComputedStyle(`+node("ops.flaky")+`.querySelector("rect.box")).fill`); got != "rgb(253, 236, 236)" {
		t.Errorf("the failed task's node is filled %s, want the failed pink", got)
	}
	b.shot("console-batch-grid-failed")

	// The list says held too.
	b.click(`button[data-view="list"]`)
	b.waitJS(`document.querySelector('.bf-groups details[data-date="2025-01-12"] [data-task="ops.flaky"] .i-state [data-status]')?.dataset.status === "held"`)
	b.click(`button[data-view="grid"]`)
	b.waitJS(`document.querySelector("table.bf-grid") !== null`)

	// A click on the failed cell opens its log.
	b.click(`table.bf-grid tr[data-task="ops.flaky"] td[data-date="2025-01-11"]`)
	b.waitJS(`(document.querySelector('dialog[data-dialog="instance"] pre.log') || {}).textContent?.includes("no input for 20250111")`)
	b.click(instDialog + `button[data-action="cancel"]`)

	// The banner points at the Re-run button, which ends the backfill once
	// the input is there.
	b.waitJS(`document.querySelector('[data-banner] a[data-action="point-rerun"]') !== null`)
	b.click(`[data-banner] a[data-action="point-rerun"]`)
	b.waitJS(`document.activeElement?.dataset.action === "rerun-backfill" && document.activeElement.classList.contains("pointed")`)
	rerunWith(b, ready)
	b.waitJS(`document.querySelector('[data-backfill-state="succeeded"]') !== null &&
		[...document.querySelectorAll("table.bf-grid [data-instance]")].map((c) => c.dataset.state).join() === "succeeded,succeeded,succeeded,succeeded,succeeded,succeeded" &&
		[...document.querySelectorAll(".bf-dag g.node")].every((n) => n.dataset.state === "succeeded")`)
	b.shot("console-batch-grid-succeeded")

	// A year of ten tasks, waiting for its start time.
	at := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills",
		`{"task": "year.c0", "dates": {"from": "2025-01-01", "to": "2025-12-31"}, "scope": {"mode": "list", "downstream": -1}, "run_at": "`+at+`"}`)
	bf = sub.Backfill
	if bf.Instances != 3650 {
		t.Fatalf("the year's backfill has %d instances, want 3,650", bf.Instances)
	}
	start := time.Now()
	b.open(fmt.Sprintf("#/batch/%d", bf.ID), `table.bf-grid`)
	b.waitJS(`document.querySelectorAll("table.bf-grid [data-instance]").length === 3650`)
	t.Logf("3,650 instances: the grid shown %s after navigating", time.Since(start).Round(time.Millisecond))
	if got := textOf(b, `table.bf-grid tr.g-months`); !strings.HasPrefix(got, "Task \\ date") || !strings.Contains(got, "2025-01") || !strings.Contains(got, "2025-12") {
		t.Errorf("the grid's month header says %q", got)
	}
	if n := jsValue[int](b, `document.querySelectorAll(".bf-gridbox *").length`); n > 3650+365+10+12+100 {
		t.Errorf("the grid holds %d elements for 3,650 instances of 10 tasks over 365 dates", n)
	}
	if n := batchCount(b, `.inst, details.date-block`); n != 0 {
		t.Errorf("the page also holds %d list rows", n)
	}
	if h := jsValue[int](b, `document.documentElement.scrollHeight`); h > 2000 {
		t.Errorf("the page is %d pixels high, want under 2,000", h)
	}
	// The grid scrolls within the page, not the page with it.
	if w := jsValue[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		t.Errorf("the page is %d pixels wide in a window of %d", w[0], w[1])
	}
	if n := batchCount(b, `.bf-dag g.node[data-state="waiting"]`); n != 10 {
		t.Errorf("%d of the DAG's 10 nodes are coloured waiting", n)
	}
	// Drawing the grid again (a click on Grid does, as a refresh does).
	ms := jsValue[float64](b, `(() => { const t = performance.now(); document.querySelector('button[data-view="grid"]').click(); return performance.now() - t; })()`)
	t.Logf("3,650 instances: the grid drawn again in %.0f ms", ms)
	b.shot("console-batch-grid-year")
}
