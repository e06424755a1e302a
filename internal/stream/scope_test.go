package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

var ordersID = change.TableID{Schema: "public", Name: "orders"}

const ordersSetup = `
	CREATE TABLE orders (id int PRIMARY KEY, region text NOT NULL, amount int NOT NULL, note text);
	INSERT INTO orders SELECT g, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END, g, 'n' || g FROM generate_series(1, 3000) g;`

// destOrders reads the destination's orders keyed by id.
func (e *env) destOrders() map[string]change.Row {
	e.t.Helper()
	t := e.s.lookup(ordersID)
	rows, err := e.openDest().ReadRange(e.ctx, t, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]change.Row{}
	for _, r := range rows {
		out[r[0].Text] = r
	}
	return out
}

// waitVerified waits for a run's ending verify and returns the run.
func (e *env) waitVerified(id int64) store.Backfill {
	e.t.Helper()
	var b store.Backfill
	e.waitFor(fmt.Sprintf("backfill %d verified", id), func() bool {
		var err error
		if b, err = e.st.GetBackfill(e.ctx, id); err != nil {
			e.t.Fatal(err)
		}
		return b.Verify != nil && b.Verify.Status != VerifyRunning
	})
	return b
}

// TestFilteredBackfill backfills only the rows a filter selects: they are
// rewritten, every other destination row is left as it was (even a row the
// source lacks); the run's verify compares what it covered. Then a verify
// of the whole table finds the rest and --repair re-reads only those ranges.
func TestFilteredBackfill(t *testing.T) {
	t.Parallel()
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: ordersSetup, yaml: "backfill: {mode: automatic, chunk_size: 400}"})
			e.start()
			e.waitVerified(e.waitLoaded("orders").BackfillID) // the first load's verify, before the damage
			e.execInDest(`UPDATE orders SET amount = -1`, `INSERT INTO orders VALUES (999999, 'us', 0, 'extra')`)
			recs, err := e.s.InitiateWith(e.ctx, []change.TableID{ordersID}, store.StartedByCLI, BackfillOptions{Filter: "region = 'eu' -- a comment"})
			if err != nil {
				t.Fatal(err)
			}
			e.waitLoaded("orders")
			run := e.waitVerified(recs[0].ID)
			if run.RowsRead != 1000 || run.Verify.Status != VerifyMatch || run.Verify.SourceRows != 1000 || run.Verify.DestRows != 1000 {
				t.Fatalf("filtered run read %d rows, verify %+v; want 1000 rows, a match over 1000", run.RowsRead, *run.Verify)
			}
			got := e.destOrders()
			for id := 1; id <= 3000; id++ {
				r := got[fmt.Sprint(id)]
				want := "-1"
				if id%3 == 0 {
					want = fmt.Sprint(id)
				}
				if r == nil || r[2].Text != want {
					t.Fatalf("destination row %d after the filtered backfill: %v, want amount %s", id, r, want)
				}
			}
			if got["999999"] == nil {
				t.Fatal("the filtered backfill deleted a destination row outside its filter")
			}

			checks, err := e.s.Verify(e.ctx, []change.TableID{ordersID}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if checks[0].Match {
				t.Fatal("verify of the whole table matches though 2000 rows differ")
			}
			checks, err = e.s.Repair(e.ctx, checks)
			if err != nil || checks[0].Repair == nil {
				t.Fatalf("repair: %v, %+v", err, checks[0])
			}
			rep := checks[0].Repair
			if rep.StartedBy != "repair" || len(optionsOf(*rep).ranges) == 0 {
				t.Fatalf("repair run %+v: want started by repair, with ranges", rep)
			}
			e.waitLoaded("orders")
			if run := e.waitVerified(rep.ID); run.Verify.Status != VerifyMatch {
				t.Fatalf("repair run's verify: %+v", *run.Verify)
			}
			e.assertConverged("orders")
		})
	}
}

// TestRepairReadsOnlyDifferingRanges damages rows in three ranges of 100,
// two of them adjacent: the repair run reads those ranges (the adjacent
// ones joined), not the table.
func TestRepairReadsOnlyDifferingRanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", setup: ordersSetup, yaml: "backfill: {mode: automatic, chunk_size: 400}"})
	e.start()
	e.waitVerified(e.waitLoaded("orders").BackfillID)
	e.execInDest(`UPDATE orders SET note = 'damaged' WHERE id IN (10, 2500)`, `DELETE FROM orders WHERE id = 2501`)
	checks, err := e.s.Verify(e.ctx, []change.TableID{ordersID}, 100)
	if err != nil {
		t.Fatal(err)
	}
	checks, err = e.s.Repair(e.ctx, checks)
	if err != nil || checks[0].Repair == nil {
		t.Fatalf("repair: %v, %+v", err, checks[0])
	}
	rep := checks[0].Repair
	if ranges := optionsOf(*rep).ranges; len(ranges) != 2 {
		t.Fatalf("repair ranges %v: want (0, 100] and (2400, 2600], holding ids 10, 2500 and 2501", ranges)
	}
	e.waitLoaded("orders")
	run := e.waitVerified(rep.ID)
	if run.RowsRead != 300 || run.Verify.Status != VerifyMatch {
		t.Fatalf("repair read %d rows (want 300: three ranges of 100), verify %+v", run.RowsRead, *run.Verify)
	}
	e.assertConverged("orders")
}

// TestColumnSubsetBackfill fills one column of every row without writing
// the others: a damaged column it does not name stays damaged, a row the
// destination lacks is not invented, and the run's verify says so.
func TestColumnSubsetBackfill(t *testing.T) {
	t.Parallel()
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: ordersSetup, yaml: "backfill: {mode: automatic, chunk_size: 700}"})
			e.start()
			e.waitVerified(e.waitLoaded("orders").BackfillID) // the first load's verify, before the damage
			e.execInDest(`UPDATE orders SET amount = -1, note = NULL`, `DELETE FROM orders WHERE id = 1500`)
			recs, err := e.s.InitiateWith(e.ctx, []change.TableID{ordersID}, store.StartedByCLI, BackfillOptions{Columns: []string{"note"}})
			if err != nil {
				t.Fatal(err)
			}
			e.waitLoaded("orders")
			run := e.waitVerified(recs[0].ID)
			if run.RowsWritten != 2999 {
				t.Errorf("column backfill wrote %d rows, want 2999 (not the row the destination lacks)", run.RowsWritten)
			}
			if run.Verify.Status != VerifyDiffer || run.Verify.DifferingRanges != 1 {
				t.Fatalf("verify of the column backfill: %+v; want one differing range (the row the destination lacks)", *run.Verify)
			}
			if o := e.object("orders"); !strings.Contains(o.Reason, "tidemark verify --repair") {
				t.Errorf("object reason %q: want the verify's finding and what to do", o.Reason)
			}
			got := e.destOrders()
			if got["1500"] != nil {
				t.Fatal("a column backfill inserted a row the destination lacked")
			}
			for id := 1; id <= 3000; id++ {
				r := got[fmt.Sprint(id)]
				if id == 1500 {
					continue
				}
				if r == nil || r[2].Text != "-1" || r[3].Text != fmt.Sprintf("n%d", id) {
					t.Fatalf("destination row %d: %v, want amount -1 (not named) and note n%d", id, r, id)
				}
			}
		})
	}
}

// TestScopeRefusals: a filter the source refuses, an unknown column and a
// key column are refused before anything starts, saying why; a filter
// holding a second statement runs nothing.
func TestScopeRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: ordersSetup + `CREATE TABLE victim (id int PRIMARY KEY);`, yaml: "backfill: {mode: manual}"})
	e.start()
	e.waitState(store.StateRunning)
	cases := []struct {
		opts BackfillOptions
		want string
	}{
		{BackfillOptions{Filter: "nosuch = 1"}, `column "nosuch" does not exist`},
		{BackfillOptions{Filter: "region = 'eu'; DROP TABLE victim"}, "refused the filter"},
		{BackfillOptions{Filter: "   "}, "filter is blank"},
		{BackfillOptions{Filter: "generate_series(1, 2) > 1"}, "set-returning functions are not allowed"},
		{BackfillOptions{Columns: []string{"nope"}}, `has no column "nope": its columns are id, region, amount, note`},
		{BackfillOptions{Columns: []string{"id"}}, `column "id" is part of the key`},
		{BackfillOptions{Columns: []string{}}, "columns is empty"},
	}
	for _, c := range cases {
		_, err := e.s.InitiateWith(e.ctx, []change.TableID{ordersID}, store.StartedByCLI, c.opts)
		var inv *InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("initiate with %+v: %v; want an invalid request saying %q", c.opts, err, c.want)
		}
	}
	var n int
	if err := e.src.QueryRow(e.ctx, `SELECT count(*) FROM victim`).Scan(&n); err != nil {
		t.Fatalf("victim: %v", err)
	}
	if bfs, _ := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name}); len(bfs) != 0 {
		t.Fatalf("refused initiates recorded %d backfills", len(bfs))
	}
}

// TestVerifyOff: with backfill.verify off a run records that it was not
// verified.
func TestVerifyOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: ordersSetup, yaml: "backfill: {mode: automatic, verify: false}"})
	e.start()
	o := e.waitLoaded("orders")
	if run := e.waitVerified(o.BackfillID); run.Verify.Status != VerifyOff {
		t.Fatalf("verify with backfill.verify off: %+v", *run.Verify)
	}
}

// TestColumnRenamedBeforeStart: a column subset whose column was renamed
// between the initiate and the run's start fails the run, saying so,
// rather than completing having written nothing.
func TestColumnRenamedBeforeStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: ordersSetup, yaml: "backfill: {mode: manual}"})
	e.start()
	e.waitState(store.StateRunning)
	at := time.Now().Add(1500 * time.Millisecond)
	recs, err := e.s.InitiateWith(e.ctx, []change.TableID{ordersID}, store.StartedByCLI, BackfillOptions{Columns: []string{"note"}, RunAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`ALTER TABLE orders RENAME COLUMN note TO remark`)
	var b store.Backfill
	e.waitFor("the run failed", func() bool {
		if b, err = e.st.GetBackfill(e.ctx, recs[0].ID); err != nil {
			t.Fatal(err)
		}
		return b.Status == StatusFailed || b.Status == StatusCompleted
	})
	if b.Status != StatusFailed || !strings.Contains(b.Error, `has no column "note"`) {
		t.Fatalf("run of a renamed column: %s %q; want failed, naming the column", b.Status, b.Error)
	}
}

// TestInterruptedVerifyEnds: a verify left running by a daemon that was
// killed is recorded as ended in error when the stream starts again.
func TestInterruptedVerifyEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: ordersSetup, yaml: "backfill: {mode: manual}"})
	now := time.Now().UTC()
	rec := store.Backfill{Stream: e.cfg.Name, Schema: "public", Table: "orders", StartedBy: store.StartedByCLI,
		Status: StatusCompleted, FinishedAt: &now, LoadedAt: &now, Verify: &store.VerifySummary{Status: VerifyRunning}}
	if err := e.st.CreateBackfill(e.ctx, &rec); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitFor("the interrupted verify recorded", func() bool {
		b, err := e.st.GetBackfill(e.ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return b.Verify != nil && b.Verify.Status == VerifyError && strings.Contains(b.Verify.Error, "stopped during the verify")
	})
}

// TestFilteredVerifyUnderWrites: while a filtered backfill runs, live
// updates to rows outside its filter (leaving their out-of-line TOASTed
// column unchanged) land in its chunks' windows; its verify still matches.
func TestFilteredVerifyUnderWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100}", setup: `
		CREATE TABLE docs (id int PRIMARY KEY, region text NOT NULL, amount int NOT NULL, doc text);
		ALTER TABLE docs ALTER COLUMN doc SET STORAGE EXTERNAL;
		INSERT INTO docs SELECT g, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END, g, repeat(md5(g::text), 100)
		FROM generate_series(1, 3000) g;`})
	e.start()
	e.waitVerified(e.waitLoaded("docs").BackfillID)
	stop := e.keepWriting(e.ctx, func(ctx context.Context, conn *pgx.Conn, i int) {
		id := 1 + (i*7919)%3000
		if id%3 == 0 {
			id++
		}
		_, _ = conn.Exec(ctx, "UPDATE docs SET amount = amount + 1 WHERE id = $1", id)
	})
	recs, err := e.s.InitiateWith(e.ctx, []change.TableID{{Schema: "public", Name: "docs"}}, store.StartedByCLI, BackfillOptions{Filter: "region = 'eu'"})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	run := e.waitVerified(recs[0].ID)
	stop()
	if run.Verify.Status != VerifyMatch || run.WindowConflicts == 0 {
		t.Fatalf("filtered run under writes: verify %+v, %d window conflicts; want a match, with conflicts", *run.Verify, run.WindowConflicts)
	}
}

// TestFilterAfterRename: a column the filter does not use, renamed while a
// filtered run waits for its start and nothing writes to the table, is no
// reason to refuse the filter.
func TestFilterAfterRename(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", setup: ordersSetup, yaml: "backfill: {mode: automatic}"})
	e.start()
	e.waitVerified(e.waitLoaded("orders").BackfillID)
	at := time.Now().Add(time.Second)
	recs, err := e.s.InitiateWith(e.ctx, []change.TableID{ordersID}, store.StartedByCLI, BackfillOptions{Filter: "region = 'eu'", RunAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`ALTER TABLE orders RENAME COLUMN note TO remark`)
	if _, err := e.s.InitiateWith(e.ctx, []change.TableID{{Schema: "public", Name: "nope"}}, store.StartedByCLI, BackfillOptions{Filter: "region = 'eu'"}); err == nil || strings.Contains(err.Error(), "filter") {
		t.Errorf("a second filtered initiate after the rename: %v; want refused for the unknown object only", err)
	}
	if run := e.waitVerified(recs[0].ID); run.Status != StatusCompleted || run.RowsRead != 1000 {
		t.Fatalf("filtered run after a rename: %s, %d rows read, error %q", run.Status, run.RowsRead, run.Error)
	}
}
