package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Run is several backfills initiated together as one: its status is
// derived from its members' (see stream.RunStatus).
type Run struct {
	ID        int64     `json:"id"`
	Stream    string    `json:"stream"`
	StartedBy string    `json:"started_by"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateRun inserts r and sets its ID and CreatedAt.
func (s *Store) CreateRun(ctx context.Context, r *Run) error {
	if r.Stream == "" || r.StartedBy == "" {
		return errors.New("create run: stream and started_by are required")
	}
	created := now()
	id, err := s.insertID(ctx, `INSERT INTO "backfill_runs" ("stream", "started_by", "created_at") VALUES (?, ?, ?) RETURNING "id"`,
		r.Stream, r.StartedBy, s.d.timeArg(created))
	if err != nil {
		return fmt.Errorf("create run of %s: %w", r.Stream, err)
	}
	r.ID, r.CreatedAt = id, created
	return nil
}

// GetRun returns a run and its member backfills (oldest first), or
// ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (Run, []Backfill, error) {
	var r Run
	var created timeCol
	err := s.queryRow(ctx, `SELECT "id", "stream", "started_by", "created_at" FROM "backfill_runs" WHERE "id" = ?`, id).
		Scan(&r.ID, &r.Stream, &r.StartedBy, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, nil, fmt.Errorf("get run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, nil, fmt.Errorf("get run %d: %w", id, err)
	}
	r.CreatedAt = created.T
	members, err := s.ListBackfills(ctx, BackfillFilter{RunID: id, Limit: 100000})
	if err != nil {
		return Run{}, nil, fmt.Errorf("get run %d: %w", id, err)
	}
	slices.Reverse(members) // oldest first
	return r, members, nil
}
