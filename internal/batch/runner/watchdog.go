package runner

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// A shell task of a cluster node runs under a watchdog: a small process,
// the daemon's own executable started with WatchdogArg, that leads the
// task's process group, starts the script in it, and ends the whole group
// by the time the daemon gives it. The daemon sends that time on a pipe
// several times a second (its node's lease renewed pushes it on); the
// watchdog ends the group when the time comes without a later one (the
// daemon is frozen: SIGSTOP, a VM pause; or cut off from the store), or at
// once when the pipe closes (the daemon died). Without it the script's
// children would outlive a killed or frozen node, and another node
// recovering the attempt would run it twice at once (docs/cluster.md,
// "Batch").

// WatchdogArg is the first argument that makes the daemon's executable a
// watchdog (ServeWatchdog).
const WatchdogArg = "__tidemark-task-watchdog"

// Watchdog is how shell tasks are watched; the zero value runs them
// without one.
type Watchdog struct {
	// Exe is the executable started with WatchdogArg.
	Exe string
	// KillBy is when the daemon's tasks must have ended unless it says
	// otherwise before then.
	KillBy func() time.Time
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
// it by killBy's time as read last (nil: no watchdog). It reports false
// when this executable cannot be a watchdog (no ServeWatchdog).
func WatchTasks(killBy func() time.Time) bool {
	watchdogMu.Lock()
	defer watchdogMu.Unlock()
	watchdog.KillBy = killBy
	return watchdog.Exe != ""
}

func currentWatchdog() Watchdog {
	watchdogMu.Lock()
	defer watchdogMu.Unlock()
	if watchdog.KillBy == nil {
		return Watchdog{}
	}
	return watchdog
}

// heartbeatFD is the watchdog's end of the daemon's heartbeat pipe (the
// first of exec.Cmd.ExtraFiles); firedFD the one of the pipe on which it
// tells the daemon that the time came (the second).
const (
	heartbeatFD = 3
	firedFD     = 4
)

// beatEvery is how often the daemon sends the time.
const beatEvery = 100 * time.Millisecond

// heartbeat is the daemon's end of a watched task's pipes.
type heartbeat struct {
	pipe   *os.File // the heartbeats' daemon end
	killBy func() time.Time
	// fired is the daemon's end of the pipe on which the watchdog says,
	// before it ends the group, that the time came without a later one.
	fired *os.File
	// childEnds are the watchdog's ends, closed once it started.
	childEnds []*os.File
}

// watchedCommand is the command that runs argv under w, and the
// heartbeat the daemon beats on (beatUntil).
func watchedCommand(w Watchdog, argv []string) (*exec.Cmd, *heartbeat, error) {
	r, pipe, err := os.Pipe() // close-on-exec: no other child holds it
	if err != nil {
		return nil, nil, fmt.Errorf("heartbeat pipe: %w", err)
	}
	fired, firedW, err := os.Pipe()
	if err != nil {
		r.Close()
		pipe.Close()
		return nil, nil, fmt.Errorf("watchdog pipe: %w", err)
	}
	h := &heartbeat{pipe: pipe, killBy: w.KillBy, fired: fired, childEnds: []*os.File{r, firedW}}
	left := time.Until(w.KillBy()).Milliseconds()
	args := append([]string{WatchdogArg, strconv.FormatInt(left, 10)}, argv...)
	cmd := exec.Command(w.Exe, args...)
	cmd.Args[0] = "tidemark" // as ps shows it
	cmd.ExtraFiles = h.childEnds
	return cmd, h, nil
}

// closeChildEnds closes the watchdog's ends once it is started (or failed
// to start): its exit then fails the beats and ends what fired can read.
func (h *heartbeat) closeChildEnds() {
	for _, f := range h.childEnds {
		f.Close()
	}
}

// beatUntil sends the time left until killBy's every beatEvery (an 8-byte
// big-endian count of milliseconds) until done is closed or the watchdog
// is gone, then closes the pipe.
func (h *heartbeat) beatUntil(done <-chan struct{}) {
	defer h.pipe.Close()
	t := time.NewTicker(beatEvery)
	defer t.Stop()
	var rec [8]byte
	for {
		select {
		case <-done:
			return
		case <-t.C:
			binary.BigEndian.PutUint64(rec[:], uint64(time.Until(h.killBy()).Milliseconds()))
			if _, err := h.pipe.Write(rec[:]); err != nil {
				return // the watchdog is gone: the task has ended
			}
		}
	}
}

// lapsed reports, once the watchdog has ended, whether it ended the group
// because its time came without a later one: the daemon did not move it
// on (it was frozen, or its node could not renew its leases). The
// watchdog said so before the kill; the daemon may only hear it after
// waking, and after sending more beats, so no clock can tell.
func (h *heartbeat) lapsed() bool {
	defer h.fired.Close()
	// Every writer is gone (the watchdog is dead, the script never had
	// it): the read returns at once. The deadline guards against a
	// process that escaped with it all the same.
	_ = h.fired.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	n, _ := h.fired.Read(b[:])
	return n == 1
}

// RunWatchdog is the watchdog's main (args after WatchdogArg: the
// milliseconds left, then the command); it returns the exit code, or ends
// the process with the signal that ended the command.
func RunWatchdog(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "tidemark: "+WatchdogArg+" is started by the daemon for a shell task, not by hand")
		return 2
	}
	ms, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tidemark watchdog: time left %q: want milliseconds\n", args[0])
		return 2
	}
	killAt := time.Now().Add(time.Duration(ms) * time.Millisecond)
	if syscall.Getpgrp() != os.Getpid() {
		// It ends its whole group: it must be a group of its own.
		fmt.Fprintln(os.Stderr, "tidemark watchdog: not the leader of its process group")
		return 2
	}
	// SIGTERM and SIGINT to the group reach the command too; the watchdog
	// outlives them to report how the command ended. SIGPIPE would end it
	// at its last words to a dead daemon, before it ends the group.
	// (Caught, not ignored: the command would inherit an ignored signal.)
	stopping := make(chan os.Signal, 1)
	signal.Notify(stopping, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if err := syscall.SetNonblock(heartbeatFD, true); err != nil {
		fmt.Fprintf(os.Stderr, "tidemark watchdog: heartbeat pipe: %v\n", err)
		return 2
	}
	syscall.CloseOnExec(heartbeatFD) // the daemon's, not the script's
	syscall.CloseOnExec(firedFD)
	heartbeat := os.NewFile(heartbeatFD, "heartbeat")
	fired := os.NewFile(firedFD, "fired")
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The command stays in the watchdog's process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "tidemark watchdog: start %s: %v\n", args[1], err)
		return 127
	}
	go watchHeartbeat(heartbeat, fired, killAt)
	_ = cmd.Wait()
	select {
	case <-stopping:
		// A stop (or a signal to the group): the rest of the group has
		// the runner's grace period to end by itself.
		for end := time.Now().Add(GracePeriod); time.Now().Before(end) && othersInGroup(false); {
			time.Sleep(10 * time.Millisecond)
		}
	default:
	}
	// What the command left running ends with it, as without a watchdog:
	// a frozen daemon could not end it. A process that does not die (stuck
	// in the kernel) is left to the daemon after reapTimeout.
	pause := time.Millisecond
	for end := time.Now().Add(reapTimeout); time.Now().Before(end) && othersInGroup(true); pause = min(2*pause, maxPoll) {
		time.Sleep(pause)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		dieFromSignal(ws.Signal())
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// othersInGroup reports whether a live process other than the watchdog
// is in its process group, sending each SIGKILL when kill is set.
func othersInGroup(kill bool) bool {
	self := os.Getpid()
	names, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	found := false
	for _, e := range names {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, err := readStat(pid); err == nil && st.pgrp == self && st.alive() {
			found = true
			if kill {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return found
}

// dieFromSignal ends the watchdog with sig, as the command ended, so the
// daemon reads the same wait status. The Go runtime handles some signals
// itself (SIGSEGV, SIGPIPE…): the default action is set directly, the
// signal unblocked on this thread and sent to it. No core file.
func dieFromSignal(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	const prSetDumpable = 4 // nor a core handed to a core_pattern pipe
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	runtime.LockOSThread()
	var act [4]uint64 // the kernel's struct sigaction: handler SIG_DFL, no flags, empty mask
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	set := uint64(1) << (uint(sig) - 1)
	const sigUnblock = 1
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigUnblock, uintptr(unsafe.Pointer(&set)), 0, 8, 0, 0)
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	time.Sleep(time.Second) // a signal whose default is to be ignored comes back
}

// watchHeartbeat ends the process group, the watchdog with it, at killAt
// as the daemon last moved it, or when the pipe closes. When the time
// came, it says so on fired first: the daemon, woken, learns that its
// node was lost (ErrLapsed), not that the task failed.
func watchHeartbeat(heartbeat, fired *os.File, killAt time.Time) {
	var rec [8]byte
	why := "its node's leases were about to expire: the daemon is frozen or cut off from the metadata store"
	lapsed := true
	for time.Now().Before(killAt) {
		if err := heartbeat.SetReadDeadline(killAt); err != nil {
			why, lapsed = err.Error(), false
			break
		}
		if _, err := io.ReadFull(heartbeat, rec[:]); err != nil {
			if !os.IsTimeout(err) {
				why, lapsed = "its daemon stopped", false
			}
			break
		}
		killAt = time.Now().Add(time.Duration(int64(binary.BigEndian.Uint64(rec[:]))) * time.Millisecond)
	}
	if lapsed {
		// An empty pipe takes a byte at once; a dead daemon's refuses it.
		_, _ = fired.Write([]byte{1})
	}
	// Last words, if the log takes them at once: a frozen daemon reads
	// nothing, and a full pipe must not hold the kill up.
	said := make(chan struct{})
	go func() {
		fmt.Fprintf(os.Stderr, "\n[tidemark: the task was ended: %s]\n", why)
		close(said)
	}()
	select {
	case <-said:
	case <-time.After(50 * time.Millisecond):
	}
	_ = syscall.Kill(0, syscall.SIGKILL)
}
