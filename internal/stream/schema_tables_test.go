package stream

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// schemaWaitCopied waits until a table's object has a backfill newer than
// after, completed and loaded; the object may not exist yet, or be failed
// from before.
func (e *env) schemaWaitCopied(table string, after int64) store.Object {
	e.t.Helper()
	var o store.Object
	e.waitFor(table+" copied", func() bool {
		var err error
		o, err = e.st.GetObject(e.ctx, e.cfg.Name, "public", table)
		if errors.Is(err, store.ErrNotFound) {
			return false
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return o.BackfillID > after && o.Status == StatusCompleted && o.Loaded
	}, func() string { return fmt.Sprintf("object %+v", o) })
	return o
}

// Tables created and dropped on the source while the stream runs
// (docs/schema-changes.md).

// TestSchemaNewTable: a table created while streaming, with rows written
// before the stream found it, ends up in the destination with all its
// rows, copied by a backfill started by discovery.
func TestSchemaNewTable(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}\ndiscovery_interval: 50ms", setup: `
				CREATE TABLE base (id int PRIMARY KEY); INSERT INTO base VALUES (1);`})
			e.start()
			e.waitLoaded("base")
			e.exec(`CREATE TABLE fresh (id int PRIMARY KEY, v text);
				INSERT INTO fresh SELECT g, 'before ' || g FROM generate_series(1, 300) g`)
			o := e.schemaWaitCopied("fresh", 0)
			e.exec(`INSERT INTO fresh VALUES (301, 'after')`)
			e.exec(`UPDATE fresh SET v = 'changed' WHERE id = 1`)
			e.assertConverged("fresh")
			rec, err := e.st.GetBackfill(e.ctx, o.BackfillID)
			if err != nil || rec.StartedBy != StartedByDiscovery || rec.RowsRead != 300 {
				t.Fatalf("backfill of the new table: %+v %v, want 300 rows started by discovery", rec, err)
			}
		})
	}
}

// TestSchemaDroppedTable: a table dropped on the source ends as a failed
// object with the reason while the other tables stream on; created again,
// it is a new table, copied whole.
func TestSchemaDroppedTable(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}\ndiscovery_interval: 50ms", setup: `
				CREATE TABLE gone (id int PRIMARY KEY); INSERT INTO gone VALUES (1);
				CREATE TABLE other (id int PRIMARY KEY);`})
			e.start()
			first := e.waitLoaded("gone")
			e.exec(`DROP TABLE gone`)
			if reason := e.schemaWaitFailed("gone"); reason != ReasonDropped {
				t.Fatalf("dropped table: reason %q, want %q", reason, ReasonDropped)
			}
			e.exec(`INSERT INTO other VALUES (1), (2)`)
			e.assertConverged("other")
			if st := e.s.State(); st.State != store.StateRunning {
				t.Fatalf("stream state %+v, want running", st)
			}
			e.exec(`CREATE TABLE gone (id int PRIMARY KEY, note text);
				INSERT INTO gone SELECT g, 'again' FROM generate_series(1, 5) g`)
			// The old destination table lacks the new column: it is added.
			e.schemaWaitCopied("gone", first.BackfillID)
			e.assertConverged("gone")
		})
	}
}

// TestSchemaVolatileDefault: a column added with a default the source
// computed for each row (no value in the catalog for older rows) is
// brought to the rows already copied by a backfill started by
// schema_change.
func TestSchemaVolatileDefault(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 40);`})
			e.start()
			first := e.waitLoaded("t")
			e.exec(`ALTER TABLE t ADD COLUMN r text DEFAULT md5(random()::text)`)
			e.exec(`INSERT INTO t VALUES (41)`)
			o := e.schemaWaitCopied("t", first.BackfillID)
			rec, err := e.st.GetBackfill(e.ctx, o.BackfillID)
			if err != nil || rec.StartedBy != StartedBySchemaChange {
				t.Fatalf("backfill after the volatile default: %+v %v, want one started by %s", rec, err, StartedBySchemaChange)
			}
			e.assertConverged("t")
		})
	}
}

// TestSchemaChangedWhileStopped: schema changes made while the stream was
// stopped are checked at its start: an added column is added (older rows
// get its default), a rename it cannot tell from a drop fails the object
// with the differences.
func TestSchemaChangedWhileStopped(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE added (id int PRIMARY KEY); INSERT INTO added SELECT generate_series(1, 10);
				CREATE TABLE renamed (id int PRIMARY KEY, a text); INSERT INTO renamed VALUES (1, 'x');`})
			e.start()
			e.waitLoaded("added")
			e.waitLoaded("renamed")
			e.stop()
			e.exec(`INSERT INTO added VALUES (11)`)
			e.exec(`ALTER TABLE added ADD COLUMN d numeric(6,2) DEFAULT 1.50`)
			e.exec(`INSERT INTO added VALUES (12, 2)`)
			e.exec(`ALTER TABLE renamed RENAME COLUMN a TO b`)
			e.start()
			e.schemaWaitColumns("added", "id", "d")
			e.assertConverged("added")
			o := e.object("renamed")
			if o.Status != StatusFailed || !isSchemaFailure(o.Status, o.Reason) {
				t.Fatalf("renamed while stopped: %+v, want failed by a schema change", o)
			}
			schemaWantIn(t, "reason", o.Reason, `destination column "a" is not in the source table`)
		})
	}
}

// TestSchemaRenamedTable: a table renamed on the source ends under its old
// name (dropped) and is streamed under the new one, copied whole, with the
// changes after the rename.
func TestSchemaRenamedTable(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}\ndiscovery_interval: 50ms", setup: `
				CREATE TABLE before (id int PRIMARY KEY, v text);
				INSERT INTO before SELECT g, 'v' FROM generate_series(1, 20) g;`})
			e.start()
			e.waitLoaded("before")
			e.exec(`ALTER TABLE before RENAME TO after`)
			e.exec(`INSERT INTO after VALUES (21, 'renamed')`)
			if reason := e.schemaWaitFailed("before"); reason != ReasonDropped {
				t.Fatalf("renamed table under its old name: reason %q, want %q", reason, ReasonDropped)
			}
			e.schemaWaitCopied("after", 0)
			e.exec(`UPDATE after SET v = 'later' WHERE id = 1`)
			e.exec(`DELETE FROM after WHERE id = 2`)
			e.assertConverged("after")
		})
	}
}
