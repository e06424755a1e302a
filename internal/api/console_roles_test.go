package api_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleRoles opens a stream's page with a viewer's token, then an
// operator's: the viewer is offered neither Initiate nor Pause, the
// operator Initiate but not Pause (an admin's).
func TestConsoleRoles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY)`,
		api: "{tokens: [{name: ann, token: tok-viewer, role: viewer}, {name: bob, token: tok-operator, role: operator}]}"})
	b := newBrowser(t, e)
	shown := func(action string) bool {
		t.Helper()
		return jsValue[bool](b, `getComputedStyle(document.querySelector('button[data-action="`+action+`"]')).display !== "none"`)
	}
	for _, c := range []struct {
		token, role     string
		initiate, pause bool
	}{
		{"tok-viewer", "viewer", false, false},
		{"tok-operator", "operator", true, false},
	} {
		jsValue[bool](b, `sessionStorage.setItem("tidemark.token", `+jsString(c.token)+`), true`)
		b.run(chromedp.Navigate(e.base+"/ui/#/streams/"+e.name), chromedp.Reload())
		b.waitJS(`document.body.dataset.role === ` + jsString(c.role) +
			` && document.querySelector('button[data-action="initiate"]') !== null && document.querySelector('button[data-action="pause"]') !== null`)
		if got := shown("initiate"); got != c.initiate {
			t.Errorf("%s: Initiate shown %v, want %v", c.role, got, c.initiate)
		}
		if got := shown("pause"); got != c.pause {
			t.Errorf("%s: Pause shown %v, want %v", c.role, got, c.pause)
		}
		b.shot("console-role-" + c.role)
	}
}
