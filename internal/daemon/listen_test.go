package daemon

import (
	"testing"

	"github.com/tidemark/tidemark/internal/config"
)

// TestCheckListen: a loopback listen address needs no token, whatever its
// spelling (the configuration's check calls the same ones loopback); any
// other needs one.
func TestCheckListen(t *testing.T) {
	for listen, ok := range map[string]bool{
		"127.0.0.1:7420": true, "LOCALHOST:7420": true, "localhost.:7420": true, "[::1]:7420": true,
		"[::ffff:127.0.0.1]:7420": true, "0.0.0.0:7420": false, ":7420": false, "10.0.0.5:7420": false,
	} {
		err := checkListen(config.API{Listen: listen})
		if (err == nil) != ok {
			t.Errorf("checkListen(%q) = %v, want ok %v", listen, err, ok)
		}
		if err := checkListen(config.API{Listen: listen, Tokens: []config.Token{{Name: "a", Token: "x"}}}); err != nil {
			t.Errorf("checkListen(%q) with a token = %v", listen, err)
		}
	}
}
