package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/pgserver"
)

// bin is the tidemark binary built once for the package's tests, from the
// module at moduleRoot.
var bin, moduleRoot string

func TestMain(m *testing.M) {
	flag.Parse()
	pgserver.ScrubEnv()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tidemark-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		fmt.Fprintf(os.Stderr, "find the module root with `go env GOMOD`: %v %s\n", err, gomod)
		return 1
	}
	bin, moduleRoot = filepath.Join(dir, "tidemark"), filepath.Dir(strings.TrimSpace(string(gomod)))
	build := exec.Command("go", "build", "-o", bin, "./cmd/tidemark")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build tidemark: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// environ is this process's environment without tidemark's variables, so
// that the caller's TIDEMARK_ADDR or TIDEMARK_TOKEN cannot change a test.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIDEMARK_") {
			env = append(env, kv)
		}
	}
	return env
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// tidemark runs the binary to completion; it is killed after a minute.
func tidemark(t *testing.T, args ...string) result {
	t.Helper()
	return tidemarkEnv(t, nil, args...)
}

// tidemarkEnv is tidemark with extra environment variables.
func tidemarkEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("tidemark %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// expect runs the binary and checks its exit code and that its stderr (or,
// for exit 0, its stdout) contains each of want.
func expect(t *testing.T, code int, want []string, args ...string) result {
	t.Helper()
	r := tidemark(t, args...)
	out := r.stderr
	if code == 0 {
		out = r.stdout
	}
	if r.code != code {
		t.Fatalf("tidemark %s: %s, want exit %d", strings.Join(args, " "), r, code)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("tidemark %s: %s, want %q in it", strings.Join(args, " "), r, w)
		}
	}
	return r
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestHelp(t *testing.T) {
	t.Parallel()
	expect(t, 0, []string{"run ", "streams ", "objects ", "backfill ", "verify ", "stream ", "demo ", "tasks ", "batch ", "doctor ", "audit ", "--addr", "--json", "--token"}, "--help")
	expect(t, 0, []string{"preview ", "backfill ", "list ", "show ", "instances ", "log ", "export ", "stop ", "rerun ", "stop-instance ", "mark-succeeded "}, "batch", "--help")
	expect(t, 0, []string{"--groups", "--downstream", "--coverage", "--paused", "--succeeded", "--start-at", "--time-range", "--confirm"}, "batch", "backfill", "--help")
	expect(t, 0, []string{"initiate ", "stop ", "list "}, "backfill", "--help")
	expect(t, 0, []string{"--wait", "completed and"}, "backfill", "initiate", "--help")
	expect(t, 0, []string{"pause ", "resume ", "reset "}, "stream", "--help")
	expect(t, 0, []string{"SIGTERM", "--config"}, "run", "--help")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	expect(t, 2, []string{missing}, "run", "-c", missing)

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`
streams:
  - name: s
    source: {dsn: "postgres://u@127.0.0.1:1/db"}
    destination: {type: sqlite, path: d.db}
    include: ["public.*"]
    backfill: {mode: manual, chunk_sise: 5}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, 2, []string{bad + ": streams[0].backfill.chunk_sise: unknown key", "chunk_size"}, "run", "-c", bad)

	for _, args := range [][]string{
		{"streams", "--bogus"},
		{"--bogus"},
		{"backfill", "list", "--since"},
		{"verify", "s", "--chunk-size", "many"},
	} {
		expect(t, 2, []string{"--help"}, args...)
	}
	for _, args := range [][]string{
		{"backfill", "initiate", "s"},
		{"backfill", "stop", "s"},
		{"objects"},
		{"objects", "s", "t"},
		{"verify"},
		{"streams", "extra"},
		{"stream", "pause"},
		{"run", "extra"},
	} {
		expect(t, 2, []string{"wrong number of arguments", "usage: tidemark "}, args...)
	}
}

func TestDaemonNotRunning(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	for _, args := range [][]string{
		{"streams"},
		{"objects", "s"},
		{"backfill", "initiate", "s", "public.t"},
		{"backfill", "initiate", "s", "public.t", "--wait"},
		{"verify", "s"},
		{"audit"},
		{"audit", "--format", "csv"},
	} {
		expect(t, 1, []string{"cannot reach tidemark at " + addr, "`tidemark run`"}, append([]string{"--addr", addr}, args...)...)
	}
}
