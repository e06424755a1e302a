package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestChunkReadTimeout: a chunk read that runs into the source's statement
// timeout is read again with half as many rows, and at a sixteenth of
// chunk_size fails the backfill with a reason naming the timeout and its
// key. Row 40 of the table takes a minute to read (its row security policy
// sleeps), so the reads of chunks holding it time out while the rows before
// it, read in smaller and smaller chunks, are loaded. Row security applies
// to the table's owner only when it is no superuser, so the stream reads
// as a user of its own.
func TestChunkReadTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{yaml: "backfill: {mode: manual, chunk_size: 64}", setup: `
CREATE TABLE slow (id int PRIMARY KEY, v text);
INSERT INTO slow SELECT g, 'v' || g FROM generate_series(1, 100) g;
CREATE FUNCTION slow_gate(id int) RETURNS boolean LANGUAGE plpgsql COST 10000 AS $$
BEGIN IF id = 40 THEN PERFORM pg_sleep(60); END IF; RETURN true; END $$;
ALTER TABLE slow ENABLE ROW LEVEL SECURITY;
ALTER TABLE slow FORCE ROW LEVEL SECURITY;
CREATE POLICY gate ON slow USING (slow_gate(id));
ANALYZE slow;`})
	user := e.cfg.Name + "_reader"
	e.exec(fmt.Sprintf(`CREATE ROLE %[1]s LOGIN REPLICATION; ALTER TABLE slow OWNER TO %[1]s;
		DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %%I TO %[1]s', current_database()); END $$`, user))
	t.Cleanup(func() {
		_, _ = e.src.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", user))
	})
	e.cfg.Source.DSN = strings.Replace(e.srcDSN, "postgres@", user+"@", 1)
	e.cfg.Source.ReadTimeouts.Statement = 300 * time.Millisecond
	e.start()

	id := change.TableID{Schema: "public", Name: "slow"}
	recs, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByCLI, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rec store.Backfill
	e.waitFor("the backfill failed", func() bool {
		rec = e.backfillRec(recs[0].ID)
		return rec.Status == StatusFailed
	})
	for _, want := range []string{"statement timeout, 300ms", "chunks of 4 rows", "raise source.read_timeouts.statement of stream " + e.cfg.Name} {
		if !strings.Contains(rec.Error, want) {
			t.Errorf("the backfill failed with %q, want %q in it", rec.Error, want)
		}
	}
	// 64 rows timed out, then 32 were read; 32, 16 and 8 timed out, 4
	// were read; 4 timed out again, the smallest size.
	if rec.RowsRead != 36 || rec.Retries != 4 {
		t.Errorf("the backfill read %d rows with %d retries, want 36 rows with 4", rec.RowsRead, rec.Retries)
	}
	tbl := e.s.lookup(id)
	snk := e.openDest()
	var rows []change.Row
	e.waitFor("rows 1 to 36 in the destination", func() bool {
		if rows, err = snk.ReadRange(e.ctx, tbl, nil, nil); err != nil {
			t.Fatal(err)
		}
		return len(rows) >= 36
	})
	for i, r := range rows {
		if r[0].Text != strconv.Itoa(i+1) || i >= 36 {
			t.Fatalf("destination row %d has id %s, want rows 1 to 36", i, r[0].Text)
		}
	}
}
