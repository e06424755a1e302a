package mysqlserver

import (
	"context"
	"fmt"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// ReplicaSettings start a server that can replace primary in a failover:
// its own server id, and the transactions it replicates written to its
// own binlog (numbered its own way).
var ReplicaSettings = map[string]string{"server-id": "2", "log-slave-updates": "ON"}

// ForFailover starts a primary and a GTID replica of it, both stopped when
// the test ends. The primary's binlog is rotated first, so that the two
// binlogs are numbered differently.
func ForFailover(t testing.TB) (primary, replica *Server) {
	t.Helper()
	ctx := context.Background()
	primary, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(primary.Stop)
	if replica, err = Start(ctx, Options{Settings: ReplicaSettings}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replica.Stop)
	if err := primary.Exec(ctx, "", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS"); err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicateFrom(ctx, primary); err != nil {
		t.Fatal(err)
	}
	return primary, replica
}

// ReplicateFrom makes s a GTID replica of primary from primary's current
// GTID position on: what primary wrote before (the tidemark account, for
// one) is not replayed.
func (s *Server) ReplicateFrom(ctx context.Context, primary *Server) error {
	pos, err := primary.gtidBinlogPos(ctx)
	if err == nil {
		_, err = s.query(ctx, "SET GLOBAL gtid_slave_pos = ?", pos)
	}
	if err == nil {
		err = s.Exec(ctx, "", fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %d, MASTER_USER = 'root', MASTER_USE_GTID = slave_pos", primary.Port),
			"START SLAVE")
	}
	if err != nil {
		return fmt.Errorf("replicate from the primary: %w", err)
	}
	return nil
}

// WaitReplicated waits (up to a minute) until s has applied everything
// primary has written so far.
func (s *Server) WaitReplicated(ctx context.Context, primary *Server) error {
	pos, err := primary.gtidBinlogPos(ctx)
	if err != nil {
		return err
	}
	r, err := s.query(ctx, "SELECT MASTER_GTID_WAIT(?, 60)", pos)
	if err != nil {
		return fmt.Errorf("wait for the replica: %w", err)
	}
	if v, _ := r.GetInt(0, 0); v != 0 {
		return fmt.Errorf("the replica did not reach GTID %s within a minute", pos)
	}
	return nil
}

// Promote stops s replicating: it takes the writes from now on.
func (s *Server) Promote(ctx context.Context) error {
	return s.Exec(ctx, "", "STOP SLAVE", "RESET SLAVE ALL")
}

func (s *Server) gtidBinlogPos(ctx context.Context) (string, error) {
	r, err := s.query(ctx, "SELECT @@gtid_binlog_pos")
	if err != nil {
		return "", fmt.Errorf("read gtid_binlog_pos: %w", err)
	}
	return r.GetString(0, 0)
}

// query runs one statement with arguments as root.
func (s *Server) query(ctx context.Context, q string, args ...any) (*gomysql.Result, error) {
	c, err := s.Root(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Execute(q, args...)
}
