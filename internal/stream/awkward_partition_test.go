package stream

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
)

// partitionSetup: a table partitioned by range over three partitions, the
// last itself partitioned, with rows in each leaf.
const partitionSetup = `
	CREATE TABLE events (id int NOT NULL, region int NOT NULL, v text, PRIMARY KEY (id, region)) PARTITION BY RANGE (region);
	CREATE TABLE events_r0 PARTITION OF events FOR VALUES FROM (0) TO (10);
	CREATE TABLE events_r1 PARTITION OF events FOR VALUES FROM (10) TO (20);
	CREATE TABLE events_r2 PARTITION OF events FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (id);
	CREATE TABLE events_r2_low PARTITION OF events_r2 FOR VALUES FROM (MINVALUE) TO (50);
	CREATE TABLE events_r2_high PARTITION OF events_r2 FOR VALUES FROM (50) TO (MAXVALUE);
	INSERT INTO events SELECT g, g % 30, 'v' || g FROM generate_series(1, 90) g;
	CREATE TABLE plain (id int PRIMARY KEY); INSERT INTO plain VALUES (1);`

// TestPartitionedTableAsRoot: a partitioned table is one object, named as
// its root, backfilled by reading every partition and streamed through the
// publication as the root (publish_via_partition_root, set also on a
// publication that existed without it): the destination has one table
// holding the rows of every partition; the partitions are neither objects
// nor destination tables. A row moving to another partition converges; a
// partition created or attached later is streamed; and what the log does not
// carry (a partition attached with rows, a partition truncated) converges
// with a backfill of the root.
func TestPartitionedTableAsRoot(t *testing.T) {
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: partitionSetup, yaml: "backfill: {mode: automatic, chunk_size: 7}"})
			// A publication made before tidemark, without publish_via_partition_root.
			e.exec("CREATE PUBLICATION " + pgx.Identifier{e.cfg.Source.Publication}.Sanitize() + " FOR TABLE plain")
			e.start()
			events := pubTable("events")
			e.waitLoadedID(events)
			e.waitLoaded("plain")
			wantOnlyRoot(t, e)
			e.assertConverged("events")
			if n := e.destCount(events); n != 90 {
				t.Fatalf("destination holds %d rows of events after the backfill, want 90", n)
			}
			var viaRoot bool
			if err := e.src.QueryRow(e.ctx, "SELECT pubviaroot FROM pg_publication WHERE pubname = $1", e.cfg.Source.Publication).Scan(&viaRoot); err != nil || !viaRoot {
				t.Fatalf("publication publish_via_partition_root = %v (%v), want true", viaRoot, err)
			}
			// Writes through the root and straight into partitions, and a
			// row moving across partitions (its key changes with them).
			e.exec(`INSERT INTO events VALUES (100, 5, 'root'), (101, 25, 'root')`)
			e.exec(`INSERT INTO events_r1 VALUES (102, 15, 'leaf')`)
			e.exec(`INSERT INTO events_r2_high VALUES (103, 22, 'leaf')`)
			e.exec(`UPDATE events_r0 SET v = 'updated in leaf' WHERE id = 1`)
			e.exec(`UPDATE events SET region = 25, v = 'moved' WHERE id IN (3, 4)`)
			e.exec(`UPDATE events SET region = 2 WHERE id = 55`)
			e.exec(`DELETE FROM events_r2_low WHERE id = 21`)
			e.exec(`DELETE FROM events WHERE id = 12`)
			e.assertConverged("events")
			// A partition created later streams through the root.
			e.exec(`CREATE TABLE events_r3 PARTITION OF events FOR VALUES FROM (30) TO (40)`)
			e.exec(`INSERT INTO events VALUES (104, 35, 'new partition'); UPDATE events SET region = 31 WHERE id = 6`)
			e.assertConverged("events")
			if n, want := e.destCount(events), e.sourceCount(events); n != want {
				t.Fatalf("destination holds %d rows of events, source %d", n, want)
			}
			partitionChangesOutsideLog(t, e)
			e.stop()
			e.start()
			wantOnlyRoot(t, e)
			e.exec(`INSERT INTO events_r4 VALUES (106, 46, 'after restart')`)
			e.assertConverged("events")
			e.assertVerified(events)
		})
	}
}

// partitionChangesOutsideLog changes the root's rows without row changes
// in the log: PostgreSQL publishes no rows for a partition attached with
// rows, nor the TRUNCATE of one partition when publishing via the root. A
// backfill of the root converges.
func partitionChangesOutsideLog(t *testing.T, e *env) {
	t.Helper()
	e.exec(`CREATE TABLE events_r4 (id int NOT NULL, region int NOT NULL, v text, PRIMARY KEY (id, region));
		INSERT INTO events_r4 VALUES (200, 41, 'before attach'), (201, 42, 'before attach')`)
	e.exec(`ALTER TABLE events ATTACH PARTITION events_r4 FOR VALUES FROM (40) TO (50)`)
	e.exec(`INSERT INTO events_r4 VALUES (105, 45, 'after attach')`)
	e.exec(`TRUNCATE events_r1`)
	e.backfill(pubTable("events"))
	e.assertConverged("events")
	if n := e.destCount(pubTable("events")); n != e.sourceCount(pubTable("events")) {
		t.Fatalf("destination holds %d rows of events after the backfill, source %d", n, e.sourceCount(pubTable("events")))
	}
}

// wantOnlyRoot checks that the partitions are neither objects nor
// destination tables.
func wantOnlyRoot(t *testing.T, e *env) {
	t.Helper()
	if ids := e.objectIDs(); !slices.Equal(ids, []change.TableID{pubTable("events"), pubTable("plain")}) {
		t.Fatalf("objects %v, want public.events and public.plain only", ids)
	}
	want := []string{"events", "plain"}
	if e.dest == "postgres" {
		want = []string{"public.events", "public.plain"}
	}
	if got := e.destTables(); !slices.Equal(got, want) {
		t.Fatalf("destination tables %v, want %v", got, want)
	}
}

// TestPartitionIdentity: the log carries a partition's old rows under the
// partition's own replica identity, so that is the one the key must be part
// of. Configured keys under REPLICA IDENTITY FULL partitions stream,
// rows moving across partitions included; a partition whose identity does
// not hold the key fails the root's object with a reason naming it.
func TestPartitionIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: `
keys:
  public.fullkeys: [code]`, setup: `
		CREATE TABLE bad (id int, region int, PRIMARY KEY (id, region)) PARTITION BY RANGE (region);
		CREATE TABLE bad_0 PARTITION OF bad FOR VALUES FROM (0) TO (10);
		CREATE TABLE bad_1 PARTITION OF bad FOR VALUES FROM (10) TO (20);
		ALTER TABLE bad_1 REPLICA IDENTITY NOTHING;
		CREATE TABLE fullkeys (code text COLLATE "C" NOT NULL, region int NOT NULL, v int) PARTITION BY LIST (region);
		CREATE TABLE fullkeys_a PARTITION OF fullkeys FOR VALUES IN (1);
		CREATE TABLE fullkeys_b PARTITION OF fullkeys FOR VALUES IN (2);
		ALTER TABLE fullkeys_a REPLICA IDENTITY FULL; ALTER TABLE fullkeys_b REPLICA IDENTITY FULL;
		INSERT INTO fullkeys VALUES ('a', 1, 1), ('b', 2, 2), ('c', 1, 3);`})
	e.start()
	e.waitFailed(pubTable("bad"), "partition public.bad_1", "REPLICA IDENTITY FULL")
	// Left out of the publication, the partition takes deletes: published,
	// PostgreSQL would refuse them for want of a replica identity.
	e.exec(`INSERT INTO bad VALUES (1, 15); DELETE FROM bad_1`)
	e.waitLoaded("fullkeys")
	e.exec(`UPDATE fullkeys SET region = 2, v = 10 WHERE code = 'a'`)
	e.exec(`UPDATE fullkeys SET code = 'z' WHERE code = 'b'`)
	e.exec(`DELETE FROM fullkeys WHERE code = 'c'; INSERT INTO fullkeys VALUES ('d', 1, 4)`)
	e.assertConverged("fullkeys")
}
