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
	if len(deps) > len(insts) {
		return fmt.Errorf("create batch backfill %q: %d dependency lists for %d instances", b.Name, len(deps), len(insts))
	}
	first, err := s.CreateBatchBackfillFrom(ctx, b, NewInstances{
		Len: len(insts),
		At:  func(i int, c *BatchInstance) { *c = insts[i] },
		Deps: func(i int) []int {
			if i < len(deps) {
				return deps[i]
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	for i := range insts {
		c := &insts[i]
		c.ID, c.BackfillID = first+int64(i), b.ID
		_ = prepareBatchInstance(c) // checked above: fills the defaults
		c.Deps = nil
		if i < len(deps) && len(deps[i]) > 0 {
			up := sortedDeps(deps[i])
			c.Deps = make([]int64, len(up))
			for k, j := range up {
				c.Deps[k] = first + int64(j)
			}
		}
	}
	return nil
}

// NewInstances are a new backfill's instances, handed to
// CreateBatchBackfillFrom one at a time, so that a large backfill is never
// held whole in the store's form beside the caller's.
type NewInstances struct {
	Len int
	// At fills *c with instance i (its ID, BackfillID and Deps are
	// ignored). It is asked for each instance twice (to check it, then to
	// write it) and must give the same both times, as must Deps.
	At func(i int, c *BatchInstance)
	// Deps are the indexes of the instances that instance i waits for, in
	// any order; duplicates count once. A nil Deps: none wait.
	Deps func(i int) []int
}

// deps is insts.Deps(i), none when insts has no Deps.
func (insts NewInstances) deps(i int) []int {
	if insts.Deps == nil {
		return nil
	}
	return insts.Deps(i)
}

// CreateBatchBackfillFrom inserts b, its instances and their dependency
// edges in one transaction, as CreateBatchBackfill does, and returns the
// id of instance 0: instance i's is first+i. It sets b.ID, b.CreatedAt and
// b.Instances. Every instance is checked before anything is written.
func (s *Store) CreateBatchBackfillFrom(ctx context.Context, b *BatchBackfill, insts NewInstances) (first int64, err error) {
	if b.State == "" {
		b.State = BatchWaiting
	}
	if first, err = s.createBatchBackfill(ctx, b, insts); err != nil {
		return 0, fmt.Errorf("create batch backfill %q: %w", b.Name, err)
	}
	return first, nil
}

func (s *Store) createBatchBackfill(ctx context.Context, b *BatchBackfill, insts NewInstances) (int64, error) {
	if !ValidBatchState(b.State) {
		return 0, fmt.Errorf("invalid state %q", b.State)
	}
	if len(b.Request) > 0 && !json.Valid(b.Request) {
		return 0, errors.New("request is not valid JSON")
	}
	lean, err := checkNewInstances(insts)
	if err != nil {
		return 0, err
	}
	edges, err := countEdges(insts)
	if err != nil {
		return 0, err
	}
	created := now()
	id, base, err := s.insertBatchBackfill(ctx, b, created, insts, edges, lean)
	if err != nil {
		return 0, err
	}
	b.ID, b.CreatedAt, b.Instances = id, created, insts.Len
	return base + 1, nil
}

// checkNewInstances validates every instance before any is written. lean
// is true when none has run (HasRun): then only their lean columns need
// writing.
func checkNewInstances(insts NewInstances) (lean bool, err error) {
	var c BatchInstance
	lean = true
	for i := range insts.Len {
		c = BatchInstance{}
		insts.At(i, &c)
		if err := prepareBatchInstance(&c); err != nil {
			return false, fmt.Errorf("instance %d (%s): %w", i, c.Task, err)
		}
		if _, err := encodeBatchOutputs(c.Outputs); err != nil {
			return false, fmt.Errorf("instance %d (%s): %w", i, c.Task, err)
		}
		lean = lean && !c.HasRun()
	}
	return lean, nil
}

// sortedDeps is deps ascending, without duplicates (deps itself when it
// already is).
func sortedDeps(deps []int) []int {
	ascending := true
	for k := 1; k < len(deps) && ascending; k++ {
		ascending = deps[k-1] < deps[k]
	}
	if ascending {
		return deps
	}
	l := slices.Clone(deps)
	slices.Sort(l)
	return slices.Compact(l)
}

// countEdges checks the instances' dependency lists and counts the edges
// they make.
func countEdges(insts NewInstances) (int, error) {
	n := 0
	for i := range insts.Len {
		l := sortedDeps(insts.deps(i))
		if len(l) == 0 {
			continue
		}
		if l[0] < 0 || l[len(l)-1] >= insts.Len {
			return 0, fmt.Errorf("instance %d: dependency index out of range [0, %d)", i, insts.Len)
		}
		if _, self := slices.BinarySearch(l, i); self {
			return 0, fmt.Errorf("instance %d depends on itself", i)
		}
		n += len(l)
	}
	return n, nil
}

// edgeWalk walks the edges of insts in order (instance by instance, each
// one's upstreams ascending), as the bulk insert's fill asks for them.
type edgeWalk struct {
	insts NewInstances
	i     int   // the instance whose edges are being walked
	up    []int // its upstreams, sorted
	k     int   // the next of them
	err   error // set when insts gave fewer edges than counted
}

// next returns the next edge's instance and upstream indexes; past the
// last edge (insts changed between the two passes) it sets w.err and
// returns an edge the transaction then rolls back.
func (w *edgeWalk) next() (from, to int) {
	for w.k >= len(w.up) {
		if w.i+1 >= w.insts.Len {
			w.err = errors.New("the instances' dependencies changed while they were written")
			return 0, 0
		}
		w.i++
		w.up, w.k = sortedDeps(w.insts.deps(w.i)), 0
	}
	w.k++
	return w.i, w.up[w.k-1]
}

// insertBatchBackfill inserts b, created at created, and its instances and
// nEdges edges in one transaction. It returns the backfill's id and base,
// the id of instance i being base+1+i.
//
// When lean, no instance has run, and each row is written with its lean
// columns alone, the others left to their defaults: the drivers' cost is
// per value bound (docs/benchmark.md, "Planned instances written with 14
// columns").
func (s *Store) insertBatchBackfill(ctx context.Context, b *BatchBackfill, created time.Time, insts NewInstances, nEdges int, lean bool) (id, base int64, err error) {
	cols := batchInstanceColNames
	if lean {
		cols = cols[:batchInstanceLeanNCols]
	}
	err = s.batchWriteConnTx(ctx, true, func(conn *sql.Conn, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.d.rebind(`INSERT INTO "batch_backfills" (`+batchBackfillInsertCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING "id"`),
			b.Name, b.Task, b.StartedBy, string(b.Request), b.State, b.Error,
			s.d.timeArg(created), s.d.timeArg(b.RunAt), s.d.nullTimeArg(b.StartedAt), s.d.nullTimeArg(b.FinishedAt), insts.Len,
		).Scan(&id)
		if err != nil {
			return err
		}
		if base, err = maxBatchInstanceID(ctx, tx); err != nil {
			return err
		}
		var c BatchInstance
		var changed error // an instance At gave otherwise than when checked
		packed := newPackedEncoder()
		err = s.bulkInsert(ctx, conn, tx, "batch_instances", cols, batchInstanceRowsPerInsert, insts.Len,
			func(args []any, i int) []any {
				c = BatchInstance{}
				insts.At(i, &c)
				outputs, err := encodeBatchOutputs(c.Outputs)
				if lean && c.HasRun() {
					err = errors.New("it has run")
				}
				if err = cmp.Or(prepareBatchInstance(&c), err); err != nil && changed == nil {
					changed = fmt.Errorf("instance %d (%s) changed while it was written: %w", i, c.Task, err)
				}
				packed.add(i, &c, sortedDeps(insts.deps(i)))
				n := len(args)
				return s.appendInstanceArgs(args, base+1+int64(i), id, &c, c.State, c.Mode, outputs)[:n+len(cols)]
			})
		if err = cmp.Or(changed, err); err != nil {
			return fmt.Errorf("insert instances: %w", batchBusyErr(err))
		}
		walk := edgeWalk{insts: insts, i: -1}
		err = s.bulkInsert(ctx, conn, tx, "batch_instance_deps", []string{"instance_id", "upstream_id"}, batchDepRowsPerInsert, nEdges,
			func(args []any, _ int) []any {
				from, to := walk.next()
				return append(args, base+1+int64(from), base+1+int64(to))
			})
		if err = cmp.Or(walk.err, err); err != nil {
			return fmt.Errorf("insert dependencies: %w", err)
		}
		if v := packed.value(base + 1); v != nil {
			if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "batch_backfill_packed" ("backfill_id", "value") VALUES (?, ?)`), id, v); err != nil {
				return fmt.Errorf("record the packed instances: %w", err)
			}
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
