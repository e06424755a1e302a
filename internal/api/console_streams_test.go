package api_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// jsValue evaluates a JavaScript expression in the page and returns its value.
func jsValue[T any](b *browser, expr string) T {
	b.t.Helper()
	return value(b, chromedp.Evaluate[T](expr))
}

// textOf is the text of the first element matching sel, read in one
// evaluation: rows that update live are replaced between a query and a
// read of their nodes.
func textOf(b *browser, sel string) string {
	b.t.Helper()
	return jsValue[string](b, `(document.querySelector(`+jsString(sel)+`) || {innerText: `+jsString("(nothing matches "+sel+")")+`}).innerText`)
}

// objectRow is a JavaScript expression for the objects tab's row of object.
func objectRow(object string) string {
	return `document.querySelector('tr[data-object=` + jsString(object) + `]')`
}

// objectStatus is a JavaScript expression for the status badge of object's row.
func objectStatus(object string) string {
	return objectRow(object) + `.querySelector('.badge').dataset.status`
}

const (
	initiateButton = `document.querySelector('button[data-action="initiate"]')`
	stopButton     = `document.querySelector('button[data-action="stop"]')`
	confirmDialog  = `dialog[data-dialog="confirm"]`
)

// backfillStatuses is the order of the distinct consecutive statuses of each
// object's backfills in the events, and the index of the first event of
// each status of each object.
func backfillStatuses(evs []map[string]any, streamName string) (map[string][]string, map[string]int) {
	seq := map[string][]string{}
	first := map[string]int{}
	for i, ev := range evs {
		bf, ok := ev["backfill"].(map[string]any)
		if !ok || ev["stream"] != streamName {
			continue
		}
		obj := fmt.Sprint(bf["schema"], ".", bf["table"])
		st := fmt.Sprint(bf["status"])
		if s := seq[obj]; len(s) == 0 || s[len(s)-1] != st {
			seq[obj] = append(s, st)
		}
		if _, ok := first[obj+" "+st]; !ok {
			first[obj+" "+st] = i
		}
	}
	return seq, first
}

// inOrder says whether want is a subsequence of got.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// destRows counts the rows of a table of the SQLite destination.
func destRows(t *testing.T, e *env, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(e.ctx, `SELECT count(*) FROM "`+table+`"`).Scan(&n); err != nil {
		t.Fatalf("count %s in the destination: %v", table, err)
	}
	return n
}

func sourceRows(t *testing.T, e *env, table string) int {
	t.Helper()
	var n int
	if err := e.src.QueryRow(e.ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConsoleStreamsBackfill backfills two objects from the Objects tab:
// select both, initiate, confirm, and watch them go pending, active and
// completed one at a time (max_concurrent is 1), the rows updated in place
// from pushed events.
func TestConsoleStreamsBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{
		backfill: "{mode: manual, max_concurrent: 1, rows_per_second: 2000, chunk_size: 500}",
		setup: `
		CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, email text, created_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO customers (id, name, email) SELECT g, 'customer ' || g, 'c' || g || '@example.com' FROM generate_series(1, 3000) g;
		CREATE TABLE orders (id int PRIMARY KEY, customer_id bigint NOT NULL, amount numeric(10,2), note text, placed_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO orders (id, customer_id, amount, note) SELECT g, 1 + g % 3000, g * 1.5, 'order ' || g FROM generate_series(1, 3200) g;
		CREATE TABLE audit_log (id bigint PRIMARY KEY, event text);
		INSERT INTO audit_log SELECT g, 'e' || g FROM generate_series(1, 10) g;`,
	})
	const cust, ord = "public.customers", "public.orders"
	b := newBrowser(t, e)

	// The streams list links to the Objects tab.
	b.open("#/streams", `tr[data-stream=`+jsString(e.name)+`] a[data-action="objects"]`)
	b.waitJS(`document.querySelector('tr[data-stream=` + jsString(e.name) + `] [data-status]').dataset.status === "running"`)
	b.waitJS(`document.querySelector('tr[data-stream=` + jsString(e.name) + `] [data-count="-"]') !== null`)
	// The list says what the stream reads and writes, where as the title.
	if ends := jsValue[[]string](b, `(() => { const s = document.querySelector('tr[data-stream=`+jsString(e.name)+`] [data-destination]');
		return [s.dataset.source, s.dataset.destination, s.textContent, s.title]; })()`); ends[0] != "postgres" || ends[1] == "" ||
		!strings.Contains(ends[2], "postgres → ") || !strings.Contains(ends[3], "destination: ") || strings.Contains(ends[3], "password") {
		t.Errorf("the stream's source and destination show %q", ends)
	}
	b.click(`tr[data-stream=` + jsString(e.name) + `] a[data-action="objects"]`)
	b.waitJS(objectRow(ord) + ` !== null && ` + objectRow(cust) + ` !== null`)
	if got := jsValue[string](b, `location.hash`); got != "#/streams/"+e.name {
		t.Fatalf("the Objects link went to %q", got)
	}

	// Nothing selected: both actions are off, and say why.
	for _, o := range []string{cust, ord, "public.audit_log"} {
		if st := jsValue[string](b, objectStatus(o)); st != "-" {
			t.Fatalf("%s shows status %q before any backfill, want -", o, st)
		}
	}
	if !jsValue[bool](b, initiateButton+`.disabled && `+stopButton+`.disabled && `+initiateButton+`.title.includes("Select")`) {
		t.Fatal("with nothing selected, Initiate and Stop should be disabled with a reason")
	}
	if reason := textOf(b, `tr[data-object="public.audit_log"] .sk-reason`); !strings.Contains(reason, "manual backfill mode") {
		t.Errorf("the reason for - is %q", reason)
	}
	if cols := jsValue[string](b, objectRow(ord)+`.querySelector('.sk-cols').textContent`); !strings.Contains(cols, "customer_id bigint") || !strings.Contains(cols, "amount numeric") {
		t.Errorf("the columns of orders show %q", cols)
	}

	// The rows are updated in place: mark them to tell.
	jsValue[bool](b, objectRow(cust)+`.tmMark = true`)
	jsValue[bool](b, objectRow(ord)+`.tmMark = true`)

	b.click(`input[data-select="public.customers"]`)
	b.click(`input[data-select="public.orders"]`)
	b.waitJS(`!` + initiateButton + `.disabled && ` + stopButton + `.disabled`)
	if title := jsValue[string](b, stopButton+`.title`); !strings.Contains(title, "public.customers has no backfill running") {
		t.Errorf("Stop's title with two objects never backfilled: %q", title)
	}

	// Record what the page shows on every frame: states pass quickly, and
	// the assertions below read the record instead of racing the backfills.
	jsValue[bool](b, `(() => {
		window.tmSeen = [];
		let last = "";
		const tick = () => {
			const st = (o) => { const r = document.querySelector('tr[data-object="' + o + '"] .badge'); return r ? r.dataset.status : "?"; };
			const i = document.querySelector('button[data-action="initiate"]'), s = document.querySelector('button[data-action="stop"]');
			if (!i || !s || !document.querySelector('tr[data-object]')) return; // left the objects tab: done
			const now = [st("public.customers"), st("public.orders"), i.disabled ? "initiate-off" : "initiate-on", s.disabled ? "stop-off" : "stop-on"].join(" ");
			if (now !== last) { window.tmSeen.push(now); last = now; }
			requestAnimationFrame(tick);
		};
		tick();
		return true;
	})()`)

	b.run(chromedp.Click(chromedp.CSS(`button[data-action="initiate"]`)), chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	if title := textOf(b, confirmDialog+` h2`); title != "Initiate backfill of 2 objects?" {
		t.Errorf("the confirmation is titled %q", title)
	}
	if body := textOf(b, confirmDialog); !strings.Contains(body, cust) || !strings.Contains(body, ord) {
		t.Errorf("the confirmation does not name both objects: %q", body)
	}
	// The source's estimate: small tables are counted exactly.
	b.waitJS(`(document.querySelector('` + confirmDialog + ` .sk-estimate') || {}).textContent?.startsWith("In all 6,200 rows")`)
	if size := textOf(b, confirmDialog+` li:last-child .sk-size`); !strings.HasPrefix(size, "3,200 rows") {
		t.Errorf("the estimate of orders shows %q", size)
	}
	b.shot("objects-confirm")
	b.click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(`document.querySelector('` + confirmDialog + `') === null`)

	// One at a time: customers copies while orders waits; the selection
	// is both, so Initiate is off and Stop is on.
	b.waitJS(objectStatus(cust) + ` === "active" && ` + objectStatus(ord) + ` === "pending" && ` +
		initiateButton + `.disabled && !` + stopButton + `.disabled && ` + objectRow(cust) + `.querySelector('.sk-figs') !== null`)
	b.shot("objects-running")
	if title := jsValue[string](b, initiateButton+`.title`); !strings.Contains(title, "public.customers is active") || !strings.Contains(title, "public.orders is pending") {
		t.Errorf("Initiate's title while running: %q", title)
	}

	b.waitJS(objectStatus(cust) + ` === "completed" && ` + objectStatus(ord) + ` === "completed" && ` +
		objectRow(cust) + `.querySelector('.sk-yes') !== null && ` + objectRow(ord) + `.querySelector('.sk-yes') !== null`)
	// Done: both may be initiated again, neither stopped.
	b.waitJS(`!` + initiateButton + `.disabled && ` + stopButton + `.disabled`)
	seen := jsValue[[]string](b, `window.tmSeen`)
	for _, want := range []string{
		"active pending initiate-off stop-on",      // customers copies, orders waits
		"completed active initiate-off stop-off",   // then orders copies; customers, selected too, is no longer stoppable
		"completed completed initiate-on stop-off", // done
	} {
		if !slices.Contains(seen, want) {
			t.Errorf("the page never showed %q; it showed %q", want, seen)
		}
	}
	if !jsValue[bool](b, objectRow(cust)+`.tmMark === true && `+objectRow(ord)+`.tmMark === true`) {
		t.Error("the rows were rebuilt instead of updated in place")
	}
	if !jsValue[bool](b, `document.querySelector('input[data-select="public.customers"]').checked && document.querySelector('input[data-select="public.orders"]').checked`) {
		t.Error("the selection was lost")
	}
	if got := textOf(b, `tr[data-object="public.orders"] .sk-runcell`); !strings.Contains(got, "3,200 rows") {
		t.Errorf("the completed run of orders shows %q", got)
	}
	// The 7-day counters are re-read once the runs finish.
	b.waitJS(objectRow(ord) + `.cells[4].textContent === "3,200" && ` + objectRow(cust) + `.cells[4].textContent === "3,000"`)
	b.shot("objects-done")

	seq, first := backfillStatuses(b.events(), e.name)
	for _, o := range []string{cust, ord} {
		if !inOrder(seq[o], []string{"pending", "active", "completed"}) {
			t.Errorf("statuses of %s in the events: %v, want pending, active, completed in order", o, seq[o])
		}
	}
	// orders waited its turn while customers was active.
	order := []string{ord + " pending", cust + " active", cust + " completed", ord + " active", ord + " completed"}
	for i := 1; i < len(order); i++ {
		a, okA := first[order[i-1]]
		c, okC := first[order[i]]
		if !okA || !okC || a >= c {
			t.Errorf("event %q (#%d) should precede %q (#%d)", order[i-1], a, order[i], c)
		}
	}

	e.waitLoaded(cust, ord)
	for _, tbl := range []string{"customers", "orders"} {
		if src, dst := sourceRows(t, e, tbl), destRows(t, e, tbl); src != dst {
			t.Errorf("%s: %d rows in the source, %d in the destination", tbl, src, dst)
		}
	}

	// The object's history.
	b.click(`tr[data-object="public.orders"] a.sk-name`)
	b.waitJS(`document.querySelector('tr[data-backfill] [data-status="completed"]') !== null`)
	if got := jsValue[string](b, `location.hash`); got != "#/streams/"+e.name+"/objects/public.orders" {
		t.Fatalf("the object link went to %q", got)
	}
	runs := e.backfills("stream=" + e.name + "&object=public.orders")
	if len(runs) != 1 {
		t.Fatalf("orders has %d runs", len(runs))
	}
	r := textOf(b, fmt.Sprintf(`tr[data-backfill="%d"]`, runs[0].ID))
	if runs[0].StartedBy != "console" {
		t.Errorf("a backfill initiated from the console is started by %q", runs[0].StartedBy)
	}
	for _, want := range []string{"completed", "console", "3,200", fmt.Sprint(runs[0].Chunks)} {
		if !strings.Contains(r, want) {
			t.Errorf("the history row %q lacks %q", r, want)
		}
	}
	if chips := textOf(b, `.sk-chips`); !strings.Contains(chips, "customer_id") || !strings.Contains(strings.ToLower(chips), "key") {
		t.Errorf("the history page's columns: %q", chips)
	}
	b.shot("object-history")
}

// TestConsoleStreamsRefusal checks that the actions say why they are off,
// that a refusal of the API shows in the dialog with its message, and that
// a stop from the console stops.
func TestConsoleStreamsRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{
		backfill: "{mode: manual, max_concurrent: 1, rows_per_second: 100, chunk_size: 20}",
		setup: `
		CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'v' || g FROM generate_series(1, 5000) g;
		CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b SELECT generate_series(1, 10);
		CREATE TABLE c (id int PRIMARY KEY);
		CREATE TABLE nokey (v int);`,
	})
	e.initiate(http.StatusCreated, `{"objects": ["public.b"]}`)
	e.waitLoaded("public.b")

	br := newBrowser(t, e)
	br.open("#/streams/"+e.name, `tr[data-object="public.c"]`)
	br.waitJS(objectStatus("public.b") + ` === "completed"`)

	click := func(sel string) { br.click(sel) }
	// A table the stream cannot key is failed, with the reason in sight.
	if st := jsValue[string](br, objectStatus("public.nokey")); st != "failed" {
		t.Errorf("public.nokey shows %q, want failed", st)
	}
	if reason, want := textOf(br, `tr[data-object="public.nokey"] .sk-reason`), e.objects()["public.nokey"].Reason; reason != want || want == "" {
		t.Errorf("public.nokey's reason shows %q, want %q", reason, want)
	}
	// A completed object may be backfilled again, not stopped.
	click(`input[data-select="public.b"]`)
	br.waitJS(`!` + initiateButton + `.disabled && ` + stopButton + `.disabled`)
	if title := jsValue[string](br, stopButton+`.title`); !strings.Contains(title, "public.b is already completed") {
		t.Errorf("Stop's title for a completed object: %q", title)
	}
	click(`input[data-select="public.c"]`)
	br.waitJS(stopButton + `.title.includes("public.c has no backfill running") && ` + stopButton + `.disabled && !` + initiateButton + `.disabled`)
	if hint := textOf(br, `.sk-hint`); !strings.Contains(hint, "Cannot stop") {
		t.Errorf("the hint under the toolbar: %q", hint)
	}
	click(`input[data-select="public.b"]`)
	click(`input[data-select="public.c"]`)
	br.waitJS(initiateButton + `.disabled && ` + stopButton + `.disabled`)

	// The console's rules only pre-empt: a between-times initiation (by the
	// CLI, say) makes the API refuse, and the dialog shows why.
	click(`input[data-select="public.a"]`)
	click(`button[data-action="initiate"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	if title := textOf(br, confirmDialog+` h2`); title != "Initiate backfill of public.a?" {
		t.Errorf("the confirmation is titled %q", title)
	}
	e.initiate(http.StatusCreated, `{"objects": ["public.a"]}`)
	br.waitJS(`["pending", "active"].includes(` + objectStatus("public.a") + `)`)
	click(confirmDialog + ` button[data-action="yes"]`)
	br.waitJS(`(document.querySelector('` + confirmDialog + ` .error-box') || {}).textContent?.includes("cannot initiate a backfill of public.a")`)
	if msg := textOf(br, confirmDialog+` .error-box`); !strings.Contains(msg, "refused") {
		t.Errorf("the refusal shows %q", msg)
	}
	br.shot("objects-refused")
	click(confirmDialog + ` button[data-action="cancel"]`)
	br.waitJS(`document.querySelector('` + confirmDialog + `') === null`)
	if n := len(e.backfills("stream=" + e.name + "&object=public.a")); n != 1 {
		t.Fatalf("public.a has %d runs after the refusal, want 1", n)
	}

	// public.a runs: it may be stopped, not initiated.
	br.waitJS(initiateButton + `.disabled && !` + stopButton + `.disabled && /public\.a is (pending|active)/.test(` + initiateButton + `.title)`)
	click(`button[data-action="stop"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	if title := textOf(br, confirmDialog+` h2`); title != "Stop backfill of public.a?" {
		t.Errorf("the stop confirmation is titled %q", title)
	}
	click(confirmDialog + ` button[data-action="yes"]`)
	br.waitJS(objectStatus("public.a") + ` === "stopped" && ` + stopButton + `.disabled && ` + stopButton + `.title.includes("public.a is already stopped") && !` + initiateButton + `.disabled`)
	if o := e.objects()["public.a"]; o.Status != stream.StatusStopped {
		t.Errorf("public.a is %s after the console stopped it", o.Status)
	}
	br.shot("objects-stopped")

	// The history page of public.a shows the stopped run; a run initiated
	// there appears on top and makes progress live, in place.
	first := e.backfills("stream=" + e.name + "&object=public.a")[0].ID
	br.click(`tr[data-object="public.a"] a.sk-name`)
	br.waitJS(fmt.Sprintf(`(document.querySelector('tr[data-backfill="%d"] .badge') || {}).dataset?.status === "stopped"`, first))
	br.waitJS(`!` + initiateButton + `.disabled && ` + stopButton + `.disabled`)
	// Initiated with a rate limit of its own, then another one set while
	// it runs.
	click(`button[data-action="initiate"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	click(confirmDialog + ` details.sk-careful summary`)
	br.run(chromedp.SendKeys(chromedp.CSS(confirmDialog+` input[name="rows_per_second"]`), "150"))
	click(confirmDialog + ` button[data-action="yes"]`)
	newest := `document.querySelector('tbody tr[data-backfill]')`
	br.waitJS(fmt.Sprintf(`%s.dataset.backfill !== "%d" && %s.querySelector('.badge').dataset.status === "active" && %s.disabled && !%s.disabled`,
		newest, first, newest, initiateButton, stopButton))
	jsValue[bool](br, newest+`.tmMark = true`)
	br.waitJS(newest + `.tmMark === true && Number(` + newest + `.cells[10].textContent.replaceAll(",", "")) >= 40`)
	second := e.backfills("stream=" + e.name + "&object=public.a")[0]
	if rate := second.Options["rows_per_second"]; rate != 150.0 {
		t.Errorf("the run initiated with 150 rows/s has options %v", second.Options)
	}
	if sub := textOf(br, fmt.Sprintf(`tr[data-backfill="%d"] .sk-sub`, second.ID)); !strings.Contains(sub, "150 rows/s") {
		t.Errorf("the run's options show %q", sub)
	}
	br.shot("object-history-active")
	click(`button[data-action="stop"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	click(confirmDialog + ` button[data-action="yes"]`)
	br.waitJS(newest + `.tmMark === true && ` + newest + `.querySelector('.badge').dataset.status === "stopped" && !` + initiateButton + `.disabled`)

	// A run scheduled an hour ahead waits, saying until when; its rate
	// limit is changed while it waits. (Not while it is active: changing
	// an active run's rate races with the event feed in internal/stream,
	// SetRowsPerSecond mutating an options map already published.)
	click(`button[data-action="initiate"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	click(confirmDialog + ` details.sk-careful summary`)
	jsValue[bool](br, `(() => {
		const d = new Date(Date.now() + 3600e3), p = (n) => String(n).padStart(2, "0");
		document.querySelector('`+confirmDialog+` input[name="run_at"]').value = d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + "T" + p(d.getHours()) + ":" + p(d.getMinutes());
		return true;
	})()`)
	click(confirmDialog + ` button[data-action="yes"]`)
	br.waitJS(newest + `.querySelector('.badge').dataset.status === "pending" && ` + newest + `.querySelector('.sk-sub').textContent.startsWith("at ") && ` +
		`document.querySelector('.sk-facts .sk-reason').textContent.startsWith("scheduled to start at ")`)
	third := e.backfills("stream=" + e.name + "&object=public.a")[0]
	if o := e.objects()["public.a"]; o.Status != stream.StatusPending || o.BackfillID != third.ID || !strings.HasPrefix(o.Reason, "scheduled to start at ") {
		t.Errorf("public.a after a scheduled initiation: %+v", o)
	}
	click(`button[data-action="rate"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(`dialog[data-dialog="rate"]`)),
		chromedp.SetValue(chromedp.CSS(`dialog[data-dialog="rate"] input`), "60"),
		chromedp.Click(chromedp.CSS(`dialog[data-dialog="rate"] button[data-action="yes"]`)))
	br.waitJS(`document.querySelector('dialog[data-dialog="rate"]') === null && ` + newest + `.textContent.includes("60 rows/s")`)
	if rate := e.backfill(third.ID).Options["rows_per_second"]; rate != 60.0 {
		t.Errorf("after setting 60 rows/s, the run's limit is %v", rate)
	}
	br.shot("object-history-scheduled")
	click(`button[data-action="stop"]`)
	br.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	click(confirmDialog + ` button[data-action="yes"]`)
	br.waitJS(newest + `.querySelector('.badge').dataset.status === "stopped" && ` + stopButton + `.disabled && ` + `document.querySelector('button[data-action="rate"]').disabled`)
	if n := len(e.backfills("stream=" + e.name + "&object=public.a")); n != 3 {
		t.Errorf("public.a has %d runs, want 3", n)
	}
}

// TestConsoleStreamsList pauses and resumes a stream from the streams list,
// which follows the pushed state changes, and checks that a reset asks
// first and says what it does.
func TestConsoleStreamsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY)`})
	b := newBrowser(t, e)
	tr := `tr[data-stream=` + jsString(e.name) + `]`
	state := `document.querySelector('` + tr + ` .badge').dataset.status`
	btn := func(action string) string {
		return `document.querySelector('` + tr + ` button[data-action="` + action + `"]')`
	}
	b.open("#/streams", tr)
	b.waitJS(state + ` === "running" && ` + btn("resume") + `.disabled && !` + btn("pause") + `.disabled`)

	b.click(tr + ` button[data-action="pause"]`)
	b.waitJS(state + ` === "paused" && !` + btn("resume") + `.disabled && ` + btn("pause") + `.disabled`)
	if reason := textOf(b, tr+` .sk-reason`); reason != "paused by request" {
		t.Errorf("the paused stream's reason shows %q", reason)
	}
	if st := e.d.Streams()[0].State().State; st != "paused" {
		t.Errorf("the stream is %s after Pause", st)
	}
	b.shot("streams-list")
	b.click(tr + ` button[data-action="resume"]`)
	b.waitJS(state + ` === "running" && ` + btn("resume") + `.disabled`)

	// Reset asks first; cancelling sends nothing.
	b.run(chromedp.Click(chromedp.CSS(tr+` button[data-action="reset"]`)), chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	if body := textOf(b, confirmDialog); !strings.Contains(body, "re-creates the slot") || !strings.Contains(body, "backfills every streamed object again") {
		t.Errorf("the reset confirmation says %q", body)
	}
	b.shot("streams-reset-confirm")
	b.click(confirmDialog + ` button[data-action="cancel"]`)
	b.waitJS(`document.querySelector('` + confirmDialog + `') === null`)
	if st := e.d.Streams()[0].State().State; st != "running" {
		t.Errorf("the stream is %s after a cancelled reset", st)
	}
}

// TestConsoleStreamsScoped initiates narrowed backfills from the dialog: a
// filter or a column the source cannot take shows the daemon's 400 in the
// dialog and starts nothing; a filtered backfill copies the matching rows
// and its history row shows the filter and the verify that ended it
// (match); a column subset over a destination missing rows ends with a
// verify that differs, saying how many ranges; and two objects initiated
// "As one run" share a run id, named in the success message and in the
// history.
func TestConsoleStreamsScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{
		backfill: "{mode: manual, chunk_size: 40}",
		setup: `
		CREATE TABLE items (id int PRIMARY KEY, region text NOT NULL, qty int NOT NULL);
		INSERT INTO items SELECT g, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END, g * 2 FROM generate_series(1, 300) g;
		CREATE TABLE tags (id int PRIMARY KEY, label text);
		INSERT INTO tags SELECT g, 'tag ' || g FROM generate_series(1, 60) g;`,
	})
	const items, tags = "public.items", "public.tags"
	b := newBrowser(t, e)
	click := func(sel string) { b.t.Helper(); b.click(sel) }
	// typeInto replaces the text of an input the way a user types it.
	typeInto := func(sel, text string) {
		b.t.Helper()
		jsValue[bool](b, `(() => { const i = document.querySelector(`+jsString(sel)+`); i.value = ""; i.dispatchEvent(new Event("input")); return true; })()`)
		if text != "" {
			b.run(chromedp.SendKeys(chromedp.CSS(sel), text))
		}
	}
	const filterInput, columnsInput = confirmDialog + ` input[name="filter"]`, confirmDialog + ` input[name="columns"]`
	problem := `(document.querySelector('` + confirmDialog + ` .error-box') || {}).textContent`
	runsOf := func(object string) []store.Backfill { return e.backfills("stream=" + e.name + "&object=" + object) }

	b.open("#/streams/"+e.name, `tr[data-object="public.tags"]`)
	b.waitJS(objectRow(items) + ` !== null`)
	click(`input[data-select="public.items"]`)
	b.waitJS(`!` + initiateButton + `.disabled`)
	click(`button[data-action="initiate"]`)
	b.run(chromedp.WaitVisible(chromedp.CSS(filterInput)))

	// One object: no "As one run"; its non-key columns are offered.
	if jsValue[bool](b, `document.querySelector('`+confirmDialog+` input[name="as_one_run"]') !== null`) {
		t.Error(`the dialog for one object offers "As one run"`)
	}
	if got := jsValue[string](b, `[...document.querySelectorAll('`+confirmDialog+` datalist option')].map((o) => o.value).join(",")`); got != "region,qty" {
		t.Errorf("the columns offered for items: %q, want region,qty", got)
	}
	if got := jsValue[string](b, `[...document.querySelectorAll('`+confirmDialog+` button.sk-colpick')].map((o) => o.textContent).join(",")`); got != "region,qty" {
		t.Errorf("the column buttons for items: %q, want region,qty", got)
	}

	// A filter the source cannot take: the daemon's 400 stays in the
	// dialog, and nothing starts.
	typeInto(filterInput, "nosuch > 1")
	click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(problem + `?.includes('column "nosuch" does not exist')`)
	if msg := textOf(b, confirmDialog+` .error-box`); !strings.HasPrefix(msg, "bad request:") {
		t.Errorf("a bad filter shows %q", msg)
	}
	b.shot("objects-bad-filter")
	// So does a column the table does not have.
	typeInto(filterInput, "")
	typeInto(columnsInput, "nosuch")
	click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(problem + `?.includes('public.items has no column "nosuch"')`)
	if n := len(e.backfills("stream=" + e.name)); n != 0 {
		t.Fatalf("%d backfills after refused initiations, want none", n)
	}
	if st := e.objects()[items].Status; st != "-" {
		t.Fatalf("items is %q after refused initiations, want -", st)
	}

	// A filter that selects a third of the rows.
	typeInto(columnsInput, "")
	typeInto(filterInput, "region = 'eu'")
	b.waitJS(`document.querySelector('` + confirmDialog + ` .sk-notes').textContent.includes("matching the filter")`)
	click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(`document.querySelector('` + confirmDialog + `') === null`)
	b.waitJS(objectStatus(items) + ` === "completed"`)
	runs := runsOf(items)
	if len(runs) != 1 || runs[0].Options["filter"] != "region = 'eu'" || runs[0].Options["columns"] != nil || runs[0].RunID != 0 {
		t.Fatalf("items' runs after a filtered initiation: %+v", runs)
	}
	filtered := runs[0].ID
	// The objects tab says how the verify went.
	b.waitJS(`(` + objectRow(items) + `.querySelector('.sk-runcell [data-verify]') || {}).dataset?.verify === "match"`)

	// The history shows the filter and the verify.
	click(`tr[data-object="public.items"] a.sk-name`)
	row := fmt.Sprintf(`tr[data-backfill="%d"]`, filtered)
	b.waitJS(fmt.Sprintf(`(document.querySelector('%s [data-verify]') || {}).dataset?.verify === "match"`, row))
	rec := e.backfill(filtered)
	if rec.Verify == nil || rec.Verify.Status != "match" || rec.RowsRead != 100 || rec.Verify.SourceRows != 100 {
		t.Fatalf("the filtered run: read %d rows, verify %+v; want 100 rows and a match", rec.RowsRead, rec.Verify)
	}
	if got := jsValue[string](b, `document.querySelector('`+row+` .sk-optfilter').textContent`); got != "where region = 'eu'" {
		t.Errorf("the filtered run's options show %q", got)
	}
	if title := jsValue[string](b, `document.querySelector('`+row+` [data-verify]').title`); !strings.Contains(title, "100 source rows") {
		t.Errorf("the verify's title: %q", title)
	}
	if head := textOf(b, `.sk-runs thead`); !strings.Contains(strings.ToLower(head), "verify") {
		t.Errorf("the history's head lacks Verify: %q", head)
	}
	if src, dst := 100, destRows(t, e, "items"); src != dst {
		t.Errorf("items: %d rows in the destination after the filtered backfill, want %d", dst, src)
	}
	b.shot("object-history-filter")

	// A column subset, from the history page's own dialog, picked with its
	// button: the destination holds only the filtered rows, so the verify
	// differs, and says in how many ranges.
	click(`button[data-action="initiate"]`)
	b.run(chromedp.WaitVisible(chromedp.CSS(columnsInput)))
	click(confirmDialog + ` button.sk-colpick[data-column="qty"]`)
	if got := jsValue[string](b, `document.querySelector('`+columnsInput+`').value`); got != "qty" {
		t.Errorf("the column button wrote %q", got)
	}
	click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(`document.querySelector('` + confirmDialog + `') === null`)
	newest := `document.querySelector('tbody tr[data-backfill]')`
	b.waitJS(fmt.Sprintf(`%s.dataset.backfill !== "%d" && (%s.querySelector('[data-verify]') || {}).dataset?.verify === "differ"`, newest, filtered, newest))
	subset := runsOf(items)[0]
	if cols, _ := subset.Options["columns"].([]any); len(cols) != 1 || cols[0] != "qty" || subset.Options["filter"] != nil {
		t.Fatalf("the column-subset run's options: %v", subset.Options)
	}
	subset = e.backfill(subset.ID)
	if subset.Verify == nil || subset.Verify.Status != "differ" || subset.Verify.DifferingRanges == 0 {
		t.Fatalf("the column-subset run's verify: %+v, want differ", subset.Verify)
	}
	row = fmt.Sprintf(`tr[data-backfill="%d"]`, subset.ID)
	want := fmt.Sprintf("differ %d of %d ranges", subset.Verify.DifferingRanges, subset.Verify.Ranges)
	if got := textOf(b, row+` [data-verify]`); got != want {
		t.Errorf("the differing verify shows %q, want %q", got, want)
	}
	if got := jsValue[string](b, `document.querySelector('`+row+` .sk-optcols').textContent`); got != "columns qty" {
		t.Errorf("the column-subset run's options show %q", got)
	}
	// The object's reason says so, as the daemon does.
	wantReason := e.objects()[items].Reason
	if !strings.Contains(wantReason, "key ranges differing") {
		t.Errorf("items' reason after a differing verify: %q", wantReason)
	}
	b.waitJS(`(document.querySelector('.sk-facts .sk-reason') || {}).textContent === ` + jsString(wantReason))
	b.shot("object-history-verify")

	// Two objects as one run, from the objects tab.
	b.open("#/streams/"+e.name, `tr[data-object="public.tags"]`)
	jsValue[bool](b, `(() => {
		window.tmToasts = [];
		new MutationObserver((ms) => { for (const m of ms) for (const n of m.addedNodes) window.tmToasts.push(n.textContent); })
			.observe(document.getElementById("toasts"), { childList: true });
		return true;
	})()`)
	click(`input[data-select="public.items"]`)
	click(`input[data-select="public.tags"]`)
	b.waitJS(`!` + initiateButton + `.disabled`)
	click(`button[data-action="initiate"]`)
	b.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog + ` input[name="as_one_run"]`)))
	if jsValue[bool](b, `document.querySelector('`+columnsInput+`').hasAttribute("list")`) {
		t.Error("with two objects selected, the columns input offers one object's columns")
	}
	click(confirmDialog + ` input[name="as_one_run"]`)
	b.shot("objects-one-run-confirm")
	click(confirmDialog + ` button[data-action="yes"]`)
	// A refusal stays in the dialog: say what it was.
	b.waitJS(`document.querySelector('` + confirmDialog + `') === null || document.querySelector('` + confirmDialog + ` .error-box') !== null`)
	if refusal := jsValue[string](b, `(document.querySelector('`+confirmDialog+` .error-box') || {}).textContent || ""`); refusal != "" {
		t.Fatalf("initiating items and tags as one run was refused: %s", refusal)
	}
	b.waitJS(`window.tmToasts.some((s) => / as run \d+$/.test(s))`)
	a, c := runsOf(items)[0], runsOf(tags)[0]
	if a.ID == subset.ID || a.RunID == 0 || c.RunID != a.RunID || a.Options["filter"] != nil || a.Options["columns"] != nil {
		t.Fatalf("initiated as one run: items %+v, tags %+v", a, c)
	}
	toasts := jsValue[[]string](b, `window.tmToasts`)
	if wantToast := fmt.Sprintf("Initiated the backfill of public.items and public.tags as run %d", a.RunID); !slices.Contains(toasts, wantToast) {
		t.Errorf("the toasts %q lack %q", toasts, wantToast)
	}
	var run struct {
		ID        int64            `json:"id"`
		Backfills []store.Backfill `json:"backfills"`
	}
	e.ok(http.StatusOK, &run, "GET", fmt.Sprintf("/api/v1/streams/%s/runs/%d", e.name, a.RunID), "")
	if run.ID != a.RunID || len(run.Backfills) != 2 {
		t.Errorf("run %d: %+v", a.RunID, run)
	}
	// Both complete, verified, and the destination equals the source.
	for _, o := range []string{items, tags} {
		b.waitJS(objectStatus(o) + ` === "completed" && (` + objectRow(o) + `.querySelector('.sk-runcell [data-verify]') || {}).dataset?.verify === "match"`)
	}
	e.waitLoaded(items, tags)
	for _, tbl := range []string{"items", "tags"} {
		if src, dst := sourceRows(t, e, tbl), destRows(t, e, tbl); src != dst {
			t.Errorf("%s: %d rows in the source, %d in the destination", tbl, src, dst)
		}
	}
	// The reason of the earlier differing verify is gone.
	b.waitJS(objectRow(items) + `.querySelector('.sk-reason') === null`)
	b.shot("objects-one-run")

	// The history names the run.
	click(`tr[data-object="public.tags"] a.sk-name`)
	b.waitJS(fmt.Sprintf(`(document.querySelector('tr[data-backfill="%d"] [data-run]') || {}).textContent === "run %d"`, c.ID, a.RunID))
	b.waitJS(fmt.Sprintf(`(document.querySelector('tr[data-backfill="%d"] [data-verify]') || {}).dataset?.verify === "match"`, c.ID))
}
