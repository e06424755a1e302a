package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startGroup starts script as the leader of a new process group, as Run
// does, and waits until the group has n live members.
func startGroup(t *testing.T, script string, n int) (*exec.Cmd, Proc) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's members to start", func() bool {
		live, err := groupLive(pid)
		return err == nil && live >= n
	})
	return cmd, Proc{PID: pid, PGID: pid, StartTicks: st.startTicks}
}

func TestEndProcessGroupWithLeader(t *testing.T) {
	t.Parallel()
	cmd, proc := startGroup(t, "sleep 300 & sleep 300", 2)
	ended, err := EndProcessGroup(proc)
	if err != nil || !ended {
		t.Fatalf("EndProcessGroup = %v, %v", ended, err)
	}
	if live, _ := groupLive(proc.PGID); live != 0 {
		t.Fatalf("%d members still running", live)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != -1 {
		t.Fatalf("leader: %v", err)
	}
}

func TestEndProcessGroupWithoutLeader(t *testing.T) {
	t.Parallel()
	// What a daemon crash leaves: the leader is gone (the kernel killed it
	// with the daemon), its children are still running in its group.
	cmd, proc := startGroup(t, "sleep 300 & sleep 300", 2)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // reaped: /proc/PGID is gone
	if live, _ := groupLive(proc.PGID); live == 0 {
		t.Fatal("the leader's child did not survive it")
	}
	ended, err := EndProcessGroup(proc)
	if err != nil || !ended {
		t.Fatalf("EndProcessGroup = %v, %v", ended, err)
	}
	if live, _ := groupLive(proc.PGID); live != 0 {
		t.Fatalf("%d members still running", live)
	}
}

func TestEndProcessGroupReusedPID(t *testing.T) {
	t.Parallel()
	// The PID belongs to a process started later than the recorded one.
	_, proc := startGroup(t, "sleep 300", 1)
	proc.StartTicks--
	ended, err := EndProcessGroup(proc)
	if err != nil || ended {
		t.Fatalf("EndProcessGroup = %v, %v", ended, err)
	}
	if !running(proc.PID, proc.PGID) {
		t.Fatal("EndProcessGroup killed a process it did not start")
	}
}

func TestEndProcessGroupUnknownPID(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := readStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	ended, err := EndProcessGroup(Proc{PID: pid, PGID: pid, StartTicks: st.startTicks})
	if err != nil || ended {
		t.Fatalf("EndProcessGroup = %v, %v", ended, err)
	}
}

func TestEndProcessGroupRejectsNonLeader(t *testing.T) {
	t.Parallel()
	if _, err := EndProcessGroup(Proc{PID: 1234, PGID: 1233}); err == nil {
		t.Fatal("accepted a PID that is not its group's ID")
	}
	if _, err := EndProcessGroup(Proc{}); err == nil {
		t.Fatal("accepted PID 0")
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	line := "4242 (we ird) (name) S 1 4240 4240 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.state != 'S' || st.pgrp != 4240 || st.startTicks != 987654 {
		t.Fatalf("parsed %+v", st)
	}
	if _, err := parseStat([]byte("4242 (x) S 1")); err == nil {
		t.Fatal("short line accepted")
	}
}

// EndTagged finds a script and its child by the tag in their environment,
// without knowing their process group.
func TestEndTagged(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	cmd := exec.Command("/bin/sh", "-c", `sleep 300 & echo $! > `+pidFile+`; wait`)
	cmd.Env = append(os.Environ(), TagEnv+"=tag-under-test")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var child int
	for child == 0 {
		select {
		case <-done:
			t.Fatal("the script ended early")
		case <-time.After(time.Millisecond):
		}
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if n, err := EndTagged("other-tag"); err != nil || n != 0 {
		t.Fatalf("EndTagged(other) = %d, %v; want 0", n, err)
	}
	n, err := EndTagged("tag-under-test")
	if err != nil || n != 1 {
		t.Fatalf("EndTagged = %d, %v; want 1 group", n, err)
	}
	<-done
	if st, err := readStat(child); err == nil && st.alive() {
		t.Errorf("the tagged child %d still runs", child)
	}
}
