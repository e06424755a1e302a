package api_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// A small DAG: extract feeds load (Paris time) and audit (another
// project); report waits for both.
const consoleTasks = `
  - {name: extract, project: sales, owner: ann, output: sales.raw, type: shell, schedule: daily, command: "echo extracted ${bizdate}; echo rows=7 >> $TIDEMARK_OUTPUT", outputs: {rows: "0"}}
  - {name: load, project: sales, owner: ann, type: shell, schedule: "daily 01:30", timezone: Europe/Paris, depends_on: [extract], command: "echo loaded ${outputs.extract.rows} for ${bizdate}"}
  - {name: audit, project: finance, owner: bo, type: shell, schedule: daily, depends_on: [sales.extract], command: "echo audited ${bizdate}"}
  - {name: report, project: sales, type: noop, schedule: daily, depends_on: [load, finance.audit]}
`

// The backfill dialog's parts.
const (
	bfDialog   = `dialog[data-dialog="backfill"] `
	instDialog = `dialog[data-dialog="instance"] `
)

// batchZone makes the browser's time zone zone (before the console reads it,
// so the page is loaded again) and waits for the live feed.
func batchZone(b *browser, zone string) {
	b.t.Helper()
	b.run(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
		return err
	}), chromedp.Reload())
	b.waitJS(`document.getElementById("tz").textContent === ` + jsString(zone) + ` && document.getElementById("live").dataset.state === "live"`)
}

// batchCount is the number of elements matching sel.
func batchCount(b *browser, sel string) int {
	b.t.Helper()
	return value(b, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
}

// TestConsoleBatchBackfill goes the way a user does: the DAG on the tasks
// page, a task's page, the backfill dialog (3 dates, the task and all its
// downstream, 2 groups), its preview against the API's, the submission,
// the backfill's page followed live to the end, and an instance's log.
func TestConsoleBatchBackfill(t *testing.T) {
	e := newBatchEnv(t, consoleTasks)
	b := newBrowser(t, e)
	batchZone(b, "Asia/Shanghai") // the tasks are in UTC and Europe/Paris

	b.open("#/tasks", `svg.dag g.node[data-task="sales.extract"]`)
	nodes := value(b, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg.dag g.node")].map((n) => n.dataset.task).sort()`))
	if want := []string{"finance.audit", "sales.extract", "sales.load", "sales.report"}; !slices.Equal(nodes, want) {
		t.Fatalf("DAG nodes = %v, want %v", nodes, want)
	}
	if n := batchCount(b, "svg.dag path.edge"); n != 4 {
		t.Errorf("DAG edges = %d, want 4", n)
	}
	if n := batchCount(b, `table.grid tr[data-task] button[data-action="backfill"]`); n != 4 {
		t.Errorf("task rows with a Backfill button = %d, want 4", n)
	}
	b.shot("console-batch-tasks")

	// A node opens its task's page, its lineage drawn around it.
	b.click(`svg.dag g.node[data-task="sales.extract"] rect.box`)
	b.waitJS(`location.hash === "#/tasks/sales.extract" && document.querySelector('svg.dag g.node.focus[data-task="sales.extract"]') !== null`)
	if code := b.text("pre.code"); !strings.Contains(code, "echo extracted ${bizdate}") {
		t.Errorf("task page code = %q", code)
	}
	if n := batchCount(b, "svg.dag g.node.near"); n != 2 {
		t.Errorf("direct neighbours highlighted = %d, want 2 (load, audit)", n)
	}
	b.shot("console-batch-task")

	b.click(`.page-head button[data-action="backfill"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"][open]') !== null`)
	b.run(
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="dates.from"]`), "2025-01-11"),
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="dates.to"]`), "2025-01-13"),
		chromedp.Click(chromedp.CSS(bfDialog+`input[name="scope.mode"][value="list"]`)),
		chromedp.SetValue(chromedp.CSS(bfDialog+`select[name="scope.downstream"]`), "-1"),
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="groups"]`), "2"),
		chromedp.Click(chromedp.CSS(bfDialog+`button[data-action="preview"]`)),
	)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"] .bf-preview[data-count]') !== null`)

	var p api.PlanView
	e.ok(http.StatusOK, &p, "POST", "/api/v1/batch/preview?tz=Asia/Shanghai",
		`{"task": "sales.extract", "dates": {"from": "2025-01-11", "to": "2025-01-13"}, "scope": {"mode": "list", "downstream": -1}, "groups": 2}`)
	if p.Count != 12 {
		t.Fatalf("API preview count = %d, want 12 (4 tasks × 3 dates)", p.Count)
	}
	shown := value(b, chromedp.Evaluate[string](`document.querySelector('dialog[data-dialog="backfill"] .bf-preview').dataset.count`))
	rows := batchCount(b, bfDialog+`.bf-preview table.plan tr[data-index]`)
	if shown != fmt.Sprint(p.Count) || rows != p.Count {
		t.Errorf("dialog preview shows count %s with %d rows, want %d as the API", shown, rows, p.Count)
	}
	if n := batchCount(b, bfDialog+`.plan-group`); n != 2 {
		t.Errorf("preview groups = %d, want 2", n)
	}
	heads := value(b, chromedp.Evaluate[string](`document.querySelector('dialog[data-dialog="backfill"] table.plan thead').textContent`))
	if strings.Count(heads, "Asia/Shanghai") != 2 || strings.Count(heads, "task's zone") != 2 {
		t.Errorf("preview headers %q: want business and scheduled times in the task's zone and in Asia/Shanghai", heads)
	}
	// load of 2025-01-11 (Paris): business midnight CET is 07:00 in
	// Shanghai; scheduled 01:30 CET the next day is 08:30 there.
	load := value(b, chromedp.Evaluate[string](`[...document.querySelectorAll('dialog[data-dialog="backfill"] tr[data-task="sales.load"]')].map((r) => r.textContent).find((s) => s.includes("2025-01-11 00:00 CET")) || ""`))
	for _, want := range []string{"2025-01-11 07:00", "2025-01-12 01:30 CET", "2025-01-12 08:30"} {
		if !strings.Contains(load, want) {
			t.Errorf("preview row of load 2025-01-11 = %q, want %q in it", load, want)
		}
	}
	b.shot("console-batch-dialog")

	b.click(bfDialog + `button[data-action="submit"]`)
	b.waitJS(`/^#\/batch\/\d+$/.test(location.hash) && document.querySelector("[data-backfill-state]") !== null`)
	id := value(b, chromedp.Evaluate[int64](`Number(location.hash.slice("#/batch/".length))`))
	b.waitJS(`document.querySelector("[data-backfill-state]").dataset.backfillState === "succeeded" &&
		document.querySelectorAll(".bf-groups [data-instance]").length === 12 &&
		[...document.querySelectorAll(".bf-groups [data-instance] .i-state [data-status]")].every((s) => s.dataset.status === "succeeded")`)
	if n := batchCount(b, ".bf-groups section.group"); n != 2 {
		t.Errorf("backfill page groups = %d, want 2", n)
	}
	if n := batchCount(b, `.bf-groups [data-instance] button[data-action="rerun"]:not(:disabled)`); n != 0 {
		t.Errorf("%d succeeded instances offer a re-run", n)
	}
	b.shot("console-batch-backfill")

	// The instances, and the events the console was pushed for them.
	var ins []store.BatchInstance
	e.ok(http.StatusOK, &ins, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d/instances", id), "")
	if len(ins) != 12 {
		t.Fatalf("instances = %d, want 12", len(ins))
	}
	succeeded := map[int64]bool{}
	for _, ev := range b.events() {
		if ev["kind"] == "instance" && ev["backfill_id"] == float64(id) && ev["state"] == "succeeded" {
			succeeded[int64(ev["instance_id"].(float64))] = true
		}
	}
	for _, in := range ins {
		if !succeeded[in.ID] {
			t.Errorf("no pushed event says instance %d (%s) succeeded; events %v", in.ID, in.Task, b.events())
			break
		}
	}

	// The log of load on 2025-01-11, with its upstream's output rendered.
	row := `.bf-groups details[data-date="2025-01-11"] [data-instance][data-task="sales.load"] `
	b.waitJS(`document.querySelector(` + jsString(row+`button[data-action="log"]:not(:disabled)`) + `) !== null`)
	b.click(row + `button[data-action="log"]`)
	b.waitJS(`(document.querySelector('dialog[data-dialog="instance"] pre.log') || {}).textContent?.includes("loaded 7 for 20250111")`)
	b.shot("console-batch-log")
	b.click(instDialog + `.tabs button[data-tab="code"]`)
	if code := b.text(instDialog + "pre.code"); code != "echo loaded 7 for 20250111" {
		t.Errorf("instance code = %q, want the rendered command", code)
	}
	b.click(instDialog + `button[data-action="cancel"]`)

	// The instance as a page.
	var loadID int64
	for _, in := range ins {
		if in.Task == "sales.load" && in.BizTime.Format("2006-01-02") == "2025-01-10" { // midnight CET is 23:00 UTC the day before
			loadID = in.ID
		}
	}
	b.open(fmt.Sprintf("#/instances/%d", loadID), "pre.log")
	b.waitJS(`document.querySelector("pre.log").textContent.includes("loaded 7 for 20250111")`)
	b.click(`.tabs button[data-tab="details"]`)
	b.waitJS(`document.querySelector(".instance-view dl.kv") !== null`)

	// The list shows it, with its counts.
	b.open("#/batch", fmt.Sprintf(`tr[data-backfill="%d"]`, id))
	if got := b.text(fmt.Sprintf(`tr[data-backfill="%d"] .stack-n`, id)); got != "12/12" {
		t.Errorf("list progress = %q, want 12/12", got)
	}
}

// TestConsoleBatchFailure: a backfill above the confirmation threshold is
// confirmed in the dialog; a failing task shows its error and log; a
// failed instance is marked succeeded from its row, and once the input is
// there the backfill's re-run ends it.
func TestConsoleBatchFailure(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	e := startDaemon(t, fmt.Sprintf(`
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:0"}
log: {level: warn}
batch: {confirm_above: 3}
tasks:
  - {name: flaky, project: ops, type: shell, schedule: daily, command: "test -f %s || { echo no input for ${bizdate} >&2; exit 3; }; echo ran ${bizdate}"}
  - {name: after, project: ops, type: shell, schedule: daily, depends_on: [flaky], command: "echo after ${bizdate}"}
`, filepath.Join(dir, "meta.db"), ready))
	<-e.d.Batch().Ready()
	b := newBrowser(t, e)
	b.waitJS(`document.getElementById("live").dataset.state === "live"`)

	// The node's backfill button opens the dialog.
	b.open("#/tasks", `svg.dag g.node[data-task="ops.flaky"]`)
	b.click(`svg.dag g.node[data-task="ops.flaky"] g.node-bf rect`)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"][open]') !== null`)

	// A refused request names its field next to the form.
	b.run(
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="dates.from"]`), "2025-01-12"),
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="dates.to"]`), "2025-01-11"),
		chromedp.Click(chromedp.CSS(bfDialog+`button[data-action="preview"]`)),
	)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"] .bf-errors .error-box') !== null && document.querySelector('dialog[data-dialog="backfill"] .invalid[data-field^="dates"]') !== null`)

	// Two dates of flaky and after: 4 instances, more than 3.
	b.run(
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="dates.from"]`), "2025-01-11"),
		chromedp.SetValue(chromedp.CSS(bfDialog+`input[name="dates.to"]`), "2025-01-12"),
		chromedp.Click(chromedp.CSS(bfDialog+`input[name="scope.mode"][value="list"]`)),
		chromedp.Click(chromedp.CSS(bfDialog+`button[data-action="submit"]`)),
	)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"] .confirm-box') !== null`)
	if msg := b.text(bfDialog + ".confirm-box"); !strings.Contains(msg, "4 instances") {
		t.Errorf("confirmation = %q, want the instance count", msg)
	}
	b.shot("console-batch-confirm")
	b.click(bfDialog + `button[data-action="confirm-submit"]`)
	b.waitJS(`/^#\/batch\/\d+$/.test(location.hash) && document.querySelector('[data-backfill-state="failed"]') !== null &&
		document.querySelector('.bf-groups details[data-date="2025-01-11"] [data-task="ops.flaky"] [data-status="failed"]') !== null`)
	id := value(b, chromedp.Evaluate[int64](`Number(location.hash.slice("#/batch/".length))`))
	if msg := b.text(".notice"); !strings.Contains(msg, "failed") {
		t.Errorf("backfill error = %q", msg)
	}
	// Once the page has read the instances again, the failed one offers a
	// re-run and a log, and so does the backfill.
	failed := `.bf-groups details[data-date="2025-01-11"] [data-task="ops.flaky"] `
	b.waitJS(`document.querySelector(` + jsString(failed+`button[data-action="rerun"]:not(:disabled)`) + `) !== null &&
		document.querySelector(` + jsString(failed+`button[data-action="log"]:not(:disabled)`) + `) !== null &&
		document.querySelector('button[data-action="rerun-backfill"]:not(:disabled)') !== null`)
	if n := batchCount(b, failed+`button[data-action="stop"]:not(:disabled)`); n != 0 {
		t.Errorf("the failed instance of a failed backfill offers a stop")
	}
	b.click(failed + `button[data-action="log"]`)
	b.waitJS(`(document.querySelector('dialog[data-dialog="instance"] pre.log') || {}).textContent?.includes("no input for 20250111")`)
	b.click(instDialog + `button[data-action="cancel"]`)
	b.shot("console-batch-failed")

	// Marked succeeded, date 1's after runs and date 2's flaky fails in turn.
	b.click(failed + `button[data-action="mark-succeeded"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="confirm"][open]') !== null`)
	b.click(`dialog[data-dialog="confirm"] button[data-action="yes"]`)
	b.waitJS(`document.querySelector('[data-backfill-state="failed"]') !== null &&
		document.querySelector('.bf-groups details[data-date="2025-01-12"] [data-task="ops.flaky"] [data-status="failed"]') !== null &&
		document.querySelector('.bf-groups details[data-date="2025-01-11"] [data-task="ops.after"] [data-status="succeeded"]') !== null &&
		document.querySelector('button[data-action="rerun-backfill"]:not(:disabled)') !== null`)

	// With the input there, the backfill's re-run ends it.
	rerunWith(b, ready)
	b.waitJS(`document.querySelector('[data-backfill-state="succeeded"]') !== null &&
		[...document.querySelectorAll(".bf-groups [data-instance] .i-state [data-status]")].every((s) => s.dataset.status === "succeeded")`)
	var bf store.BatchBackfill
	e.ok(http.StatusOK, &bf, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", id), "")
	if bf.State != store.BatchSucceeded || bf.States[store.InstanceSucceeded] != 4 {
		t.Errorf("backfill = %s %v, want succeeded with 4 succeeded instances", bf.State, bf.States)
	}
}

// rerunWith creates the file ready (the input a failing task lacked) and
// re-runs the backfill whose page b shows, confirming.
func rerunWith(b *browser, ready string) {
	b.t.Helper()
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.click(`button[data-action="rerun-backfill"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="confirm"][open]') !== null`)
	b.click(`dialog[data-dialog="confirm"] button[data-action="yes"]`)
}

// TestConsoleTaskReads: the streamed objects tasks read are drawn as
// source nodes of the DAG, listed on the task's page, and open their
// object's page (docs/lineage.md). The stream's source does not answer:
// the reads are then left unchecked, and drawn all the same.
func TestConsoleTaskReads(t *testing.T) {
	dir := t.TempDir()
	e := startDaemon(t, fmt.Sprintf(`
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:0"}
log: {level: warn}
streams:
  - {name: shop, source: {dsn: "postgres://tidemark@127.0.0.1:1/shop?connect_timeout=1"}, destination: {type: sqlite, path: "%s"}, include: ["public.*"]}
tasks:
  - {name: daily_orders, project: sales, type: noop, schedule: daily, reads: [{stream: shop, object: public.orders, date_column: created_at, timezone: Asia/Shanghai}, {stream: shop, object: public.refunds, date_column: day}]}
  - {name: refunds, project: finance, type: noop, schedule: "weekly mon", reads: [{stream: shop, object: public.refunds, date_column: day}]}
  - {name: report, project: sales, type: noop, schedule: daily, depends_on: [daily_orders]}
`, filepath.Join(dir, "meta.db"), filepath.Join(dir, "dest.db")))
	<-e.d.Batch().Ready()
	b := newBrowser(t, e)

	b.open("#/tasks", `svg.dag g.node.object[data-object="shop/public.orders"]`)
	objects := value(b, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg.dag g.node.object")].map((n) => n.dataset.object).sort()`))
	if want := []string{"shop/public.orders", "shop/public.refunds"}; !slices.Equal(objects, want) {
		t.Fatalf("object nodes = %v, want %v", objects, want)
	}
	edges := value(b, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg.dag path.edge")].map((p) => p.dataset.from + ">" + p.dataset.to).sort()`))
	want := []string{"object:shop/public.orders>sales.daily_orders", "object:shop/public.refunds>finance.refunds",
		"object:shop/public.refunds>sales.daily_orders", "sales.daily_orders>sales.report"}
	if !slices.Equal(edges, want) {
		t.Errorf("DAG edges = %v, want %v", edges, want)
	}
	if n := batchCount(b, `table.grid tr[data-task]`); n != 3 {
		t.Errorf("task rows = %d, want 3: objects are not tasks", n)
	}

	b.open("#/tasks/sales.daily_orders", `ul.reads li[data-read="shop/public.orders"]`)
	if got := b.text(`ul.reads li[data-read="shop/public.orders"]`); got != "public.orders of shop by created_at (Asia/Shanghai)" {
		t.Errorf("task page read = %q", got)
	}
	if got := b.text(`ul.reads li[data-read="shop/public.refunds"]`); got != "public.refunds of shop by day (UTC)" {
		t.Errorf("task page read = %q, want the task's zone", got)
	}
	if n := batchCount(b, `svg.dag g.node.object`); n != 2 {
		t.Errorf("object nodes in the task's lineage = %d, want 2", n)
	}
	b.shot("console-task-reads")
	b.click(`svg.dag g.node.object[data-object="shop/public.orders"] rect.box`)
	b.waitJS(`location.hash === "#/streams/shop/objects/public.orders"`)
}

// TestConsoleLineageApprove goes the way of docs/lineage.md in the
// browser: a repair changes 3 rows over 2 dates a task with on_change:
// propose has run; the proposal appears on the Lineage page, is approved,
// its batch backfill runs the dates for the task and its downstream, and the
// object's page says what the repair caused.
func TestConsoleLineageApprove(t *testing.T) {
	e := newEnv(t, envOptions{
		setup: `CREATE TABLE sales (id int PRIMARY KEY, day date NOT NULL, amount int NOT NULL);
			INSERT INTO sales SELECT g, DATE '2026-03-01' + g % 10, g FROM generate_series(1, 100) g`,
		tasks: `  - {name: daily_sales, project: sales, type: noop, schedule: daily, reads: [{stream: "{{stream}}", object: public.sales, date_column: day}], on_change: {action: propose, settle: 0s}}
  - {name: report, project: sales, type: noop, schedule: daily, depends_on: [daily_sales]}
`})
	e.waitLoaded("public.sales")
	handled := func(id int64) {
		e.waitFor(fmt.Sprintf("backfill %d's changes handed over", id), func() bool {
			var v api.ChangedDatesView
			r := e.do("GET", fmt.Sprintf("/api/v1/backfills/%d/changed-dates", id), "")
			return r.status == http.StatusOK && json.Unmarshal([]byte(r.body), &v) == nil && v.Handled
		})
	}
	handled(1) // the first load: no date had run, nothing proposed
	var sub struct {
		Backfill store.BatchBackfill `json:"backfill"`
	}
	e.ok(http.StatusCreated, &sub, "POST", "/api/v1/batch/backfills", `{"task": "sales.daily_sales", "dates": {"from": "2026-03-01", "to": "2026-03-10"}}`)
	e.waitFor("the task's run", func() bool {
		var bb api.BatchBackfillView
		e.ok(http.StatusOK, &bb, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", sub.Backfill.ID), "")
		return bb.State == store.BatchSucceeded
	})
	db, err := sql.Open("sqlite", "file:"+e.dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE sales SET amount = -1 WHERE id IN (3, 13, 5)`); err != nil {
		t.Fatal(err)
	}
	var checks []api.CheckView
	e.ok(http.StatusOK, &checks, "POST", "/api/v1/streams/"+e.name+"/verify", `{"repair": true}`)
	if len(checks) != 1 || checks[0].Repair == nil {
		t.Fatalf("verify --repair: %+v", checks)
	}
	repair := checks[0].Repair.ID
	e.waitLoaded("public.sales")
	handled(repair)

	b := newBrowser(t, e)
	b.open("#/lineage", `tr[data-proposal="1"][data-state="pending"] button[data-action="approve"]`)
	want := fmt.Sprintf("#1: public.sales backfill #%d changed 2026-03-04, 2026-03-06: re-run sales.daily_sales and its 1 downstream task for these 2 dates", repair)
	if got := b.text(`p[data-summary="1"]`); got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	b.shot("console-lineage-pending")
	b.click(`tr[data-proposal="1"] button[data-action="approve"]`)
	b.waitJS(`document.querySelector('tr[data-proposal="1"][data-state="submitted"] a[href^="#/batch/"]') !== null`)
	b.click(`tr[data-proposal="1"] a[href^="#/batch/"]`)
	b.waitJS(`location.hash.startsWith("#/batch/") && document.querySelector('.page-head .badge[data-status="succeeded"]') !== null`)
	wantCause := fmt.Sprintf("caused by public.sales backfill %d of stream %s (proposal 1)", repair, e.name)
	if got := b.text(".bf-caused"); got != "Lineage: "+wantCause {
		t.Errorf("the batch backfill's page says %q, want %q", got, "Lineage: "+wantCause)
	}
	var p api.ProposalView
	e.ok(http.StatusOK, &p, "GET", "/api/v1/lineage/proposals/1", "")
	var bb api.BatchBackfillView
	e.ok(http.StatusOK, &bb, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", p.BatchBackfillID), "")
	if strings.Join(bb.CausedBy, "; ") != wantCause || bb.Name != "lineage_1" {
		t.Errorf("the batch backfill %q: caused_by %v, want [%s]", bb.Name, bb.CausedBy, wantCause)
	}
	if p.State != store.ProposalSubmitted || p.DecidedBy != "console" {
		t.Fatalf("proposal after Approve: %+v, want submitted by the console's caller", p)
	}
	var insts []api.BatchInstanceView
	e.ok(http.StatusOK, &insts, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d/instances", p.BatchBackfillID), "")
	if len(insts) != 4 {
		t.Fatalf("the approved batch backfill has %d instances, want 4 (2 dates × the task and its downstream)", len(insts))
	}

	// The audit trail links both ways.
	var trail []api.AuditRecord
	e.ok(http.StatusOK, &trail, "GET", "/api/v1/audit", "")
	links := map[string]string{}
	for _, r := range trail {
		links[fmt.Sprintf("%s %d", r.Kind, r.ID)] = strings.Join(r.Lineage, "; ")
	}
	if got, want := links[fmt.Sprintf("stream %d", repair)], fmt.Sprintf("caused batch backfill %d of sales.daily_sales (proposal 1) for 2 cycles", p.BatchBackfillID); got != want {
		t.Errorf("the repair's audit record: lineage %q, want %q", got, want)
	}
	if got, want := links[fmt.Sprintf("batch %d", p.BatchBackfillID)], fmt.Sprintf("caused by public.sales backfill %d of stream %s (proposal 1)", repair, e.name); got != want {
		t.Errorf("the batch backfill's audit record: lineage %q, want %q", got, want)
	}

	b.open("#/streams/"+e.name+"/objects/public.sales", `.sk-caused li[data-proposal="1"]`)
	line := fmt.Sprintf("Backfill #%d caused batch backfill #%d of sales.daily_sales for 2 cycles: 2026-03-04, 2026-03-06 (lineage)", repair, p.BatchBackfillID)
	if got := b.text(`.sk-caused li[data-proposal="1"]`); got != line {
		t.Errorf("the object's page says %q, want %q", got, line)
	}
}
