package stream

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// salesSetup: 200 rows over ten days (day = 2026-03-01 + id % 10), each
// at its own hour.
const salesSetup = `
	CREATE TABLE sales (id int PRIMARY KEY, day date NOT NULL, at timestamptz NOT NULL, amount int NOT NULL);
	INSERT INTO sales SELECT g, DATE '2026-03-01' + g % 10, TIMESTAMPTZ '2026-03-01 00:00:27.5+00' + g * interval '1 hour', g
	FROM generate_series(1, 200) g;`

var salesID = change.TableID{Schema: "public", Name: "sales"}

// changedValues is what backfill id noted of column, sorted.
func (e *env) changedValues(id int64, column string) []string {
	e.t.Helper()
	ds, err := e.st.ChangedDates(e.ctx, e.cfg.Name, id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		if d.Object != "public.sales" {
			e.t.Errorf("changed date of another object: %+v", d)
		}
		if d.Column == column {
			out = append(out, d.Value)
		}
	}
	return out
}

// TestChangedDates: a backfill or repair records the date column values of
// exactly the rows it changes in the destination: every date of a first
// load, none when it rewrites identical rows, the dates of 5 damaged rows
// over 3 dates for a repair, a deleted row's date, both dates of a row
// whose date it puts back and of a key it moves back; timestamps kept to
// the minute
// (docs/lineage.md). An event destination cannot tell: every row written
// counts.
func TestChangedDates(t *testing.T) {
	t.Parallel()
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: salesSetup, yaml: "backfill: {mode: automatic, chunk_size: 50}"})
			e.cfg.DateColumns = map[change.TableID][]string{salesID: {"day", "at"}}
			e.start()
			first := e.waitLoaded("sales").BackfillID
			e.waitVerified(first)
			days := e.changedValues(first, "day")
			if len(days) != 10 || days[0] != "2026-03-01" || days[9] != "2026-03-10" {
				t.Fatalf("first load noted days %v, want the ten of the table", days)
			}
			if at := e.changedValues(first, "at"); len(at) != 200 || !slices.Contains(at, "2026-03-01 01:00:00+00") {
				t.Fatalf("first load noted %d times (%v…), want 200 hours cut to the minute", len(at), at[:min(3, len(at))])
			}

			again := e.initiateSales()
			if days := e.changedValues(again, "day"); len(days) != 0 {
				t.Fatalf("a backfill rewriting identical rows noted %v", days)
			}

			// 5 rows over 3 dates damaged; a repair puts them back.
			e.execInDest(`UPDATE sales SET amount = -1 WHERE id IN (3, 13, 5, 7, 17)`)
			checks, err := e.s.Verify(e.ctx, []change.TableID{salesID}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if checks, err = e.s.Repair(e.ctx, checks); err != nil || checks[0].Repair == nil {
				t.Fatalf("repair: %v, %+v", err, checks)
			}
			rep := checks[0].Repair.ID
			e.waitLoaded("sales")
			e.waitVerified(rep)
			if days := e.changedValues(rep, "day"); strings.Join(days, " ") != "2026-03-04 2026-03-06 2026-03-08" {
				t.Fatalf("repair of 5 rows over 3 dates noted %v", days)
			}
			if at := e.changedValues(rep, "at"); len(at) != 5 {
				t.Fatalf("repair noted times %v, want the 5 rows'", at)
			}

			// A row the source lacks is deleted; a date put back counts
			// the wrong one and the right one.
			// A key moved: the row under the wrong key goes (its date counts)
			// and the right one comes back (its date counts).
			e.execInDest(`INSERT INTO sales VALUES (9999, '2026-02-15', '2026-02-15 10:00:00+00', 0)`,
				`UPDATE sales SET day = '2026-01-01' WHERE id = 30`,
				`UPDATE sales SET id = 4000, day = '2026-02-20' WHERE id = 41`)
			fix := e.initiateSales()
			if days := e.changedValues(fix, "day"); strings.Join(days, " ") != "2026-01-01 2026-02-15 2026-02-20 2026-03-01 2026-03-02" {
				t.Fatalf("backfill deleting a row, putting a date back and moving a key back noted %v", days)
			}
			e.assertConverged("sales")
		})
	}
}

// TestChangedDatesInEvents: a destination that cannot tell a changed row
// from one written identically counts every row a backfill writes.
func TestChangedDatesInEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "files", setup: salesSetup, yaml: "backfill: {mode: automatic, chunk_size: 50}"})
	e.cfg.DateColumns = map[change.TableID][]string{salesID: {"day"}}
	e.start()
	e.waitVerified(e.waitLoaded("sales").BackfillID)
	again := e.initiateSales()
	if days := e.changedValues(again, "day"); len(days) != 10 {
		t.Fatalf("a backfill into files noted %v, want every day it wrote", days)
	}
}

// initiateSales backfills sales again and waits for its verify.
func (e *env) initiateSales() int64 {
	e.t.Helper()
	recs, err := e.s.Initiate(e.ctx, []change.TableID{salesID}, store.StartedByAPI, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitLoaded("sales")
	e.waitVerified(recs[0].ID)
	return recs[0].ID
}

// TestLateData: live changes to rows of dates older than late_after record
// late data: an update counts the row's date before (read from the
// destination) and after, a delete the deleted row's; a change to a row of
// today's date records nothing (docs/lineage.md).
func TestLateData(t *testing.T) {
	t.Parallel()
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: salesSetup + `
				INSERT INTO sales VALUES (300, CURRENT_DATE, now(), 0);`, yaml: "backfill: {mode: automatic, chunk_size: 50}"})
			e.cfg.DateColumns = map[change.TableID][]string{salesID: {"day"}}
			e.cfg.LateData = map[change.TableID][]config.LateRule{salesID: {{Column: "day", After: 24 * time.Hour, Location: time.UTC}}}
			e.start()
			e.waitLoaded("sales")
			e.exec(`UPDATE sales SET amount = amount + 1 WHERE id = 300`)
			e.exec(`UPDATE sales SET day = '2026-03-09' WHERE id = 3`)
			e.exec(`DELETE FROM sales WHERE id = 5`)
			e.exec(`UPDATE sales SET amount = amount + 1 WHERE id = 300`)
			var got []string
			e.waitFor("late dates", func() bool {
				late, err := e.st.LateDates(e.ctx)
				if err != nil {
					t.Fatal(err)
				}
				got = got[:0]
				for _, d := range late {
					got = append(got, d.Value)
				}
				slices.Sort(got)
				return len(got) >= 3
			})
			e.assertConverged("sales")
			if strings.Join(got, " ") != "2026-03-04 2026-03-06 2026-03-09" {
				t.Fatalf("late dates %v, want 2026-03-04 (before the update), 2026-03-09 (after it) and 2026-03-06 (deleted)", got)
			}
		})
	}
}
