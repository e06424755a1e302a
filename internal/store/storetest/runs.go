package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// testRuns: a run records its stream and who started it; GetRun returns it
// with its members oldest first, and ListBackfills selects them by RunID.
func testRuns(t *testing.T, s *store.Store) {
	ctx := t.Context()
	_, _, err := s.GetRun(ctx, 12345)
	wantNotFound(t, "GetRun(missing)", err)
	if err := s.CreateRun(ctx, &store.Run{Stream: "s1"}); err == nil {
		t.Error("CreateRun without started_by: no error")
	}

	before := time.Now().Add(-time.Second)
	r := &store.Run{Stream: "s1", StartedBy: "cli:ops"}
	mustNil(t, s.CreateRun(ctx, r))
	if r.ID <= 0 || r.CreatedAt.Before(before) || r.CreatedAt.Location() != time.UTC {
		t.Fatalf("created run %+v, want an id and about now in UTC", r)
	}
	empty := &store.Run{Stream: "s1", StartedBy: "api"}
	mustNil(t, s.CreateRun(ctx, empty))
	if empty.ID <= r.ID {
		t.Errorf("second run id %d, want > %d", empty.ID, r.ID)
	}

	var members []store.Backfill
	for _, table := range []string{"b", "a"} {
		b := store.Backfill{Stream: "s1", Schema: "public", Table: table, StartedBy: "cli:ops", RunID: r.ID}
		mustNil(t, s.CreateBackfill(ctx, &b))
		members = append(members, b)
	}
	// Neither a backfill of no run nor one of another run is a member.
	mustNil(t, s.CreateBackfill(ctx, &store.Backfill{Stream: "s1", Schema: "public", Table: "a", StartedBy: "cli"}))
	mustNil(t, s.CreateBackfill(ctx, &store.Backfill{Stream: "s1", Schema: "public", Table: "c", StartedBy: "api", RunID: empty.ID}))
	members[0].Status, members[0].RowsRead = store.StatusActive, 5
	mustNil(t, s.UpdateBackfill(ctx, members[0]))

	got, gotMembers, err := s.GetRun(ctx, r.ID)
	mustNil(t, err)
	checkUTC(t, "run CreatedAt", got.CreatedAt, r.CreatedAt)
	got.CreatedAt = r.CreatedAt
	if got != *r {
		t.Errorf("GetRun = %+v, want %+v", got, *r)
	}
	if !reflect.DeepEqual(gotMembers, members) {
		t.Errorf("GetRun members = %+v, want %+v (oldest first)", gotMembers, members)
	}
	listed, err := s.ListBackfills(ctx, store.BackfillFilter{RunID: r.ID})
	mustNil(t, err)
	if len(listed) != 2 || listed[0].ID != members[1].ID || listed[1].ID != members[0].ID {
		t.Errorf("ListBackfills(run %d) = %+v, want members newest first", r.ID, listed)
	}
	listed, err = s.ListBackfills(ctx, store.BackfillFilter{RunID: r.ID, Status: store.StatusActive})
	mustNil(t, err)
	if len(listed) != 1 || listed[0].ID != members[0].ID || listed[0].RunID != r.ID {
		t.Errorf("ListBackfills(run %d, active) = %+v", r.ID, listed)
	}
	all, err := s.ListBackfills(ctx, store.BackfillFilter{})
	mustNil(t, err)
	if len(all) != 4 {
		t.Errorf("ListBackfills(all) = %d backfills, want 4", len(all))
	}
}
