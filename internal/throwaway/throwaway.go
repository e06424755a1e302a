// Package throwaway holds what the throwaway database servers of the tests
// (internal/pgserver, internal/mysqlserver) share: the system account a
// server runs as, a free loopback port, and the server process: started,
// awaited until it accepts connections, stopped by PID.
package throwaway

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Credential returns the credential to run a server as the named system
// user, nil when this process already is that user. install says how to get
// the account when it is missing ("apt-get install postgresql").
func Credential(name, install string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up the %s system user (install the server with `%s`): %w", name, install, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if os.Geteuid() != 0 && os.Geteuid() != uid {
		return nil, fmt.Errorf("throwaway servers run as the %s user: run as root or as %s (uid %d)", name, name, uid)
	}
	if os.Geteuid() == uid {
		return nil, nil
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Chown gives dir to the credential's user; nil changes nothing.
func Chown(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return os.Chown(dir, int(cred.Uid), int(cred.Gid))
}

// FreePort returns a loopback TCP port nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a running server process with its output going to a log file.
type Process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Launch starts cmd with its output appended to the file at log, and
// reaps it in the background.
func Launch(cmd *exec.Cmd, log string) (*Process, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	p := &Process{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Cmd is the command the process was started from.
func (p *Process) Cmd() *exec.Cmd { return p.cmd }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig and waits for the process to exit.
func (p *Process) Signal(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}

// Stop sends sig, waits for the process to exit, and kills it after 30 s.
// It returns at once when the process has already exited.
func (p *Process) Stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitReady calls try every 20 ms until it succeeds, the process exits
// (its log is in the error), ctx ends, or 60 s pass.
func (p *Process) WaitReady(ctx context.Context, try func(context.Context) error) error {
	name := filepath.Base(p.cmd.Path)
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(p.log)
			return fmt.Errorf("%s exited during start-up: %v: %s", name, p.err, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept connections within 60s: %w", name, err)
		}
	}
}

// Dir creates a fresh directory under the system temp dir, named from
// prefix, owned by the named system user and enterable by it, and returns
// it with the credential to run the server as that user.
func Dir(prefix, user, install string) (string, *syscall.Credential, error) {
	cred, err := Credential(user, install)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("create data directory: %w", err)
	}
	// MkdirTemp makes the directory 0700: the server's user must enter it.
	if err := os.Chmod(dir, 0o755); err == nil {
		err = Chown(dir, cred)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("give %s to the %s user: %w", dir, user, err)
	}
	return dir, cred, nil
}

// SweepStale removes the directories os.TempDir()/PREFIX* that a process
// killed before it could stop its server left behind (the kernel killed the
// server): older than an hour, and without a live process in the pid file
// at pidFile (relative to the directory; its first line is the pid).
func SweepStale(prefix, pidFile string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, d := range dirs {
		info, err := os.Stat(d)
		if err != nil || time.Since(info.ModTime()) < time.Hour {
			continue
		}
		if pid, err := os.ReadFile(filepath.Join(d, pidFile)); err == nil {
			line, _, _ := strings.Cut(string(pid), "\n")
			if n, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && syscall.Kill(n, 0) == nil {
				continue // still running
			}
		}
		os.RemoveAll(d)
	}
}
