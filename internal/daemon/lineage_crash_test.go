package daemon

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// TestSIGKILLAroundALineageRun kills the daemon after a backfill's changed
// dates went to a proposal and before its batch backfill was submitted,
// then, restarted, right after the submission and before the proposal was
// marked: restarted once more, exactly one batch backfill runs the changed
// dates (docs/lineage.md, "Restart safety").
func TestSIGKILLAroundALineageRun(t *testing.T) {
	ctx := context.Background()
	srcDSN, _ := crashSource(t, ctx, "lineage_src", `CREATE TABLE sales (id int PRIMARY KEY, day date NOT NULL, amount int NOT NULL);
		INSERT INTO sales SELECT g, DATE '2026-03-01' + g % 10, g FROM generate_series(1, 100) g`)
	dir := t.TempDir()
	cfgPath, metaPath, dest := filepath.Join(dir, "tidemark.yaml"), filepath.Join(dir, "meta.db"), filepath.Join(dir, "dest.db")
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "%s"}
streams:
  - name: lineage
    source: {dsn: %q, status_interval: 1s}
    destination: {type: sqlite, path: %q}
    include: [public.sales]
    backfill: {mode: manual}
tasks:
  - {name: daily, project: p, type: noop, schedule: daily, reads: [{stream: lineage, object: public.sales, date_column: day}], on_change: {action: run, settle: 0s}}
`, metaPath, addr, srcDSN, dest)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, addr: addr, stream: "lineage", object: "public.sales"}
	c.start()
	c.waitAPI()
	st, err := store.Open(ctx, "sqlite://"+metaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	latest := c.watch(metaPath)
	c.initiate()
	// Loaded: a run started before the last chunk committed would read the
	// table without it, and be proposed again.
	c.waitFor("the first load", func() bool { b := latest(); return b.Status == store.StatusCompleted && b.LoadedAt != nil })
	ran := submitBatch(t, addr, `{"task": "p.daily", "dates": {"from": "2026-03-01", "to": "2026-03-10"}}`)
	c.waitFor("the task's run of ten dates", func() bool {
		bb, err := st.GetBatchBackfill(ctx, ran)
		return err == nil && bb.State == store.BatchSucceeded
	})

	db, err := sql.Open("sqlite", "file:"+dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE sales SET amount = -1 WHERE id IN (3, 13, 5)`); err != nil {
		t.Fatal(err)
	}
	c.stop()
	c.env = []string{"TIDEMARK_TEST_LINEAGE_KILL=after-hand"}
	c.start()
	c.waitAPI() // the stream is marked not started before the API listens
	c.waitFor("stream running", func() bool {
		s, err := st.GetStream(ctx, "lineage")
		return err == nil && s.State == store.StateRunning
	})
	c.initiate()
	c.killedItself("after handing the changes over")

	c.env = []string{"TIDEMARK_TEST_LINEAGE_KILL=after-submit"}
	c.start()
	c.killedItself("after submitting the batch backfill")

	c.env = nil
	c.start()
	var p store.Proposal
	c.waitFor("the proposal submitted", func() bool {
		ps, err := st.ListProposals(ctx, "", 0)
		if err == nil && len(ps) == 1 {
			p = ps[0]
		}
		return p.State == store.ProposalSubmitted
	})
	bbs, err := st.ListBatchBackfills(ctx, store.BatchBackfillFilter{Task: "p.daily", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var lineage []string
	for _, bb := range bbs {
		if strings.HasPrefix(bb.Name, "lineage_") {
			lineage = append(lineage, fmt.Sprintf("%d %s", bb.ID, bb.Name))
		}
	}
	if len(lineage) != 1 || lineage[0] != fmt.Sprintf("%d lineage_%d", p.BatchBackfillID, p.ID) {
		t.Fatalf("lineage batch backfills %v, proposal %+v: want exactly its one", lineage, p)
	}
	c.waitFor("its batch backfill", func() bool {
		bb, err := st.GetBatchBackfill(ctx, p.BatchBackfillID)
		return err == nil && bb.State == store.BatchSucceeded
	})
	insts, err := st.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: p.BatchBackfillID})
	if err != nil {
		t.Fatal(err)
	}
	var days []string
	for _, in := range insts {
		days = append(days, in.BizTime.Format("2006-01-02"))
	}
	if strings.Join(days, " ") != "2026-03-04 2026-03-06" {
		t.Fatalf("the batch backfill ran %v, want the 2 changed dates", days)
	}
	c.stop()
}

// killedItself waits for the daemon to end by its failpoint; the next
// start has no failpoint unless the test sets one.
func (c *crashEnv) killedItself(where string) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(3 * time.Minute):
		c.t.Fatalf("the daemon did not kill itself %s within 3 minutes", where)
	}
	c.cmd, c.env = nil, nil
}
