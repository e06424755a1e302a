package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShellUnderWatchdog: a shell task under the watchdog runs as without
// one: outputs, exit status, the signal that killed it, and a timeout
// ending everything it started; the watchdog leads the script's group.
// (Not parallel: the watchdog is the package's setting.)
func TestShellUnderWatchdog(t *testing.T) {
	if !WatchTasks(func() time.Time { return time.Now().Add(time.Hour) }) {
		t.Fatal("the test binary cannot be a watchdog")
	}
	defer WatchTasks(nil)
	ctx := context.Background()
	dir := t.TempDir()

	res, log, proc := shell(t, ctx, Spec{Script: `echo hello; echo "n=$N" >> "$TIDEMARK_OUTPUT"; echo $$ > sh; ps -o pgid= -p $$ > pgid`, Env: []string{"N=4"}, Dir: dir})
	if res.Err != nil || res.Outputs["n"] != "4" || log != "hello\n" {
		t.Errorf("result %+v, log %q", res, log)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "pgid")); strings.TrimSpace(string(b)) != strconv.Itoa(proc.PGID) {
		t.Errorf("the script ran in group %q, want the watchdog's %d", b, proc.PGID)
	}
	if sh := readPID(t, filepath.Join(dir, "sh")); sh == proc.PGID {
		t.Errorf("the shell %d leads the group: no watchdog", sh)
	}
	if st, err := readStat(proc.PGID); err == nil && st.alive() {
		t.Errorf("the watchdog %d outlived its task", proc.PGID)
	}
	if res, log, _ := shell(t, ctx, Spec{Script: "echo failing >&2; exit 3"}); res.ExitCode != 3 || res.Err == nil || log != "failing\n" {
		t.Errorf("exit 3: %+v, log %q", res, log)
	}
	for sig, name := range map[string]string{"TERM": "15", "SEGV": "11", "USR1": "10"} {
		if res, _, _ := shell(t, ctx, Spec{Script: "kill -" + sig + " $$"}); res.Err == nil || !strings.Contains(res.Err.Error(), "killed by signal "+name+" ") {
			t.Errorf("a script killed by SIG%s: %+v", sig, res)
		}
	}
	if _, log, _ := shell(t, ctx, Spec{Script: "[ -e /proc/$$/fd/3 ] && echo 'fd 3 open'; [ -e /proc/$$/fd/4 ] && echo 'fd 4 open'; true"}); log != "" {
		t.Errorf("the script inherited the watchdog's pipes: %q", log)
	}
	pidFile := filepath.Join(dir, "child")
	res, _, proc = shell(t, ctx, Spec{Script: "sleep 300 & echo $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; wait", Timeout: 300 * time.Millisecond})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "killed by timeout") {
		t.Errorf("a script past its timeout: %+v", res)
	}
	if pid := readPID(t, pidFile); running(pid, proc.PGID) {
		t.Errorf("the script's child %d outlived its timeout", pid)
	}
}

// TestShellLapsedUnderWatchdog: a task its watchdog ended because the
// daemon stopped moving its deadline on reports ErrLapsed (its node is
// lost, not the task failed); one killed by SIGKILL before its deadline
// reports the signal, not a lapse. (Not parallel: the watchdog is the
// package's setting.)
func TestShellLapsedUnderWatchdog(t *testing.T) {
	ctx := context.Background()
	at := time.Now().Add(500 * time.Millisecond) // never renewed
	if !WatchTasks(func() time.Time { return at }) {
		t.Fatal("the test binary cannot be a watchdog")
	}
	defer WatchTasks(nil)
	res, log, _ := shell(t, ctx, Spec{Script: "sleep 300"})
	if !errors.Is(res.Err, ErrLapsed) || res.ExitCode != -1 || !strings.Contains(log, "about to expire") {
		t.Errorf("a task past its node's deadline: %+v, log %q; want ErrLapsed", res, log)
	}
	WatchTasks(func() time.Time { return time.Now().Add(time.Hour) })
	res, _, _ = shell(t, ctx, Spec{Script: "kill -KILL $$"})
	if errors.Is(res.Err, ErrLapsed) || res.Err == nil || !strings.Contains(res.Err.Error(), "killed by signal 9 ") {
		t.Errorf("a task killed before its deadline: %+v; want killed by signal 9, not lapsed", res)
	}
}

// TestWatchdogEndsGroup: the watchdog ends the task's whole process group
// when the daemon's heartbeat pipe closes (the daemon died), when the
// time it was given passes without a later one (the daemon froze after
// beating for longer than that time), and when the time the daemon sends
// stops moving on (its node cannot renew its lease).
func TestWatchdogEndsGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want string
	}{{"daemon died", "its daemon stopped"}, {"daemon frozen", "about to expire"}, {"lease not renewed", "about to expire"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "child")
			killBy := func() time.Time { return time.Now().Add(2 * time.Second) }
			if tc.name == "lease not renewed" {
				at := time.Now().Add(3 * time.Second)
				killBy = func() time.Time { return at }
			}
			w := Watchdog{Exe: os.Args[0], KillBy: killBy}
			cmd, beat, err := watchedCommand(w, []string{"/bin/sh", "-c", "sleep 300 & echo $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; wait"})
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			beat.closeChildEnds()
			done := make(chan struct{})
			if tc.name == "daemon frozen" {
				// Beats for two seconds, then falls silent with the pipe open.
				defer beat.pipe.Close()
				go func() {
					for range 20 {
						var rec [8]byte
						binary.BigEndian.PutUint64(rec[:], uint64(time.Until(killBy()).Milliseconds()))
						if _, err := beat.pipe.Write(rec[:]); err != nil {
							return
						}
						time.Sleep(beatEvery)
					}
					close(done)
				}()
			} else {
				go beat.beatUntil(done)
			}
			waitFor(t, "the script's child", func() bool { _, err := os.Stat(pidFile); return err == nil })
			pid := readPID(t, pidFile)
			switch tc.name {
			case "daemon died":
				close(done) // the pipe closes
			case "daemon frozen":
				<-done
				if !running(pid, cmd.Process.Pid) {
					t.Errorf("the group ended while the daemon was still beating")
				}
			}
			waitFor(t, "the group to end", func() bool { return !running(pid, cmd.Process.Pid) })
			err = cmd.Wait()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("the watchdog ended with %v, stderr %q; want SIGKILL and %q", err, stderr.String(), tc.want)
			}
			// It says when its time came, not when its daemon died.
			if got, want := beat.lapsed(), tc.name != "daemon died"; got != want {
				t.Errorf("the watchdog said its time came: %v, want %v", got, want)
			}
			if tc.name == "lease not renewed" {
				close(done)
			}
		})
	}
}

// daemonScriptEnv makes the test binary a daemon running one shell task
// under a watchdog (runAsDaemon).
const daemonScriptEnv = "TIDEMARK_TEST_DAEMON_SCRIPT"

func runAsDaemon(script string) int {
	// Only the daemon's death can end the task.
	WatchTasks(func() time.Time { return time.Now().Add(time.Hour) })
	res := Run(context.Background(), Spec{Type: TypeShell, Script: script}, NewLog(0), nil)
	if res.Err != nil {
		return 1
	}
	return 0
}

// TestWatchdogOutlivesNoKilledDaemon: a daemon SIGKILLed while its shell
// task runs takes the task's whole process group with it.
func TestWatchdogOutlivesNoKilledDaemon(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child")
	daemon := exec.Command(os.Args[0])
	daemon.Env = append(os.Environ(), daemonScriptEnv+"=sleep 300 & echo $! > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; wait")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task's child", func() bool { _, err := os.Stat(pidFile); return err == nil })
	pid := readPID(t, pidFile)
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	waitFor(t, "the task to end with its daemon", func() bool { return !running(pid, st.pgrp) })
}

// TestWatchdogEndsLeftovers: with its daemon alive but doing nothing (as
// when frozen), a watchdog whose script exited ends what the script left
// running in the group, and one whose daemon stopped reading the task's
// log still ends the group when its time comes.
func TestWatchdogEndsLeftovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, script string }{
		{"script exited", "sleep 300 & echo $! > %[1]s.tmp; mv %[1]s.tmp %[1]s; exit 0"},
		{"log unread", "sleep 300 & echo $! > %[1]s.tmp; mv %[1]s.tmp %[1]s; head -c 300000 /dev/zero >&2; wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "child")
			w := Watchdog{Exe: os.Args[0], KillBy: func() time.Time { return time.Now().Add(time.Second) }}
			cmd, beat, err := watchedCommand(w, []string{"/bin/sh", "-c", fmt.Sprintf(tc.script, pidFile)})
			if err != nil {
				t.Fatal(err)
			}
			defer beat.pipe.Close() // open and silent: the daemon is frozen
			defer beat.fired.Close()
			logR, logW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer logR.Close() // never read
			cmd.Stdout, cmd.Stderr = logW, logW
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			beat.closeChildEnds()
			logW.Close()
			waitFor(t, "the script's child", func() bool { _, err := os.Stat(pidFile); return err == nil })
			pid := readPID(t, pidFile)
			_ = cmd.Wait()
			// A watchdog that ends the group ends itself in the same
			// kill(2): the child may still be on its way out when the
			// watchdog is reaped, but it must go (the daemon's runner
			// then waits for the group, EndProcessGroup).
			waitFor(t, "the script's child to end with its watchdog", func() bool { return !running(pid, cmd.Process.Pid) })
		})
	}
}
