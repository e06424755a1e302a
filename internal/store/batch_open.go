package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// batchOpenWhere selects (alias i) the instances LoadOpenInstances
// returns: waiting or running, of the schedule or of a waiting or running
// backfill.
var batchOpenWhere = `i."state" IN ('` + InstanceWaiting + `', '` + InstanceRunning + `')
	AND (i."backfill_id" IS NULL OR EXISTS (SELECT 1 FROM "batch_backfills" b
		WHERE b."id" = i."backfill_id" AND b."state" IN ('` + BatchWaiting + `', '` + BatchRunning + `')))`

// batchOpenScheduledWhere selects (alias i) the open instances of the
// recurring schedule alone: a seek of the state index.
var batchOpenScheduledWhere = `i."state" IN ('` + InstanceWaiting + `', '` + InstanceRunning + `')
	AND i."backfill_id" IS NULL`

// LoadOpenInstances returns, ordered by id and with their Deps, the
// instances the engine still has to run: every waiting or running instance
// of the recurring schedule or of a waiting or running backfill.
// doneStates maps every dependency id that is not itself in open to its
// state, so the engine knows whether the upstream succeeded, dry-ran or
// failed.
func (s *Store) LoadOpenInstances(ctx context.Context) (open []BatchInstance, doneStates map[int64]string, err error) {
	return s.loadOpen(ctx, batchOpenWhere)
}

// LoadOpenScheduled is LoadOpenInstances of the recurring schedule's
// instances alone, for an engine that reads its open backfills whole.
func (s *Store) LoadOpenScheduled(ctx context.Context) (open []BatchInstance, doneStates map[int64]string, err error) {
	return s.loadOpen(ctx, batchOpenScheduledWhere)
}

// loadOpen is LoadOpenInstances of the instances (alias i) where selects.
func (s *Store) loadOpen(ctx context.Context, where string) (open []BatchInstance, doneStates map[int64]string, err error) {
	doneStates = map[int64]string{}
	err = s.batchReadTx(ctx, func(tx *sql.Tx) error {
		var err error
		if open, err = readOpenInstances(ctx, tx, where); err != nil || len(open) == 0 {
			return err
		}
		edges, err := readOpenEdges(ctx, tx, where, open, doneStates)
		if err != nil {
			return fmt.Errorf("read dependencies: %w", err)
		}
		// The states of the upstream instances that are not open: usually
		// few (the frontier of what finished).
		if err := s.readBatchStates(ctx, tx, doneStates); err != nil {
			return fmt.Errorf("read upstream states: %w", err)
		}
		edges.attachTo(open)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load open instances: %w", err)
	}
	return open, doneStates, nil
}

// readOpenInstances returns the instances where selects (batchOpenWhere,
// say) ordered by id, without their Deps; nil when there are none.
func readOpenInstances(ctx context.Context, tx *sql.Tx, where string) ([]BatchInstance, error) {
	// The count sizes the slice, which saves growing and copying it.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM "batch_instances" i WHERE `+where).Scan(&n); err != nil {
		return nil, fmt.Errorf("count instances: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	open := make([]BatchInstance, 0, n)
	err := scanBatchInstances(ctx, tx, &open, `SELECT `+batchInstanceColsI+` FROM "batch_instances" i WHERE `+where)
	if err != nil {
		return nil, fmt.Errorf("read instances: %w", err)
	}
	// Sorted here: ORDER BY would make SQLite sort every row in a temporary B-tree.
	slices.SortFunc(open, func(a, b BatchInstance) int { return cmp.Compare(a.ID, b.ID) })
	return open, nil
}

// openEdges are the dependency edges of the open instances: edge e runs
// from open[from[e]] to the instance of id to[e].
type openEdges struct {
	from []int32 // index into open
	to   []int64
}

// readOpenEdges reads the dependency edges of open, the result of
// readOpenInstances in the same transaction, and adds to doneStates, with
// an empty state, every upstream id that is not in open.
func readOpenEdges(ctx context.Context, tx *sql.Tx, where string, open []BatchInstance, doneStates map[int64]string) (openEdges, error) {
	idx := make(map[int64]int32, len(open))
	for k := range open {
		idx[open[k].ID] = int32(k)
	}
	// Index-only: the state index and the edges' primary key.
	rows, err := tx.QueryContext(ctx, `SELECT e."instance_id", e."upstream_id"
		FROM "batch_instances" i JOIN "batch_instance_deps" e ON e."instance_id" = i."id"
		WHERE `+where)
	if err != nil {
		return openEdges{}, err
	}
	defer rows.Close()
	var edges openEdges
	var id, up int64
	for rows.Next() {
		if err := rows.Scan(&id, &up); err != nil {
			return openEdges{}, err
		}
		k, ok := idx[id] // always: both queries see one snapshot
		if !ok {
			continue
		}
		edges.from, edges.to = append(edges.from, k), append(edges.to, up)
		if _, ok := idx[up]; !ok {
			doneStates[up] = ""
		}
	}
	return edges, rows.Err()
}

// attachTo sets the Deps of every instance of open (ascending) from the
// edges, which index open.
func (edges openEdges) attachTo(open []BatchInstance) {
	// Every instance's Deps share one array.
	count := make([]int32, len(open)+1)
	for _, k := range edges.from {
		count[k+1]++
	}
	for k := 1; k < len(count); k++ {
		count[k] += count[k-1]
	}
	all := make([]int64, len(edges.to))
	next := slices.Clone(count[:len(open)])
	for e, k := range edges.from {
		all[next[k]] = edges.to[e]
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
		err := func() error {
			rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT "id", "state" FROM "batch_instances" WHERE "id" IN (`+batchInList(len(chunk))+`)`), batchIDArgs(chunk)...)
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
