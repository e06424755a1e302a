package store

import (
	"cmp"
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

// batchTasksPerQuery bounds the IN list of TaskRuns.
const batchTasksPerQuery = 500

// TaskRun is one instance of a task: it runs the cycles from BizTime to
// BizEnd (the same but for a single instance covering several cycles).
type TaskRun struct {
	ID              int64
	Task            string
	BizTime, BizEnd time.Time // UTC
	State           string
	// StartedAt and FinishedAt are nil until the instance started
	// (a dry run is never started) and ended.
	StartedAt, FinishedAt *time.Time
}

// Covers reports whether the run covers the cycle of its task at biz.
func (r TaskRun) Covers(biz time.Time) bool {
	return !biz.Before(r.BizTime) && !biz.After(r.BizEnd)
}

// TaskRunStates returns, for each (task, business time) of tasks with the
// business time in [from, to], the state of its latest instance (highest
// id) across the schedule and every backfill. Keys' BizTime are in UTC.
func (s *Store) TaskRunStates(ctx context.Context, tasks []string, from, to time.Time) (map[TaskTime]string, error) {
	runs, err := s.TaskRuns(ctx, tasks, from, to)
	if err != nil {
		return nil, err
	}
	out := map[TaskTime]string{}
	lo := ceilMicro(from)
	for _, r := range runs { // by id: later ids win
		if !r.BizTime.Before(lo) && !r.BizTime.After(to) {
			out[TaskTime{Task: r.Task, BizTime: r.BizTime}] = r.State
		}
	}
	return out, nil
}

// TaskRuns returns, by id, the instances of tasks that run a cycle in
// [from, to]: those whose business time is in it, and the single
// instances whose range overlaps it.
func (s *Store) TaskRuns(ctx context.Context, tasks []string, from, to time.Time) ([]TaskRun, error) {
	var out []TaskRun
	tasks = slices.Compact(slices.Sorted(slices.Values(tasks)))
	lo, hi := s.d.timeArg(ceilMicro(from)), s.d.timeArg(to)
	for start := 0; start < len(tasks); start += batchTasksPerQuery {
		chunk := tasks[start:min(start+batchTasksPerQuery, len(tasks))]
		in := make([]any, 0, len(chunk))
		for _, t := range chunk {
			in = append(in, t)
		}
		args := append(append(append(slices.Clone(in), lo, hi), in...), hi, lo)
		list := batchInList(len(chunk))
		err := func() error {
			rows, err := s.query(ctx, `SELECT "id", "task", "biz_time", "biz_end", "state", "started_at", "finished_at" FROM "batch_instances"
				WHERE "task" IN (`+list+`) AND "biz_time" >= ? AND "biz_time" <= ?
				UNION
				SELECT "id", "task", "biz_time", "biz_end", "state", "started_at", "finished_at" FROM "batch_instances"
				WHERE "task" IN (`+list+`) AND "biz_end" > "biz_time" AND "biz_time" <= ? AND "biz_end" >= ?
				ORDER BY 1`, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var r TaskRun
				var biz, end, started, finished timeCol
				if err := rows.Scan(&r.ID, &r.Task, &biz, &end, &r.State, &started, &finished); err != nil {
					return err
				}
				r.BizTime, r.BizEnd = biz.T, end.T
				if started.Valid {
					r.StartedAt = &started.T
				}
				if finished.Valid {
					r.FinishedAt = &finished.T
				}
				if r.BizEnd.Before(r.BizTime) {
					r.BizEnd = r.BizTime
				}
				out = append(out, r)
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("task runs: %w", err)
		}
	}
	slices.SortFunc(out, func(a, b TaskRun) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
