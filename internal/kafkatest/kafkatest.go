// Package kafkatest runs a throwaway Kafka cluster for tests: franz-go's
// kfake (an in-memory implementation of the Kafka protocol, transactions
// included) in a child process of its own on a free loopback port. No
// Kafka broker is packaged for these machines, so every Kafka test and
// figure is against kfake.
//
// The child is the test binary itself: a binary that imports this package
// becomes a broker when started with brokerEnv set. Building a separate
// kfake command instead cost a minute on the first cluster of each test
// package (franz-go's protocol package compiled again, without -race).
package kafkatest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tidemark/tidemark/internal/throwaway"
)

// Cluster is a running kfake process.
type Cluster struct {
	// Addr is the broker's host:port.
	Addr  string
	p     *throwaway.Process
	stdin io.Closer
	dir   string
}

// Options tune a cluster. The zero value serves anyone in plain text.
type Options struct {
	// Partitions of a topic created without a count (default 1).
	Partitions int
	// SASL, when set, is the mechanism the broker requires (PLAIN,
	// SCRAM-SHA-256 or SCRAM-SHA-512), and User and Password the one
	// login it accepts.
	SASL, User, Password string
	// TLSCert and TLSKey, when set, are the PEM files the broker serves
	// TLS with.
	TLSCert, TLSKey string
	// TLSClientCA, when set, is the CA that must have signed the client
	// certificate the broker requires of every client.
	TLSClientCA string
}

// Start starts kfake on a free loopback port,
// topics created without a partition count getting partitions. The
// child also exits when the test process dies (its standard input
// closes).
func Start(ctx context.Context, partitions int) (*Cluster, error) {
	return StartWith(ctx, Options{Partitions: partitions})
}

// StartWith is Start with SASL or TLS.
func StartWith(ctx context.Context, o Options) (*Cluster, error) {
	if o.Partitions <= 0 {
		o.Partitions = 1
	}
	dir, err := os.MkdirTemp("", "tidemark-kfake-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	if err := c.start(ctx, o); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, o Options) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	port, err := throwaway.FreePort()
	if err != nil {
		return err
	}
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	spec, err := json.Marshal(brokerSpec{Options: o, Port: port})
	if err != nil {
		return err
	}
	// The broker is this very binary, made one by brokerEnv (see init):
	// nothing to build while the test runs.
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), brokerEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	c.stdin = in
	if c.p, err = throwaway.Launch(cmd, filepath.Join(c.dir, "kfake.log")); err != nil {
		return err
	}
	err = c.p.WaitReady(ctx, func(ctx context.Context) error {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", c.Addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("kfake (this binary as broker): %w", err)
	}
	return nil
}

// PID is the kfake process's id.
func (c *Cluster) PID() int { return c.p.PID() }

// Stop ends the kfake process (by its pid) and removes its directory.
func (c *Cluster) Stop() {
	if c.p != nil {
		c.p.Stop(syscall.SIGTERM)
	}
	if c.stdin != nil {
		c.stdin.Close()
	}
	os.RemoveAll(c.dir)
}
