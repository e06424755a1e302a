package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// emptyText is a non-nil empty parameter: pgconn sends a nil one as NULL.
var emptyText = []byte{}

// Apply commits the batch, its position and its cursors in one transaction.
func (s *Sink) Apply(ctx context.Context, b *sink.Batch) error {
	if err := s.ensureConn(ctx); err != nil {
		return fmt.Errorf("apply batch of stream %q: %w", b.Stream, err)
	}
	if err := s.apply(ctx, b); err != nil {
		// A rolled-back transaction undoes its staging tables' creation and drops.
		s.staging.rolledBack()
		if stalePlan(err) && !s.conn.IsClosed() {
			s.dropStatements(ctx) // the retry prepares them again
		}
		if errors.Is(err, sink.ErrFenced) {
			// Whichever round trip found it, no op of the batch is at fault.
			return fmt.Errorf("apply batch of stream %q at epoch %d: %w", b.Stream, s.fence.epoch, sink.ErrFenced)
		}
		if rejected(err) {
			return fmt.Errorf("apply batch of stream %q: %w: %w", b.Stream, sink.ErrRejected, err)
		}
		return fmt.Errorf("apply batch of stream %q: %w", b.Stream, err)
	}
	s.staging.committed()
	return nil
}

// rejected tells errors about the batch's content (syntax or access rule
// violations such as an undefined column, class 42; data exceptions, class
// 22; integrity constraint violations, class 23, such as a unique index or
// a check someone added to the destination table) from outages: retrying
// the same batch cannot cure them. A foreign key violation is the
// exception: one table's backfill may run ahead of the table it refers to,
// and the retry succeeds once the other has caught up.
func rejected(err error) bool {
	var pgErr *pgconn.PgError
	if errors.Is(err, errBinaryRefused) {
		return true
	}
	if sink.IsBeforeCommit(err) || !errors.As(err, &pgErr) || pgErr.Code == foreignKeyViolation {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "42") || strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
}

const foreignKeyViolation = "23503"

func (s *Sink) apply(ctx context.Context, b *sink.Batch) error {
	p := &pipeline{s: s}
	p.begin()                 // with the first round trip
	defer s.rollbackOpen(ctx) // after a failure; a committed batch left none open
	if err := s.queueFenceCheck(ctx, p); err != nil {
		return err
	}
	staged := make(map[change.TableID]bool)
	var reports []func()
	for i, op := range b.Ops {
		op, report := s.omit.Op(op) // generated columns it computes are not written
		reports = append(reports, report)
		switch {
		case op.Chunk != nil:
			if err := s.applyChunk(ctx, p, op.Chunk, staged); err != nil {
				return fmt.Errorf("op %d: apply chunk to %s: %w", i, op.Chunk.Table.ID, err)
			}
		case op.Change != nil:
			if op.Changed != nil {
				if err := s.queueNoteChange(ctx, p, op.Change, op.Changed); err != nil {
					return fmt.Errorf("op %d: read the row %s changes in %s: %w", i, op.Change.Kind, op.Change.Table.ID, err)
				}
			}
			if err := s.queueChange(ctx, p, op.Change); err != nil {
				return fmt.Errorf("op %d: %s on %s: %w", i, op.Change.Kind, op.Change.Table.ID, err)
			}
		}
	}
	if err := s.queueCheckpoint(ctx, p, b); err != nil {
		return err
	}
	if b.BeforeCommit == nil {
		// The commit goes in the last round trip: a statement that fails
		// before it (the fence check included) fails the transaction, and
		// the server skips the rest of the round trip.
		if err := p.commit(ctx); err != nil {
			return err
		}
	} else {
		if err := p.flush(ctx); err != nil {
			return err
		}
		if err := b.CallBeforeCommit(ctx); err != nil {
			return err
		}
		if err := p.commit(ctx); err != nil {
			return err
		}
	}
	for _, report := range reports {
		report()
	}
	return nil
}

// rollbackOpen ends the transaction a failed batch left open. A
// connection that cannot is closed: the next batch reconnects.
func (s *Sink) rollbackOpen(ctx context.Context) {
	if s.conn.IsClosed() || s.conn.PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := s.conn.PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		_ = s.conn.Close(ctx)
	}
}

func (s *Sink) queueChange(ctx context.Context, p *pipeline, c *change.Change) error {
	ts, err := s.table(c.Table)
	if err != nil {
		return err
	}
	switch c.Kind {
	case change.Insert, change.Update:
		return s.queueUpsert(ctx, p, ts, c)
	case change.Delete:
		if len(c.OldKey) != len(ts.key) {
			return fmt.Errorf("delete needs the old key (%d values, got %d)", len(ts.key), len(c.OldKey))
		}
		return p.queue(ctx, ts.deleteSQL(), keyArgs(c.OldKey), "delete")
	case change.Truncate:
		return p.queue(ctx, ts.truncateSQL(), nil, "truncate")
	}
	return fmt.Errorf("unknown change kind %d", c.Kind)
}

// queueUpsert writes an inserted or updated row. An update that moved the
// key deletes the old-key row first; columns the change left Unchanged keep
// the destination's value, or take the old-key row's.
func (s *Sink) queueUpsert(ctx context.Context, p *pipeline, ts *tableSQL, c *change.Change) error {
	if len(c.Row) != len(ts.cols) {
		return fmt.Errorf("row has %d values, table has %d columns", len(c.Row), len(ts.cols))
	}
	moved := c.OldKey != nil && c.OldKey.Encode() != c.Table.RowKey(c.Row).Encode()
	if !moved {
		sql, args := upsertStmt(ts, c.Row, nil)
		return p.queue(ctx, sql, args, "upsert")
	}
	unchanged, some := unchangedMask(c.Row)
	if !some {
		if err := p.queue(ctx, ts.deleteSQL(), keyArgs(c.OldKey), "delete old key"); err != nil {
			return err
		}
		sql, args := upsertStmt(ts, c.Row, nil)
		return p.queue(ctx, sql, args, "upsert")
	}
	// The Unchanged values live in the old-key row: read them as it goes.
	if err := p.flush(ctx); err != nil {
		return err
	}
	carried, err := s.deleteReturning(ctx, ts, c.OldKey, unchanged)
	if err != nil {
		return err
	}
	sql, args := upsertStmt(ts, c.Row, carried)
	return p.queue(ctx, sql, args, "upsert")
}

// deleteReturning deletes the row with key k and returns its ret columns'
// values indexed by column (nil when the row did not exist).
func (s *Sink) deleteReturning(ctx context.Context, ts *tableSQL, k change.Key, ret []bool) ([][]byte, error) {
	name, err := s.prepare(ctx, ts.deleteReturningSQL(ret))
	if err != nil {
		return nil, err
	}
	rr := s.conn.PgConn().ExecPrepared(ctx, name, keyArgs(k), nil, nil)
	var carried [][]byte
	for rr.NextRow() {
		vals := rr.Values()
		carried = make([][]byte, len(ts.cols))
		j := 0
		for i, r := range ret {
			if r {
				carried[i] = bytes.Clone(vals[j])
				j++
			}
		}
	}
	if _, err := rr.Close(); err != nil {
		return nil, fmt.Errorf("delete old key: %w", err)
	}
	return carried, nil
}

// upsertStmt builds the upsert of row. Unchanged columns are never updated;
// they are inserted from carried when it holds the old-key row, else left
// out (their default: NULL unless the user's table says otherwise), and
// then a row with the key is updated rather than upserted
// (updateElseInsertSQL).
func upsertStmt(ts *tableSQL, row change.Row, carried [][]byte) (string, [][]byte) {
	ins := make([]bool, len(row))
	set := make([]bool, len(row))
	args := make([][]byte, 0, len(row))
	left, keyLeft := false, false
	for i, v := range row {
		switch {
		case !v.Unchanged:
			ins[i], set[i] = true, !ts.isKey[i]
			args = append(args, valueArg(v))
		case carried != nil:
			ins[i] = true
			args = append(args, carried[i])
		case ts.isKey[i]:
			keyLeft = true // never from a source; the upsert then says what is wrong
		default:
			left = true
		}
	}
	if left && !keyLeft {
		return ts.updateElseInsertSQL(ins, set), args
	}
	return ts.upsertSQL(ins, set), args
}

func unchangedMask(row change.Row) ([]bool, bool) {
	m := make([]bool, len(row))
	some := false
	for i, v := range row {
		if v.Unchanged {
			m[i], some = true, true
		}
	}
	return m, some
}

func valueArg(v change.Value) []byte {
	if v.Null {
		return nil
	}
	return textBytes(v.Text)
}

func textBytes(s string) []byte {
	if s == "" {
		return emptyText
	}
	return []byte(s)
}

func keyArgs(k change.Key) [][]byte {
	args := make([][]byte, len(k))
	for i, v := range k {
		args[i] = valueArg(v)
	}
	return args
}

// queueNoteChange queues the reads of the tracked values of the
// destination rows c replaces, which run before c in the pipeline, and
// notes its new row's (sink.ChangeReporter).
func (s *Sink) queueNoteChange(ctx context.Context, p *pipeline, c *change.Change, ch *sink.Changes) error {
	if c.Kind == change.Truncate {
		return nil
	}
	ts, err := s.table(c.Table)
	if err != nil {
		return err
	}
	var idx []int
	var names []string
	for j, i := range ch.Indexes(c.Table) {
		if i >= 0 {
			idx, names = append(idx, i), append(names, ch.Columns[j])
		}
	}
	if len(idx) > 0 {
		for _, k := range sink.ChangeKeys(c) {
			err := p.queueRows(ctx, ts.selectByKeySQL(idx), keyArgs(k), "read the row before the change", nil, func(vals [][]byte) {
				for j, v := range vals {
					if v == nil {
						ch.NoteValue(names[j], change.Null)
					} else {
						ch.NoteValue(names[j], change.Text(string(v)))
					}
				}
			})
			if err != nil {
				return err
			}
		}
	}
	if c.Kind != change.Delete {
		ch.Note(c.Table, c.Row)
	}
	return nil
}
