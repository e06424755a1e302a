package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// UpdateBatchInstances writes the mutable fields of every instance in insts
// (State, Reason, Attempt, NextTry, StartedAt, FinishedAt, PID, PGID,
// ProcStart, Host, SQLTag, Rendered, Outputs and Error), by ID, in one
// transaction: all or nothing. Updates to a state other than "running" are
// applied first, so that one batch can hand a task's cycle from one instance
// to another. It returns ErrNotFound when an ID is unknown, and
// ErrTaskTimeBusy when an instance would run while another instance of its
// task and business time runs.
func (s *Store) UpdateBatchInstances(ctx context.Context, insts []BatchInstance) error {
	if len(insts) == 0 {
		return nil
	}
	outputs, order, err := prepareInstanceUpdates(insts)
	if err != nil {
		return err
	}
	err = s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		return s.updateInstances(ctx, tx, insts, outputs, order)
	})
	if err != nil {
		return fmt.Errorf("update batch instances: %w", err)
	}
	return nil
}

// prepareInstanceUpdates validates insts' states and returns their encoded
// outputs and the order to write them in: every update to a state other than
// "running" before those to "running", each group in the order given.
func prepareInstanceUpdates(insts []BatchInstance) (outputs []string, order []int, err error) {
	outputs = make([]string, len(insts))
	order = make([]int, 0, len(insts))
	for i := range insts {
		c := &insts[i]
		if !ValidInstanceState(c.State) {
			return nil, nil, fmt.Errorf("update batch instance %d: invalid state %q", c.ID, c.State)
		}
		if outputs[i], err = encodeBatchOutputs(c.Outputs); err != nil {
			return nil, nil, fmt.Errorf("update batch instance %d: %w", c.ID, err)
		}
		if c.State != InstanceRunning {
			order = append(order, i)
		}
	}
	for i := range insts {
		if insts[i].State == InstanceRunning {
			order = append(order, i)
		}
	}
	return outputs, order, nil
}

// updateInstances writes insts in tx (see UpdateBatchInstances).
func (s *Store) updateInstances(ctx context.Context, tx *sql.Tx, insts []BatchInstance, outputs []string, order []int) error {
	if s.d.name == dialectPostgres {
		return s.updateInstancesSet(ctx, tx, insts, outputs, order)
	}
	return s.updateInstancesEach(ctx, tx, insts, outputs, order)
}

// updateInstancesEach is UpdateBatchInstances with one prepared UPDATE per
// instance, in order.
func (s *Store) updateInstancesEach(ctx context.Context, tx *sql.Tx, insts []BatchInstance, outputs []string, order []int) error {
	stmt, err := tx.PrepareContext(ctx, s.d.rebind(`UPDATE "batch_instances" SET
		"state" = ?, "reason" = ?, "attempt" = ?, "next_try" = ?, "started_at" = ?, "finished_at" = ?,
		"pid" = ?, "pgid" = ?, "proc_start" = ?, "host" = ?, "sql_tag" = ?, "rendered" = ?, "outputs" = ?, "error" = ?,
		"updated" = TRUE WHERE "id" = ?`))
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, i := range order {
		c := &insts[i]
		res, err := stmt.ExecContext(ctx, c.State, c.Reason, c.Attempt,
			s.d.nullTimeArg(c.NextTry), s.d.nullTimeArg(c.StartedAt), s.d.nullTimeArg(c.FinishedAt),
			c.PID, c.PGID, int64(c.ProcStart), c.Host, c.SQLTag, c.Rendered, outputs[i], c.Error, c.ID)
		if err != nil {
			return fmt.Errorf("instance %d: %w", c.ID, batchBusyErr(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("instance %d: %w", c.ID, err)
		}
		if n == 0 {
			return fmt.Errorf("instance %d: %w", c.ID, ErrNotFound)
		}
	}
	return nil
}

// updateInstancesSet is UpdateBatchInstances for PostgreSQL: one UPDATE …
// FROM (VALUES …) per chunk instead of a round trip per row. The rows that
// leave the running state go in statements before those that enter it, so
// that one batch can hand a task's cycle from one instance to another
// (the uniqueness of running cycles is checked row by row).
func (s *Store) updateInstancesSet(ctx context.Context, tx *sql.Tx, insts []BatchInstance, outputs []string, order []int) error {
	const chunk = 400 // 15 parameters a row, well under PostgreSQL's 65,535
	for start := 0; start < len(order); {
		end := min(start+chunk, len(order))
		// Do not mix the two groups in one statement.
		running := insts[order[start]].State == InstanceRunning
		for k := start; k < end; k++ {
			if (insts[order[k]].State == InstanceRunning) != running {
				end = k
				break
			}
		}
		var q strings.Builder
		q.WriteString(`UPDATE "batch_instances" AS b SET "state" = v.s, "reason" = v.r, "attempt" = v.a, "next_try" = v.nt,
			"started_at" = v.sa, "finished_at" = v.fa, "pid" = v.pid, "pgid" = v.pgid, "proc_start" = v.ps, "host" = v.host,
			"sql_tag" = v.tag, "rendered" = v.code, "outputs" = v.o, "error" = v.e, "updated" = TRUE FROM (VALUES `)
		args := make([]any, 0, (end-start)*15)
		for k := start; k < end; k++ {
			c := &insts[order[k]]
			if k > start {
				q.WriteString(", ")
			}
			q.WriteString(`(?::bigint, ?::text, ?::text, ?::int, ?::timestamptz, ?::timestamptz, ?::timestamptz, ?::bigint, ?::bigint, ?::bigint, ?::text, ?::text, ?::text, ?::text, ?::text)`)
			args = append(args, c.ID, c.State, c.Reason, c.Attempt,
				s.d.nullTimeArg(c.NextTry), s.d.nullTimeArg(c.StartedAt), s.d.nullTimeArg(c.FinishedAt),
				c.PID, c.PGID, int64(c.ProcStart), c.Host, c.SQLTag, c.Rendered, outputs[order[k]], c.Error)
		}
		q.WriteString(`) AS v(id, s, r, a, nt, sa, fa, pid, pgid, ps, host, tag, code, o, e) WHERE b."id" = v.id`)
		res, err := tx.ExecContext(ctx, s.d.rebind(q.String()), args...)
		if err != nil {
			return batchBusyErr(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != int64(end-start) {
			return fmt.Errorf("%d of %d instances: %w", int64(end-start)-n, end-start, ErrNotFound)
		}
		start = end
	}
	return nil
}
