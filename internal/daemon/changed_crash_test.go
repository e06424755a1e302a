package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// TestChangedDatesSurviveAKill kills the daemon right after the destination
// committed a backfill chunk of a table a task reads, before the store
// recorded the chunk (TIDEMARK_TEST_KILL_AFTER_SINK_COMMIT): the restarted
// backfill resumes after that chunk, and the changed dates still hold every
// day of the table, that chunk's included, since they are stored before the
// destination commits (docs/lineage.md). Each chunk holds days of its own.
func TestChangedDatesSurviveAKill(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) { testChangedDatesSurviveAKill(t, dest) })
	}
}

func testChangedDatesSurviveAKill(t *testing.T, dest string) {
	const rows, chunk, days = 2000, 200, 100 // 10 days a chunk
	ctx := context.Background()
	name := "dates_" + dest
	srcDSN, _ := crashSource(t, ctx, name+"_src", fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, day date NOT NULL);
		INSERT INTO t SELECT g, DATE '2026-01-01' + (g - 1) / %d FROM generate_series(1, %d) g`, rows/days, rows))
	dir := t.TempDir()
	cfgPath, metaPath := filepath.Join(dir, "tidemark.yaml"), filepath.Join(dir, "meta.db")
	destination := fmt.Sprintf(`{type: sqlite, path: "%s"}`, filepath.Join(dir, "replica.db"))
	if dest == "postgres" {
		dstDSN, err := server.CreateDatabase(ctx, name+"_dst")
		if err != nil {
			t.Fatal(err)
		}
		destination = fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dstDSN)
	}
	addr := freeAddr(t)
	err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
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
tasks:
  - {name: daily, project: p, type: noop, schedule: daily, reads: [{stream: %s, object: public.t, date_column: day}]}
`, metaPath, addr, name, srcDSN, destination, chunk, name)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, addr: addr, stream: name, object: "public.t",
		env: []string{"TIDEMARK_TEST_KILL_AFTER_SINK_COMMIT=3"}}
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
	if b := backfill(); b.RowsWritten != 2*chunk {
		t.Fatalf("after the kill the store records %d rows written, want %d (the 3rd chunk committed, unrecorded)", b.RowsWritten, 2*chunk)
	}
	c.cmd, c.env = nil, nil
	c.start()
	c.waitFor("backfill completed", func() bool { return backfill().Status == store.StatusCompleted })
	st, err := store.Open(ctx, "sqlite://"+metaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ds, err := st.ChangedDates(ctx, name, backfill().ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range ds {
		got[d.Value] = true
	}
	for i := range days {
		day := time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
		if !got[day] {
			t.Errorf("changed dates lack %s (chunk %d)", day, i/(chunk/(rows/days))+1)
		}
	}
	if len(got) != days {
		t.Errorf("%d changed dates, want %d", len(got), days)
	}
	c.stop()
}
