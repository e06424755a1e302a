package cli_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/cli"
)

// tidemark version and --version print the version and commit -ldflags
// set, and the Go version; --json gives the same as JSON.
func TestVersion(t *testing.T) {
	t.Parallel()
	tm := filepath.Join(t.TempDir(), "tidemark")
	const pkg = "github.com/tidemark/tidemark/internal/cli"
	build := exec.Command("go", "build", "-o", tm, "-ldflags", "-X "+pkg+".version=v1.2.3 -X "+pkg+".commit=0123abc", "./cmd/tidemark")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	want := "tidemark v1.2.3\ncommit 0123abc\n" + runtime.Version() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(tm, args...).Output()
		if err != nil || string(out) != want {
			t.Errorf("tidemark %s: %v %q, want %q", strings.Join(args, " "), err, out, want)
		}
	}
	out, err := exec.Command(tm, "version", "--json").Output()
	var v cli.Version
	if err != nil || json.Unmarshal(out, &v) != nil || v != (cli.Version{Version: "v1.2.3", Commit: "0123abc", Go: runtime.Version()}) {
		t.Errorf("tidemark version --json: %v %s", err, out)
	}
	// Without -ldflags, the build information's (no version: devel).
	if r := expect(t, 0, []string{"tidemark ", "commit ", runtime.Version()}, "version"); strings.Contains(r.stdout, "v1.2.3") {
		t.Errorf("version: %s", r)
	}
	expect(t, 2, []string{"wrong number of arguments"}, "version", "extra")
}
