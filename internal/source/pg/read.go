package pg

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/source"
)

// ReadTimeouts bound every transaction tidemark opens on the source. Each
// is set with SET LOCAL at the transaction's start, so it holds for that
// transaction only, whatever the server's or the role's defaults are:
// statement_timeout, lock_timeout, idle_in_transaction_session_timeout.
type ReadTimeouts = source.ReadTimeouts

// DefaultReadTimeouts are the timeouts of a source whose configuration
// names none (docs/config.md).
var DefaultReadTimeouts = source.DefaultReadTimeouts

// setLocal is the statements that set the timeouts for one transaction.
// The values are whole milliseconds tidemark formats itself.
func setLocal(t ReadTimeouts) string {
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	return "SET LOCAL statement_timeout = " + ms(t.Statement) +
		"; SET LOCAL lock_timeout = " + ms(t.Lock) +
		"; SET LOCAL idle_in_transaction_session_timeout = " + ms(t.IdleInTransaction)
}

// readTx is a read-only transaction on the source, opened by beginRead.
// It only ever ends with ROLLBACK: nothing a read did, whatever SQL ran in
// it, is committed.
type readTx struct {
	conn *pgx.Conn
}

// Isolation levels of a read.
const (
	readCommitted  = "READ COMMITTED"
	repeatableRead = "REPEATABLE READ"
)

// beginRead opens a read-only transaction at isolation level iso on conn,
// its timeouts set with SET LOCAL, in one round trip. Every transaction
// tidemark opens on the source goes through it; the caller ends it with
// rollback, whatever happened.
func beginRead(ctx context.Context, conn *pgx.Conn, iso string, t ReadTimeouts) (*readTx, error) {
	sql := "BEGIN ISOLATION LEVEL " + iso + " READ ONLY; " + setLocal(t.OrDefault())
	if _, err := conn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		// A BEGIN that went through before the error leaves the
		// transaction open: end it.
		if conn.PgConn().TxStatus() != 'I' {
			(&readTx{conn: conn}).rollback(ctx)
		}
		return nil, fmt.Errorf("begin read: %w", err)
	}
	return &readTx{conn: conn}, nil
}

// rollback ends the transaction. A connection where that fails is closed,
// so that the pool drops it rather than lend it with a transaction open.
func (tx *readTx) rollback(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resetTimeout)
	defer cancel()
	if _, err := tx.conn.PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		tx.conn.Close(ctx)
	}
}

func (tx *readTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return tx.conn.Query(ctx, sql, args...)
}

func (tx *readTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return tx.conn.QueryRow(ctx, sql, args...)
}

// pgConn is the transaction's wire connection, for reads that take the
// server's text output as it comes.
func (tx *readTx) pgConn() *pgconn.PgConn { return tx.conn.PgConn() }

// read runs fn in a read transaction (READ COMMITTED) on a pooled
// connection.
func (s *Source) read(ctx context.Context, fn func(q queryer) error) error {
	return s.readAt(ctx, readCommitted, func(tx *readTx) error { return fn(tx) })
}

// readAt runs fn in a read transaction at isolation level iso on a pooled
// connection, and rolls it back.
func (s *Source) readAt(ctx context.Context, iso string, fn func(tx *readTx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx, err := beginRead(ctx, conn.Conn(), iso, s.cfg.Timeouts)
	if err != nil {
		return err
	}
	defer tx.rollback(ctx)
	return fn(tx)
}

// write runs one statement that changes the source (the publication, the
// slot) in a transaction of its own with the same timeouts, and commits it.
// A connection left in a transaction by a failure is dropped by the pool.
func (s *Source) write(ctx context.Context, sql string, args ...any) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	c := conn.Conn()
	if _, err := c.PgConn().Exec(ctx, "BEGIN; "+setLocal(s.cfg.Timeouts.OrDefault())).ReadAll(); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		(&readTx{conn: c}).rollback(ctx)
		return err
	}
	_, err = c.PgConn().Exec(ctx, "COMMIT").ReadAll()
	return err
}
