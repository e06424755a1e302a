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

// maxPipeline bounds how many statements wait for one round trip, so huge
// batches do not buffer without limit.
const maxPipeline = 1000

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
	if sink.IsBeforeCommit(err) || !errors.As(err, &pgErr) || pgErr.Code == foreignKeyViolation {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "42") || strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
}

const foreignKeyViolation = "23503"

func (s *Sink) apply(ctx context.Context, b *sink.Batch) error {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// No-op after Commit; after a failure it ends the transaction (or pgx
	// closes a broken connection, and the next call reconnects).
	defer tx.Rollback(ctx)
	p := &pipeline{s: s}
	fenced, err := s.queueFenceCheck(ctx, p)
	if err != nil {
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
	if err := p.flush(ctx); err != nil {
		return err
	}
	if err := fenced(); err != nil {
		return err
	}
	if err := b.CallBeforeCommit(ctx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, report := range reports {
		report()
	}
	return nil
}

// pipeline queues prepared statements and sends them in one round trip.
type pipeline struct {
	s     *Sink
	batch pgconn.Batch
	what  []string                  // what each queued statement does, for errors
	done  []func(pgconn.CommandTag) // optional, called with each statement's tag
	rows  []func([][]byte)          // optional, called with each row it returns (text)
}

func (p *pipeline) queue(ctx context.Context, sql string, args [][]byte, what string) error {
	return p.queueTagged(ctx, sql, args, what, nil)
}

// queueTagged queues a statement; done, if not nil, receives its command tag.
func (p *pipeline) queueTagged(ctx context.Context, sql string, args [][]byte, what string, done func(pgconn.CommandTag)) error {
	return p.queueRows(ctx, sql, args, what, done, nil)
}

// queueRows queues a statement; done and rows, when not nil, receive its
// command tag and each row it returns, in text.
func (p *pipeline) queueRows(ctx context.Context, sql string, args [][]byte, what string, done func(pgconn.CommandTag), rows func([][]byte)) error {
	name, err := p.s.prepare(ctx, sql)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// nil formats: all parameters and results in text.
	p.batch.ExecPrepared(name, args, nil, nil)
	p.what = append(p.what, what)
	p.done = append(p.done, done)
	p.rows = append(p.rows, rows)
	if len(p.what) >= maxPipeline {
		return p.flush(ctx)
	}
	return nil
}

// flush runs the queued statements.
func (p *pipeline) flush(ctx context.Context) error {
	if len(p.what) == 0 {
		return nil
	}
	what, done, rows := p.what, p.done, p.rows
	mrr := p.s.conn.PgConn().ExecBatch(ctx, &p.batch)
	p.batch, p.what, p.done, p.rows = pgconn.Batch{}, nil, nil, nil
	i := 0
	for ; mrr.NextResult(); i++ {
		rr := mrr.ResultReader()
		for rows[i] != nil && rr.NextRow() {
			rows[i](rr.Values())
		}
		tag, err := rr.Close()
		if err != nil {
			mrr.Close()
			return fmt.Errorf("%s: %w", what[i], err)
		}
		if done[i] != nil {
			done[i](tag)
		}
	}
	if err := mrr.Close(); err != nil {
		return fmt.Errorf("%s: %w", what[min(i, len(what)-1)], err)
	}
	return nil
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
// out (NULL).
func upsertStmt(ts *tableSQL, row change.Row, carried [][]byte) (string, [][]byte) {
	ins := make([]bool, len(row))
	set := make([]bool, len(row))
	args := make([][]byte, 0, len(row))
	for i, v := range row {
		switch {
		case !v.Unchanged:
			ins[i], set[i] = true, !ts.isKey[i]
			args = append(args, valueArg(v))
		case carried != nil:
			ins[i] = true
			args = append(args, carried[i])
		}
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
