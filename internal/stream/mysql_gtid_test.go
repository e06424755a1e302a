package stream

import (
	"context"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/sink"
)

// TestMySQLFailoverByGTID streams a MariaDB primary into SQLite, stops,
// lets the primary write more, fails over to its replica (log_slave_updates,
// its binlog numbered differently from the primary's) which then takes
// writes of its own, and restarts the stream with the replica's DSN: it
// resumes from the destination's checkpoint by GTID and the destination
// equals the promoted replica, the rows written on both sides of the
// failover included. The checkpoint then holds the replica's GTID state
// and a position of the next epoch.
func TestMySQLFailoverByGTID(t *testing.T) {
	ctx := context.Background()
	primary, replica := mysqlserver.ForFailover(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(primary.Exec(ctx, "", "CREATE DATABASE shop", "CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(10))",
		"INSERT INTO shop.items VALUES (1, 'a'), (2, 'b')"))
	e := mysqlEnv(t, primary.DSN("shop"), "shop", "sqlite")
	e.start()
	id := change.TableID{Schema: "shop", Name: "items"}
	e.waitLoadedID(id)
	must(primary.Exec(ctx, "shop", "INSERT INTO items VALUES (3, 'c')"))
	e.assertConvergedMySQL(id)
	e.stop()

	must(primary.Exec(ctx, "shop", "INSERT INTO items VALUES (4, 'd')", "UPDATE items SET v = 'z' WHERE id = 1"))
	must(replica.WaitReplicated(ctx, primary))
	must(replica.Promote(ctx))
	primary.Stop()
	must(replica.Exec(ctx, "shop", "INSERT INTO items VALUES (5, 'e')", "DELETE FROM items WHERE id = 2"))

	e.cfg.Source.DSN = replica.DSN("shop")
	e.start()
	e.assertConvergedMySQL(id)
	var cp sink.Checkpoint
	var err error
	e.waitFor("the checkpoint on the replica's GTIDs", func() bool {
		if cp, err = e.openDest().Checkpoint(ctx, e.cfg.Name); err != nil {
			t.Fatal(err)
		}
		return strings.HasPrefix(cp.Resume, "0-2-")
	}, func() string { return cp.Resume })
	if cp.Position>>56 != 1 {
		t.Errorf("checkpoint position %x after the failover, want epoch 1", uint64(cp.Position))
	}
}
