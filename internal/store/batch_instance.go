package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

const batchInstanceCols = `"id", "backfill_id", "task", "biz_time", "biz_end", "scheduled", "group", "seq", "order", "mode", "resource_group",
	"state", "reason", "attempt", "next_try", "started_at", "finished_at", "pid", "pgid", "proc_start", "sql_tag", "rendered", "outputs", "error"`

const batchInstanceNCols = 24

// batchInstanceColsI is batchInstanceCols qualified with the alias i.
var batchInstanceColsI = func() string {
	cols := strings.Split(batchInstanceCols, ",")
	for k, c := range cols {
		cols[k] = `i.` + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}()

// appendInstanceArgs appends the batchInstanceCols arguments of c.
func (s *Store) appendInstanceArgs(args []any, id, backfillID int64, c *BatchInstance, state, mode, outputs string) []any {
	var bf any
	if backfillID != 0 {
		bf = backfillID
	}
	return append(args, id, bf, c.Task, s.d.timeArg(c.BizTime), s.d.timeArg(c.BizEnd), s.d.timeArg(c.Scheduled),
		c.Group, c.Seq, c.Order, mode, c.ResourceGroup,
		state, c.Reason, c.Attempt, s.d.nullTimeArg(c.NextTry), s.d.nullTimeArg(c.StartedAt), s.d.nullTimeArg(c.FinishedAt),
		c.PID, c.PGID, int64(c.ProcStart), c.SQLTag, c.Rendered, outputs, c.Error)
}

func scanBatchInstance(sc interface{ Scan(...any) error }) (BatchInstance, error) {
	var b BatchInstance
	var bf sql.NullInt64
	var biz, end, sched, next, started, finished timeCol
	var group, seq, order, attempt, pid, pgid, procStart batchIntCol
	var outputs string
	if err := sc.Scan(&b.ID, &bf, &b.Task, &biz, &end, &sched, &group, &seq, &order, &b.Mode, &b.ResourceGroup,
		&b.State, &b.Reason, &attempt, &next, &started, &finished, &pid, &pgid, &procStart, &b.SQLTag, &b.Rendered, &outputs, &b.Error); err != nil {
		return BatchInstance{}, err
	}
	b.BackfillID = bf.Int64
	b.BizTime, b.BizEnd, b.Scheduled = biz.T, end.T, sched.T
	b.Group, b.Seq, b.Order, b.Attempt = int(group), int(seq), int(order), int(attempt)
	b.NextTry, b.StartedAt, b.FinishedAt = next.ptr(), started.ptr(), finished.ptr()
	b.PID, b.PGID, b.ProcStart = int(pid), int(pgid), uint64(procStart)
	if outputs != "{}" {
		if err := json.Unmarshal([]byte(outputs), &b.Outputs); err != nil {
			return BatchInstance{}, fmt.Errorf("decode outputs of instance %d: %w", b.ID, err)
		}
		if len(b.Outputs) == 0 {
			b.Outputs = nil
		}
	}
	return b, nil
}

// batchIntCol scans an integer column without database/sql's reflection.
type batchIntCol int64

func (c *batchIntCol) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*c = batchIntCol(v)
	case int32:
		*c = batchIntCol(v)
	case nil:
		*c = 0
	default:
		var n sql.NullInt64
		if err := n.Scan(src); err != nil {
			return err
		}
		*c = batchIntCol(n.Int64)
	}
	return nil
}

// queryBatchInstances runs query (selecting batchInstanceCols) and scans every row.
func queryBatchInstances(ctx context.Context, q batchQuerier, query string, args ...any) ([]BatchInstance, error) {
	var out []BatchInstance
	err := scanBatchInstances(ctx, q, &out, query, args...)
	return out, err
}

// scanBatchInstances runs query (selecting batchInstanceCols) and appends every row to out.
func scanBatchInstances(ctx context.Context, q batchQuerier, out *[]BatchInstance, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		b, err := scanBatchInstance(rows)
		if err != nil {
			return err
		}
		*out = append(*out, b)
	}
	return rows.Err()
}

// batchIDsPerQuery bounds the IN list of batchDepsOf (parameter limits).
const batchIDsPerQuery = 10000

// batchDepsOf returns the upstream ids (ascending) of each of ids.
func (s *Store) batchDepsOf(ctx context.Context, q batchQuerier, ids []int64) (map[int64][]int64, error) {
	out := make(map[int64][]int64)
	for start := 0; start < len(ids); start += batchIDsPerQuery {
		chunk := ids[start:min(start+batchIDsPerQuery, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		err := func() error {
			rows, err := q.QueryContext(ctx, s.d.rebind(`SELECT "instance_id", "upstream_id" FROM "batch_instance_deps"
				WHERE "instance_id" IN (`+batchInList(len(args))+`) ORDER BY "instance_id", "upstream_id"`), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, up int64
				if err := rows.Scan(&id, &up); err != nil {
					return err
				}
				out[id] = append(out[id], up)
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("read dependencies: %w", err)
		}
	}
	return out, nil
}

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
		if len(ups) > 0 {
			args := make([]any, len(ups))
			for i, u := range ups {
				args[i] = u
			}
			var n int
			if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM "batch_instances" WHERE "id" IN (`+batchInList(len(args))+`)`),
				args...).Scan(&n); err != nil {
				return err
			}
			if n != len(ups) {
				return fmt.Errorf("upstream instance: %w", ErrNotFound)
			}
		}
		base, err := maxBatchInstanceID(ctx, tx)
		if err != nil {
			return err
		}
		id = base + 1
		args := s.appendInstanceArgs(nil, id, 0, &inst, inst.State, inst.Mode, outputs)
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "batch_instances" (`+batchInstanceCols+`) VALUES `+batchPlaceholders(1, batchInstanceNCols)), args...); err != nil {
			return batchBusyErr(err)
		}
		err = s.batchBulkInsert(ctx, tx, `"batch_instance_deps"`, `"instance_id", "upstream_id"`, 2, batchDepRowsPerInsert, len(ups),
			func(args []any, k int) []any { return append(args, id, ups[k]) })
		if err != nil {
			return fmt.Errorf("insert dependencies: %w", err)
		}
		created = true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return id, created, nil
}

// GetBatchInstance returns one instance with its Deps, or ErrNotFound.
func (s *Store) GetBatchInstance(ctx context.Context, id int64) (BatchInstance, error) {
	b, err := scanBatchInstance(s.queryRow(ctx, `SELECT `+batchInstanceCols+` FROM "batch_instances" WHERE "id" = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return BatchInstance{}, fmt.Errorf("get batch instance %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return BatchInstance{}, fmt.Errorf("get batch instance %d: %w", id, err)
	}
	deps, err := s.batchDepsOf(ctx, s.db, []int64{id})
	if err != nil {
		return BatchInstance{}, fmt.Errorf("get batch instance %d: %w", id, err)
	}
	b.Deps = deps[id]
	return b, nil
}

// DefaultBatchInstanceLimit is the number of instances ListBatchInstances returns
// when the filter's Limit is 0.
const DefaultBatchInstanceLimit = 10000

// ListBatchInstances returns the matching instances ordered by id, with
// their Deps.
func (s *Store) ListBatchInstances(ctx context.Context, f BatchInstanceFilter) ([]BatchInstance, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list batch instances: negative limit %d", f.Limit)
	}
	if f.Scheduled && f.BackfillID != 0 {
		return nil, fmt.Errorf("list batch instances: both Scheduled and backfill %d", f.BackfillID)
	}
	var where []string
	var args []any
	switch {
	case f.Scheduled:
		where = append(where, `"backfill_id" IS NULL`)
	case f.BackfillID != 0:
		where = append(where, `"backfill_id" = ?`)
		args = append(args, f.BackfillID)
	}
	if f.Task != "" {
		where = append(where, `"task" = ?`)
		args = append(args, f.Task)
	}
	if len(f.States) > 0 {
		where = append(where, `"state" IN (`+batchInList(len(f.States))+`)`)
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	if f.AfterID > 0 {
		where = append(where, `"id" > ?`)
		args = append(args, f.AfterID)
	}
	q := `SELECT ` + batchInstanceCols + ` FROM "batch_instances"`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultBatchInstanceLimit
	}
	q += ` ORDER BY "id" LIMIT ?`
	args = append(args, limit)

	var list []BatchInstance
	err := s.batchReadTx(ctx, func(tx *sql.Tx) error {
		var err error
		if list, err = queryBatchInstances(ctx, tx, s.d.rebind(q), args...); err != nil {
			return err
		}
		ids := make([]int64, len(list))
		for i := range list {
			ids[i] = list[i].ID
		}
		deps, err := s.batchDepsOf(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i := range list {
			list[i].Deps = deps[list[i].ID]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list batch instances: %w", err)
	}
	return list, nil
}

// batchOpenWhere selects (alias i) the instances LoadOpenInstances
// returns: waiting or running, of the schedule or of a waiting or running
// backfill.
var batchOpenWhere = `i."state" IN ('` + InstanceWaiting + `', '` + InstanceRunning + `')
	AND (i."backfill_id" IS NULL OR EXISTS (SELECT 1 FROM "batch_backfills" b
		WHERE b."id" = i."backfill_id" AND b."state" IN ('` + BatchWaiting + `', '` + BatchRunning + `')))`

// LoadOpenInstances returns, ordered by id and with their Deps, the
// instances the engine still has to run: every waiting or running instance
// of the recurring schedule or of a waiting or running backfill.
// doneStates maps every dependency id that is not itself in open to its
// state, so the engine knows whether the upstream succeeded, dry-ran or
// failed.
func (s *Store) LoadOpenInstances(ctx context.Context) (open []BatchInstance, doneStates map[int64]string, err error) {
	doneStates = map[int64]string{}
	err = s.batchReadTx(ctx, func(tx *sql.Tx) error {
		// The count sizes the slice, which saves growing and copying it.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM "batch_instances" i WHERE `+batchOpenWhere).Scan(&n); err != nil {
			return fmt.Errorf("count instances: %w", err)
		}
		if n == 0 {
			return nil
		}
		open = make([]BatchInstance, 0, n)
		err := scanBatchInstances(ctx, tx, &open, `SELECT `+batchInstanceColsI+` FROM "batch_instances" i WHERE `+batchOpenWhere)
		if err != nil {
			return fmt.Errorf("read instances: %w", err)
		}
		// Sorted here: ORDER BY would make SQLite sort every row in a temporary B-tree.
		slices.SortFunc(open, func(a, b BatchInstance) int { return cmp.Compare(a.ID, b.ID) })
		idx := make(map[int64]int32, len(open))
		for k := range open {
			idx[open[k].ID] = int32(k)
		}
		var from []int32 // index into open
		var to []int64
		err = func() error {
			// Index-only: the state index and the edges' primary key.
			rows, err := tx.QueryContext(ctx, `SELECT e."instance_id", e."upstream_id"
				FROM "batch_instances" i JOIN "batch_instance_deps" e ON e."instance_id" = i."id"
				WHERE `+batchOpenWhere)
			if err != nil {
				return err
			}
			defer rows.Close()
			var id, up int64
			for rows.Next() {
				if err := rows.Scan(&id, &up); err != nil {
					return err
				}
				k, ok := idx[id] // always: both queries see one snapshot
				if !ok {
					continue
				}
				from, to = append(from, k), append(to, up)
				if _, ok := idx[up]; !ok {
					doneStates[up] = ""
				}
			}
			return rows.Err()
		}()
		if err != nil {
			return fmt.Errorf("read dependencies: %w", err)
		}
		// The states of the upstream instances that are not open: usually
		// few (the frontier of what finished).
		if err := s.readBatchStates(ctx, tx, doneStates); err != nil {
			return fmt.Errorf("read upstream states: %w", err)
		}
		// Every instance's Deps share one array.
		count := make([]int32, len(open)+1)
		for _, k := range from {
			count[k+1]++
		}
		for k := 1; k < len(count); k++ {
			count[k] += count[k-1]
		}
		all := make([]int64, len(to))
		next := slices.Clone(count[:len(open)])
		for e, k := range from {
			all[next[k]] = to[e]
			next[k]++
		}
		for k := range open {
			if d := all[count[k]:count[k+1]:count[k+1]]; len(d) > 0 {
				if !slices.IsSorted(d) {
					slices.Sort(d)
				}
				open[k].Deps = d
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load open instances: %w", err)
	}
	return open, doneStates, nil
}

// readBatchStates sets the state of every instance id in states.
func (s *Store) readBatchStates(ctx context.Context, tx *sql.Tx, states map[int64]string) error {
	ids := make([]int64, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for start := 0; start < len(ids); start += batchIDsPerQuery {
		chunk := ids[start:min(start+batchIDsPerQuery, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		err := func() error {
			rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT "id", "state" FROM "batch_instances" WHERE "id" IN (`+batchInList(len(args))+`)`), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id int64
				var state string
				if err := rows.Scan(&id, &state); err != nil {
					return err
				}
				states[id] = state
			}
			return rows.Err()
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// UpdateBatchInstances writes the mutable fields of every instance in insts
// (State, Reason, Attempt, NextTry, StartedAt, FinishedAt, PID, PGID,
// ProcStart, SQLTag, Rendered, Outputs and Error), by ID, in one
// transaction: all or nothing. Updates to a state other than "running" are
// applied first, so that one batch can hand a task's cycle from one instance
// to another. It returns ErrNotFound when an ID is unknown, and
// ErrTaskTimeBusy when an instance would run while another instance of its
// task and business time runs.
func (s *Store) UpdateBatchInstances(ctx context.Context, insts []BatchInstance) error {
	if len(insts) == 0 {
		return nil
	}
	outputs := make([]string, len(insts))
	order := make([]int, 0, len(insts))
	for i := range insts {
		c := &insts[i]
		if !ValidInstanceState(c.State) {
			return fmt.Errorf("update batch instance %d: invalid state %q", c.ID, c.State)
		}
		var err error
		if outputs[i], err = encodeBatchOutputs(c.Outputs); err != nil {
			return fmt.Errorf("update batch instance %d: %w", c.ID, err)
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
	if s.d.name == dialectPostgres {
		if err := s.updateInstancesSet(ctx, insts, outputs, order); err != nil {
			return fmt.Errorf("update batch instances: %w", err)
		}
		return nil
	}
	err := s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, s.d.rebind(`UPDATE "batch_instances" SET
			"state" = ?, "reason" = ?, "attempt" = ?, "next_try" = ?, "started_at" = ?, "finished_at" = ?,
			"pid" = ?, "pgid" = ?, "proc_start" = ?, "sql_tag" = ?, "rendered" = ?, "outputs" = ?, "error" = ?
			WHERE "id" = ?`))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, i := range order {
			c := &insts[i]
			res, err := stmt.ExecContext(ctx, c.State, c.Reason, c.Attempt,
				s.d.nullTimeArg(c.NextTry), s.d.nullTimeArg(c.StartedAt), s.d.nullTimeArg(c.FinishedAt),
				c.PID, c.PGID, int64(c.ProcStart), c.SQLTag, c.Rendered, outputs[i], c.Error, c.ID)
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
	})
	if err != nil {
		return fmt.Errorf("update batch instances: %w", err)
	}
	return nil
}

// updateInstancesSet is UpdateBatchInstances for PostgreSQL: one UPDATE …
// FROM (VALUES …) per chunk instead of a round trip per row. The rows that
// leave the running state go in statements before those that enter it, so
// that one batch can hand a task's cycle from one instance to another
// (the uniqueness of running cycles is checked row by row).
func (s *Store) updateInstancesSet(ctx context.Context, insts []BatchInstance, outputs []string, order []int) error {
	const chunk = 400 // 14 parameters a row, well under PostgreSQL's 65,535
	return s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
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
				"started_at" = v.sa, "finished_at" = v.fa, "pid" = v.pid, "pgid" = v.pgid, "proc_start" = v.ps,
				"sql_tag" = v.tag, "rendered" = v.code, "outputs" = v.o, "error" = v.e FROM (VALUES `)
			args := make([]any, 0, (end-start)*14)
			for k := start; k < end; k++ {
				c := &insts[order[k]]
				if k > start {
					q.WriteString(", ")
				}
				q.WriteString(`(?::bigint, ?::text, ?::text, ?::int, ?::timestamptz, ?::timestamptz, ?::timestamptz, ?::bigint, ?::bigint, ?::bigint, ?::text, ?::text, ?::text, ?::text)`)
				args = append(args, c.ID, c.State, c.Reason, c.Attempt,
					s.d.nullTimeArg(c.NextTry), s.d.nullTimeArg(c.StartedAt), s.d.nullTimeArg(c.FinishedAt),
					c.PID, c.PGID, int64(c.ProcStart), c.SQLTag, c.Rendered, outputs[order[k]], c.Error)
			}
			q.WriteString(`) AS v(id, s, r, a, nt, sa, fa, pid, pgid, ps, tag, code, o, e) WHERE b."id" = v.id`)
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
	})
}

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
	_, err := s.exec(ctx, `INSERT INTO "batch_schedule_cursors" ("task", "last_time", "updated_at") VALUES (?, ?, ?)
		ON CONFLICT ("task") DO UPDATE SET "last_time" = excluded."last_time", "updated_at" = excluded."updated_at"`,
		task, s.d.timeArg(last), s.d.timeArg(now()))
	if err != nil {
		return fmt.Errorf("put schedule cursor of %q: %w", task, err)
	}
	return nil
}
