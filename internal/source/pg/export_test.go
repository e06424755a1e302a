package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// TestExportedSnapshot: rows read in the slot's exported snapshot are
// exactly those committed before the slot's start, which is where the
// slot streams from, even while the export is held: the first change
// streamed is the first one the snapshot does not see.
func TestExportedSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, conn := testDB(t, `
		CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT g, 'before' FROM generate_series(1, 5) g;
		CREATE PUBLICATION p FOR TABLE t`)
	src := exportingSource(t, dsn)
	exp, err := src.ExportLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	var after uint32
	if err := conn.QueryRow(ctx, `INSERT INTO t VALUES (6, 'after') RETURNING xmin::text::bigint`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE t SET v = 'after' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	tbl, err := src.Describe(ctx, change.TableID{Schema: "public", Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := src.ReadChunkIn(ctx, exp, tbl, ReadOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range chunk.Rows {
		got = append(got, r[0].Text+"="+r[1].Text)
	}
	if want := []string{"1=before", "2=before", "3=before", "4=before", "5=before"}; !slices.Equal(got, want) {
		t.Errorf("read in the snapshot %v, want %v", got, want)
	}
	if chunk.Position != exp.Position || exp.Position == 0 {
		t.Errorf("chunk position %s, want the export's %s", chunk.Position, exp.Position)
	}
	if chunk.Snapshot.VisibleXid(after) {
		t.Errorf("the chunk's snapshot sees transaction %d, committed after the export", after)
	}

	// The slot streams while the export is held, from its start: the
	// first transaction is the insert the snapshot did not see.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	events := make(chan change.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- src.Stream(sctx, 0, func(id change.TableID) *change.Table {
			if id == tbl.ID {
				return tbl
			}
			return nil
		}, events)
	}()
	for first := true; first; {
		select {
		case ev := <-events:
			if ev.Txn == nil {
				continue
			}
			first = false
			if ev.Txn.Xid != after || ev.Txn.CommitLSN < exp.Position {
				t.Errorf("first streamed transaction %d at %s, want %d after %s", ev.Txn.Xid, ev.Txn.CommitLSN, after, exp.Position)
			}
		case err := <-done:
			t.Fatalf("stream while the export is held: %v", err)
		case <-ctx.Done():
			t.Fatal("no change streamed")
		}
	}
	stop()
	<-done

	// Once closed, the snapshot cannot be read in (as soon as the server
	// has ended the exporting connection, which it does after the close).
	exp.Close()
	for {
		_, err := src.ReadChunkIn(ctx, exp, tbl, ReadOptions{Limit: 100})
		if errors.Is(err, source.ErrNotInSnapshot) {
			break
		}
		if err != nil || ctx.Err() != nil {
			t.Fatalf("read in a closed export's snapshot: %v, want ErrNotInSnapshot", err)
		}
		time.Sleep(10 * time.Millisecond) // polled: the server ends the connection after the close
	}
}

// TestExportedSnapshotOutlivesIdleTimeout: the exporting connection sits
// idle in a transaction; a role's idle_in_transaction_session_timeout
// would end it, and the snapshot with it, so it is turned off there.
func TestExportedSnapshotOutlivesIdleTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	role := fmt.Sprintf("idler%d", dbSeq.Add(1))
	dsn, conn := testDB(t, fmt.Sprintf(`
		CREATE ROLE %[1]s LOGIN REPLICATION;
		ALTER ROLE %[1]s SET idle_in_transaction_session_timeout = '200ms';
		CREATE TABLE t (id int PRIMARY KEY);
		INSERT INTO t VALUES (1);
		GRANT SELECT ON t TO %[1]s;
		CREATE PUBLICATION p FOR TABLE t`, role))
	t.Cleanup(func() { conn.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", role)) })
	src := exportingSource(t, strings.Replace(dsn, "postgres@", role+"@", 1))
	tbl, err := src.Describe(ctx, change.TableID{Schema: "public", Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := src.ExportLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	time.Sleep(time.Second) // idle five times the role's timeout: what is tested
	if chunk, err := src.ReadChunkIn(ctx, exp, tbl, ReadOptions{Limit: 10}); err != nil || len(chunk.Rows) != 1 {
		t.Fatalf("read in the snapshot after 1s idle: %d rows, %v", len(chunk.Rows), err)
	}
}

// TestExportedSnapshotRefusesChangedTables: a table rewritten, truncated
// or created after the export shows its snapshot no rows of its own, a
// partition attached after it would show its rows as of the export though
// its changes until the attach are not in the log, and the snapshot's
// columns of a table whose column was dropped or renamed since make a
// query the catalog refuses: reading such a table there is
// ErrNotInSnapshot. A column added without a rewrite reads as the
// snapshot's shape, and a partitioned table reads whole.
func TestExportedSnapshotRefusesChangedTables(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, conn := testDB(t, `
		CREATE TABLE rewritten (id int PRIMARY KEY, v int);
		CREATE TABLE truncated (id int PRIMARY KEY);
		CREATE TABLE added (id int PRIMARY KEY);
		CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
		CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
		CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200);
		CREATE TABLE attached (id int PRIMARY KEY) PARTITION BY RANGE (id);
		CREATE TABLE attached_1 PARTITION OF attached FOR VALUES FROM (0) TO (100);
		CREATE TABLE loose (id int PRIMARY KEY);
		CREATE TABLE dropped (id int PRIMARY KEY, v int); INSERT INTO dropped VALUES (1, 1);
		CREATE TABLE renamed (id int PRIMARY KEY, v int); INSERT INTO renamed VALUES (1, 1);
		INSERT INTO attached VALUES (1); INSERT INTO loose VALUES (150);
		INSERT INTO rewritten VALUES (1, 1); INSERT INTO truncated VALUES (1);
		INSERT INTO added VALUES (1); INSERT INTO parted VALUES (1), (150);
		CREATE PUBLICATION p FOR ALL TABLES`)
	src := exportingSource(t, dsn)
	describe := func(name string) *change.Table {
		t.Helper()
		tbl, err := src.Describe(ctx, change.TableID{Schema: "public", Name: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	tables := map[string]*change.Table{}
	for _, name := range []string{"rewritten", "truncated", "added", "parted", "attached", "dropped", "renamed"} {
		tables[name] = describe(name)
	}
	exp, err := src.ExportLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	if _, err := conn.Exec(ctx, `
		ALTER TABLE rewritten ALTER COLUMN v TYPE bigint;
		TRUNCATE truncated;
		ALTER TABLE added ADD COLUMN extra int;
		CREATE TABLE created (id int PRIMARY KEY); INSERT INTO created VALUES (1);
		INSERT INTO loose VALUES (160);
		ALTER TABLE attached ATTACH PARTITION loose FOR VALUES FROM (100) TO (200);
		ALTER TABLE dropped DROP COLUMN v;
		ALTER TABLE renamed RENAME COLUMN v TO w`); err != nil {
		t.Fatal(err)
	}
	tables["created"] = describe("created")
	for name, refused := range map[string]bool{"rewritten": true, "truncated": true, "created": true, "attached": true,
		"dropped": true, "renamed": true, "added": false, "parted": false} {
		chunk, err := src.ReadChunkIn(ctx, exp, tables[name], ReadOptions{Limit: 100})
		switch {
		case refused && !errors.Is(err, source.ErrNotInSnapshot):
			t.Errorf("%s: read %d rows, err %v; want ErrNotInSnapshot", name, len(chunk.Rows), err)
		case !refused && err != nil:
			t.Errorf("%s: %v", name, err)
		case name == "added" && (len(chunk.Rows) != 1 || len(chunk.Table.Columns) != 1):
			t.Errorf("added: %d rows of %d columns, want 1 of the snapshot's 1", len(chunk.Rows), len(chunk.Table.Columns))
		case name == "parted" && len(chunk.Rows) != 2:
			t.Errorf("parted: %d rows, want 2", len(chunk.Rows))
		}
	}
}

// exportingSource is a source on dsn with a slot of its own (slots are
// the server's, not the database's), dropped when the test ends.
func exportingSource(t *testing.T, dsn string) *Source {
	t.Helper()
	slot := fmt.Sprintf("export%d", dbSeq.Add(1))
	src, err := Open(context.Background(), Config{DSN: dsn, Publication: "p", Slot: slot}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		src.DropLog(context.Background())
		src.Close()
	})
	return src
}

func TestMajorVersion(t *testing.T) {
	for v, want := range map[string]int{"15.20": 15, "17.2": 17, "18devel": 18, "16.4 (Debian 16.4-1.pgdg120+1)": 16, "": 0, "x": 0} {
		if got := majorVersion(v); got != want {
			t.Errorf("majorVersion(%q) = %d, want %d", v, got, want)
		}
	}
}
