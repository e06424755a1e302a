// Package natsserver starts throwaway NATS servers with JetStream for the
// tests of the NATS destination. Nothing else uses it.
//
// A server runs from a directory of its own under the system temp dir
// (JetStream's store, its config and log), listens on a free loopback port
// and never on the standard 4222, and is stopped by PID: explicitly with
// Stop, and by the kernel (parent-death signal) if the process that started
// it dies.
package natsserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/tidemark/tidemark/internal/throwaway"
)

// Server is one running throwaway nats-server.
type Server struct {
	Dir  string
	Port int
	opts Options
	proc *throwaway.Process
}

// Options tune a server. The zero value serves anyone.
type Options struct {
	// User and Password, when set, are the only login the server accepts.
	User, Password string
	// TLSCert and TLSKey, when set, are the PEM files the server requires
	// TLS with; TLSCA is the CA that signed TLSCert, which Start trusts
	// while it waits for the server.
	TLSCert, TLSKey, TLSCA string
	// TLSClientCert and TLSClientKey, when set, make the server require a
	// client certificate signed by TLSCA; Start presents this one.
	TLSClientCert, TLSClientKey string
}

// Binary finds the nats-server executable.
func Binary() (string, error) {
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server", nil
	}
	return "", errors.New("no nats-server on PATH or in /usr/sbin: install it with `apt-get install nats-server` (scripts/setup.sh does)")
}

const prefix = "tidemark-nats-"

// Start starts a server with JetStream storing under a fresh directory.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	throwaway.SweepStale(prefix, "nats.pid")
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("create server directory: %w", err)
	}
	s := &Server{Dir: dir, opts: opts}
	started := false
	defer func() {
		if !started {
			s.Stop()
			os.RemoveAll(dir)
		}
	}()
	if s.Port, err = throwaway.FreePort(); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(s.config()), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-c", conf)
	cmd.Env = []string{}
	// If this process dies (a panicking test), the kernel kills the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if s.proc, err = throwaway.Launch(cmd, filepath.Join(dir, "server.log")); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	started = true
	return s, nil
}

// config is the server's configuration file: strings are quoted with
// strconv.Quote, whose escapes the NATS config parser reads the same.
func (s *Server) config() string {
	c := fmt.Sprintf("listen: %s\npid_file: %s\njetstream {\n  store_dir: %s\n}\n",
		strconv.Quote("127.0.0.1:"+strconv.Itoa(s.Port)), strconv.Quote(filepath.Join(s.Dir, "nats.pid")),
		strconv.Quote(filepath.Join(s.Dir, "jetstream")))
	if s.opts.TLSCert != "" {
		c += fmt.Sprintf("tls {\n  cert_file: %s\n  key_file: %s\n", strconv.Quote(s.opts.TLSCert), strconv.Quote(s.opts.TLSKey))
		if s.opts.TLSClientCert != "" {
			c += fmt.Sprintf("  ca_file: %s\n  verify: true\n", strconv.Quote(s.opts.TLSCA))
		}
		c += "}\n"
	}
	if s.opts.User != "" {
		c += fmt.Sprintf("authorization {\n  user: %s\n  password: %s\n}\n", strconv.Quote(s.opts.User), strconv.Quote(s.opts.Password))
	}
	return c
}

func (s *Server) waitReady(ctx context.Context) error {
	return s.proc.WaitReady(ctx, func(ctx context.Context) error {
		opts := []nats.Option{nats.UserInfo(s.opts.User, s.opts.Password)}
		if s.opts.TLSCA != "" {
			opts = append(opts, nats.RootCAs(s.opts.TLSCA))
		}
		if s.opts.TLSClientCert != "" {
			opts = append(opts, nats.ClientCert(s.opts.TLSClientCert, s.opts.TLSClientKey))
		}
		nc, err := nats.Connect(s.URL(), opts...)
		if err != nil {
			return err
		}
		defer nc.Close()
		// JetStream answers once it has read its store.
		_, err = nc.RequestWithContext(ctx, "$JS.API.INFO", nil)
		return err
	})
}

// URL is the server's address, without credentials.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.Port) }

// PID is the server's process id.
func (s *Server) PID() int { return s.proc.PID() }

// Stop shuts the server down, waits for it by PID and removes its
// directory. It is safe to call more than once.
func (s *Server) Stop() {
	if s == nil || s.proc == nil {
		return
	}
	s.proc.Stop(syscall.SIGTERM)
	os.RemoveAll(s.Dir)
}
