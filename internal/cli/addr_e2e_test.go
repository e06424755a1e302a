package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The client verbs reach the daemon at --addr written as api.listen takes
// it (host:port, localhost:port) or as a URL, at TIDEMARK_ADDR, or at the
// api.listen of the configuration -c names, with its strongest token.
func TestClientAddress(t *testing.T) {
	t.Parallel()
	d, cfg, port := daemonWith(t, func(dir string, port int) string {
		return fmt.Sprintf(`
metadata: "sqlite://%s"
api:
  listen: "127.0.0.1:%d"
  tokens:
    - {name: watcher, token: viewer-secret, role: viewer}
    - {name: ci, token: operator-secret, role: operator}
tasks:
  - {name: extract, project: sales, type: shell, schedule: daily, command: "echo ${bizdate}"}
`, filepath.Join(dir, "meta.db"), port)
	})
	dir := filepath.Dir(cfg)
	hostPort := fmt.Sprintf("127.0.0.1:%d", port)
	poll(t, d, "the API", func() bool { return tidemark(t, "tasks", "-c", cfg).code == 0 })
	// The daemon says at start where its console is.
	poll(t, d, "the console's URL http://"+hostPort+"/ui/ in the daemon's log", func() bool {
		log, err := os.ReadFile(filepath.Join(dir, "daemon.log"))
		return err == nil && strings.Contains(string(log), "http://"+hostPort+"/ui/")
	})

	nowhere := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	preview := []string{"batch", "preview", "extract", "--from", "2025-01-01"}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"host:port", nil, []string{"tasks", "--addr", hostPort, "--token", "viewer-secret"}},
		{"localhost:port", nil, []string{"tasks", "--addr", fmt.Sprintf("localhost:%d", port), "--token", "viewer-secret"}},
		{"URL", nil, []string{"tasks", "--addr", "http://" + hostPort + "/", "--token", "viewer-secret"}},
		{"flag before the verb", nil, []string{"--addr", hostPort, "--token", "viewer-secret", "tasks"}},
		{"TIDEMARK_ADDR", []string{"TIDEMARK_ADDR=" + hostPort, "TIDEMARK_TOKEN=viewer-secret"}, []string{"tasks"}},
		// -c: the address and the operator token, the stronger of the two.
		{"-c", nil, append(preview, "-c", cfg)},
		{"-c over the environment", []string{"TIDEMARK_ADDR=" + nowhere, "TIDEMARK_TOKEN=viewer-secret"}, append(preview, "-c", cfg)},
	} {
		if r := tidemarkEnv(t, c.env, c.args...); r.code != 0 || !strings.Contains(r.stdout, "sales.extract") {
			t.Errorf("%s: %s", c.name, r)
		}
	}
	// A token named on the command line wins over -c's: the viewer may
	// not preview.
	expect(t, 1, []string{"operator role"}, append(preview, "-c", cfg, "--token", "viewer-secret")...)
	// And an address on the command line wins over -c's.
	expect(t, 1, []string{"cannot reach tidemark at http://" + nowhere}, "tasks", "-c", cfg, "--addr", nowhere)

	missing := filepath.Join(dir, "missing.yaml")
	expect(t, 2, []string{"-c", missing}, "tasks", "-c", missing)
	for _, addr := range []string{"127.0.0.1", "ftp://" + hostPort, "127.0.0.1:0", "http://", "127.0.0.1:port"} {
		expect(t, 2, []string{"--addr", "use host:port"}, "tasks", "--addr", addr)
	}
}
