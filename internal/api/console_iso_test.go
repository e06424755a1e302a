package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleTimesISO: the initiate dialog's start time and the Audit tab's
// since and until are text typed as YYYY-MM-DD HH:MM in the browser's time
// zone whatever its locale (en-US here, whose datetime inputs read
// 01/02/2030, 03:04 AM); another form is refused naming the field and
// sends nothing.
func TestConsoleTimesISO(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)`})
	b := newBrowser(t, e)
	batchZone(b, "Asia/Shanghai") // UTC+8, no daylight saving time
	retype := func(sel, text string) {
		t.Helper()
		jsValue[bool](b, `(() => { const i = document.querySelector(`+jsString(sel)+`); i.value = ""; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)
		b.run(chromedp.SendKeys(chromedp.CSS(sel), text))
	}
	textInput := func(sel string) {
		t.Helper()
		if got := jsValue[string](b, `(() => { const i = document.querySelector(`+jsString(sel)+`); return i.type + " " + i.placeholder; })()`); got != "text YYYY-MM-DD HH:MM" {
			t.Errorf("%s is %q, want a text input with the placeholder YYYY-MM-DD HH:MM", sel, got)
		}
	}

	b.open("#/streams/"+e.name, `tr[data-object="public.t"]`)
	b.click(`input[data-select="public.t"]`)
	b.click(`button[data-action="initiate"]`)
	b.run(chromedp.WaitVisible(chromedp.CSS(confirmDialog)))
	b.click(confirmDialog + ` details.sk-careful summary`)
	runAt := confirmDialog + ` input[name="run_at"]`
	textInput(runAt)
	retype(runAt, "01/02/2030 03:04")
	b.click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(`document.querySelector(` + jsString(confirmDialog+` .sk-problem .error-box`) + `) !== null`)
	if msg := textOf(b, confirmDialog+` .sk-problem`); !strings.Contains(msg, `Start at: "01/02/2030 03:04" is not a time as YYYY-MM-DD HH:MM`) {
		t.Errorf("a start time in the locale's form says %q, want a refusal naming Start at and the form", msg)
	}
	if n := len(e.backfills("stream=" + e.name)); n != 0 {
		t.Fatalf("%d backfills initiated with a start time refused", n)
	}
	retype(runAt, "2030-01-02 03:04")
	b.click(confirmDialog + ` button[data-action="yes"]`)
	b.waitJS(`document.querySelector('dialog[data-dialog="confirm"]') === null && ` + objectStatus("public.t") + ` === "pending"`)
	recs := e.backfills("stream=" + e.name)
	if len(recs) != 1 {
		t.Fatalf("backfills = %d, want 1", len(recs))
	}
	at, _ := recs[0].Options["run_at"].(string)
	if got, err := time.Parse(time.RFC3339Nano, at); err != nil || !got.Equal(time.Date(2030, 1, 1, 19, 4, 0, 0, time.UTC)) {
		t.Errorf("run_at = %q, want 2030-01-02 03:04 in Asia/Shanghai (2030-01-01T19:04:00Z)", at)
	}

	// The audit's since and until.
	b.open("#/audit", `input[name="since"]`)
	b.waitJS(`document.querySelector("tr[data-kind]") !== null`)
	for _, name := range []string{"since", "until"} {
		textInput(`input[name="` + name + `"]`)
	}
	apply := func() { b.click(`.audit-filters button[type="submit"]`) }
	retype(`input[name="since"]`, "2026-13-01 00:00")
	apply()
	b.waitJS(`document.querySelector("main .error-box") !== null`)
	if msg := textOf(b, `main .error-box`); !strings.Contains(msg, `since: "2026-13-01 00:00" is not a time as YYYY-MM-DD HH:MM`) {
		t.Errorf("a since of month 13 says %q, want a refusal naming since", msg)
	}
	// A since in the future finds nothing, one in the past the backfill;
	// an until before it nothing again.
	retype(`input[name="since"]`, time.Now().Add(48*time.Hour).Format("2006-01-02 15:04"))
	apply()
	b.waitJS(`document.querySelector("main .error-box") === null && document.querySelector("main p.empty") !== null`)
	retype(`input[name="since"]`, "2000-01-01 00:00")
	apply()
	b.waitJS(`document.querySelector("tr[data-kind]") !== null`)
	retype(`input[name="until"]`, "2000-01-02 08:00")
	apply()
	b.waitJS(`document.querySelector("main p.empty") !== null`)
	b.shot("console-audit-iso")
}
