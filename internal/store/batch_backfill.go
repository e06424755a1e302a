package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

const batchBackfillInsertCols = `"name", "task", "started_by", "request", "state", "error",
	"created_at", "run_at", "started_at", "finished_at", "instances"`

const batchBackfillCols = `"id", ` + batchBackfillInsertCols

func scanBatchBackfill(sc interface{ Scan(...any) error }) (BatchBackfill, error) {
	var b BatchBackfill
	var req string
	var created, runAt, started, finished timeCol
	if err := sc.Scan(&b.ID, &b.Name, &b.Task, &b.StartedBy, &req, &b.State, &b.Error,
		&created, &runAt, &started, &finished, &b.Instances); err != nil {
		return BatchBackfill{}, err
	}
	if req != "" {
		b.Request = json.RawMessage(req)
	}
	b.CreatedAt, b.RunAt = created.T, runAt.T
	b.StartedAt, b.FinishedAt = started.ptr(), finished.ptr()
	return b, nil
}

// CreateBatchBackfill inserts b, its instances insts and their dependency
// edges in one transaction: deps[i] lists the indexes into insts of the
// instances insts[i] waits for (insts[i].Deps is ignored; deps may be nil).
// It sets b.ID, b.CreatedAt and b.Instances, and every instance's ID,
// BackfillID and Deps (the upstream IDs, ascending, without duplicates). An
// empty b.State becomes "waiting"; an empty instance State "waiting" and
// Mode "run". Empty Outputs come back as nil.
func (s *Store) CreateBatchBackfill(ctx context.Context, b *BatchBackfill, insts []BatchInstance, deps [][]int) error {
	if b.State == "" {
		b.State = BatchWaiting
	}
	if err := s.createBatchBackfill(ctx, b, insts, deps); err != nil {
		return fmt.Errorf("create batch backfill %q: %w", b.Name, err)
	}
	return nil
}

func (s *Store) createBatchBackfill(ctx context.Context, b *BatchBackfill, insts []BatchInstance, deps [][]int) error {
	if !ValidBatchState(b.State) {
		return fmt.Errorf("invalid state %q", b.State)
	}
	if len(b.Request) > 0 && !json.Valid(b.Request) {
		return errors.New("request is not valid JSON")
	}
	if len(deps) > len(insts) {
		return fmt.Errorf("%d dependency lists for %d instances", len(deps), len(insts))
	}
	rows, err := prepareBackfillRows(insts)
	if err != nil {
		return err
	}
	edges, err := newBackfillEdges(deps, len(insts))
	if err != nil {
		return err
	}
	created := now()
	id, base, err := s.insertBatchBackfill(ctx, b, created, insts, rows, edges)
	if err != nil {
		return err
	}
	b.ID, b.CreatedAt, b.Instances = id, created, len(insts)
	for i := range insts {
		c := &insts[i]
		c.ID, c.BackfillID, c.State, c.Mode = base+1+int64(i), id, rows.states[i], rows.modes[i]
		c.Deps = nil
		if len(edges.up[i]) > 0 {
			c.Deps = make([]int64, len(edges.up[i]))
			for k, j := range edges.up[i] {
				c.Deps[k] = base + 1 + int64(j)
			}
		}
	}
	return nil
}

// backfillRows are the column values of a backfill's instances that
// insertion normalises: State and Mode with their defaults, and the encoded
// Outputs.
type backfillRows struct {
	states, modes, outputs []string
}

// prepareBackfillRows validates insts for insertion.
func prepareBackfillRows(insts []BatchInstance) (backfillRows, error) {
	// Validate and normalise on copies, so that a failure leaves insts alone.
	rows := backfillRows{
		states:  make([]string, len(insts)),
		modes:   make([]string, len(insts)),
		outputs: make([]string, len(insts)),
	}
	for i := range insts {
		c := insts[i]
		if err := prepareBatchInstance(&c); err != nil {
			return backfillRows{}, fmt.Errorf("instance %d (%s): %w", i, insts[i].Task, err)
		}
		rows.states[i], rows.modes[i] = c.State, c.Mode
		var err error
		if rows.outputs[i], err = encodeBatchOutputs(c.Outputs); err != nil {
			return backfillRows{}, fmt.Errorf("instance %d (%s): %w", i, c.Task, err)
		}
	}
	return rows, nil
}

// backfillEdges are a backfill's dependency edges between instance indexes.
type backfillEdges struct {
	up       [][]int // up[i]: whom instance i waits for, sorted, without duplicates
	from, to []int32 // up flattened: edge k runs from instance from[k] to to[k]
}

// newBackfillEdges checks and normalises deps, CreateBatchBackfill's
// dependency lists of n instances.
func newBackfillEdges(deps [][]int, n int) (backfillEdges, error) {
	up := make([][]int, n)
	nEdges := 0
	for i, ds := range deps {
		if len(ds) == 0 {
			continue
		}
		l := slices.Clone(ds)
		slices.Sort(l)
		l = slices.Compact(l)
		if l[0] < 0 || l[len(l)-1] >= n {
			return backfillEdges{}, fmt.Errorf("instance %d: dependency index out of range [0, %d)", i, n)
		}
		if _, self := slices.BinarySearch(l, i); self {
			return backfillEdges{}, fmt.Errorf("instance %d depends on itself", i)
		}
		up[i] = l
		nEdges += len(l)
	}
	edges := backfillEdges{up: up, from: make([]int32, 0, nEdges), to: make([]int32, 0, nEdges)}
	for i, l := range up {
		for _, j := range l {
			edges.from = append(edges.from, int32(i))
			edges.to = append(edges.to, int32(j))
		}
	}
	return edges, nil
}

// insertBatchBackfill inserts b, created at created, and its prepared
// instances and edges in one transaction. It returns the backfill's id and
// base, the id of insts[i] being base+1+i.
func (s *Store) insertBatchBackfill(ctx context.Context, b *BatchBackfill, created time.Time, insts []BatchInstance, rows backfillRows, edges backfillEdges) (id, base int64, err error) {
	err = s.batchWriteConnTx(ctx, true, func(conn *sql.Conn, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.d.rebind(`INSERT INTO "batch_backfills" (`+batchBackfillInsertCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING "id"`),
			b.Name, b.Task, b.StartedBy, string(b.Request), b.State, b.Error,
			s.d.timeArg(created), s.d.timeArg(b.RunAt), s.d.nullTimeArg(b.StartedAt), s.d.nullTimeArg(b.FinishedAt), len(insts),
		).Scan(&id)
		if err != nil {
			return err
		}
		if base, err = maxBatchInstanceID(ctx, tx); err != nil {
			return err
		}
		err = s.bulkInsert(ctx, conn, tx, "batch_instances", batchInstanceColNames, batchInstanceRowsPerInsert, len(insts),
			func(args []any, i int) []any {
				return s.appendInstanceArgs(args, base+1+int64(i), id, &insts[i], rows.states[i], rows.modes[i], rows.outputs[i])
			})
		if err != nil {
			return fmt.Errorf("insert instances: %w", batchBusyErr(err))
		}
		err = s.bulkInsert(ctx, conn, tx, "batch_instance_deps", []string{"instance_id", "upstream_id"}, batchDepRowsPerInsert, len(edges.from),
			func(args []any, k int) []any {
				return append(args, base+1+int64(edges.from[k]), base+1+int64(edges.to[k]))
			})
		if err != nil {
			return fmt.Errorf("insert dependencies: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return id, base, nil
}

// GetBatchBackfill returns one backfill with States filled, or ErrNotFound.
func (s *Store) GetBatchBackfill(ctx context.Context, id int64) (BatchBackfill, error) {
	b, err := scanBatchBackfill(s.queryRow(ctx, `SELECT `+batchBackfillCols+` FROM "batch_backfills" WHERE "id" = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return BatchBackfill{}, fmt.Errorf("get batch backfill %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return BatchBackfill{}, fmt.Errorf("get batch backfill %d: %w", id, err)
	}
	list := []BatchBackfill{b}
	if err := s.fillBatchStates(ctx, list); err != nil {
		return BatchBackfill{}, fmt.Errorf("get batch backfill %d: %w", id, err)
	}
	return list[0], nil
}

// fillBatchStates sets the States of every backfill in list (never nil),
// with one grouped query.
func (s *Store) fillBatchStates(ctx context.Context, list []BatchBackfill) error {
	if len(list) == 0 {
		return nil
	}
	byID := make(map[int64]*BatchBackfill, len(list))
	args := make([]any, len(list))
	for i := range list {
		list[i].States = map[string]int{}
		byID[list[i].ID] = &list[i]
		args[i] = list[i].ID
	}
	// Listing every state lets the ("state", "backfill_id") index answer
	// with a seek per state and backfill, reading no table rows.
	stateArgs := make([]any, 0, len(batchInstanceStates)+len(args))
	for _, st := range batchInstanceStates {
		stateArgs = append(stateArgs, st)
	}
	rows, err := s.query(ctx, `SELECT "backfill_id", "state", COUNT(*) FROM "batch_instances"
		WHERE "state" IN (`+batchInList(len(batchInstanceStates))+`) AND "backfill_id" IN (`+batchInList(len(args))+`)
		GROUP BY "backfill_id", "state"`, append(stateArgs, args...)...)
	if err != nil {
		return fmt.Errorf("count instances by state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var state string
		var n int
		if err := rows.Scan(&id, &state, &n); err != nil {
			return fmt.Errorf("count instances by state: %w", err)
		}
		if b := byID[id]; b != nil {
			b.States[state] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count instances by state: %w", err)
	}
	return nil
}

// ListBatchBackfills returns the matching backfills, newest (highest ID)
// first, with States filled.
func (s *Store) ListBatchBackfills(ctx context.Context, f BatchBackfillFilter) ([]BatchBackfill, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list batch backfills: negative limit %d", f.Limit)
	}
	var where []string
	var args []any
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+` = ?`)
			args = append(args, v)
		}
	}
	eq(`"task"`, f.Task)
	eq(`"state"`, f.State)
	eq(`"started_by"`, f.StartedBy)
	if !f.Since.IsZero() {
		where = append(where, `"created_at" >= ?`)
		args = append(args, s.d.timeArg(ceilMicro(f.Since)))
	}
	if !f.Until.IsZero() {
		where = append(where, `"created_at" < ?`)
		args = append(args, s.d.timeArg(ceilMicro(f.Until)))
	}
	q := `SELECT ` + batchBackfillCols + ` FROM "batch_backfills"`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultBackfillLimit
	}
	q += ` ORDER BY "id" DESC LIMIT ?`
	args = append(args, limit)

	list, err := func() ([]BatchBackfill, error) {
		rows, err := s.query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []BatchBackfill
		for rows.Next() {
			b, err := scanBatchBackfill(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("list batch backfills: %w", err)
	}
	// Backfill ids go in one IN list; keep each under the parameter limits.
	for start := 0; start < len(list); start += batchIDsPerQuery {
		if err := s.fillBatchStates(ctx, list[start:min(start+batchIDsPerQuery, len(list))]); err != nil {
			return nil, fmt.Errorf("list batch backfills: %w", err)
		}
	}
	return list, nil
}

// SetBatchBackfillState sets the backfill's state and error message, and its
// start and finish times unless nil. It returns ErrNotFound for an unknown id.
func (s *Store) SetBatchBackfillState(ctx context.Context, id int64, state, errMsg string, startedAt, finishedAt *time.Time) error {
	if !ValidBatchState(state) {
		return fmt.Errorf("set batch backfill %d state: invalid state %q", id, state)
	}
	var n int64
	err := s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE "batch_backfills" SET "state" = ?, "error" = ?,
		"started_at" = COALESCE(?, "started_at"), "finished_at" = COALESCE(?, "finished_at")
		WHERE "id" = ?`),
			state, errMsg, s.d.nullTimeArg(startedAt), s.d.nullTimeArg(finishedAt), id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("set batch backfill %d state: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("set batch backfill %d state: %w", id, ErrNotFound)
	}
	return nil
}

// CountBatchBackfillsSince counts the backfills started from task created at
// or after since.
func (s *Store) CountBatchBackfillsSince(ctx context.Context, task string, since time.Time) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM "batch_backfills" WHERE "task" = ? AND "created_at" >= ?`,
		task, s.d.timeArg(ceilMicro(since))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count batch backfills of %q: %w", task, err)
	}
	return n, nil
}
