package api_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// careful is a stream of one 1000-row table, backfilled by hand in chunks
// of 30 rows into SQLite.
func careful(t *testing.T) (*env, *sql.DB) {
	e := newEnv(t, envOptions{backfill: "{mode: manual, chunk_size: 30}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL);
		INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 1000) g;`})
	db, err := sql.Open("sqlite", "file:"+e.dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return e, db
}

func (e *env) initiateOne(body string) store.Backfill {
	e.t.Helper()
	return e.initiate(201, body)[0]
}

func (e *env) waitBackfill(id int64, what string, cond func(store.Backfill) bool) store.Backfill {
	e.t.Helper()
	var rec store.Backfill
	e.waitFor(what, func() bool {
		e.ok(200, &rec, "GET", fmt.Sprintf("/api/v1/backfills/%d", id), "")
		return cond(rec)
	})
	return rec
}

func loadedRun(b store.Backfill) bool { return b.Status == "completed" && b.LoadedAt != nil }

// TestSampleBackfill: a sample reads the first N rows in key order and
// leaves the destination's rows past them alone, where a full backfill
// would have reset them.
func TestSampleBackfill(t *testing.T) {
	e, db := careful(t)
	full := e.initiateOne(`{"objects": ["public.t"]}`)
	e.waitBackfill(full.ID, "full backfill", loadedRun)
	for _, id := range []int{50, 900} {
		if _, err := db.ExecContext(e.ctx, `UPDATE "t" SET "v" = 'stale' WHERE "id" = ?`, id); err != nil {
			t.Fatal(err)
		}
	}
	sample := e.initiateOne(`{"objects": ["public.t"], "sample_rows": 100}`)
	rec := e.waitBackfill(sample.ID, "sample", loadedRun)
	if rec.RowsRead != 100 || rec.Chunks != 4 {
		t.Errorf("sample read %d rows in %d chunks, want 100 in 4 (30+30+30+10)", rec.RowsRead, rec.Chunks)
	}
	var v50, v900 string
	if err := db.QueryRowContext(e.ctx, `SELECT (SELECT "v" FROM "t" WHERE "id" = 50), (SELECT "v" FROM "t" WHERE "id" = 900)`).Scan(&v50, &v900); err != nil {
		t.Fatal(err)
	}
	if v50 != "v50" || v900 != "stale" {
		t.Errorf("after the sample: row 50 %q (want v50: reset), row 900 %q (want stale: outside the sample)", v50, v900)
	}
	var n int
	if err := db.QueryRowContext(e.ctx, `SELECT count(*) FROM "t"`).Scan(&n); err != nil || n != 1000 {
		t.Errorf("destination rows after the sample: %d (%v), want all 1000 kept", n, err)
	}
	e.fails(400, "bad_request", "POST", "/api/v1/streams/"+e.name+"/backfills", `{"objects": ["public.t"], "sample_rows": -1}`)
}

// TestBackfillRunAtAndLiveRate: a run given a start time stays pending
// (saying until when) and starts then; a run limited to 1 row/s, which
// would take 1000 s, completes once its limit is lifted while it runs.
func TestBackfillRunAtAndLiveRate(t *testing.T) {
	e, _ := careful(t)
	at := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	rec := e.initiateOne(fmt.Sprintf(`{"objects": ["public.t"], "run_at": %q}`, at.Format(time.RFC3339Nano)))
	var objs []api.ObjectView
	e.ok(200, &objs, "GET", "/api/v1/streams/"+e.name+"/objects", "")
	if objs[0].Status != "pending" || !strings.Contains(objs[0].Reason, "scheduled to start at") {
		t.Errorf("object before its start time: %+v", objs[0])
	}
	rec = e.waitBackfill(rec.ID, "scheduled run", loadedRun)
	if rec.StartedAt == nil || rec.StartedAt.Before(at) {
		t.Errorf("started at %v, before its start time %v", rec.StartedAt, at)
	}
	e.fails(400, "bad_request", "POST", "/api/v1/streams/"+e.name+"/backfills", `{"objects": ["public.t"], "run_at": "2020-01-01T00:00:00Z"}`)

	slow := e.initiateOne(`{"objects": ["public.t"], "rows_per_second": 1}`)
	e.waitBackfill(slow.ID, "slow run reading", func(b store.Backfill) bool { return b.Status == "active" && b.RowsRead > 0 })
	var changed store.Backfill
	e.ok(200, &changed, "PATCH", fmt.Sprintf("/api/v1/backfills/%d", slow.ID), `{"rows_per_second": 0}`)
	if _, limited := changed.Options["rows_per_second"]; limited {
		t.Errorf("options after lifting the limit: %v", changed.Options)
	}
	e.waitBackfill(slow.ID, "run after its limit was lifted", loadedRun)
	e.fails(409, "refused", "PATCH", fmt.Sprintf("/api/v1/backfills/%d", slow.ID), `{"rows_per_second": 10}`)
	e.fails(400, "bad_request", "PATCH", fmt.Sprintf("/api/v1/backfills/%d", slow.ID), `{}`)
	e.fails(404, "not_found", "PATCH", "/api/v1/backfills/99999", `{"rows_per_second": 10}`)
}

// TestScopedBackfillAndRepair: every backfill's record carries the verify
// that ended it; a filtered backfill rewrites only its rows; a filter or
// columns the source cannot take are a 400 saying why; verify with repair
// starts a backfill of the differing ranges that puts them right.
func TestScopedBackfillAndRepair(t *testing.T) {
	e, db := careful(t)
	full := e.initiateOne(`{"objects": ["public.t"]}`)
	rec := e.waitBackfill(full.ID, "full backfill verified", verified)
	if rec.Verify.Status != "match" || rec.Verify.SourceRows != 1000 || rec.Verify.Ranges != 34 {
		t.Fatalf("full backfill's verify: %+v, want a match over 1000 rows in 34 ranges", *rec.Verify)
	}
	for _, id := range []int{50, 900} {
		if _, err := db.ExecContext(e.ctx, `UPDATE "t" SET "v" = 'stale' WHERE "id" = ?`, id); err != nil {
			t.Fatal(err)
		}
	}
	filtered := e.initiateOne(`{"objects": ["public.t"], "filter": "id <= 100"}`)
	rec = e.waitBackfill(filtered.ID, "filtered backfill verified", verified)
	if rec.RowsRead != 100 || rec.Verify.Status != "match" || rec.Verify.SourceRows != 100 || rec.Options["filter"] != "id <= 100" {
		t.Fatalf("filtered backfill: read %d, verify %+v, options %v", rec.RowsRead, *rec.Verify, rec.Options)
	}
	if v := destValue(t, e, db, 50); v != "v50" {
		t.Errorf("row 50 after the filtered backfill: %q, want v50", v)
	}
	if v := destValue(t, e, db, 900); v != "stale" {
		t.Errorf("row 900 after the filtered backfill: %q, want stale (outside the filter)", v)
	}
	path := "/api/v1/streams/" + e.name + "/backfills"
	if msg := e.fails(400, "bad_request", "POST", path, `{"objects": ["public.t"], "filter": "nosuch > 1"}`); !strings.Contains(msg, `column "nosuch" does not exist`) {
		t.Errorf("bad filter: %q", msg)
	}
	if msg := e.fails(400, "bad_request", "POST", path, `{"objects": ["public.t"], "columns": ["w"]}`); !strings.Contains(msg, `public.t has no column "w": its columns are id, v`) {
		t.Errorf("unknown column: %q", msg)
	}

	var checks []stream.ObjectCheck
	e.ok(200, &checks, "POST", "/api/v1/streams/"+e.name+"/verify", `{"objects": ["public.t"], "repair": true}`)
	if len(checks) != 1 || checks[0].Match || checks[0].Repair == nil || checks[0].Repair.StartedBy != "repair" {
		t.Fatalf("verify with repair: %+v", checks)
	}
	rec = e.waitBackfill(checks[0].Repair.ID, "repair verified", verified)
	if rec.RowsRead != 30 || rec.Verify.Status != "match" {
		t.Errorf("repair read %d rows (want the 30 of the range holding 900), verify %+v", rec.RowsRead, *rec.Verify)
	}
	if v := destValue(t, e, db, 900); v != "v900" {
		t.Errorf("row 900 after the repair: %q, want v900", v)
	}
}

func verified(b store.Backfill) bool {
	return loadedRun(b) && b.Verify != nil && b.Verify.Status != "running"
}

func destValue(t *testing.T, e *env, db *sql.DB, id int) string {
	t.Helper()
	var v string
	if err := db.QueryRowContext(e.ctx, `SELECT "v" FROM "t" WHERE "id" = ?`, id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
