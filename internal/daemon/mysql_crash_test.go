package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/mysqlserver"
)

const myCrashRows = 40_000

// TestSIGKILLDuringMySQLBackfill kills a real daemon process streaming a
// MariaDB table with SIGKILL while its backfill reads chunks, at a quarter
// and at half of the table, under a writer; each time it is started again,
// and the backfill resumes from its committed cursor (rows read at most
// 1.3× the table) to completion, the destination equal to the source.
func TestSIGKILLDuringMySQLBackfill(t *testing.T) {
	ctx := context.Background()
	srv, srcDSN := mysqlserver.ForTest(t, mysqlserver.Options{}, "shop",
		"CREATE TABLE t (id BIGINT PRIMARY KEY, v INT, note VARCHAR(40))",
		fmt.Sprintf("INSERT INTO t SELECT seq, seq, CONCAT('row ', seq) FROM seq_1_to_%d", myCrashRows))
	dstDSN, err := server.CreateDatabase(ctx, "mycrash_dst")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tidemark.yaml")
	metaPath := filepath.Join(dir, "meta.db")
	addr := freeAddr(t)
	err = os.WriteFile(cfgPath, fmt.Appendf(nil, `
metadata: sqlite://%s
api: {listen: "%s"}
streams:
  - name: crash
    source: {type: mysql, dsn: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["shop.t"]
    backfill: {mode: manual, chunk_size: 1000, rows_per_second: 10000}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`, metaPath, addr, srcDSN, dstDSN), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, srcDSN: srcDSN, dstDSN: dstDSN, addr: addr, object: "shop.t"}
	c.start()
	backfill := c.watch(metaPath)
	writes := startMySQLWriter(t, srv)
	c.initiate()
	for _, frac := range []float64{0.25, 0.5} {
		c.waitFor(fmt.Sprintf("%.0f%% read", frac*100), func() bool { return backfill().RowsRead >= int64(frac*myCrashRows) })
		c.kill()
		c.start()
	}
	c.waitResumed(backfill, writes, myCrashRows, "2 kills")
	var diff string
	defer func() {
		if t.Failed() {
			t.Logf("last difference: %s", diff)
		}
	}()
	c.waitFor("destination equal to source", func() bool {
		diff = myCrashDiff(ctx, srv, dstDSN)
		return diff == ""
	})
	c.stop()
}

// myCrashDiff compares shop.t in MariaDB with the destination's copy and
// describes the first difference ("" when equal).
func myCrashDiff(ctx context.Context, srv *mysqlserver.Server, dstDSN string) string {
	src, err := srv.Root(ctx)
	if err != nil {
		return err.Error()
	}
	defer src.Close()
	r, err := src.Execute("SELECT id, v, note FROM shop.t")
	if err != nil {
		return err.Error()
	}
	want := map[int64]string{}
	for i := range r.RowNumber() {
		id, _ := r.GetInt(i, 0)
		v, _ := r.GetInt(i, 1)
		note, _ := r.GetString(i, 2)
		want[id] = fmt.Sprint(v, note)
	}
	dst, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		return err.Error()
	}
	defer dst.Close(ctx)
	rows, err := dst.Query(ctx, "SELECT id, v, note FROM shop.t")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, v int64
		var note string
		if err := rows.Scan(&id, &v, &note); err != nil {
			return err.Error()
		}
		if w, ok := want[id]; !ok || w != fmt.Sprint(v, note) {
			return fmt.Sprintf("row %d: %d %q, want %q", id, v, note, w)
		}
		n++
	}
	if n != len(want) {
		return fmt.Sprintf("%d rows, want %d", n, len(want))
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return ""
}

// startMySQLWriter changes shop.t until the returned function is called
// and returns how many statements ran.
func startMySQLWriter(t *testing.T, srv *mysqlserver.Server) func() int {
	conn, err := srv.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return paceWriter(time.Millisecond, func(i int) string {
		id := (i*7919)%myCrashRows + 1
		switch i % 5 {
		case 0, 1:
			return fmt.Sprintf("UPDATE shop.t SET v = v + 1 WHERE id = %d", id)
		case 2:
			return fmt.Sprintf("INSERT INTO shop.t VALUES (%d, 0, 'new') ON DUPLICATE KEY UPDATE v = 0", myCrashRows+i%5000)
		case 3: // a key move across chunks
			return fmt.Sprintf("UPDATE IGNORE shop.t SET id = %d WHERE id = %d", (i*104729)%myCrashRows+1, id)
		default:
			return fmt.Sprintf("DELETE FROM shop.t WHERE id = %d", id)
		}
	}, func(_ context.Context, q string) error {
		_, err := conn.Execute(q)
		return err
	}, func() { conn.Close() })
}
