package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// GracePeriod is how long a stopped shell task's process group has between
// SIGTERM and SIGKILL, and how long a stopped PostgreSQL query has to
// acknowledge its cancel request before the connection is dropped. Tests
// shorten it; change it only before the first Run.
var GracePeriod = 5 * time.Second

// OutputEnv names the environment variable holding the path of the file a
// shell task writes its output parameters to, one name=value per line.
const OutputEnv = "TIDEMARK_OUTPUT"

const (
	// pipeDelay bounds the wait for the output pipe to close once the
	// script's process group has ended: only a process that left the group
	// (setsid) can still hold it.
	pipeDelay = 2 * time.Second
	// maxOutputsSize bounds the outputs file.
	maxOutputsSize = 1 << 20
)

func runShell(ctx context.Context, spec Spec, log io.Writer, started func(Proc) error) Result {
	if err := context.Cause(ctx); err != nil {
		return failed(cancelled(err)) // not started
	}
	outputs, err := os.CreateTemp("", "tidemark-output-*")
	if err != nil {
		return failed(fmt.Errorf("create outputs file: %w", err))
	}
	outputsPath := outputs.Name()
	outputs.Close()
	defer os.Remove(outputsPath)

	ctx, cancel, timeoutCause := withTimeout(ctx, spec.Timeout)
	defer cancel()

	cmd := exec.Command("/bin/sh", "-c", spec.Script)
	// Under a watchdog, it leads the group and starts the shell.
	w := currentWatchdog()
	var beat *heartbeat
	if w.Exe != "" {
		if cmd, beat, err = watchedCommand(w, cmd.Args); err != nil {
			return failed(err)
		}
	}
	cmd.Dir = spec.Dir
	cmd.Env = append(slices.Clip(spec.Env), OutputEnv+"="+outputsPath)
	// One writer for both: exec gives the script a single pipe, so stdout
	// and stderr keep the order in which they were written.
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so that the script and everything it starts
	// can be signalled at once; SIGKILL if the daemon dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if beat != nil {
		// Not the watchdog: killed, it could not end the group. It ends
		// the group itself when the daemon dies.
		cmd.SysProcAttr.Pdeathsig = 0
	}
	cmd.WaitDelay = pipeDelay
	err = cmd.Start()
	if beat != nil {
		beat.closeChildEnds()
	}
	if err != nil {
		if beat != nil {
			beat.pipe.Close()
			beat.fired.Close()
		}
		return failed(fmt.Errorf("start %s: %w", cmd.Path, err))
	}
	g := watchGroup(cmd.Process.Pid)
	if beat != nil {
		go beat.beatUntil(g.exited)
	}

	var stopErr error
	if st, err := readStat(g.pgid); err != nil {
		stopErr = fmt.Errorf("read start time of process %d: %w", g.pgid, err)
	} else if started != nil {
		stopErr = started(Proc{PID: g.pgid, PGID: g.pgid, StartTicks: st.startTicks})
	}
	if stopErr != nil {
		g.kill()
	} else {
		select {
		case <-g.exited:
		case <-ctx.Done():
			stopErr = stopError(ctx, timeoutCause, "killed")
			g.terminate()
		}
	}
	<-g.exited
	// The leader has exited but is not reaped yet, so the group ID is still
	// this group's: end whatever the script left running in it.
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	if err := waitGroupGone(g.pgid, time.Now().Add(reapTimeout), maxPoll); err != nil {
		fmt.Fprintf(log, "\n[tidemark: %v]\n", err)
	}
	waitErr := cmd.Wait()
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		fmt.Fprintf(log, "\n[tidemark: a process outside the task's process group kept its output open; output after this point is lost]\n")
		waitErr = nil
	}

	lapsed := beat != nil && beat.lapsed()
	return shellResult(cmd.ProcessState, lapsed, stopErr, waitErr, outputsPath)
}

// shellResult says how a shell task ended: lapsed (its watchdog said its
// time came, and ended it), stopped (stopErr), killed, failed, or
// succeeded with the outputs it wrote.
func shellResult(state *os.ProcessState, lapsed bool, stopErr, waitErr error, outputsPath string) Result {
	code := state.ExitCode()
	ws, _ := state.Sys().(syscall.WaitStatus)
	// A script that ended by itself while the watchdog said its last
	// words is reported as it ended: the watchdog's kill never came.
	if lapsed && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		// Before a stop or a timeout: one that came while the daemon was
		// frozen is seen as it wakes, beside the watchdog's end.
		return Result{ExitCode: code, Err: fmt.Errorf("%w: its watchdog ended it", ErrLapsed)}
	}
	if stopErr != nil {
		return Result{ExitCode: code, Err: stopErr}
	}
	if ws.Signaled() {
		return Result{ExitCode: code, Err: fmt.Errorf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())}
	}
	if code != 0 {
		return Result{ExitCode: code, Err: fmt.Errorf("exit status %d", code)}
	}
	if waitErr != nil {
		return Result{ExitCode: code, Err: fmt.Errorf("collect output: %w", waitErr)}
	}
	outs, err := readOutputs(outputsPath)
	if err != nil {
		return Result{ExitCode: code, Err: err}
	}
	return Result{Outputs: outs, ExitCode: code}
}

// group is a started script's process group, led by the script's shell.
type group struct {
	pgid   int
	exited chan struct{} // closed when the leader has exited (not reaped)
}

func watchGroup(pid int) *group {
	g := &group{pgid: pid, exited: make(chan struct{})}
	go func() {
		defer close(g.exited)
		_ = waitExited(pid) // fails only if someone else reaped the leader
	}()
	return g
}

func (g *group) kill() { _ = syscall.Kill(-g.pgid, syscall.SIGKILL) }

// terminate sends SIGTERM to the group and SIGKILL once the whole group has
// exited or GracePeriod has passed, whichever comes first.
func (g *group) terminate() {
	_ = syscall.Kill(-g.pgid, syscall.SIGTERM)
	deadline := time.Now().Add(GracePeriod)
	grace := time.NewTimer(GracePeriod)
	defer grace.Stop()
	select {
	case <-g.exited:
		// The rest of the group gets what remains of the grace period.
		_ = waitGroupGone(g.pgid, deadline, maxGracePoll)
	case <-grace.C:
	}
	g.kill()
}

// readOutputs parses a shell task's outputs file: name=value lines, where
// the value is everything after the first '='; blank lines and lines
// starting with '#' are skipped. A missing file means no outputs.
func readOutputs(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read outputs file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxOutputsSize+1))
	if err != nil {
		return nil, fmt.Errorf("read outputs file: %w", err)
	}
	if len(b) > maxOutputsSize {
		return nil, fmt.Errorf("outputs file ($%s) is larger than %d bytes", OutputEnv, maxOutputsSize)
	}
	return parseOutputs(string(b))
}

func parseOutputs(s string) (map[string]string, error) {
	var outs map[string]string
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if t := strings.TrimSpace(line); t == "" || t[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t\v\f") {
			if len(line) > 80 {
				line = line[:80] + "…"
			}
			return nil, fmt.Errorf("outputs file ($%s) line %d: %q is not name=value", OutputEnv, i+1, line)
		}
		if outs == nil {
			outs = make(map[string]string)
		}
		outs[name] = value
	}
	return outs, nil
}
