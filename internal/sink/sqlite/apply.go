package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

var errNoKey = errors.New("delete needs the old key")

// Apply commits the batch, its position and its cursors in one transaction.
func (s *Sink) Apply(ctx context.Context, b *sink.Batch) error {
	if err := s.inTurn(ctx, func() error { return s.apply(ctx, b) }); err != nil {
		if rejected(err) {
			return fmt.Errorf("apply batch of stream %q: %w: %w", b.Stream, sink.ErrRejected, err)
		}
		return fmt.Errorf("apply batch of stream %q: %w", b.Stream, err)
	}
	return nil
}

// rejected tells SQLite's errors about the batch's content: the table or a
// column is missing, or a constraint added by hand refuses it.
func rejected(err error) bool {
	if sink.IsBeforeCommit(err) {
		return false // the metadata store's, not the destination's
	}
	msg := err.Error()
	return strings.Contains(msg, "no such column") || strings.Contains(msg, "has no column named") || strings.Contains(msg, "no such table") ||
		// A UNIQUE, NOT NULL or CHECK added to the destination table; a
		// foreign key may be satisfied once another table caught up.
		strings.Contains(msg, "constraint failed") && !strings.Contains(msg, "FOREIGN KEY")
}

func (s *Sink) apply(ctx context.Context, b *sink.Batch) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	w := &txn{tx: tx, stmts: make(map[string]*sql.Stmt)}
	var reports []func()
	for i, op := range b.Ops {
		op, report := s.omit.Op(op) // generated columns SQLite computes are not written
		reports = append(reports, report)
		switch {
		case op.Chunk != nil:
			if err := s.applyChunk(ctx, w, op.Chunk); err != nil {
				return fmt.Errorf("op %d: apply chunk to %s: %w", i, op.Chunk.Table.ID, err)
			}
		case op.Change != nil:
			if op.Changed != nil {
				if err := s.noteChange(ctx, w, op.Change, op.Changed); err != nil {
					return fmt.Errorf("op %d: read the row %s changes in %s: %w", i, op.Change.Kind, op.Change.Table.ID, err)
				}
			}
			if err := s.applyChange(ctx, w, op.Change); err != nil {
				return fmt.Errorf("op %d: %s on %s: %w", i, op.Change.Kind, op.Change.Table.ID, err)
			}
		}
	}
	if err := s.writeCheckpoint(ctx, w, b); err != nil {
		return err
	}
	if err := b.CallBeforeCommit(ctx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, report := range reports {
		report()
	}
	return nil
}

func (s *Sink) applyChange(ctx context.Context, w *txn, c *change.Change) error {
	ts, err := s.table(c.Table)
	if err != nil {
		return err
	}
	switch c.Kind {
	case change.Insert, change.Update:
		return s.upsertChange(ctx, w, ts, c)
	case change.Delete:
		if len(c.OldKey) != len(ts.key) {
			return fmt.Errorf("%w (%d values, got %d)", errNoKey, len(ts.key), len(c.OldKey))
		}
		_, err := w.ExecContext(ctx, ts.deleteSQL(), ts.keyArgs(c.OldKey)...)
		return err
	case change.Truncate:
		_, err := w.ExecContext(ctx, "DELETE FROM "+ts.name)
		return err
	}
	return fmt.Errorf("unknown change kind %d", c.Kind)
}

// upsertChange writes an inserted or updated row. An update that moved the
// key deletes the old-key row first; columns the change left Unchanged keep
// the destination's value, or take the old-key row's.
func (s *Sink) upsertChange(ctx context.Context, w *txn, ts *tableSQL, c *change.Change) error {
	if len(c.Row) != len(ts.cols) {
		return fmt.Errorf("row has %d values, table has %d columns", len(c.Row), len(ts.cols))
	}
	var carried []any
	if c.OldKey != nil && c.OldKey.Encode() != c.Table.RowKey(c.Row).Encode() {
		if unchanged, some := unchangedMask(c.Row); some {
			var err error
			if carried, err = s.readColumns(ctx, w, ts, c.OldKey, unchanged); err != nil {
				return fmt.Errorf("read old-key row: %w", err)
			}
		}
		if _, err := w.ExecContext(ctx, ts.deleteSQL(), ts.keyArgs(c.OldKey)...); err != nil {
			return fmt.Errorf("delete old key: %w", err)
		}
	}
	return s.upsert(ctx, w, ts, c.Row, carried, false)
}

// readColumns returns the stored values of the cols columns of the row with
// key k, indexed by column, or nil when there is no such row.
func (s *Sink) readColumns(ctx context.Context, w *txn, ts *tableSQL, k change.Key, cols []bool) ([]any, error) {
	var idx []int
	for i, c := range cols {
		if c {
			idx = append(idx, i)
		}
	}
	rows, err := w.QueryContext(ctx, ts.selectByKeySQL(idx), ts.keyArgs(k)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals, err := scanValues(rows, len(idx))
	if err != nil {
		return nil, err
	}
	carried := make([]any, len(cols))
	for j, i := range idx {
		carried[i] = vals[j]
	}
	return carried, nil
}

// upsert writes row. Unchanged columns are never updated; they are inserted
// from carried (stored values of the old-key row) when it is not nil, else
// left out (NULL). onlyChanged skips rows that are already identical.
func (s *Sink) upsert(ctx context.Context, w *txn, ts *tableSQL, row change.Row, carried []any, onlyChanged bool) error {
	for _, k := range ts.key {
		// Checked here: a single INTEGER key is SQLite's rowid, which
		// would turn NULL into a fresh number.
		if row[k].Null || row[k].Unchanged {
			return fmt.Errorf("key column %s has no value", ts.cols[k])
		}
	}
	ins := make([]bool, len(row))
	set := make([]bool, len(row))
	args := make([]any, 0, len(row))
	for i, v := range row {
		switch {
		case !v.Unchanged:
			// A key under a folding collation takes the row's spelling.
			ins[i], set[i] = true, !ts.isKey[i] || ts.coll[i] != ""
			args = append(args, encode(ts.kinds[i], v))
		case carried != nil:
			ins[i] = true
			args = append(args, carried[i])
		}
	}
	_, err := w.ExecContext(ctx, ts.upsertSQL(ins, set, onlyChanged), args...)
	return err
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

// applyChunk replaces the rows of (Low, High] by the chunk's rows: it reads
// the range's keys, deletes those the chunk lacks, and upserts the rows,
// skipping rows already identical.
func (s *Sink) applyChunk(ctx context.Context, w *txn, ch *sink.Chunk) error {
	ts, err := s.table(ch.Table)
	if err != nil {
		return err
	}
	for _, b := range []change.Key{ch.Low, ch.High} {
		if b != nil && len(b) != len(ts.key) {
			return fmt.Errorf("chunk bound has %d values, key has %d columns", len(b), len(ts.key))
		}
	}
	for n, r := range ch.Rows {
		if len(r) != len(ts.cols) {
			return fmt.Errorf("chunk row %d has %d values, table has %d columns", n, len(r), len(ts.cols))
		}
	}
	ch.Removed = 0
	if ch.Changed != nil {
		var old []change.Row
		err := scanRange(ctx, w, ts, ts.all(), ch.Low, ch.High, func(vals []any) { old = append(old, ts.decodeRow(vals)) })
		if err != nil {
			return fmt.Errorf("read the range's rows: %w", err)
		}
		ch.NoteChanges(old)
	}
	if ch.UpdateOnly {
		return s.updateRows(ctx, w, ts, ch)
	}
	if !ch.Keep {
		if err := s.deleteMissing(ctx, w, ts, ch); err != nil {
			return err
		}
	}
	for _, r := range ch.Rows {
		if err := s.upsert(ctx, w, ts, r, nil, true); err != nil {
			return fmt.Errorf("upsert chunk row: %w", err)
		}
	}
	return nil
}

// deleteMissing deletes the range's rows whose key the chunk lacks.
func (s *Sink) deleteMissing(ctx context.Context, w *txn, ts *tableSQL, ch *sink.Chunk) error {
	keep := make(map[string]bool, len(ch.Rows))
	for _, r := range ch.Rows {
		keep[ch.Table.RowKey(r).Encode()] = true
	}
	// Collect first, delete after: no writes while a read is open.
	var gone [][]any
	err := scanRange(ctx, w, ts, ts.key, ch.Low, ch.High, func(vals []any) {
		k := make(change.Key, len(vals))
		for i, v := range vals {
			k[i] = decode(ts.kinds[ts.key[i]], v)
		}
		if !keep[k.Encode()] {
			gone = append(gone, vals)
		}
	})
	if err != nil {
		return fmt.Errorf("read keys of the range: %w", err)
	}
	for _, k := range gone {
		if _, err := w.ExecContext(ctx, ts.deleteSQL(), k...); err != nil {
			return fmt.Errorf("delete row missing from the chunk: %w", err)
		}
	}
	ch.Removed = int64(len(gone))
	return nil
}

// updateRows writes rows over the destination rows with their keys, their
// Unchanged columns left alone; a row the destination lacks is not written.
func (s *Sink) updateRows(ctx context.Context, w *txn, ts *tableSQL, ch *sink.Chunk) error {
	ch.Skipped = 0
	for _, r := range ch.Rows {
		set := make([]bool, len(r))
		args := make([]any, 0, len(r)+len(ts.key))
		for i, v := range r {
			if !v.Unchanged && !ts.isKey[i] {
				set[i] = true
				args = append(args, encode(ts.kinds[i], v))
			}
		}
		if len(args) == 0 {
			continue
		}
		for _, k := range ts.key {
			args = append(args, encode(ts.kinds[k], r[k]))
		}
		res, err := w.ExecContext(ctx, ts.updateSQL(set), args...)
		if err != nil {
			return fmt.Errorf("update chunk row: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			ch.Skipped++
		}
	}
	return nil
}

// noteChange notes into ch the tracked values of the destination rows c
// replaces, read before it is applied, and of its new row.
func (s *Sink) noteChange(ctx context.Context, w *txn, c *change.Change, ch *sink.Changes) error {
	if c.Kind == change.Truncate {
		return nil
	}
	ts, err := s.table(c.Table)
	if err != nil {
		return err
	}
	idx := ch.Indexes(c.Table)
	mask, some := make([]bool, len(ts.cols)), false
	for _, i := range idx {
		if i >= 0 {
			mask[i], some = true, true
		}
	}
	for _, k := range sink.ChangeKeys(c) {
		if !some {
			break
		}
		vals, err := s.readColumns(ctx, w, ts, k, mask)
		if err != nil {
			return err
		}
		for j, i := range idx {
			if vals != nil && i >= 0 {
				ch.NoteValue(ch.Columns[j], decode(ts.kinds[i], vals[i]))
			}
		}
	}
	if c.Kind != change.Delete {
		ch.Note(c.Table, c.Row)
	}
	return nil
}
