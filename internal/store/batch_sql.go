package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrTaskTimeBusy is returned (wrapped) when a write would leave two
// instances of one task's cycle (task, business time) running at once,
// counting the recurring schedule and every backfill. Test for it with
// errors.Is.
var ErrTaskTimeBusy = errors.New("another instance of this task and business time is running")

// batchInstancesLockKey is the PostgreSQL advisory lock ("tidemarl" in ASCII,
// one above the migration lock) held, to commit, by every transaction that
// inserts batch instances: they assign ids as MAX("id") + 1. SQLite's BEGIN
// IMMEDIATE (the DSN's _txlock) already takes the database write lock.
const batchInstancesLockKey = 7594876915033286508

// Rows per multi-row INSERT statement. Measured on SQLite, larger
// statements of instances are slower, not faster: 730,000 instances of
// 2,000 tasks took 19 s at 500 rows a statement, 11 s at 256
// (BenchmarkCreateBatchBackfill), the difference spent in SQLite's
// statement journal (docs/benchmark.md, "Smaller INSERTs on SQLite").
const (
	batchInstanceRowsPerInsert = 256  // × 25 columns = 6,400 parameters (× 14 lean ones, 3,584)
	batchDepRowsPerInsert      = 1000 // × 2 columns
)

// batchRunningIndex is the partial unique index on running instances.
const batchRunningIndex = "batch_instances_running_uniq"

// isBatchRunningConflict reports whether err is a violation of batchRunningIndex.
func isBatchRunningConflict(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505" && pe.ConstraintName == batchRunningIndex
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		// SQLite names the columns, not the index; batchRunningIndex lists them
		// in an order no other unique index uses.
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE &&
			strings.Contains(se.Error(), `batch_instances.biz_time, batch_instances.task`)
	}
	return false
}

// batchBusyErr wraps err with ErrTaskTimeBusy when it is a running-index conflict.
func batchBusyErr(err error) error {
	if isBatchRunningConflict(err) {
		return fmt.Errorf("%w: %w", ErrTaskTimeBusy, err)
	}
	return err
}

// batchWriteTx runs f in a read-write transaction. With lockInstances it first
// takes the lock that serialises inserts into "batch_instances" (PostgreSQL;
// on SQLite the transaction already holds the database write lock).
// When FenceBatchWrites set a fence, the transaction last checks that this
// node still holds the batch engine's lease (last: its share lock on the
// lease row then lasts only through the commit, not the whole write).
func (s *Store) batchWriteTx(ctx context.Context, lockInstances bool, f func(*sql.Tx) error) (err error) {
	return s.writeTx(ctx, "tx batch_write", s.batchTxBody(ctx, lockInstances, f))
}

// batchWriteConnTx is batchWriteTx that also hands f the transaction's
// connection, for bulkInsert's COPY.
func (s *Store) batchWriteConnTx(ctx context.Context, lockInstances bool, f func(*sql.Conn, *sql.Tx) error) error {
	return s.writeConnTx(ctx, "tx batch_write", func(conn *sql.Conn, tx *sql.Tx) error {
		return s.batchTxBody(ctx, lockInstances, func(tx *sql.Tx) error { return f(conn, tx) })(tx)
	})
}

// batchTxBody is f inside batchWriteTx's lock and fence check.
func (s *Store) batchTxBody(ctx context.Context, lockInstances bool, f func(*sql.Tx) error) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		if lockInstances && s.d.name == dialectPostgres {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(`+fmt.Sprint(batchInstancesLockKey)+`)`); err != nil {
				return fmt.Errorf("lock batch instances: %w", err)
			}
		}
		if err := f(tx); err != nil {
			return err
		}
		return s.checkFenceTx(ctx, tx)
	}
}

// writeTx runs f in a read-write transaction, committed when f succeeds.
func (s *Store) writeTx(ctx context.Context, timer string, f func(*sql.Tx) error) error {
	defer s.timed(timer, time.Now())
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	return commitUnlessErr(tx, f)
}

// writeConnTx is writeTx on a connection taken for it, which f also gets:
// only a bulk COPY needs it, so other writes do not pay for taking one.
func (s *Store) writeConnTx(ctx context.Context, timer string, f func(*sql.Conn, *sql.Tx) error) error {
	defer s.timed(timer, time.Now())
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	return commitUnlessErr(tx, func(tx *sql.Tx) error { return f(conn, tx) })
}

// commitUnlessErr runs f in tx and commits, or rolls back when f fails.
func commitUnlessErr(tx *sql.Tx, f func(*sql.Tx) error) (err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// batchReadTx runs f in a read-only transaction that sees one snapshot.
func (s *Store) batchReadTx(ctx context.Context, f func(*sql.Tx) error) (err error) {
	defer s.timed("tx batch_read", time.Now())
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d.name == dialectPostgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		// Read-only: nothing to keep, so always roll back.
		err = errors.Join(err, ignoreDone(tx.Rollback()))
	}()
	return f(tx)
}

// batchPlaceholders returns "(?, ?, …), (?, ?, …)…": rows groups of cols.
func batchPlaceholders(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	var b strings.Builder
	b.Grow(rows * (len(one) + 2))
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	return b.String()
}

// batchInList returns "?, ?, …" for n values.
func batchInList(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// bulkInsert inserts n rows into table (unquoted) in tx, the transaction
// of conn: on PostgreSQL with one COPY (binary, several times faster than
// multi-row INSERTs), on SQLite with batchBulkInsert's statements of
// perStmt rows. fill appends row i's values, in cols' order, to args.
func (s *Store) bulkInsert(ctx context.Context, conn *sql.Conn, tx *sql.Tx, table string, cols []string, perStmt, n int, fill func(args []any, i int) []any) error {
	if s.d.name != dialectPostgres {
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = `"` + c + `"`
		}
		return s.batchBulkInsert(ctx, tx, `"`+table+`"`, strings.Join(quoted, ", "), len(cols), perStmt, n, fill, "")
	}
	if n == 0 {
		return nil
	}
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("copy into %s: connection is a %T, not pgx's", table, dc)
		}
		row, i := make([]any, 0, len(cols)), 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			row = fill(row[:0], i)
			i++
			return row, nil
		})
		copied, err := pc.Conn().CopyFrom(ctx, pgx.Identifier{table}, cols, src)
		if err == nil && copied != int64(n) {
			err = fmt.Errorf("copied %d rows of %d", copied, n)
		}
		if err != nil {
			return fmt.Errorf("copy into %s: %w", table, err)
		}
		return nil
	})
}

// batchBulkInsert inserts n rows into table with multi-row INSERTs of perStmt
// rows, the full-size statement prepared once. fill appends row i's ncols
// arguments to args; tail ends each statement (an ON CONFLICT clause, or "").
func (s *Store) batchBulkInsert(ctx context.Context, tx *sql.Tx, table, cols string, ncols, perStmt, n int, fill func(args []any, i int) []any, tail string) error {
	if n == 0 {
		return nil
	}
	head := `INSERT INTO ` + table + ` (` + cols + `) VALUES `
	args := make([]any, 0, min(n, perStmt)*ncols)
	var full *sql.Stmt
	if n >= perStmt {
		var err error
		full, err = tx.PrepareContext(ctx, s.d.rebind(head+batchPlaceholders(perStmt, ncols)+tail))
		if err != nil {
			return err
		}
		defer full.Close()
	}
	for start := 0; start < n; start += perStmt {
		end := min(start+perStmt, n)
		args = args[:0]
		for i := start; i < end; i++ {
			args = fill(args, i)
		}
		var err error
		if end-start == perStmt {
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, s.d.rebind(head+batchPlaceholders(end-start, ncols)+tail), args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// batchQuerier is what *sql.DB and *sql.Tx share.
type batchQuerier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}
