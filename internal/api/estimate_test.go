package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// TestEstimate sizes tables before a backfill: exact rows for small tables,
// partitions summed into their root, quoted names, an unknown table named
// in the answer; the rate is unknown until a backfill of the stream has
// completed, then measured; an active run records its estimate for
// progress bars.
func TestEstimate(t *testing.T) {
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `
		CREATE TABLE plain (id int PRIMARY KEY, pad text);
		INSERT INTO plain SELECT g, repeat('x', 100) FROM generate_series(1, 1000) g;
		CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
		CREATE TABLE parted_a PARTITION OF parted FOR VALUES FROM (0) TO (100);
		CREATE TABLE parted_b PARTITION OF parted FOR VALUES FROM (100) TO (1000);
		INSERT INTO parted SELECT g FROM generate_series(50, 349) g;
		CREATE TABLE "Odd ""Name""" (id int PRIMARY KEY);
		INSERT INTO "Odd ""Name""" VALUES (1), (2);`})
	path := "/api/v1/streams/" + e.name + "/estimate?"
	q := url.Values{"object": {"public.plain", "public.parted", `public."Odd ""Name"""`}}
	var est stream.Estimate
	e.ok(200, &est, "GET", path+q.Encode(), "")
	// Answers name objects as requests do, quoted where needed.
	want := map[string]int64{"public.plain": 1000, "public.parted": 300, `public."Odd ""Name"""`: 2}
	if len(est.Objects) != 3 {
		t.Fatalf("estimate: %+v", est)
	}
	for _, o := range est.Objects[:3] {
		if o.Rows != want[o.Object] || !o.RowsExact || o.Bytes <= 0 || o.Error != "" {
			t.Errorf("%s: %+v, want %d rows exactly", o.Object, o, want[o.Object])
		}
	}
	// An object that does not exist is a 404 naming it (issue 16), not a
	// line of the estimate.
	if msg := e.fails(404, "not_found", "GET", path+"object=public.plain&object=public.nope", ""); !strings.Contains(msg, "no object public.nope") {
		t.Errorf("unknown table: %q", msg)
	}
	if est.Rows != 1302 || est.Seconds != 0 || !strings.HasPrefix(est.Basis, "unknown") {
		t.Errorf("before any backfill: rows %d, seconds %v, basis %q", est.Rows, est.Seconds, est.Basis)
	}
	e.fails(400, "bad_request", "GET", path+"objects=public.plain", "")
	e.fails(400, "bad_request", "GET", path+"object=a.b.c", "")

	var recs []store.Backfill
	e.ok(201, &recs, "POST", "/api/v1/streams/"+e.name+"/backfills", `{"objects": ["public.plain"]}`)
	var rec store.Backfill
	e.waitFor("backfill completed", func() bool {
		e.ok(200, &rec, "GET", fmt.Sprintf("/api/v1/backfills/%d", recs[0].ID), "")
		return rec.Status == "completed"
	})
	if rec.RowsEstimate != 1000 {
		t.Errorf("rows_estimate of the run: %d, want 1000", rec.RowsEstimate)
	}
	e.ok(200, &est, "GET", path+"object=public.plain", "")
	if est.Seconds <= 0 || est.RowsPerSecond <= 0 || !strings.HasPrefix(est.Basis, "measured") {
		t.Errorf("after a completed backfill: %+v", est)
	}
}
