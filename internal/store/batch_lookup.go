package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ScheduledInstance finds the recurring schedule's instance of task at
// business time biz; ok is false when there is none.
func (s *Store) ScheduledInstance(ctx context.Context, task string, biz time.Time) (id int64, state string, ok bool, err error) {
	err = s.queryRow(ctx, `SELECT "id", "state" FROM "batch_instances"
		WHERE "backfill_id" IS NULL AND "task" = ? AND "biz_time" = ?`, task, s.d.timeArg(biz)).Scan(&id, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("find the scheduled instance of %s at %s: %w", task, biz.UTC().Format(time.RFC3339), err)
	}
	return id, state, true, nil
}
