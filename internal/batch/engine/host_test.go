package engine_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// TestRecoveryEndsOnlyItsHostsProcesses: an attempt left running is ended
// by recovery only when it ran on this engine's host; one that ran on
// another host (a former batch leader's, docs/cluster.md) is not looked
// for here, where its pid may be anyone's, and is re-run all the same.
func TestRecoveryEndsOnlyItsHostsProcesses(t *testing.T) {
	for _, tc := range []struct {
		host  string
		ended bool
	}{{"alpha", true}, {"beta", false}} {
		t.Run("ran on "+tc.host, func(t *testing.T) {
			url := "sqlite://" + filepath.Join(t.TempDir(), "meta.db")
			tasks := []dag.Task{task(t, "a", dag.TypeShell, "true")}
			first := newEnv(t, tasks, envOpts{storeURL: url, host: "alpha"})
			req := rangeReq("a", "2025-01-01", "2025-01-01")
			later := time.Now().Add(time.Hour)
			req.StartAt = &later
			bf := first.submit(req)
			first.stop()

			// A process group standing for the attempt a killed leader left.
			cmd := exec.Command("sleep", "60")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
			in := first.instances(bf.ID)[0]
			started := time.Now().UTC()
			in.State, in.Attempt, in.StartedAt = store.InstanceRunning, 1, &started
			proc, err := runner.ProcessOf(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			in.PID, in.PGID, in.ProcStart, in.Host = proc.PID, proc.PGID, proc.StartTicks, tc.host
			if err := first.st.UpdateBatchInstances(t.Context(), []store.BatchInstance{in}); err != nil {
				t.Fatal(err)
			}

			second := newEnv(t, tasks, envOpts{storeURL: url, host: "alpha"})
			got := second.instances(bf.ID)[0]
			if got.State != store.InstanceWaiting {
				t.Errorf("recovered instance is %s, want waiting to run again", got.State)
			}
			select {
			case <-exited:
				if !tc.ended {
					t.Errorf("recovery ended a process group recorded on host %s from host alpha", tc.host)
				}
			case <-time.After(time.Second):
				if tc.ended {
					t.Errorf("recovery left this host's process group running")
				}
			}
			if want := "it ran on host beta"; !tc.ended && !strings.Contains(got.Reason, want) {
				t.Errorf("reason %q lacks %q", got.Reason, want)
			}
		})
	}
}
