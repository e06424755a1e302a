package api_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium from Debian's packages on a fresh
// profile, driven through chromedp, with the flags a root, offline machine
// needs. JavaScript exceptions and console errors fail the test.
type browser struct {
	t    testing.TB
	e    *env
	ctx  context.Context
	dir  string // screenshots
	mu   sync.Mutex
	errs []string
}

// chromiumPath is where scripts/setup.sh installs Chromium.
func chromiumPath(t testing.TB) string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("Chromium is not installed: run ./scripts/setup.sh (it installs Debian's chromium package)")
	return ""
}

func newBrowser(t testing.TB, e *env) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("no-sandbox", true), // root cannot use the sandbox
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("lang", "en-US"),
	}
	opts = append(chromedp.DefaultExecAllocatorOptions[:], opts...)
	actx, cancelAlloc := chromedp.NewExecAllocator(e.ctx, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, e: e, ctx: ctx, dir: screenshotDir(t)}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Collect exceptions and console.error calls; the browser's own log
	// (a refused request's 409, say) is not the page's fault.
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || (m.Type == chromedp.ConsoleError && m.Source == "") {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(b.checkErrors)
	b.run(chromedp.Navigate(e.base + "/ui/"))
	return b
}

// screenshotDir is TIDEMARK_SCREENSHOTS, or a directory under the system's
// temporary one that outlives the test so that the pictures can be looked at.
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("TIDEMARK_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "tidemark-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (b *browser) checkErrors() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser: %s", e)
	}
}

// run runs actions, failing the test on error; every run is bounded.
func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// value runs one action and returns its value, failing the test on error.
func value[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
	return v
}

// open shows a console route ("#/streams/NAME") and waits for sel.
func (b *browser) open(route, sel string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.e.base+"/ui/"+route), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// shot saves a screenshot of the whole page as NAME.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png := value(b, chromedp.FullScreenshot(100))
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

// click presses the mouse at the centre of the first element matching
// sel, as a user does. The centre is read before the press, so content
// arriving in between can move the element: the click waits until nothing
// is aria-busy. Only the console's loads that grow a dialog (the Initiate
// estimate, the batch preview) say they are busy, so this narrows the
// race to what the test itself starts, and a busy load behind a token
// prompt would hold the click until the wait's timeout.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.waitJS(`document.querySelector('[aria-busy="true"]') === null`)
	b.run(chromedp.Click(chromedp.CSS(sel)))
}

// waitJS waits until the JavaScript expression is true. It is evaluated in
// the page on every animation frame; nothing here sleeps.
func (b *browser) waitJS(expr string) {
	b.t.Helper()
	value(b, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(waitTimeout)))
}

// events returns every event the console received, oldest first.
func (b *browser) events() []map[string]any {
	b.t.Helper()
	raw := value(b, chromedp.Evaluate[string]("JSON.stringify(window.tidemark.events)"))
	var evs []map[string]any
	if err := json.Unmarshal([]byte(raw), &evs); err != nil {
		b.t.Fatal(err)
	}
	return evs
}

// text returns the text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return value(b, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// TestConsoleLoads opens the console, checks the shell and that its live
// feed connected, and that the files carry the headers that forbid inline
// script and framing.
func TestConsoleLoads(t *testing.T) {
	e := newEnv(t, envOptions{setup: `CREATE TABLE t (id int PRIMARY KEY)`})
	r := e.do("GET", "/", "") // the client follows the redirect
	if r.status != 200 || !strings.Contains(string(r.body), "<title>tidemark</title>") {
		t.Fatalf("GET / = %d %.200s, want the console", r.status, r.body)
	}
	r = e.do("GET", "/ui/js/app.js", "")
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), "javascript") || !strings.Contains(r.header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /ui/js/app.js = %d, headers %v", r.status, r.header)
	}
	b := newBrowser(t, e)
	b.waitJS(`document.getElementById("live").dataset.state === "live"`)
	b.open("#/streams", "main h1")
}
