package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// testActions: an action records who asked what and the answer; actions
// list newest first, filtered by who and time; a long detail is cut.
func testActions(t *testing.T, s *store.Store) {
	ctx := t.Context()
	if err := s.RecordAction(ctx, &store.Action{Action: "POST /x"}); err == nil {
		t.Error("RecordAction without who: no error")
	}
	before := time.Now().Add(-time.Second)
	pause := &store.Action{Who: "cli:ops", Action: "POST /api/v1/streams/{stream}/pause", Path: "/api/v1/streams/shop/pause", Status: 200}
	mustNil(t, s.RecordAction(ctx, pause))
	if pause.ID <= 0 || pause.At.Before(before) || pause.At.Location() != time.UTC {
		t.Fatalf("recorded %+v, want an id and about now in UTC", pause)
	}
	rate := &store.Action{Who: "api:robot", Action: "PUT /api/v1/streams/{stream}/objects/{object}/rate",
		Path: "/api/v1/streams/shop/objects/public.orders/rate", Status: 200, Detail: strings.Repeat("x", store.MaxActionDetail+10)}
	mustNil(t, s.RecordAction(ctx, rate))
	all, err := s.ListActions(ctx, store.ActionFilter{})
	mustNil(t, err)
	if len(all) != 2 || all[0].ID != rate.ID || all[1].ID != pause.ID {
		t.Fatalf("actions %+v, want the rate change then the pause", all)
	}
	if len(all[0].Detail) != store.MaxActionDetail || all[1].Who != "cli:ops" || all[1].Status != 200 || all[1].Path != pause.Path {
		t.Errorf("listed %+v, want the pause as recorded and the detail cut at %d bytes", all, store.MaxActionDetail)
	}
	mine, err := s.ListActions(ctx, store.ActionFilter{Who: "cli:ops"})
	mustNil(t, err)
	if len(mine) != 1 || mine[0].ID != pause.ID {
		t.Errorf("actions of cli:ops %+v, want the pause", mine)
	}
	later, err := s.ListActions(ctx, store.ActionFilter{Since: time.Now().Add(time.Hour)})
	mustNil(t, err)
	if len(later) != 0 {
		t.Errorf("actions since an hour from now %+v, want none", later)
	}
	if _, err := s.ListActions(ctx, store.ActionFilter{Limit: -1}); err == nil {
		t.Error("negative limit: no error")
	}
}
