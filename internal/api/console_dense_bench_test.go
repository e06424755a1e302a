package api_test

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkConsoleObjectsDense prints how long the console's Objects tab
// takes for a stream of 1,000 tables (TestConsoleObjectsDense checks what
// it shows): opening the tab until the first page of rows is in the
// document and laid out, a sort by Object that brings rows not shown
// before, and a page change; each the median of 3 rounds, each round a new
// visit of the tab. Figures, not pass/fail: `make bench` runs it, and
// docs/benchmark.md has the figures.
func BenchmarkConsoleObjectsDense(b *testing.B) {
	e := newEnv(b, envOptions{backfill: "{mode: manual}", setup: thousandTables})
	br := newBrowser(b, e)
	const rounds = 3
	var open, sort, next []time.Duration
	first := `document.querySelector('tbody tr[data-object]')?.dataset.object`
	for range rounds {
		// Leave for the stream list, so that the tab is drawn anew.
		br.run(chromedp.Evaluate[chromedp.Void](`location.hash = "#/streams"`))
		br.waitJS(`!!document.querySelector('a.sk-streamname')`)
		open = append(open, elapsed(br, `location.hash = `+jsString("#/streams/"+e.name),
			`document.querySelectorAll('tbody tr[data-object]').length === 100 && document.querySelector('.sk-pageinfo')?.textContent === "1–100 of 1,000"`))
		// The first click sorts as the API does; the second reverses the
		// order and shows rows not made yet.
		br.click(`th[data-sort="object"] button`)
		br.waitJS(`document.querySelector('th[data-sort="object"]').getAttribute("aria-sort") === "ascending"`)
		sort = append(sort, elapsed(br, `document.querySelector('th[data-sort="object"] button').click()`, first+` === "public.t1000"`))
		next = append(next, elapsed(br, `document.querySelector('button[data-action="next-page"]').click()`, first+` === "public.t0900"`))
	}
	agent := jsValue[string](br, `navigator.userAgent`)
	chromium := "Chromium (version unknown)"
	if m := regexp.MustCompile(`Chrome/([\d.]+)`).FindStringSubmatch(agent); m != nil {
		chromium = "Chromium " + m[1]
	}
	fmt.Printf("\nconsole Objects tab, a stream of 1,000 tables (pages of 100 rows), %s, %d CPUs, %s; median of %d rounds (each round's figure in brackets)\n",
		chromium, runtime.NumCPU(), runtime.Version(), rounds)
	for _, f := range []struct {
		what string
		ds   []time.Duration
		key  string
	}{
		{"open the tab until the first page is laid out", open, "open"},
		{"sort by Object, descending (100 new rows)", sort, "sort"},
		{"next page (100 new rows)", next, "page"},
	} {
		m := median(f.ds)
		fmt.Printf("  %-48s %7.1f ms  [%s]\n", f.what, ms(m), joinMS(f.ds))
		b.ReportMetric(ms(m), f.key+"-ms")
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		avg, _, _ := strings.Cut(string(load), " ")
		fmt.Printf("  load average over the last minute: %s on %d CPUs", avg, runtime.NumCPU())
		if n, err := strconv.ParseFloat(avg, 64); err == nil && n > float64(runtime.NumCPU()) {
			fmt.Print(": other processes competed for the CPUs, the figures are pessimistic")
		}
		fmt.Println()
	}
	b.ReportMetric(0, "ns/op") // whole rounds, not a per-op time
}

// elapsed runs the statement act in the page and returns the time until
// the expression done holds and the document is laid out, measured in the
// page: done is checked right after act (a click draws synchronously) and
// after every change to the document (a route loads its data first).
func elapsed(b *browser, act, done string) time.Duration {
	b.t.Helper()
	script := `new Promise((resolve) => {
	  const done = () => (` + done + `);
	  const t0 = performance.now();
	  let obs;
	  const check = () => {
	    if (!done()) return false;
	    obs.disconnect();
	    void document.body.offsetHeight; // style and layout, as the next frame paints them
	    resolve(performance.now() - t0);
	    return true;
	  };
	  obs = new MutationObserver(check);
	  obs.observe(document.body, { childList: true, subtree: true, characterData: true, attributes: true });
	  ` + act + `;
	  check();
	})`
	v := value(b, chromedp.Evaluate[float64](script, chromedp.EvalAwaitPromise))
	return time.Duration(v * float64(time.Millisecond))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func joinMS(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", ms(d))
	}
	return strings.Join(parts, ", ")
}
