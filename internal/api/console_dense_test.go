package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// thousandTables creates public.t0001 … public.t1000, each with a key.
const thousandTables = `
	DO $$ BEGIN
	  FOR i IN 1..1000 LOOP
	    EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, v text)', 't' || lpad(i::text, 4, '0'));
	  END LOOP;
	END $$`

// TestConsoleObjectsDense: a stream of 1,000 tables. The Objects tab holds
// one page of rows in its document, pages and sorts by a column, filters
// and selects across pages, says once what every object without a
// backfill shares, and shows each table's columns as a count with the
// list a click away.
func TestConsoleObjectsDense(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: thousandTables})
	b := newBrowser(t, e)
	rows := `document.querySelectorAll('tbody tr[data-object]')`
	first := rows + `[0].dataset.object`
	info := `document.querySelector('.sk-pageinfo').textContent`

	start := time.Now()
	b.open("#/streams/"+e.name, `tr[data-object="public.t0001"]`)
	b.waitJS(info + `.includes("of 1,000")`)
	t.Logf("1,000 objects: the first page shown %s after navigating", time.Since(start).Round(time.Millisecond))
	if n := jsValue[int](b, rows+`.length`); n != 100 {
		t.Fatalf("the page holds %d object rows in its document, want one page of 100", n)
	}
	if got := textOf(b, `.sk-pageinfo`); got != "1–100 of 1,000" {
		t.Errorf("page info %q", got)
	}
	banner := textOf(b, `[data-banner]`)
	if !strings.HasPrefix(banner, "1,000 objects not backfilled: ") || !strings.Contains(banner, "manual") {
		t.Errorf("banner %q, want one line for the 1,000 objects sharing the manual-mode reason", banner)
	}
	if cols := textOf(b, `tr[data-object="public.t0001"] .sk-cols summary`); cols != "2 columns · key id" {
		t.Errorf("columns cell %q, want the count and the key", cols)
	}
	b.click(`tr[data-object="public.t0001"] .sk-cols summary`)
	b.waitJS(`document.querySelector('tr[data-object="public.t0001"] .sk-cols').open`)
	if list := textOf(b, `tr[data-object="public.t0001"] .sk-colpop`); !strings.Contains(list, "id integer") || !strings.Contains(list, "v text") {
		t.Errorf("the columns popover says %q", list)
	}

	b.click(`button[data-action="next-page"]`)
	b.waitJS(first + ` === "public.t0101"`)
	if n := jsValue[int](b, rows+`.length`); n != 100 {
		t.Errorf("page 2 holds %d rows", n)
	}
	if got := textOf(b, `.sk-pageinfo`); got != "101–200 of 1,000" {
		t.Errorf("page 2 info %q", got)
	}

	// Sorting by Object, then the other way, starts again at the first page.
	sortObject := `th[data-sort="object"] button`
	b.click(sortObject)
	b.waitJS(first + ` === "public.t0001" && document.querySelector('th[data-sort="object"]').getAttribute("aria-sort") === "ascending"`)
	b.click(sortObject)
	b.waitJS(first + ` === "public.t1000" && document.querySelector('th[data-sort="object"]').getAttribute("aria-sort") === "descending"`)
	b.click(`button[data-action="next-page"]`)
	b.waitJS(first + ` === "public.t0900"`)

	// A filter, and a selection of every object it shows, kept when the
	// filter is cleared.
	b.run(chromedp.SendKeys(chromedp.CSS(`input.sk-filter`), "t09"))
	b.waitJS(info + ` === "1–100 of 100 shown by the filter (1,000 in all)"`)
	if !jsValue[bool](b, `document.querySelector('.sk-pager').hidden`) {
		t.Error("the pager shows for one page")
	}
	b.click(`input[data-select-all]`)
	b.waitJS(`document.querySelector('.sk-selinfo').textContent === "100 selected"`)
	jsValue[bool](b, `(() => { const i = document.querySelector('input.sk-filter'); i.value = ""; i.dispatchEvent(new Event("input")); return true; })()`)
	b.waitJS(first + ` === "public.t1000" && ` + info + ` === "1–100 of 1,000"`)
	if got := textOf(b, `.sk-selinfo`); got != "100 selected" {
		t.Errorf("after clearing the filter the selection says %q", got)
	}
	if !jsValue[bool](b, `document.querySelector('input[data-select-all]').indeterminate`) {
		t.Error("select-all is not shown as partly checked with 100 of 1,000 selected")
	}
	b.shot("objects-dense")
}
