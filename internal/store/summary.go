package store

import (
	"context"
	"fmt"
)

// Summaries for monitoring: each is one query, cheap enough to run on every
// scrape of the daemon's metrics.

// LatestBackfills returns the latest backfill run of every object of every
// stream (the run its status is of), by ascending id.
func (s *Store) LatestBackfills(ctx context.Context) ([]Backfill, error) {
	rows, err := s.query(ctx, `SELECT `+backfillCols+` FROM "backfills"
		WHERE "id" IN (SELECT "backfill_id" FROM "objects" WHERE "backfill_id" > 0) ORDER BY "id"`)
	if err != nil {
		return nil, fmt.Errorf("list latest backfills: %w", err)
	}
	defer rows.Close()
	var out []Backfill
	for rows.Next() {
		b, err := scanBackfill(rows)
		if err != nil {
			return nil, fmt.Errorf("list latest backfills: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list latest backfills: %w", err)
	}
	return out, nil
}

// StatusCount is how many backfill runs of a stream have a status.
type StatusCount struct {
	Stream, Status string
	N              int64
}

// CountBackfills counts the backfill runs of every stream by status.
// Runs are never deleted, so a count only grows, except as runs move on
// from pending and active.
func (s *Store) CountBackfills(ctx context.Context) ([]StatusCount, error) {
	var out []StatusCount
	err := s.countBy(ctx, `SELECT "stream", "status", COUNT(*) FROM "backfills" GROUP BY "stream", "status" ORDER BY "stream", "status"`,
		func(stream, status string, n int64) {
			out = append(out, StatusCount{Stream: stream, Status: status, N: n})
		})
	if err != nil {
		return nil, fmt.Errorf("count backfills: %w", err)
	}
	return out, nil
}

// CountBatchBackfills counts batch backfills by state.
func (s *Store) CountBatchBackfills(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.countBy(ctx, `SELECT '', "state", COUNT(*) FROM "batch_backfills" GROUP BY "state"`, func(_, state string, n int64) {
		out[state] = n
	})
	if err != nil {
		return nil, fmt.Errorf("count batch backfills: %w", err)
	}
	return out, nil
}

// CountBatchInstances counts task instances by state: those of batch
// backfills and those of the recurring schedule apart.
func (s *Store) CountBatchInstances(ctx context.Context) (backfill, schedule map[string]int64, err error) {
	backfill, schedule = map[string]int64{}, map[string]int64{}
	err = s.countBy(ctx, `SELECT CASE WHEN "backfill_id" IS NULL THEN 'schedule' ELSE 'backfill' END, "state", COUNT(*)
		FROM "batch_instances" GROUP BY 1, 2`, func(kind, state string, n int64) {
		if kind == "schedule" {
			schedule[state] = n
		} else {
			backfill[state] = n
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("count batch instances: %w", err)
	}
	return backfill, schedule, nil
}

// countBy runs a query of (text, text, count) rows.
func (s *Store) countBy(ctx context.Context, q string, f func(a, b string, n int64)) error {
	rows, err := s.query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		var n int64
		if err := rows.Scan(&a, &b, &n); err != nil {
			return err
		}
		f(a, b, n)
	}
	return rows.Err()
}
