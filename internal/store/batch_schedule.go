package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// EnsureScheduledInstance returns the id of the recurring schedule's
// instance of (inst.Task, inst.BizTime), inserting inst with its upstream
// edges (instance ids) when there is none yet; created says which. An empty
// State becomes "waiting" and an empty Mode "run". inst.ID, inst.BackfillID
// (must be 0) and inst.Deps are ignored. It returns ErrNotFound when an
// upstream id is unknown.
func (s *Store) EnsureScheduledInstance(ctx context.Context, inst BatchInstance, upstream []int64) (id int64, created bool, err error) {
	id, created, err = s.ensureScheduledInstance(ctx, inst, upstream)
	if err != nil {
		return 0, false, fmt.Errorf("ensure scheduled instance %s at %s: %w", inst.Task, inst.BizTime.UTC().Format(time.RFC3339Nano), err)
	}
	return id, created, nil
}

func (s *Store) ensureScheduledInstance(ctx context.Context, inst BatchInstance, upstream []int64) (id int64, created bool, err error) {
	if inst.BackfillID != 0 {
		return 0, false, fmt.Errorf("backfill id %d: a scheduled instance belongs to no backfill", inst.BackfillID)
	}
	if err := prepareBatchInstance(&inst); err != nil {
		return 0, false, err
	}
	outputs, err := encodeBatchOutputs(inst.Outputs)
	if err != nil {
		return 0, false, err
	}
	ups := slices.Clone(upstream)
	slices.Sort(ups)
	ups = slices.Compact(ups)

	err = s.batchWriteTx(ctx, true, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT "id" FROM "batch_instances"
			WHERE "backfill_id" IS NULL AND "task" = ? AND "biz_time" = ?`),
			inst.Task, s.d.timeArg(inst.BizTime)).Scan(&id)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := s.checkUpstreamInstances(ctx, tx, ups); err != nil {
			return err
		}
		if id, err = s.insertScheduledInstance(ctx, tx, &inst, outputs, ups); err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return id, created, nil
}

// checkUpstreamInstances returns ErrNotFound unless every id of ups (sorted,
// without duplicates) is an instance.
func (s *Store) checkUpstreamInstances(ctx context.Context, tx *sql.Tx, ups []int64) error {
	if len(ups) == 0 {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM "batch_instances" WHERE "id" IN (`+batchInList(len(ups))+`)`),
		batchIDArgs(ups)...).Scan(&n); err != nil {
		return err
	}
	if n != len(ups) {
		return fmt.Errorf("upstream instance: %w", ErrNotFound)
	}
	return nil
}

// insertScheduledInstance inserts inst (prepared, with its encoded outputs)
// as the schedule's and its edges to ups, and returns its id. Run it in a
// transaction that holds the instances lock (see batchWriteTx).
func (s *Store) insertScheduledInstance(ctx context.Context, tx *sql.Tx, inst *BatchInstance, outputs string, ups []int64) (int64, error) {
	base, err := maxBatchInstanceID(ctx, tx)
	if err != nil {
		return 0, err
	}
	id := base + 1
	args := s.appendInstanceArgs(nil, id, 0, inst, inst.State, inst.Mode, outputs)
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "batch_instances" (`+batchInstanceCols+`) VALUES `+batchPlaceholders(1, batchInstanceNCols)), args...); err != nil {
		return 0, batchBusyErr(err)
	}
	err = s.batchBulkInsert(ctx, tx, `"batch_instance_deps"`, `"instance_id", "upstream_id"`, 2, batchDepRowsPerInsert, len(ups),
		func(args []any, k int) []any { return append(args, id, ups[k]) }, "")
	if err != nil {
		return 0, fmt.Errorf("insert dependencies: %w", err)
	}
	return id, nil
}

// ScheduleCursor returns the last business time the recurring scheduler
// planned for task; ok is false when it has planned none.
func (s *Store) ScheduleCursor(ctx context.Context, task string) (last time.Time, ok bool, err error) {
	var c timeCol
	err = s.queryRow(ctx, `SELECT "last_time" FROM "batch_schedule_cursors" WHERE "task" = ?`, task).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read schedule cursor of %q: %w", task, err)
	}
	return c.T, true, nil
}

// PutScheduleCursor records last as the last business time the recurring
// scheduler planned for task.
func (s *Store) PutScheduleCursor(ctx context.Context, task string, last time.Time) error {
	if task == "" {
		return errors.New("put schedule cursor: empty task")
	}
	err := s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "batch_schedule_cursors" ("task", "last_time", "updated_at") VALUES (?, ?, ?)
		ON CONFLICT ("task") DO UPDATE SET "last_time" = excluded."last_time", "updated_at" = excluded."updated_at"`),
			task, s.d.timeArg(last), s.d.timeArg(now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("put schedule cursor of %q: %w", task, err)
	}
	return nil
}
