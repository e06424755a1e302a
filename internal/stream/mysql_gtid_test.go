package stream

import (
	"context"
	"fmt"
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
	must := failOn(t)
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

// TestMySQLFailoverDuringBackfill fails over in the middle of a backfill:
// the stream stops a third of the way through a 6,000-row table, the
// primary changes rows on both sides of the cursor, the replica is
// promoted and changes more, and the stream restarts on the replica. The
// same backfill continues from its committed cursor, its chunks now read
// on the replica in the new epoch, and completes; the destination equals
// the replica.
func TestMySQLFailoverDuringBackfill(t *testing.T) {
	ctx := context.Background()
	primary, replica := mysqlserver.ForFailover(t)
	must := failOn(t)
	must(primary.Exec(ctx, "", "CREATE DATABASE shop"))
	must(primary.Exec(ctx, "shop", "CREATE TABLE big (id BIGINT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40))",
		fmt.Sprintf("INSERT INTO big SELECT seq, seq, CONCAT('note ', seq) FROM seq_1_to_%d", faultRows)))
	e := myFaultEnv(t, primary.DSN("shop"), "sqlite", faultChunk, faultRate)
	e.start()
	id := e.initiateBig()
	e.waitMidBackfill(id)
	e.stop()

	must(primary.Exec(ctx, "shop", "UPDATE big SET v = -v WHERE id % 97 = 0", "DELETE FROM big WHERE id % 89 = 0",
		fmt.Sprintf("UPDATE big SET id = id + %d WHERE id %% 83 = 0", 10*faultRows)))
	must(replica.WaitReplicated(ctx, primary))
	must(replica.Promote(ctx))
	primary.Stop()
	must(replica.Exec(ctx, "shop", "UPDATE big SET note = 'after the failover' WHERE id % 79 = 0",
		"INSERT INTO big VALUES (1000000, 1, 'new'), (2492, 2, 'deleted, then again')"))

	e.cfg.Source.DSN = replica.DSN("shop")
	e.start()
	e.waitLoadedID(myBig)
	e.assertConvergedMySQL(myBig)
	if o := e.objectOf(myBig); o.BackfillID != id {
		t.Fatalf("the object's backfill is %d, want %d: the run was replaced", o.BackfillID, id)
	}
}

// failOn returns a function that fails t on an error.
func failOn(t *testing.T) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
