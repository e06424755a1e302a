package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleErrorPages: an unknown object and an unknown stream show
// only the error, with a link back, and none of the page they would have
// been (no facts, no tables).
func TestConsoleErrorPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY)`})
	b := newBrowser(t, e)
	b.open("#/streams/"+e.name, `tr[data-object="public.t"]`)
	for _, c := range []struct {
		route, says, back string
	}{
		{"#/streams/" + e.name + "/objects/public.nosuch", "no object public.nosuch in stream " + e.name, "#/streams/" + e.name},
		{"#/streams/nosuch", `no stream "nosuch"`, "#/streams"},
	} {
		b.open(c.route, `main h1`)
		b.waitJS(`[...document.querySelectorAll("main .error-box")].some((el) => el.offsetParent && el.textContent.includes(` + jsString(c.says) + `))`)
		if h1 := textOf(b, `main h1`); h1 != "Not found" {
			t.Errorf("%s: the heading says %q, want Not found", c.route, h1)
		}
		if n := jsValue[int](b, `document.querySelectorAll("main .sk-facts, main table, main .sk-colpanel, main .sk-tablebox, main button").length`); n != 0 {
			t.Errorf("%s: the error page also draws %d facts, tables or buttons of the page", c.route, n)
		}
		if href := jsValue[string](b, `(document.querySelector("main a[data-back]") || {}).getAttribute?.("href") || ""`); href != c.back {
			t.Errorf("%s: the link back goes to %q, want %q", c.route, href, c.back)
		}
		b.shot("console-error-" + strings.NewReplacer("#/", "", "/", "-").Replace(c.route))
	}
}

// TestConsoleTokenFlow: a wrong token then the right one recovers the page
// without a reload (the second prompt says the first token was refused);
// a Cancel sticks (the next page shows the 401 without prompting again),
// and the page's Enter a token button brings the page back.
func TestConsoleTokenFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY)`,
		api: "{tokens: [{name: ann, token: tok-right, role: operator}]}"})
	b := newBrowser(t, e)
	prompt := `document.querySelector('dialog[data-dialog="token"][open]')`
	answer := func(token string) {
		t.Helper()
		b.run(chromedp.SendKeys(chromedp.CSS(`dialog[data-dialog="token"][open] input[name="token"]`), token),
			chromedp.Click(chromedp.CSS(`dialog[data-dialog="token"][open] button[data-action="ok"]`)))
	}
	live := `document.getElementById("live").dataset.state`
	row := `document.querySelector('tr[data-stream=` + jsString(e.name) + `]')`

	b.waitJS(prompt + ` !== null && !` + prompt + `.querySelector("[data-refused]")`)
	answer("tok-wrong")
	b.waitJS(prompt + `?.querySelector("[data-refused]") != null`)
	if msg := textOf(b, `dialog[data-dialog="token"] [data-refused]`); !strings.Contains(msg, "refused") {
		t.Errorf("the second prompt says %q, want that the token was refused", msg)
	}
	answer("tok-right")
	b.waitJS(row + ` !== null && ` + live + ` === "live" && ` + prompt + ` === null`)
	b.shot("console-token-recovered")

	// Cancel sticks: the page says a token is needed, and the next page
	// too, without asking again.
	jsValue[bool](b, `sessionStorage.clear(), true`)
	b.run(chromedp.Navigate(e.base+"/ui/#/streams/"+e.name), chromedp.Reload())
	b.waitJS(prompt + ` !== null`)
	b.click(`dialog[data-dialog="token"][open] button[data-action="cancel"]`)
	b.waitJS(`document.querySelector("main [data-error-page]")?.textContent === "Token needed" && ` + live + ` === "locked"`)
	jsValue[bool](b, `document.getElementById("main").replaceChildren(), true`)
	b.run(chromedp.Navigate(e.base + "/ui/#/streams"))
	b.waitJS(`document.querySelector("main [data-error-page]") !== null || ` + prompt + ` !== null`)
	if jsValue[bool](b, prompt+` !== null`) {
		t.Fatal("after a Cancel the next page asked for a token again")
	}
	if msg := textOf(b, `main .error-box`); !strings.Contains(msg, "unauthorized") {
		t.Errorf("the page without a token says %q, want the daemon's 401", msg)
	}
	b.shot("console-token-cancelled")

	b.click(`main button[data-action="token"]`)
	b.waitJS(prompt + ` !== null`)
	answer("tok-right")
	b.waitJS(row + ` !== null && ` + live + ` === "live"`)
}

// TestConsoleBatchDatesISO: the backfill dialog's dates are typed and
// shown as YYYY-MM-DD whatever the browser's locale (en-US here, whose
// date inputs read 01/11/2025), its start time as YYYY-MM-DD HH:MM, and
// another form is refused naming the field.
func TestConsoleBatchDatesISO(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, consoleTasks)
	b := newBrowser(t, e)
	b.open("#/tasks/sales.extract", `.page-head button[data-action="backfill"]`)
	b.click(`.page-head button[data-action="backfill"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"][open]') !== null`)
	typeDate := func(name, text string) {
		t.Helper()
		sel := bfDialog + `input[name="` + name + `"]`
		jsValue[bool](b, `(() => { const i = document.querySelector(`+jsString(sel)+`); i.value = ""; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)
		b.run(chromedp.SendKeys(chromedp.CSS(sel), text))
	}
	if v := jsValue[string](b, `document.querySelector('`+bfDialog+`input[name="dates.from"]').value`); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(v) {
		t.Errorf("the first date starts as %q, want YYYY-MM-DD", v)
	}
	typeDate("dates.from", "2025-01-11")
	typeDate("dates.to", "2025-01-13")
	for name, want := range map[string]string{"dates.from": "2025-01-11", "dates.to": "2025-01-13"} {
		if got := jsValue[string](b, `document.querySelector('`+bfDialog+`input[name="`+name+`"]').value`); got != want {
			t.Errorf("%s typed as %s reads %q", name, want, got)
		}
	}
	b.click(bfDialog + `button[data-action="preview"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"] .bf-preview[data-count]') !== null`)
	if n := jsValue[string](b, `document.querySelector('dialog[data-dialog="backfill"] .bf-preview').dataset.count`); n != "3" {
		t.Errorf("preview of 2025-01-11..13 counts %s instances, want 3", n)
	}
	b.shot("console-batch-dates-iso")

	// The start time too: YYYY-MM-DD HH:MM in the user's zone.
	b.click(bfDialog + `input[name="run_when"][value="at"]`)
	b.waitJS(`!document.querySelector('` + bfDialog + `input[name="run_at"]').disabled`)
	typeDate("run_at", "2030-01-02 03:04")
	b.click(bfDialog + `button[data-action="preview"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"] .plan-meta')?.textContent.includes("Starts 2030-01-02 03:04")`)
	b.click(bfDialog + `input[name="run_when"][value="now"]`)

	typeDate("dates.from", "01/11/2025")
	b.click(bfDialog + `button[data-action="preview"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="backfill"] .bf-errors .error-box') !== null`)
	if msg := textOf(b, bfDialog+`.bf-errors .error-box`); !strings.Contains(msg, "dates.from") || !strings.Contains(msg, "YYYY-MM-DD") {
		t.Errorf("01/11/2025 is refused with %q, want the field and the form YYYY-MM-DD", msg)
	}
}

// TestConsoleObjectsEnded: the Objects tab says when each object's latest
// backfill ended, and sorts by it.
func TestConsoleObjectsEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `
		CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a VALUES (1);
		CREATE TABLE b (id int PRIMARY KEY);
		CREATE TABLE c (id int PRIMARY KEY); INSERT INTO c VALUES (1)`})
	e.initiate(http.StatusCreated, `{"objects": ["public.c"]}`)
	e.waitLoaded("public.c")
	e.initiate(http.StatusCreated, `{"objects": ["public.a"]}`)
	e.waitLoaded("public.a")
	b := newBrowser(t, e)
	b.open("#/streams/"+e.name, `tr[data-object="public.a"]`)
	ended := func(object string) string {
		return objectRow(object) + `?.querySelector('.sk-endcell [data-ended]')?.dataset.ended`
	}
	b.waitJS(ended("public.a") + ` && ` + ended("public.c"))
	for _, r := range e.backfills("stream=" + e.name) {
		object := r.Schema + "." + r.Table
		got := jsValue[string](b, ended(object))
		if at, err := time.Parse(time.RFC3339Nano, got); err != nil || !at.Equal(*r.FinishedAt) {
			t.Errorf("%s: Ended %q, want the backfill's finish %v", object, got, r.FinishedAt)
		}
		if text := textOf(b, `tr[data-object="`+object+`"] .sk-endcell`); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$`).MatchString(text) {
			t.Errorf("%s: Ended reads %q, want a local time", object, text)
		}
	}
	if text := textOf(b, `tr[data-object="public.b"] .sk-endcell`); text != "–" {
		t.Errorf("public.b, never backfilled: Ended reads %q", text)
	}
	order := `[...document.querySelectorAll('tbody tr[data-object]')].map((tr) => tr.dataset.object).join(" ")`
	b.click(`th[data-sort="ended"] button`)
	b.waitJS(order + ` === "public.b public.c public.a"`)
	b.click(`th[data-sort="ended"] button`)
	b.waitJS(order + ` === "public.a public.c public.b"`)
	b.shot("console-objects-ended")
}
