package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procStatus reads a "kB" field of /proc/self/status (VmRSS, VmHWM) in bytes.
func procStatus(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", field, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// resetPeak returns freed memory to the OS and resets VmHWM to the current
// RSS (writing 5 to clear_refs, Linux 4.0+).
func resetPeak() error {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}

// checkPeakReset tells whether resetPeak really lowers VmHWM here: it
// touches 64 MiB, frees it, resets and looks.
func checkPeakReset() bool {
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	runtime.KeepAlive(buf)
	before, err := procStatus("VmHWM")
	if err != nil {
		return false
	}
	buf = nil
	if resetPeak() != nil {
		return false
	}
	after, err := procStatus("VmHWM")
	return err == nil && after < before-32<<20
}

// rssSampler records the largest VmRSS seen every 50ms: the fallback when
// VmHWM cannot be reset, and a cross-check when it can.
type rssSampler struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	max  int64
}

func startSampler() *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	s.sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	if v, err := procStatus("VmRSS"); err == nil {
		s.mu.Lock()
		s.max = max(s.max, v)
		s.mu.Unlock()
	}
}

// Stop ends sampling and returns the largest RSS seen.
func (s *rssSampler) Stop() int64 {
	close(s.stop)
	s.wg.Wait()
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// cpuTimes is CPU time used so far by this process, by the child
// processes it waited for (the client programs of a shell pipe), by the
// source and the destination servers (each server process, its live
// children, and the children it reaped) and by the whole machine (every
// CPU's non-idle time).
type cpuTimes struct{ self, children, src, dst, machine time.Duration }

func readCPU(sv servers) cpuTimes { return readCPUOf(sv.src.PID(), sv.dst.PID()) }

// readCPUOf is readCPU for the source and destination servers' PIDs (a
// postmaster, or a MariaDB server whose threads are one process).
func readCPUOf(src, dst int) cpuTimes {
	rusage := func(who int) time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(who, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return cpuTimes{self: rusage(syscall.RUSAGE_SELF), children: rusage(syscall.RUSAGE_CHILDREN),
		src: serverCPU(src), dst: serverCPU(dst), machine: machineCPU()}
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{self: c.self - o.self, children: c.children - o.children, src: c.src - o.src, dst: c.dst - o.dst,
		machine: c.machine - o.machine}
}

// others is the CPU time the rest of the machine used: other processes
// compete for the same two cores and slow every figure down.
func (c cpuTimes) others() time.Duration { return max(0, c.machine-c.self-c.children-c.src-c.dst) }

// machineCPU is the non-idle time of every CPU from /proc/stat's "cpu"
// line: user nice system idle iowait irq softirq steal.
func machineCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// serverCPU sums utime+stime of the postmaster's children and the
// postmaster's own times including reaped children (cutime+cstime).
func serverCPU(postmaster int) time.Duration {
	var ticks int64
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		f, ok := readStat(path)
		if !ok {
			continue
		}
		switch {
		case f.pid == postmaster:
			ticks += f.utime + f.stime + f.cutime + f.cstime
		case f.ppid == postmaster:
			ticks += f.utime + f.stime
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

type statFields struct {
	pid, ppid                    int
	utime, stime, cutime, cstime int64
}

// readStat parses /proc/<pid>/stat; the command name may hold spaces and
// parentheses, so fields are counted after its last ')'.
func readStat(path string) (statFields, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return statFields{}, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return statFields{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw[:bytes.IndexByte(raw, '(')])))
	if err != nil {
		return statFields{}, false
	}
	// After ')': state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime …
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 15 {
		return statFields{}, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	return statFields{pid: pid, ppid: int(n(1)), utime: n(11), stime: n(12), cutime: n(13), cstime: n(14)}, true
}
