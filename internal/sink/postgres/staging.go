package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/change"
)

// maxStaging bounds the staging tables kept on the sink's connection.
// PostgreSQL empties every ON COMMIT DELETE ROWS table of a session at each
// commit of a transaction that touched a temporary table, whether or not
// that transaction used them: a commit costs more the more of them exist.
// Without a bound a stream that backfilled 1,000 tables paid for all of
// them at every chunk commit. A few more than the usual max_concurrent
// keep the tables being backfilled from pushing each other out.
const maxStaging = 8

// stagingTables tracks the staging tables that exist on the connection,
// least recently used first, and what the open transaction created and
// dropped, so that a rollback can be undone in the bookkeeping too.
type stagingTables struct {
	order   []change.TableID
	created []change.TableID
	dropped []change.TableID
}

func (st *stagingTables) has(id change.TableID) bool { return slices.Contains(st.order, id) }

// touch moves id to the most recently used end.
func (st *stagingTables) touch(id change.TableID) {
	if i := slices.Index(st.order, id); i >= 0 {
		st.order = append(slices.Delete(st.order, i, i+1), id)
	}
}

// committed forgets the transaction's journal: what it did stays.
func (st *stagingTables) committed() { st.created, st.dropped = nil, nil }

// rolledBack undoes the transaction's creations and drops.
func (st *stagingTables) rolledBack() {
	st.order = slices.DeleteFunc(st.order, func(id change.TableID) bool { return slices.Contains(st.created, id) })
	for _, id := range slices.Backward(st.dropped) {
		if !st.has(id) {
			st.order = slices.Insert(st.order, 0, id)
		}
	}
	st.committed()
}

// drop records that the open transaction dropped id's staging table. One
// this transaction created is forgotten from its journal: a rollback must
// not bring back a table that did not exist before it.
func (st *stagingTables) drop(id change.TableID) {
	st.forget(id)
	if i := slices.Index(st.created, id); i >= 0 {
		st.created = slices.Delete(st.created, i, i+1)
		return
	}
	st.dropped = append(st.dropped, id)
}

// forget drops id from the set, for a table whose staging table was
// dropped by a committed transaction.
func (st *stagingTables) forget(id change.TableID) {
	st.order = slices.DeleteFunc(st.order, func(x change.TableID) bool { return x == id })
}

// ensureStaging creates the session's staging table for ts once per
// connection: a temporary table shaped like the target, without its
// indexes, emptied by every commit (in place: unlike TRUNCATE, no new
// relfilenode and no catalog churn per chunk). When maxStaging exist, the
// least recently used one is dropped first, in the same transaction (p's,
// flushed first: it may not be open yet).
func (s *Sink) ensureStaging(ctx context.Context, p *pipeline, ts *tableSQL) error {
	st := &s.staging
	if st.has(ts.id) {
		st.touch(ts.id)
		return nil
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	if len(st.order) >= maxStaging {
		old := st.order[0]
		if _, err := s.conn.PgConn().Exec(ctx, "DROP TABLE IF EXISTS "+stagingName(old)).ReadAll(); err != nil {
			return fmt.Errorf("drop staging table of %s: %w", old, err)
		}
		st.drop(old)
	}
	return s.createStaging(ctx, ts)
}

// createStaging creates ts's staging table with the target's columns,
// types, typmods and collations, and nothing else: no constraint, NOT NULL
// included (a row staged without some values, Unchanged ones or binary
// ones among text, holds NULL there until it is taken out), no default,
// no generated column.
func (s *Sink) createStaging(ctx context.Context, ts *tableSQL) error {
	sql := "CREATE TEMP TABLE IF NOT EXISTS " + ts.tmp + " ON COMMIT DELETE ROWS AS SELECT * FROM " + ts.name + " WITH NO DATA"
	if _, err := s.conn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("create staging table: %w", err)
	}
	s.staging.order = append(s.staging.order, ts.id)
	s.staging.created = append(s.staging.created, ts.id)
	return nil
}

// remakeStaging drops ts's staging table and creates it again, in the open
// transaction: it was made before a column of ts was altered by hand, and
// has the old types (typeCheck.stagingStale).
func (s *Sink) remakeStaging(ctx context.Context, ts *tableSQL) error {
	if _, err := s.conn.PgConn().Exec(ctx, "DROP TABLE IF EXISTS "+ts.tmp).ReadAll(); err != nil {
		return fmt.Errorf("drop stale staging table of %s: %w", ts.id, err)
	}
	s.staging.drop(ts.id)
	return s.createStaging(ctx, ts)
}
