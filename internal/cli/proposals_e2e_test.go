package cli_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// TestProposalsFromARepair goes the way of docs/lineage.md, through the
// binary: a repair changes 5 rows over 3 dates of a table two tasks read;
// the daily reader (on_change: propose) gets a proposal of exactly those
// dates, which an operator approves, and the batch backfill runs them for
// it and its downstream task; the weekly reader (on_change: run) gets its
// one week re-run on its own. The initial load proposes nothing (no date
// had run), nor does a backfill that rewrites identical rows.
func TestProposalsFromARepair(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE sales (id int PRIMARY KEY, day date NOT NULL, amount int NOT NULL);
		INSERT INTO sales SELECT g, DATE '2026-03-01' + g % 10, g FROM generate_series(1, 200) g`)
	cfg, dest, addr := sqliteConfig(t, fmt.Sprintf(`{dsn: "%s", status_interval: 1s}`, dsn), "{mode: manual}")
	reads := `[{stream: s, object: public.sales, date_column: day}]`
	tasks := fmt.Sprintf(`tasks:
  - {name: daily_sales, project: sales, type: noop, schedule: daily, reads: %[1]s, on_change: {action: propose, settle: 0s}}
  - {name: report, project: sales, type: noop, schedule: daily, depends_on: [daily_sales]}
  - {name: weekly, project: sales, type: noop, schedule: "weekly mon", reads: %[1]s, on_change: {action: run, settle: 0s, backfill: {scope: {mode: task}}}}
`, reads)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(tasks); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d := startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon.log"))
	cli := func(args ...string) result { return tidemark(t, append(addr, args...)...) }
	poll(t, d, "the API", func() bool { return cli("tasks").code == 0 })
	poll(t, d, "stream s running", func() bool { return theStream(t, addr).State == store.StateRunning })
	handled := func(id string) api.ChangedDatesView {
		var v api.ChangedDatesView
		poll(t, d, "backfill "+id+"'s changes handed over", func() bool {
			r := cli("backfill", "dates", id, "--json")
			return r.code == 0 && json.Unmarshal([]byte(r.stdout), &v) == nil && v.Handled
		})
		return v
	}

	// The first load changes every date, but no task has run one.
	expect(t, 0, nil, append(addr, "backfill", "initiate", "s", "public.sales", "--wait")...)
	if v := handled("1"); len(v.Proposals) != 0 || len(v.Columns) != 1 || v.Columns[0].Total != 10 {
		t.Fatalf("first load: %+v, want 10 changed dates and no proposal", v)
	}
	expect(t, 0, []string{"succeeded"}, append(addr, "batch", "backfill", "daily_sales", "--from", "2026-03-01", "--to", "2026-03-10", "--wait")...)
	expect(t, 0, []string{"succeeded"}, append(addr, "batch", "backfill", "weekly", "--from", "2026-03-01", "--to", "2026-03-10", "--wait")...)

	// 5 rows over 3 dates damaged in the destination; a repair puts them back.
	db, err := sql.Open("sqlite", "file:"+dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE sales SET amount = -1 WHERE id IN (3, 13, 5, 7, 17)`); err != nil {
		t.Fatal(err)
	}
	expect(t, 3, []string{"source and destination differ"}, append(addr, "verify", "s", "public.sales", "--repair")...)
	expect(t, 0, nil, append(addr, "backfill", "wait", "s", "public.sales")...)
	v := handled("2")
	var daily, weekly api.CausedProposal
	for _, p := range v.Proposals {
		switch p.Task {
		case "sales.daily_sales":
			daily = p
		case "sales.weekly":
			weekly = p
		}
	}
	if strings.Join(daily.Cycles, " ") != "2026-03-04 2026-03-06 2026-03-08" || daily.State != "pending" {
		t.Fatalf("the daily reader's proposal: %+v, want pending for 2026-03-04, 03-06 and 03-08", daily)
	}
	if strings.Join(weekly.Cycles, " ") != "2026-03-02" {
		t.Fatalf("the weekly reader's proposal: %+v, want the week of 2026-03-02", weekly)
	}
	expect(t, 0, []string{"public.sales backfill #2 changed 2026-03-04, 2026-03-06, 2026-03-08: re-run sales.daily_sales and its 1 downstream task for these 3 dates"},
		append(addr, "lineage", "list", "--state", "pending")...)

	// The operator approves; the batch backfill runs the 3 dates of the
	// task and its downstream.
	r := expect(t, 0, []string{`"state": "submitted"`}, append(addr, "lineage", "approve", fmt.Sprint(daily.ID), "--json")...)
	var approved api.ProposalView
	if err := json.Unmarshal([]byte(r.stdout), &approved); err != nil || approved.BatchBackfillID == 0 {
		t.Fatalf("approve: %v %s", err, r.stdout)
	}
	bb := fmt.Sprint(approved.BatchBackfillID)
	expect(t, 0, []string{"succeeded"}, append(addr, "batch", "wait", bb)...)
	expect(t, 0, []string{`"lineage_1"`, "caused by public.sales backfill 2 of stream s (proposal 1)"}, append(addr, "batch", "show", bb)...)
	r = expect(t, 0, nil, append(addr, "batch", "instances", bb, "--json")...)
	var insts []api.BatchInstanceView
	if err := json.Unmarshal([]byte(r.stdout), &insts); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range insts {
		got = append(got, in.Task+" "+in.BizTime.Format("2006-01-02"))
	}
	slices.Sort(got)
	want := []string{"sales.daily_sales 2026-03-04", "sales.daily_sales 2026-03-06", "sales.daily_sales 2026-03-08",
		"sales.report 2026-03-04", "sales.report 2026-03-06", "sales.report 2026-03-08"}
	if !slices.Equal(got, want) {
		t.Fatalf("the approved batch backfill ran %v, want %v", got, want)
	}
	expect(t, 4, []string{"no longer pending"}, append(addr, "lineage", "approve", fmt.Sprint(daily.ID))...)
	expect(t, 2, []string{"no proposal 999"}, append(addr, "lineage", "dismiss", "999")...)
	expect(t, 2, []string{`ID "x"`}, append(addr, "lineage", "show", "x")...)

	// The weekly reader's ran on its own.
	var auto api.ProposalView
	poll(t, d, "the weekly reader's batch backfill", func() bool {
		r := cli("lineage", "show", fmt.Sprint(weekly.ID), "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &auto) == nil && auto.BatchBackfillID != 0
	})
	if auto.DecidedBy != "lineage" || auto.State != "submitted" {
		t.Fatalf("the weekly reader's proposal: %+v, want submitted by lineage", auto)
	}
	expect(t, 0, []string{"succeeded"}, append(addr, "batch", "wait", fmt.Sprint(auto.BatchBackfillID))...)
	expect(t, 0, []string{fmt.Sprintf("caused batch backfill #%d of sales.daily_sales (proposal %d) for 3 cycles", approved.BatchBackfillID, daily.ID)},
		append(addr, "backfill", "dates", "2")...)

	// Rewriting identical rows proposes nothing more.
	expect(t, 0, nil, append(addr, "backfill", "initiate", "s", "public.sales", "--wait")...)
	if v := handled("3"); len(v.Columns) != 0 || len(v.Proposals) != 0 {
		t.Fatalf("an identical backfill: %+v", v)
	}
	if r := expect(t, 0, nil, append(addr, "lineage", "list", "--state", "pending", "--json")...); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("pending proposals after an identical backfill: %s", r.stdout)
	}
}

// TestLateDataRerun: through the binary, an update to a row of a date
// weeks old while the stream runs is late data for a reader with
// late_after: 1d and on_change: run, whose cycles of the row's old and new
// dates are re-run on their own; an update to a row of today is not.
func TestLateDataRerun(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE sales (id int PRIMARY KEY, day date NOT NULL, amount int NOT NULL);
		INSERT INTO sales SELECT g, DATE '2026-03-01' + g % 10, g FROM generate_series(1, 100) g;
		INSERT INTO sales VALUES (500, CURRENT_DATE, 0)`)
	cfg, _, addr := sqliteConfig(t, fmt.Sprintf(`{dsn: "%s", status_interval: 1s}`, dsn), "{mode: manual}")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`tasks:
  - {name: daily_sales, project: sales, type: noop, schedule: daily, reads: [{stream: s, object: public.sales, date_column: day, late_after: 1d}], on_change: {action: run, settle: 0s}}
`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d := startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon.log"))
	cli := func(args ...string) result { return tidemark(t, append(addr, args...)...) }
	poll(t, d, "stream s running", func() bool { return theStream(t, addr).State == store.StateRunning })
	expect(t, 0, nil, append(addr, "backfill", "initiate", "s", "public.sales", "--wait")...)
	expect(t, 0, []string{"succeeded"}, append(addr, "batch", "backfill", "daily_sales", "--from", "2026-03-01", "--to", "2026-03-10", "--wait")...)

	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	// One transaction, so that one hand-over sees both.
	if _, err := conn.Exec(t.Context(), `UPDATE sales SET amount = amount + 1 WHERE id = 500; UPDATE sales SET day = '2026-03-09' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	var ps []api.ProposalView
	poll(t, d, "a re-run of the late dates", func() bool {
		r := cli("lineage", "list", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &ps) == nil && len(ps) > 0 && ps[0].BatchBackfillID != 0
	})
	p := ps[0]
	if len(ps) != 1 || strings.Join(p.Cycles, " ") != "2026-03-04 2026-03-09" || p.Causes[0].StartedBy != "late data" || p.DecidedBy != "lineage" {
		t.Fatalf("proposals %+v: want one, run by lineage, of 2026-03-04 (the row's date before) and 2026-03-09 (after)", ps)
	}
	expect(t, 0, []string{"succeeded"}, append(addr, "batch", "wait", fmt.Sprint(p.BatchBackfillID))...)
	expect(t, 0, []string{"caused by late data in public.sales of stream s (proposal 1)"}, append(addr, "batch", "show", fmt.Sprint(p.BatchBackfillID))...)
}
