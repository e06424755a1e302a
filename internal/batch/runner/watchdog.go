package runner

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A shell task of a cluster node runs under a watchdog: a small process,
// the daemon's own executable started with WatchdogArg, that leads the
// task's process group, starts the script in it, and ends the whole group
// when the daemon stops beating on a pipe: at once when the daemon dies
// (SIGKILL, a crash: the pipe closes), after Quiet when it is frozen
// (SIGSTOP, a VM pause). Without it the script's children would outlive a
// killed node, and another node recovering the attempt would run it twice
// at once (docs/cluster.md, "Batch").

// WatchdogArg is the first argument that makes the daemon's executable a
// watchdog (ServeWatchdog).
const WatchdogArg = "__tidemark-task-watchdog"

// Watchdog is how shell tasks are watched; the zero value runs them
// without one.
type Watchdog struct {
	// Exe is the executable started with WatchdogArg.
	Exe string
	// Quiet is how long the daemon may fall silent before its tasks end.
	Quiet time.Duration
}

var (
	watchdogMu sync.Mutex
	watchdog   Watchdog
)

// ServeWatchdog is the first thing the main of an executable that can be
// a watchdog does: started as one, it runs the watchdog and exits;
// otherwise it notes that the executable can be one (WatchTasks).
func ServeWatchdog() {
	if len(os.Args) > 1 && os.Args[1] == WatchdogArg {
		// Not os.Exit: nothing is left to flush, and a race-detector
		// build would wait a second on its way out.
		syscall.Exit(RunWatchdog(os.Args[2:]))
	}
	watchdogMu.Lock()
	defer watchdogMu.Unlock()
	// The running image, even if the file was replaced since.
	watchdog.Exe = "/proc/self/exe"
}

// WatchTasks makes every later shell task run under a watchdog that ends
// it quiet after the daemon falls silent (0: no watchdog). It reports
// false when this executable cannot be a watchdog (no ServeWatchdog).
func WatchTasks(quiet time.Duration) bool {
	watchdogMu.Lock()
	defer watchdogMu.Unlock()
	watchdog.Quiet = quiet
	return watchdog.Exe != ""
}

func currentWatchdog() Watchdog {
	watchdogMu.Lock()
	defer watchdogMu.Unlock()
	if watchdog.Quiet <= 0 {
		return Watchdog{}
	}
	return watchdog
}

// heartbeatFD is the watchdog's end of the daemon's heartbeat pipe (the
// first of exec.Cmd.ExtraFiles).
const heartbeatFD = 3

// watchedCommand is the command that runs argv under w, and the pipe end
// the daemon beats on: beat it every w.Quiet/6 until the task ends, then
// close it.
func watchedCommand(w Watchdog, argv []string) (*exec.Cmd, *os.File, func(), error) {
	r, beat, err := os.Pipe() // close-on-exec: no other child holds it
	if err != nil {
		return nil, nil, nil, fmt.Errorf("heartbeat pipe: %w", err)
	}
	args := append([]string{WatchdogArg, strconv.FormatInt(w.Quiet.Milliseconds(), 10)}, argv...)
	cmd := exec.Command(w.Exe, args...)
	cmd.ExtraFiles = []*os.File{r}
	closeRead := func() { r.Close() }
	return cmd, beat, closeRead, nil
}

// beatUntil writes a byte to beat every quiet/6 until done is closed, then
// closes it.
func beatUntil(beat *os.File, quiet time.Duration, done <-chan struct{}) {
	defer beat.Close()
	t := time.NewTicker(max(quiet/6, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if _, err := beat.Write([]byte{0}); err != nil {
				return // the watchdog is gone: the task has ended
			}
		}
	}
}

// RunWatchdog is the watchdog's main (args after WatchdogArg: the quiet
// time in milliseconds, then the command); it returns the exit code, or
// ends the process with the signal that ended the command.
func RunWatchdog(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "tidemark: "+WatchdogArg+" is started by the daemon for a shell task, not by hand")
		return 2
	}
	ms, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || ms <= 0 {
		fmt.Fprintf(os.Stderr, "tidemark watchdog: quiet time %q: want milliseconds\n", args[0])
		return 2
	}
	quiet := time.Duration(ms) * time.Millisecond
	// SIGTERM and SIGINT to the group reach the command too; the watchdog
	// outlives them to report how the command ended. SIGPIPE would end it
	// at its last words to a dead daemon, before it ends the group.
	// (Caught, not ignored: the command would inherit an ignored signal.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	if err := syscall.SetNonblock(heartbeatFD, true); err != nil {
		fmt.Fprintf(os.Stderr, "tidemark watchdog: heartbeat pipe: %v\n", err)
		return 2
	}
	heartbeat := os.NewFile(heartbeatFD, "heartbeat")
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The command stays in the watchdog's process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "tidemark watchdog: start %s: %v\n", args[1], err)
		return 127
	}
	go watchHeartbeat(heartbeat, quiet)
	_ = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		time.Sleep(time.Second) // the signal ends the process
	}
	return cmd.ProcessState.ExitCode()
}

// watchHeartbeat ends the process group, the watchdog with it, once the
// pipe closes or stays silent for quiet.
func watchHeartbeat(heartbeat *os.File, quiet time.Duration) {
	buf := make([]byte, 64)
	for {
		if err := heartbeat.SetReadDeadline(time.Now().Add(quiet)); err != nil {
			break
		}
		if _, err := heartbeat.Read(buf); err != nil {
			why := "its daemon stopped"
			if os.IsTimeout(err) {
				why = fmt.Sprintf("its daemon was silent for %s (frozen?)", quiet)
			}
			fmt.Fprintf(os.Stderr, "\n[tidemark: the task was ended: %s]\n", why)
			break
		}
	}
	_ = syscall.Kill(0, syscall.SIGKILL)
}
