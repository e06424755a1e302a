package mysqlserver

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"golang.org/x/sync/errgroup"
)

// TestStartTwoAtOnce starts two servers concurrently: each gets its own
// port, socket and directory, the binlog settings CDC needs, and the
// tidemark account with its grants; Stop ends the process and removes the
// directory.
func TestStartTwoAtOnce(t *testing.T) {
	t.Setenv("MYSQL_TCP_PORT", "3306")
	ctx := context.Background()
	var servers [2]*Server
	var g errgroup.Group
	for i := range servers {
		g.Go(func() error {
			s, err := Start(ctx, Options{})
			servers[i] = s
			return err
		})
	}
	err := g.Wait()
	for _, s := range servers {
		defer s.Stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	if servers[0].Port == servers[1].Port || servers[0].Dir == servers[1].Dir {
		t.Fatalf("servers share a port or directory: %+v %+v", servers[0], servers[1])
	}
	for _, s := range servers {
		if s.Port == 3306 {
			t.Fatal("throwaway server must not use the standard port")
		}
		checkSettings(t, s)
	}
	for _, s := range servers {
		pid, dir := s.PID(), s.Dir
		s.Stop()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind after Stop: %v", dir, err)
		}
		if alive(pid) {
			t.Errorf("server pid %d still running after Stop", pid)
		}
		s.Stop() // a second Stop is harmless
	}
}

func checkSettings(t *testing.T, s *Server) {
	t.Helper()
	c, err := client.Connect(s.Addr(), User, Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@port, @@socket, @@tmpdir")
	if err != nil {
		t.Fatal(err)
	}
	if tmp, _ := r.GetString(0, 6); tmp != s.tmpDir() {
		t.Errorf("tmpdir = %q, want the server's own %s (not the shared /tmp)", tmp, s.tmpDir())
	}
	got := make([]string, 6)
	for i := range got {
		got[i], _ = r.GetString(0, i)
	}
	want := []string{"1", "ROW", "FULL", "FULL"}
	if strings.Join(got[:4], " ") != strings.Join(want, " ") || got[4] != itoa(s.Port) || got[5] != s.Socket() {
		t.Errorf("settings = %q, want %q, port %d, socket %s", got, want, s.Port, s.Socket())
	}
	r, err = c.Execute("SHOW GRANTS")
	if err != nil {
		t.Fatal(err)
	}
	grant, _ := r.GetString(0, 0)
	// MariaDB 10.5 renamed REPLICATION CLIENT to BINLOG MONITOR.
	for _, p := range []string{"SELECT", "REPLICATION SLAVE", "BINLOG MONITOR"} {
		if !strings.Contains(grant, p) {
			t.Errorf("grants %q lack %s", grant, p)
		}
	}
}

func alive(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat("/proc/" + itoa(pid)); os.IsNotExist(err) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func itoa(n int) string { return strconv.Itoa(n) }
