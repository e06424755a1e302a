package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// Proc identifies a shell task's process group: its leader's PID, which is
// also the group ID, and the leader's start time, which tells the leader
// from a later process that got the same PID.
type Proc struct {
	PID, PGID int
	// StartTicks is field 22 of /proc/PID/stat: the leader's start time in
	// clock ticks since boot.
	StartTicks uint64
}

const (
	// reapTimeout bounds the wait for killed processes to exit.
	reapTimeout = 10 * time.Second
	// maxPoll is the longest pause between two looks at /proc while waiting
	// for killed processes to exit.
	maxPoll = 5 * time.Millisecond
	// maxGracePoll is the same while waiting for terminated processes to
	// exit of their own accord, which takes longer.
	maxGracePoll = 50 * time.Millisecond
)

// EndProcessGroup kills (SIGKILL) the process group p describes, if it is
// still the one that was started, and waits until its members have exited.
// It is how the daemon, after a restart, ends the scripts of attempts that
// were running when it died. ended reports whether the group was found and
// killed; ended is false and err nil when there is nothing to end (the
// group is gone, or p.PID now belongs to another process).
//
// Why a group found this way is the one that was started: Linux keeps a
// process ID allocated as long as any process uses it as its PID or as its
// process group ID, so the number p.PGID cannot be handed to a new process
// while a member of the group is alive (or a zombie, which keeps its PID).
//
//   - If /proc/PGID exists with p.StartTicks, it is the leader itself (alive
//     or a zombie nobody reaped), and the group is p's.
//   - If /proc/PGID exists with other start ticks, the ID was free at some
//     point, so p's group had ended; the process is someone else's and is
//     left alone.
//   - If /proc/PGID does not exist but kill(-PGID, 0) finds members, the
//     leader is gone and the ID is held by the members. They are p's group
//     unless the ID was freed, reused by a new process that made itself a
//     group leader and exited in turn, leaving members of its own: that
//     takes the PID space wrapping around in between and is accepted.
//
// A group ended with this function stays ended: its processes receive
// SIGKILL, which they can neither catch nor ignore.
func EndProcessGroup(p Proc) (ended bool, err error) {
	if p.PID <= 1 || p.PGID != p.PID {
		return false, fmt.Errorf("end process group: %+v does not describe a group leader", p)
	}
	pgid := p.PGID
	st, err := readStat(pgid)
	switch {
	case err == nil && st.startTicks != p.StartTicks:
		return false, nil // PID reused: p's group ended long ago
	case err == nil:
		// The leader, alive or a zombie, holds the group ID.
	case errors.Is(err, fs.ErrNotExist):
		switch err := syscall.Kill(-pgid, 0); {
		case errors.Is(err, syscall.ESRCH):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("end process group %d: %w", pgid, err)
		}
		// The group has members. Look again: a process that got PID pgid
		// between the two looks means the ID was free, and the members
		// found are another group's.
		if _, err := readStat(pgid); !errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	default:
		return false, fmt.Errorf("end process group %d: %w", pgid, err)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("end process group %d: %w", pgid, err)
	}
	if err := waitGroupGone(pgid, time.Now().Add(reapTimeout), maxPoll); err != nil {
		return true, fmt.Errorf("end process group %d: %w", pgid, err)
	}
	return true, nil
}

// waitGroupGone waits until no live process is in group pgid, looking at
// /proc with pauses growing to maxPause, and fails at deadline. Zombies count as
// gone: they have exited and hold nothing but their process ID, and in a
// container whose init does not reap, they never go away.
func waitGroupGone(pgid int, deadline time.Time, maxPause time.Duration) error {
	pause := time.Millisecond
	for {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return nil
		}
		live, err := groupLive(pgid)
		if err != nil {
			return err
		}
		if live == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of group %d still running after SIGKILL", live, pgid)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// groupLive counts the processes of group pgid that have not exited.
func groupLive(pgid int) (int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("list /proc: %w", err)
	}
	live := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if st.pgrp == pgid && st.alive() {
			live++
		}
	}
	return live, nil
}

// procStat is what this package reads from /proc/PID/stat.
type procStat struct {
	state      byte
	pgrp       int
	startTicks uint64
}

// alive reports whether the process has not exited: not a zombie (Z) and
// not dead (X).
func (s procStat) alive() bool { return s.state != 'Z' && s.state != 'X' }

// ProcessOf describes a running process group leader as the runner
// records one (Proc): what recovery needs to end its group later.
func ProcessOf(pid int) (Proc, error) {
	st, err := readStat(pid)
	if err != nil {
		return Proc{}, err
	}
	return Proc{PID: pid, PGID: st.pgrp, StartTicks: st.startTicks}, nil
}

// readStat reads /proc/PID/stat. Its second field, the command name in
// parentheses, may itself contain spaces and parentheses, so fields are
// counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q", b)
	}
	// Fields from 3 (state) on.
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q", b)
	}
	pgrp, err := strconv.Atoi(string(f[2])) // field 5
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q: pgrp: %w", b, err)
	}
	ticks, err := strconv.ParseUint(string(f[19]), 10, 64) // field 22
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q: starttime: %w", b, err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, startTicks: ticks}, nil
}

const pPID = 1 // waitid idtype P_PID

// waitExited blocks until child pid has exited, without reaping it: the
// zombie keeps the PID, and with it the process group ID, allocated until
// exec.Cmd.Wait reaps it. Until then kill(-pgid) cannot reach a stranger.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t, unused
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return fmt.Errorf("wait for process %d: %w", pid, e)
		}
	}
}
