package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitFor polls cond every few milliseconds: it observes a state another
// process reaches, it does not time anything.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readPID reads a PID a script wrote to a file.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the script did not write its PID file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// running reports whether pid is a live (not exited) process of group pgid.
// A zombie has exited; another group means the PID was reused.
func running(pid, pgid int) bool {
	st, err := readStat(pid)
	return err == nil && st.pgrp == pgid && st.alive()
}

// shell runs script and returns its result, log and process group.
func shell(t *testing.T, ctx context.Context, spec Spec) (Result, string, Proc) {
	t.Helper()
	spec.Type = TypeShell
	log := NewLog(0)
	var proc Proc
	res := Run(ctx, spec, log, func(p Proc) error { proc = p; return nil })
	if proc.PID == 0 {
		t.Fatal("started was not called")
	}
	return res, log.String(), proc
}

func TestShellSuccessWithOutputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res, log, proc := shell(t, context.Background(), Spec{
		Script: `echo "working in $(pwd)"
printf '# a comment\n\nrows=%s\n' "$ROWS" >> "$TIDEMARK_OUTPUT"
echo 'expr=a=b' >> "$TIDEMARK_OUTPUT"
echo 'empty=' >> "$TIDEMARK_OUTPUT"`,
		Env: []string{"ROWS=7"},
		Dir: dir,
	})
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, log %q", res, log)
	}
	want := map[string]string{"rows": "7", "expr": "a=b", "empty": ""}
	if len(res.Outputs) != len(want) {
		t.Fatalf("outputs %q, want %q", res.Outputs, want)
	}
	for k, v := range want {
		if res.Outputs[k] != v {
			t.Fatalf("outputs %q, want %q", res.Outputs, want)
		}
	}
	if log != "working in "+dir+"\n" {
		t.Fatalf("log %q", log)
	}
	if proc.PGID != proc.PID || proc.StartTicks == 0 {
		t.Fatalf("started with %+v", proc)
	}
}

func TestShellExitCodeAndStderr(t *testing.T) {
	t.Parallel()
	res, log, _ := shell(t, context.Background(), Spec{
		Script: `echo out; echo err >&2; echo out again; echo 'x=1' >> "$TIDEMARK_OUTPUT"; exit 3`,
	})
	if res.ExitCode != 3 || res.Err == nil || res.Err.Error() != "exit status 3" {
		t.Fatalf("result %+v", res)
	}
	if res.Outputs != nil {
		t.Fatalf("a failed attempt has outputs %q", res.Outputs)
	}
	if log != "out\nerr\nout again\n" {
		t.Fatalf("log %q", log)
	}
}

func TestShellKilledBySignal(t *testing.T) {
	t.Parallel()
	res, _, _ := shell(t, context.Background(), Spec{Script: `kill -SEGV $$`})
	if res.ExitCode != -1 || res.Err == nil || !strings.Contains(res.Err.Error(), "signal 11") {
		t.Fatalf("result %+v", res)
	}
}

func TestShellMalformedOutputs(t *testing.T) {
	t.Parallel()
	res, _, _ := shell(t, context.Background(), Spec{
		Script: `printf 'good=1\n\nno equals sign here\n' >> "$TIDEMARK_OUTPUT"`,
	})
	if res.Err == nil || !strings.Contains(res.Err.Error(), `line 3: "no equals sign here"`) {
		t.Fatalf("result %+v", res)
	}
	if res.Outputs != nil {
		t.Fatalf("outputs %q from a malformed file", res.Outputs)
	}
}

func TestShellBackgroundJobsDoNotOutliveScript(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, _, proc := shell(t, context.Background(), Spec{
		Script: `sleep 100 >/dev/null 2>&1 & echo $! > ` + pidFile,
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if pid := readPID(t, pidFile); running(pid, proc.PGID) {
		t.Fatalf("background sleep %d still running after the script ended", pid)
	}
}

func TestShellTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, trap string
	}{
		{"SIGTERM", ""},
		// The script and its child ignore SIGTERM: SIGKILL after the grace period.
		{"SIGKILL after grace", "trap '' TERM; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pid")
			begin := time.Now()
			res, _, proc := shell(t, context.Background(), Spec{
				Script:  tc.trap + `sleep 100 & echo $! > ` + pidFile + `; wait`,
				Timeout: time.Second,
			})
			if !errors.Is(res.Err, ErrTimeout) || res.Err.Error() != "killed by timeout after 1s" {
				t.Fatalf("result %+v", res)
			}
			if elapsed := time.Since(begin); elapsed > 20*time.Second {
				t.Fatalf("Run took %s", elapsed)
			}
			if pid := readPID(t, pidFile); running(pid, proc.PGID) {
				t.Fatalf("grandchild sleep %d survived the timeout", pid)
			}
			if running(proc.PID, proc.PGID) {
				t.Fatalf("script %d survived the timeout", proc.PID)
			}
		})
	}
}

func TestShellCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // cancels once the script has started its child
		for ctx.Err() == nil {
			if _, err := os.Stat(ready); err == nil {
				cancel()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	res, _, proc := shell(t, ctx, Spec{Script: `sleep 100 & echo $! > ` + ready + `.tmp; mv ` + ready + `.tmp ` + ready + `; wait`})
	if !errors.Is(res.Err, ErrCancelled) || errors.Is(res.Err, ErrTimeout) {
		t.Fatalf("result %+v", res)
	}
	if pid := readPID(t, ready); running(pid, proc.PGID) {
		t.Fatalf("grandchild sleep %d survived cancellation", pid)
	}
}

func TestShellCancelCause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	shutdown := errors.New("daemon shutting down")
	res := Run(ctx, Spec{Type: TypeShell, Script: `sleep 100`}, nil, func(Proc) error {
		cancel(shutdown)
		return nil
	})
	if !errors.Is(res.Err, ErrCancelled) || !errors.Is(res.Err, shutdown) {
		t.Fatalf("result %+v", res)
	}
}

func TestShellStartedError(t *testing.T) {
	t.Parallel()
	refused := errors.New("cannot record the attempt")
	var proc Proc
	res := Run(context.Background(), Spec{Type: TypeShell, Script: `sleep 100`}, nil, func(p Proc) error {
		proc = p
		return refused
	})
	if !errors.Is(res.Err, refused) {
		t.Fatalf("result %+v", res)
	}
	if running(proc.PID, proc.PGID) {
		t.Fatalf("script %d still running", proc.PID)
	}
}

func TestShellStartFailure(t *testing.T) {
	t.Parallel()
	res := Run(context.Background(), Spec{Type: TypeShell, Script: "true", Dir: filepath.Join(t.TempDir(), "missing")}, nil, func(Proc) error {
		t.Error("started called for a script that did not start")
		return nil
	})
	if res.Err == nil || res.ExitCode != -1 {
		t.Fatalf("result %+v", res)
	}
}

func TestParseOutputs(t *testing.T) {
	t.Parallel()
	got, err := parseOutputs("a=1\r\n  # note\n\t\nb = 2\n")
	if err == nil {
		t.Fatalf("name with a space accepted: %q", got)
	}
	got, err = parseOutputs("a=1\r\n  # note\n\t\nb==2\n")
	if err != nil || len(got) != 2 || got["a"] != "1" || got["b"] != "=2" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := parseOutputs("=x\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("empty name: %v", err)
	}
	if got, err := parseOutputs(""); err != nil || got != nil {
		t.Fatalf("empty file: %q, %v", got, err)
	}
}
