package api_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
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
	var recs []store.Backfill
	e.ok(201, &recs, "POST", "/api/v1/streams/"+e.name+"/backfills", body)
	return recs[0]
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
