package api_test

import (
	"strings"
	"testing"
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
