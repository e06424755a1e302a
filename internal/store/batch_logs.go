package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// PutInstanceLog stores (replacing) the log of the instance's attempt. It
// returns ErrNotFound for an unknown instance.
func (s *Store) PutInstanceLog(ctx context.Context, id int64, attempt int, log string) error {
	res, err := s.exec(ctx, `INSERT INTO "batch_instance_logs" ("instance_id", "attempt", "log", "updated_at")
		SELECT CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT), `+s.batchTimeCast()+`
		WHERE EXISTS (SELECT 1 FROM "batch_instances" WHERE "id" = ?)
		ON CONFLICT ("instance_id", "attempt") DO UPDATE SET "log" = excluded."log", "updated_at" = excluded."updated_at"`,
		id, attempt, log, s.d.timeArg(now()), id)
	if err != nil {
		return fmt.Errorf("put log of instance %d attempt %d: %w", id, attempt, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("put log of instance %d attempt %d: %w", id, attempt, err)
	}
	if n == 0 {
		return fmt.Errorf("put log of instance %d attempt %d: %w", id, attempt, ErrNotFound)
	}
	return nil
}

// batchTimeCast is a time placeholder typed for a SELECT list.
func (s *Store) batchTimeCast() string {
	if s.d.name == dialectPostgres {
		return `CAST(? AS TIMESTAMPTZ)`
	}
	return `CAST(? AS TEXT)`
}

// GetInstanceLog returns the log of the instance's attempt, or of its latest
// logged attempt when attempt is 0, and that attempt's number. It returns
// ErrNotFound when there is no such log.
func (s *Store) GetInstanceLog(ctx context.Context, id int64, attempt int) (log string, gotAttempt int, err error) {
	var row *sql.Row
	if attempt == 0 {
		row = s.queryRow(ctx, `SELECT "log", "attempt" FROM "batch_instance_logs" WHERE "instance_id" = ?
			ORDER BY "attempt" DESC LIMIT 1`, id)
	} else {
		row = s.queryRow(ctx, `SELECT "log", "attempt" FROM "batch_instance_logs" WHERE "instance_id" = ? AND "attempt" = ?`, id, attempt)
	}
	err = row.Scan(&log, &gotAttempt)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("get log of instance %d attempt %d: %w", id, attempt, ErrNotFound)
	}
	if err != nil {
		return "", 0, fmt.Errorf("get log of instance %d attempt %d: %w", id, attempt, err)
	}
	return log, gotAttempt, nil
}

// LatestOutputs returns the outputs of the task's most recently finished
// succeeded instance (of any backfill or the schedule) that finished at or
// after since; ok is false when there is none.
func (s *Store) LatestOutputs(ctx context.Context, task string, since time.Time) (outputs map[string]string, ok bool, err error) {
	var text string
	err = s.queryRow(ctx, `SELECT "outputs" FROM "batch_instances"
		WHERE "task" = ? AND "state" = ? AND "finished_at" >= ?
		ORDER BY "finished_at" DESC, "id" DESC LIMIT 1`,
		task, InstanceSucceeded, s.d.timeArg(ceilMicro(since))).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("latest outputs of %q: %w", task, err)
	}
	if err := json.Unmarshal([]byte(text), &outputs); err != nil {
		return nil, false, fmt.Errorf("latest outputs of %q: decode: %w", task, err)
	}
	if len(outputs) == 0 {
		outputs = nil
	}
	return outputs, true, nil
}

// batchTasksPerQuery bounds the IN list of TaskRunStates.
const batchTasksPerQuery = 500

// TaskRunStates returns, for each (task, business time) of tasks with the
// business time in [from, to], the state of its latest instance (highest
// id) across the schedule and every backfill. Keys' BizTime are in UTC.
func (s *Store) TaskRunStates(ctx context.Context, tasks []string, from, to time.Time) (map[TaskTime]string, error) {
	out := map[TaskTime]string{}
	tasks = slices.Compact(slices.Sorted(slices.Values(tasks)))
	for start := 0; start < len(tasks); start += batchTasksPerQuery {
		chunk := tasks[start:min(start+batchTasksPerQuery, len(tasks))]
		args := make([]any, 0, len(chunk)+2)
		for _, t := range chunk {
			args = append(args, t)
		}
		args = append(args, s.d.timeArg(ceilMicro(from)), s.d.timeArg(to))
		err := func() error {
			rows, err := s.query(ctx, `SELECT "task", "biz_time", "state" FROM "batch_instances"
				WHERE "task" IN (`+batchInList(len(chunk))+`) AND "biz_time" >= ? AND "biz_time" <= ?
				ORDER BY "id"`, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var task, state string
				var biz timeCol
				if err := rows.Scan(&task, &biz, &state); err != nil {
					return err
				}
				out[TaskTime{Task: task, BizTime: biz.T}] = state // later ids win
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("task run states: %w", err)
		}
	}
	return out, nil
}
