// Package kafkatest runs a throwaway Kafka cluster for tests: franz-go's
// kfake (an in-memory implementation of the Kafka protocol, transactions
// included) in a child process of its own on a free loopback port. No
// Kafka broker is packaged for these machines, so every Kafka test and
// figure is against kfake.
package kafkatest

import (
	"context"
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

// Start builds the kfake command and starts it on a free loopback port,
// topics created without a partition count getting partitions. The
// child also exits when the test process dies (its standard input
// closes).
func Start(ctx context.Context, partitions int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "tidemark-kfake-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	if err := c.start(ctx, partitions); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, partitions int) error {
	bin := filepath.Join(c.dir, "kfake")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/tidemark/tidemark/internal/kafkatest/kfake")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build kfake: %w: %s", err, out)
	}
	port, err := throwaway.FreePort()
	if err != nil {
		return err
	}
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "-port", strconv.Itoa(port), "-partitions", strconv.Itoa(partitions))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	c.stdin = in
	if c.p, err = throwaway.Launch(cmd, filepath.Join(c.dir, "kfake.log")); err != nil {
		return err
	}
	return c.p.WaitReady(ctx, func(ctx context.Context) error {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", c.Addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
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
