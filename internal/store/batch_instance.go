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
)

const batchInstanceCols = `"id", "backfill_id", "task", "biz_time", "biz_end", "scheduled", "group", "seq", "order", "mode", "resource_group",
	"state", "reason", "attempt", "next_try", "started_at", "finished_at", "pid", "pgid", "proc_start", "host", "sql_tag", "rendered", "outputs", "error"`

const batchInstanceNCols = 25

// batchInstanceLeanNCols counts batchInstanceLeanCols, the first of
// batchInstanceCols.
const batchInstanceLeanNCols = 14

// batchInstanceColNames are batchInstanceCols' names, unquoted, for COPY.
var batchInstanceColNames = func() []string {
	cols := strings.Split(batchInstanceCols, ",")
	for k, c := range cols {
		cols[k] = strings.Trim(strings.TrimSpace(c), `"`)
	}
	return cols
}()

// batchInstanceColsI is batchInstanceCols qualified with the alias i.
var batchInstanceColsI = func() string {
	cols := make([]string, len(batchInstanceColNames))
	for k, c := range batchInstanceColNames {
		cols[k] = `i."` + c + `"`
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
		c.PID, c.PGID, int64(c.ProcStart), c.Host, c.SQLTag, c.Rendered, outputs, c.Error)
}

func scanBatchInstance(sc interface{ Scan(...any) error }) (BatchInstance, error) {
	var b BatchInstance
	var bf sql.NullInt64
	var biz, end, sched, next, started, finished timeCol
	var group, seq, order, attempt, pid, pgid, procStart batchIntCol
	var outputs string
	if err := sc.Scan(&b.ID, &bf, &b.Task, &biz, &end, &sched, &group, &seq, &order, &b.Mode, &b.ResourceGroup,
		&b.State, &b.Reason, &attempt, &next, &started, &finished, &pid, &pgid, &procStart, &b.Host, &b.SQLTag, &b.Rendered, &outputs, &b.Error); err != nil {
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

// prepareBatchInstance validates inst for insertion and fills its defaults: an
// empty State becomes "waiting" and an empty Mode "run".
func prepareBatchInstance(inst *BatchInstance) error {
	if inst.Task == "" {
		return errors.New("task is required")
	}
	if inst.State == "" {
		inst.State = InstanceWaiting
	}
	if !ValidInstanceState(inst.State) {
		return fmt.Errorf("invalid state %q", inst.State)
	}
	if inst.Mode == "" {
		inst.Mode = InstanceModeRun
	}
	return nil
}

// encodeBatchOutputs is the stored form of an instance's outputs.
func encodeBatchOutputs(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode outputs: %w", err)
	}
	return string(b), nil
}

// maxBatchInstanceID is the highest instance id, 0 if none. Call it under the
// instances lock (see batchWriteTx).
func maxBatchInstanceID(ctx context.Context, tx *sql.Tx) (int64, error) {
	var m sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX("id") FROM "batch_instances"`).Scan(&m); err != nil {
		return 0, fmt.Errorf("read highest instance id: %w", err)
	}
	return m.Int64, nil
}

// batchIDsPerQuery bounds the IN lists of ids (parameter limits).
const batchIDsPerQuery = 10000

// batchIDArgs returns ids as query arguments.
func batchIDArgs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// batchDepsOf returns the upstream ids (ascending) of each of ids.
func (s *Store) batchDepsOf(ctx context.Context, q batchQuerier, ids []int64) (map[int64][]int64, error) {
	out := make(map[int64][]int64, len(ids))
	if dense(ids) {
		// A page of a backfill: its ids are consecutive, so one range scan of
		// the primary key reads their edges without an IN list of them all.
		err := s.readDeps(ctx, q, out, `"instance_id" BETWEEN ? AND ?`, []any{ids[0], ids[len(ids)-1]}, func(id int64) bool {
			_, found := slices.BinarySearch(ids, id)
			return found
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	for start := 0; start < len(ids); start += batchIDsPerQuery {
		chunk := ids[start:min(start+batchIDsPerQuery, len(ids))]
		err := s.readDeps(ctx, q, out, `"instance_id" IN (`+batchInList(len(chunk))+`)`, batchIDArgs(chunk), nil)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dense tells whether ids are ascending and fill at least half the range
// they span.
func dense(ids []int64) bool {
	n := len(ids)
	return n > 1 && slices.IsSorted(ids) && ids[n-1]-ids[0] < 2*int64(n)
}

// readDeps sets in out the upstream list of each instance that where
// (with args) selects and keep (nil: all) keeps.
func (s *Store) readDeps(ctx context.Context, q batchQuerier, out map[int64][]int64, where string, args []any, keep func(int64) bool) error {
	rows, err := q.QueryContext(ctx, s.d.rebind(`SELECT "instance_id", "upstream_id" FROM "batch_instance_deps"
		WHERE `+where+` ORDER BY "instance_id", "upstream_id"`), args...)
	if err != nil {
		return fmt.Errorf("read dependencies: %w", err)
	}
	defer rows.Close()
	// The lists are cut from one array (a large backfill's instances hold
	// them for as long as they are open): an instance's edges come
	// together, in order.
	var owners, ups []int64
	for rows.Next() {
		var id, up int64
		if err := rows.Scan(&id, &up); err != nil {
			return fmt.Errorf("read dependencies: %w", err)
		}
		if keep == nil || keep(id) {
			owners, ups = append(owners, id), append(ups, up)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read dependencies: %w", err)
	}
	for start := 0; start < len(ups); {
		end := start + 1
		for end < len(ups) && owners[end] == owners[start] {
			end++
		}
		out[owners[start]] = ups[start:end:end] // full: an append copies
		start = end
	}
	return nil
}

// fillBatchDeps sets the Deps of every instance in list.
func (s *Store) fillBatchDeps(ctx context.Context, q batchQuerier, list []BatchInstance) error {
	ids := make([]int64, len(list))
	for i := range list {
		ids[i] = list[i].ID
	}
	deps, err := s.batchDepsOf(ctx, q, ids)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].Deps = deps[list[i].ID]
	}
	return nil
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
	q, args, err := batchInstanceListQuery(f)
	if err != nil {
		return nil, fmt.Errorf("list batch instances: %w", err)
	}
	// A page asked for by size gets its room up front: growing a slice of
	// instances copies them.
	list := make([]BatchInstance, 0, min(f.Limit, 10000))
	err = s.batchReadTx(ctx, func(tx *sql.Tx) error {
		var err error
		if f.Sparse {
			err = s.scanSparse(ctx, tx, &list, f)
		} else {
			err = scanBatchInstances(ctx, tx, &list, s.d.rebind(q), args...)
		}
		if err != nil {
			return err
		}
		return s.fillBatchDeps(ctx, tx, list)
	})
	if err != nil {
		return nil, fmt.Errorf("list batch instances: %w", err)
	}
	if len(list) == 0 {
		return nil, nil // as before the room was made
	}
	return list, nil
}

// BatchInstanceIDRange is the lowest and highest id of a backfill's
// instances (0, 0 when it has none), from the index on backfill and id.
func (s *Store) BatchInstanceIDRange(ctx context.Context, backfillID int64) (lo, hi int64, err error) {
	var l, h sql.NullInt64
	err = s.queryRow(ctx, `SELECT MIN("id"), MAX("id") FROM "batch_instances" WHERE "backfill_id" = ?`, backfillID).Scan(&l, &h)
	if err != nil {
		return 0, 0, fmt.Errorf("id range of the instances of backfill %d: %w", backfillID, err)
	}
	return l.Int64, h.Int64, nil
}

// batchInstanceListQuery returns the query (with ? placeholders) and
// arguments of ListBatchInstances, or why f is invalid.
func batchInstanceListQuery(f BatchInstanceFilter) (q string, args []any, err error) {
	where, args, err := batchInstanceWhere(f)
	if err != nil {
		return "", nil, err
	}
	return `SELECT ` + batchInstanceCols + ` FROM "batch_instances"` + where + ` ORDER BY "id" LIMIT ?`,
		append(args, cmp.Or(f.Limit, DefaultBatchInstanceLimit)), nil
}

// batchInstanceWhere is the WHERE clause (with ? placeholders, "" for
// none) and arguments of f, or why f is invalid.
func batchInstanceWhere(f BatchInstanceFilter) (string, []any, error) {
	if f.Limit < 0 {
		return "", nil, fmt.Errorf("negative limit %d", f.Limit)
	}
	if f.Scheduled && f.BackfillID != 0 {
		return "", nil, fmt.Errorf("both Scheduled and backfill %d", f.BackfillID)
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
	if f.ThroughID > 0 {
		where = append(where, `"id" <= ?`)
		args = append(args, f.ThroughID)
	}
	if len(where) == 0 {
		return "", args, nil
	}
	return ` WHERE ` + strings.Join(where, ` AND `), args, nil
}

// batchInstanceLeanCols are the columns in which instances that have not
// run differ; batchInstanceRan holds for a row whose other columns do not
// all hold their defaults (it has run, or was made so): BatchInstance.HasRun
// in SQL.
const (
	batchInstanceLeanCols = `"id", "backfill_id", "task", "biz_time", "biz_end", "scheduled", "group", "seq", "order", "mode", "resource_group",
	"state", "reason", "attempt"`
	batchInstanceRan = `NOT ("next_try" IS NULL AND "started_at" IS NULL AND "finished_at" IS NULL AND "pid" = 0 AND "pgid" = 0
	AND "proc_start" = 0 AND "host" = '' AND "sql_tag" = '' AND "rendered" = '' AND "outputs" = '{}' AND "error" = '')`
)

// HasRun reports whether any of in's run fields (those a sparse read
// leaves out: batchInstanceRan) is set.
func (in *BatchInstance) HasRun() bool {
	return in.NextTry != nil || in.StartedAt != nil || in.FinishedAt != nil || in.PID != 0 || in.PGID != 0 || in.ProcStart != 0 ||
		in.Host != "" || in.SQLTag != "" || in.Rendered != "" || len(in.Outputs) > 0 || in.Error != ""
}

// scanSparse appends the instances f selects to out as
// scanBatchInstances would, reading the columns of the rows that have not
// run without those that hold their defaults: a restart's read of a large
// backfill not yet run is its instances' plan, and reading a column costs
// the drivers about as much whatever it holds. The rows that ran are then
// read whole, in the same transaction.
func (s *Store) scanSparse(ctx context.Context, tx *sql.Tx, out *[]BatchInstance, f BatchInstanceFilter) error {
	where, args, err := batchInstanceWhere(f)
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT `+batchInstanceLeanCols+`, CASE WHEN `+batchInstanceRan+` THEN 1 ELSE 0 END
		FROM "batch_instances"`+where+` ORDER BY "id" LIMIT ?`), append(args, cmp.Or(f.Limit, DefaultBatchInstanceLimit))...)
	if err != nil {
		return fmt.Errorf("read the instances' plans: %w", err)
	}
	defer rows.Close()
	var ran []int // indexes in *out of the rows that ran
	for rows.Next() {
		b, hasRun, err := scanLeanInstance(rows)
		if err != nil {
			return fmt.Errorf("read the instances' plans: %w", err)
		}
		if hasRun {
			ran = append(ran, len(*out))
		}
		*out = append(*out, b)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the instances' plans: %w", err)
	}
	if len(ran) == 0 {
		return nil
	}
	lo, hi := (*out)[ran[0]].ID, (*out)[ran[len(ran)-1]].ID
	if where == "" {
		where = ` WHERE `
	} else {
		where += ` AND `
	}
	whole, err := queryBatchInstances(ctx, tx, s.d.rebind(`SELECT `+batchInstanceCols+` FROM "batch_instances"`+
		where+`"id" BETWEEN ? AND ? AND `+batchInstanceRan+` ORDER BY "id"`), append(args, lo, hi)...)
	if err != nil {
		return fmt.Errorf("read the instances that ran: %w", err)
	}
	if len(whole) != len(ran) {
		return fmt.Errorf("read %d whole instances of the %d that ran", len(whole), len(ran))
	}
	for k, i := range ran {
		if whole[k].ID != (*out)[i].ID {
			return fmt.Errorf("instance %d read whole in place of %d", whole[k].ID, (*out)[i].ID)
		}
		(*out)[i] = whole[k]
	}
	return nil
}

// scanLeanInstance scans a row of batchInstanceLeanCols and the "ran"
// flag: the instance, its other fields at their defaults.
func scanLeanInstance(sc interface{ Scan(...any) error }) (b BatchInstance, ran bool, err error) {
	var bf sql.NullInt64
	var biz, end, sched timeCol
	var group, seq, order, attempt, flag batchIntCol
	if err := sc.Scan(&b.ID, &bf, &b.Task, &biz, &end, &sched, &group, &seq, &order, &b.Mode, &b.ResourceGroup,
		&b.State, &b.Reason, &attempt, &flag); err != nil {
		return BatchInstance{}, false, err
	}
	b.BackfillID = bf.Int64
	b.BizTime, b.BizEnd, b.Scheduled = biz.T, end.T, sched.T
	b.Group, b.Seq, b.Order, b.Attempt = int(group), int(seq), int(order), int(attempt)
	return b, flag != 0, nil
}
