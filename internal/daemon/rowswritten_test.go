package daemon

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

const (
	exactRows  = 12_000
	exactChunk = 1000
	// killAfter is the chunk commit after which the failpoint kills the
	// first daemon: its rows are in the destination, not yet in the store.
	killAfter = 4
)

// TestRowsWrittenExactAfterKill kills a daemon right after the destination
// committed a backfill chunk and before the metadata store recorded it (the
// TIDEMARK_TEST_KILL_AFTER_SINK_COMMIT failpoint: the child SIGKILLs itself
// after its 4th chunk commit), restarts it, lets the backfill finish, and
// checks that rows_written is exactly the table's row count and the
// destination equals the source. Once per destination type.
func TestRowsWrittenExactAfterKill(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) { testRowsWrittenExact(t, dest) })
	}
}

func testRowsWrittenExact(t *testing.T, dest string) {
	ctx := context.Background()
	name := "exact_" + dest // the stream, its slot, its databases
	srcDSN, err := server.CreateDatabase(ctx, name+"_src")
	if err != nil {
		t.Fatal(err)
	}
	src, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	if _, err := src.Exec(ctx, fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, exactRows)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath, metaPath, litePath := filepath.Join(dir, "tidemark.yaml"), filepath.Join(dir, "meta.db"), filepath.Join(dir, "replica.db")
	destination := fmt.Sprintf(`{type: sqlite, path: "%s"}`, litePath)
	var dstDSN string
	if dest == "postgres" {
		if dstDSN, err = server.CreateDatabase(ctx, name+"_dst"); err != nil {
			t.Fatal(err)
		}
		destination = fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dstDSN)
	}
	addr := freeAddr(t)
	err = os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "%s"}
streams:
  - name: %s
    source: {type: postgres, dsn: "%s"}
    destination: %s
    include: ["public.t"]
    backfill: {mode: manual, chunk_size: %d, chunk_write_target: 0}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`, metaPath, addr, name, srcDSN, destination, exactChunk)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, addr: addr, stream: name,
		env: []string{fmt.Sprintf("TIDEMARK_TEST_KILL_AFTER_SINK_COMMIT=%d", killAfter)}}
	c.start()
	backfill := c.watch(metaPath)
	c.initiate()
	select {
	case <-c.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the failpoint did not kill the daemon within 3 minutes")
	}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the daemon ended with %v, want the failpoint's SIGKILL", c.cmd.ProcessState)
	}
	c.cmd = nil
	// The moment the failpoint chose: the destination holds one chunk more
	// than the store has recorded.
	if b := backfill(); b.RowsWritten != (killAfter-1)*exactChunk {
		t.Fatalf("after the kill the store records %d rows written, want %d (the last committed chunk unrecorded)", b.RowsWritten, (killAfter-1)*exactChunk)
	}
	c.env = nil
	c.start()
	c.waitFor("backfill completed and loaded", func() bool {
		b := backfill()
		return b.Status == store.StatusCompleted && b.LoadedAt != nil
	})
	if b := backfill(); b.RowsWritten != exactRows {
		t.Errorf("rows_written = %d after a kill between a destination commit and its record, want exactly %d", b.RowsWritten, exactRows)
	}
	want := tableDigest(t, "pgx", srcDSN, `id::text || ':' || v::text || ':' || note`)
	got := ""
	if dest == "postgres" {
		got = tableDigest(t, "pgx", dstDSN, `id::text || ':' || v::text || ':' || note`)
	} else {
		got = tableDigest(t, "sqlite", litePath, `CAST(id AS TEXT) || ':' || CAST(v AS TEXT) || ':' || note`)
	}
	if got != want {
		t.Errorf("destination differs from the source: %.80s… vs %.80s…", got, want)
	}
	c.stop()
}

// tableDigest is every row of t in key order, as text.
func tableDigest(t *testing.T, driver, dsn, row string) string {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT ` + row + ` FROM "t" ORDER BY "id"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	n := 0
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s)
		b.WriteByte('\n')
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows: %s", n, b.String())
}
