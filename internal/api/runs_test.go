package api_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// runEnv is a stream of two small tables backfilled by hand, one at a time
// (max_concurrent 1), in chunks of 10 rows.
func runEnv(t *testing.T) *env {
	return newEnv(t, envOptions{backfill: "{mode: manual, chunk_size: 10, max_concurrent: 1}", setup: `
		CREATE TABLE a (id int PRIMARY KEY, v text NOT NULL);
		CREATE TABLE b (id int PRIMARY KEY, v text NOT NULL);
		INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 50) g;
		INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 40) g;`})
}

// slowRun initiates public.a and public.b as one run at 1 row/s, and waits
// until a is active, b pending behind it: the run stays so until the limit
// is lifted or the run stopped.
func (e *env) slowRun() stream.RunView {
	e.t.Helper()
	var recs []store.Backfill
	e.ok(201, &recs, "POST", "/api/v1/streams/"+e.name+"/backfills",
		`{"objects": ["public.a", "public.b"], "as_one_run": true, "rows_per_second": 1}`)
	if len(recs) != 2 || recs[0].RunID == 0 || recs[1].RunID != recs[0].RunID {
		e.t.Fatalf("initiated as one run: %+v", recs)
	}
	var v stream.RunView
	e.waitFor("the run's first member reading", func() bool {
		v = e.run(recs[0].RunID)
		return v.Backfills[0].Status == stream.StatusActive && v.Backfills[0].RowsRead > 0
	})
	if v.Status != stream.StatusActive || v.Backfills[1].Status != stream.StatusPending {
		e.t.Fatalf("run with its first member active: %s, members %s and %s", v.Status, v.Backfills[0].Status, v.Backfills[1].Status)
	}
	return v
}

func (e *env) run(id int64) stream.RunView {
	e.t.Helper()
	var v stream.RunView
	e.ok(200, &v, "GET", fmt.Sprintf("/api/v1/streams/%s/runs/%d", e.name, id), "")
	if len(v.Backfills) != 2 || v.Backfills[0].Table != "a" || v.Backfills[1].Table != "b" {
		e.t.Fatalf("run %d: members %+v, want a and b", id, v.Backfills)
	}
	return v
}

// TestRunCompletes: two objects initiated as one run share its id; the run
// is active while either is pending or active, completed only once both
// are, and totals its members.
func TestRunCompletes(t *testing.T) {
	e := runEnv(t)
	v := e.slowRun()
	for _, b := range v.Backfills {
		e.ok(200, nil, "PATCH", fmt.Sprintf("/api/v1/backfills/%d", b.ID), `{"rows_per_second": 0}`)
	}
	e.waitFor("the run completed and loaded", func() bool {
		v = e.run(v.ID)
		all, loaded := true, true
		for _, b := range v.Backfills {
			all = all && b.Status == stream.StatusCompleted
			loaded = loaded && b.LoadedAt != nil
		}
		if (v.Status == stream.StatusCompleted) != all || (v.Status != stream.StatusActive && !all) {
			t.Fatalf("run %s with members %s and %s", v.Status, v.Backfills[0].Status, v.Backfills[1].Status)
		}
		return all && loaded
	})
	a, b := v.Backfills[0], v.Backfills[1]
	if a.RowsRead != 50 || b.RowsRead != 40 || v.RowsRead != 90 || v.RowsWritten != a.RowsWritten+b.RowsWritten ||
		v.Bytes != a.Bytes+b.Bytes || v.RowsEstimate != a.RowsEstimate+b.RowsEstimate || v.Error != "" {
		t.Errorf("run totals %+v, members %+v and %+v", v, a, b)
	}
	last := a.FinishedAt // a member's finish is set again when it is loaded
	if b.FinishedAt.After(*last) {
		last = b.FinishedAt
	}
	if v.StartedAt == nil || !v.StartedAt.Equal(*a.StartedAt) || v.FinishedAt == nil || !v.FinishedAt.Equal(*last) {
		t.Errorf("run from %v to %v; members from %v to %v and from %v to %v", v.StartedAt, v.FinishedAt, a.StartedAt, a.FinishedAt, b.StartedAt, b.FinishedAt)
	}
	if v.Stream != e.name || v.StartedBy != "api" {
		t.Errorf("run of %q started by %q", v.Stream, v.StartedBy)
	}

	// A refused request records no run (an unknown object is a 404, issue 16).
	e.fails(404, "not_found", "POST", "/api/v1/streams/"+e.name+"/backfills", `{"objects": ["public.a", "public.nope"], "as_one_run": true}`)
	if _, _, err := e.d.Store().GetRun(e.ctx, v.ID+1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a run after a refused initiate: %v", err)
	}
	// Unknown ids and other streams' runs are not found.
	e.fails(404, "not_found", "GET", fmt.Sprintf("/api/v1/streams/%s/runs/%d", e.name, v.ID+100), "")
	other := store.Run{Stream: "elsewhere", StartedBy: "api"}
	if err := e.d.Store().CreateRun(e.ctx, &other); err != nil {
		t.Fatal(err)
	}
	e.fails(404, "not_found", "GET", fmt.Sprintf("/api/v1/streams/%s/runs/%d", e.name, other.ID), "")
	e.fails(404, "not_found", "POST", fmt.Sprintf("/api/v1/streams/%s/runs/%d/stop", e.name, other.ID), "")
	e.fails(400, "bad_request", "GET", "/api/v1/streams/"+e.name+"/runs/0", "")
}

// TestStopRun: stopping a run stops its pending and active members; a run
// one of whose objects was stopped alone carries on with the other, and
// stopping it then stops that one; a run that has ended is refused.
func TestStopRun(t *testing.T) {
	e := runEnv(t)
	path := func(v stream.RunView) string { return fmt.Sprintf("/api/v1/streams/%s/runs/%d/stop", e.name, v.ID) }
	stopped := func(what string, v stream.RunView) {
		t.Helper()
		if v.Status != stream.StatusStopped || v.FinishedAt == nil ||
			v.Backfills[0].Status != stream.StatusStopped || v.Backfills[1].Status != stream.StatusStopped {
			t.Errorf("%s: run %s (finished %v), members %s and %s", what, v.Status, v.FinishedAt, v.Backfills[0].Status, v.Backfills[1].Status)
		}
	}

	v := e.slowRun()
	e.ok(200, &v, "POST", path(v), "")
	stopped("run stopped with a member active and one pending", v)
	stopped("the run read again", e.run(v.ID))

	v = e.slowRun()
	e.ok(200, nil, "POST", "/api/v1/streams/"+e.name+"/backfills/stop", `{"objects": ["public.a"]}`)
	e.waitFor("the second member active", func() bool {
		v = e.run(v.ID)
		return v.Backfills[1].Status == stream.StatusActive
	})
	if v.Status != stream.StatusActive || v.Backfills[0].Status != stream.StatusStopped {
		t.Errorf("run after its first object was stopped: %s, members %s and %s", v.Status, v.Backfills[0].Status, v.Backfills[1].Status)
	}
	e.ok(200, &v, "POST", path(v), "")
	stopped("run stopped after its first object", v)
	msg := e.fails(409, "refused", "POST", path(v), "")
	if !strings.Contains(msg, "has ended") || !strings.Contains(msg, "stopped") {
		t.Errorf("stopping an ended run: %q", msg)
	}
}
