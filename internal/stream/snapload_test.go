package stream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// snapshotTables are three tables of 3,000 rows: six chunks each at
// chunk_size 500, two loading at a time and the third queued.
const snapshotTables = `
	CREATE TABLE a (id int PRIMARY KEY, v int NOT NULL, note text);
	CREATE TABLE b (id int PRIMARY KEY, v int NOT NULL, note text);
	CREATE TABLE c (id int PRIMARY KEY, v int NOT NULL, note text);
	INSERT INTO a SELECT g, g, 'a' || g FROM generate_series(1, 3000) g;
	INSERT INTO b SELECT g, g, 'b' || g FROM generate_series(1, 3000) g;
	INSERT INTO c SELECT g, g, 'c' || g FROM generate_series(1, 3000) g;`

// changeAll changes every row class of the snapshot tables: updates,
// deletes, inserts past the end and a key moved from the last chunk to
// before the first.
func (e *env) changeAll(tag string) {
	e.t.Helper()
	for _, tbl := range []string{"a", "b", "c"} {
		e.exec(fmt.Sprintf(`UPDATE %[1]s SET v = v + 100000, note = '%[2]s' WHERE id %% 7 = 0`, tbl, tag))
		e.exec(fmt.Sprintf(`DELETE FROM %s WHERE id %% 11 = 0 AND id > 0`, tbl))
		e.exec(fmt.Sprintf(`INSERT INTO %[1]s SELECT g, g, '%[2]s' FROM generate_series(5001, 5100) g ON CONFLICT (id) DO UPDATE SET note = '%[2]s again'`, tbl, tag))
		e.exec(fmt.Sprintf(`UPDATE %s SET id = -id WHERE id = (SELECT max(id) FROM %[1]s WHERE id < 5000)`, tbl))
	}
}

var snapshotIDs = []change.TableID{{Schema: "public", Name: "a"}, {Schema: "public", Name: "b"}, {Schema: "public", Name: "c"}}

// startHeldLoad starts a first start over the snapshot tables (backfill
// keys yaml, into dest) with the nth chunk of a held as it registers, and
// returns once it is held, with the stream's load.
func startHeldLoad(t *testing.T, dest, yaml string, nth int64) (*env, *chunkGate, *snapshotLoad) {
	t.Helper()
	e := newEnv(t, envOptions{dest: dest, setup: snapshotTables, yaml: "backfill: {chunk_size: 500, max_concurrent: 2" + yaml + "}"})
	gate := e.holdChunkFromStart(snapshotIDs[0], chunkRegistered, nth)
	e.start()
	gate.wait(e)
	load := e.s.load.Load()
	if load == nil || e.s.SnapshotHold() <= 0 {
		t.Fatal("a first start in automatic mode holds no snapshot")
	}
	return e, gate, load
}

// TestInitialLoadInSlotSnapshot: a first start loads its tables in the
// snapshot its new slot exported while the live stream waits: a chunk
// held while the source changes is read as of the slot's start, with no
// window, and the changes are streamed over the load once it is done.
// The destinations equal the source and every run's verify matched.
func TestInitialLoadInSlotSnapshot(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e, gate, load := startHeldLoad(t, dest, "", 2)
			e.changeAll("during the load")
			// A column added without a rewrite: the snapshot reads b
			// without it, and the stream brings it.
			e.exec(`ALTER TABLE b ADD COLUMN extra int DEFAULT 7`)
			e.exec(`UPDATE b SET extra = 9 WHERE id % 13 = 0`)
			if n := e.s.EventsApplied(); n != 0 {
				t.Fatalf("%d live changes applied while the load holds the stream", n)
			}
			gate.open()
			for _, id := range snapshotIDs {
				e.waitLoadedID(id)
			}
			e.changeAll("after the load")
			for _, id := range snapshotIDs {
				e.assertConvergedID(id)
			}
			if why := load.reason(); why != "the load is done" {
				t.Errorf("the stream started because %q, want the load done", why)
			}
			if n := load.chunks.Load(); n < 18 {
				t.Errorf("%d chunks read in the snapshot, want the 18 or more of the three tables", n)
			}
			if e.s.SnapshotHold() != 0 {
				t.Error("the export is still held after the load")
			}
			var recs []store.Backfill
			e.waitFor("the runs' verifies", func() bool {
				var err error
				if recs, err = e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name}); err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					if r.Verify == nil || r.Verify.Status == VerifyRunning {
						return false
					}
				}
				return true
			})
			for _, r := range recs {
				if r.WindowConflicts != 0 || r.Verify == nil || r.Verify.Status != VerifyMatch {
					t.Errorf("backfill of %s: %d window conflicts, verify %+v; want none and a match", r.Table, r.WindowConflicts, r.Verify)
				}
			}
		})
	}
}

// TestSnapshotLoadChangedTable: a table rewritten after the slot's start
// (ALTER COLUMN … TYPE) shows the snapshot no rows, and one whose column
// was renamed since cannot be read there; its run reads beside the stream
// instead, and the stream starts for it. (A dropped column fails the
// object as a schema change, in the snapshot or not.)
func TestSnapshotLoadChangedTable(t *testing.T) {
	for name, ddl := range map[string]string{
		"rewritten":      `ALTER TABLE a ALTER COLUMN v TYPE bigint`,
		"column renamed": `ALTER TABLE a RENAME COLUMN v TO w`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, gate, load := startHeldLoad(t, "postgres", "", 1)
			e.exec(ddl)
			e.exec(`UPDATE a SET note = 'changed' WHERE id % 5 = 0`)
			gate.open()
			for _, id := range snapshotIDs {
				e.waitLoadedID(id)
				e.assertConvergedID(id)
			}
			if why := load.reason(); why != "a chunk read beside the stream waits for it" {
				t.Errorf("the stream started because %q, want a chunk read beside it", why)
			}
		})
	}
}

// TestSnapshotLoadMaxHold: past backfill.snapshot_max_hold the stream
// starts though a chunk granted the snapshot is still to be read; read
// after that, its window holds what the stream applied meanwhile, and the
// export is released once it is read.
func TestSnapshotLoadMaxHold(t *testing.T) {
	t.Parallel()
	// The hold is long enough for a's first chunk to register before it
	// ends, even on a loaded machine.
	e, gate, load := startHeldLoad(t, "postgres", ", snapshot_max_hold: 3s", 1)
	e.waitFor("the stream to start past snapshot_max_hold", func() bool { return load.reason() != "" })
	if why := load.reason(); !strings.Contains(why, "snapshot_max_hold (3s) passed") {
		t.Errorf("the stream started because %q, want snapshot_max_hold", why)
	}
	e.changeAll("past the hold")
	// The changes are applied before the held chunk is read: they are in
	// its window.
	e.waitFor("the changes streamed", func() bool { return e.s.EventsApplied() > 0 })
	if e.s.SnapshotHold() == 0 {
		t.Error("the export was released while a chunk granted it was still to be read")
	}
	before := load.chunks.Load()
	gate.open()
	for _, id := range snapshotIDs {
		e.waitLoadedID(id)
		e.assertConvergedID(id)
	}
	if load.chunks.Load() <= before {
		t.Error("the held chunk was not read in the snapshot")
	}
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Table == "a" && r.WindowConflicts == 0 {
			t.Error("the held chunk of a merged no window: the changes applied before it were not in it")
		}
	}
	if e.s.SnapshotHold() != 0 {
		t.Error("the export is still held after its last read")
	}
}

// TestSnapshotLoadRunStopped: a run stopped during the load stops holding
// the stream back; the others load in the snapshot, and the stream starts
// when they are done.
func TestSnapshotLoadRunStopped(t *testing.T) {
	t.Parallel()
	e, gate, load := startHeldLoad(t, "postgres", "", 2)
	if err := e.s.StopBackfills(e.ctx, snapshotIDs[:1]); err != nil {
		t.Fatal(err)
	}
	gate.open()
	for _, id := range snapshotIDs[1:] {
		e.waitLoadedID(id)
	}
	e.waitFor("the stream to start", func() bool { return load.reason() != "" })
	if why := load.reason(); why != "the load is done" {
		t.Errorf("the stream started because %q, want the load done", why)
	}
	if st := e.object("a").Status; st != StatusStopped {
		t.Errorf("a is %s, want stopped", st)
	}
	e.changeAll("after the load")
	for _, id := range snapshotIDs[1:] {
		e.assertConvergedID(id)
	}
}
