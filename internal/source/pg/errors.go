package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/source"
)

// PermanentError is a source error that retrying cannot cure.
type PermanentError = source.PermanentError

// IsPermanent reports whether err needs a person rather than a retry.
func IsPermanent(err error) bool { return source.IsPermanent(err) }

// classify wraps server errors that no retry will cure in PermanentError.
func classify(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err // network and protocol errors are worth a retry
	}
	err = refusedConnect(err, pgErr)
	switch {
	case pgErr.Code == "42501":
		return &PermanentError{Err: err, Hint: "grant the source user REPLICATION and SELECT on the streamed tables (ALTER ROLE … REPLICATION; GRANT SELECT …)"}
	case pgErr.Code == "28P01" || pgErr.Code == "28000":
		return &PermanentError{Err: err, Hint: "the server refused this user or password: correct them in the stream's source dsn, or the role's password or pg_hba.conf on the server"}
	case pgErr.Code == "42P01" || pgErr.Code == "42703":
		return &PermanentError{Err: err, Hint: "the table or a column is gone from the source: check the table, then initiate the backfill again"}
	case pgErr.Code == "3D000":
		return &PermanentError{Err: err, Hint: "the source database does not exist: fix the DSN"}
	case strings.Contains(pgErr.Message, "wal_level"):
		return &PermanentError{Err: err, Hint: "set wal_level = logical on the source and restart it"}
	case strings.Contains(pgErr.Message, "replication slot") && (pgErr.Code == "42704" || strings.Contains(pgErr.Message, "does not exist")):
		return &PermanentError{Err: err, Hint: slotGoneHint}
	case strings.Contains(pgErr.Message, "invalidated") || strings.Contains(pgErr.Message, "can no longer get changes"):
		return &PermanentError{Err: err, Hint: slotGoneHint}
	}
	return err
}

// refusedConnect words a connection the server refused by the server's
// answer alone: pgx's message first lists the TLS attempt sslmode=prefer
// makes ("server refused TLS connection"), which reads like the cause.
func refusedConnect(err error, pgErr *pgconn.PgError) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return err
	}
	return fmt.Errorf("cannot connect to %s:%d/%s as %s: %w", ce.Config.Host, ce.Config.Port, ce.Config.Database, ce.Config.User, pgErr)
}

// slotGoneHint: a reset re-creates the slot and backfills every object
// itself (docs/statuses.md), so the hint does not ask for more.
const slotGoneHint = "the replication slot is gone or invalidated, so changes may have been missed: run `tidemark stream reset STREAM` (the stream's name), which re-creates the slot and backfills every object"

// classifyRead is classify for a chunk read, whose query holds the
// backfill's filter: a server error of a class that does not clear up on
// its own (syntax, names, types, values, unsupported features) fails the
// same way on every retry. A read the server cancelled while ctx was live
// ran into the statement timeout: a StatementTimeoutError.
func classifyRead(ctx context.Context, err error, timeout time.Duration) error {
	err = classify(err)
	var pgErr *pgconn.PgError
	if IsPermanent(err) || !errors.As(err, &pgErr) {
		return err
	}
	if pgErr.Code == codeQueryCanceled && ctx.Err() == nil {
		// Told by the context rather than by the message, whose
		// language is the server's: tidemark cancels a query only by
		// ending its context.
		return &StatementTimeoutError{Err: err, Timeout: timeout}
	}
	if !transientClass(pgErr.Code) {
		return &PermanentError{Err: err, Hint: "the source refused the chunk's query (the backfill's filter, if it has one, or a key column whose type changed): fix it, then initiate the backfill again"}
	}
	return err
}

// codeQueryCanceled is the SQLSTATE of a statement cancelled by the
// statement timeout or a cancel request.
const codeQueryCanceled = "57014"

// codeInvalidParameter is the SQLSTATE of SET TRANSACTION SNAPSHOT naming a
// snapshot that no longer exists (its exporting connection ended):
// "invalid snapshot identifier".
const codeInvalidParameter = "22023"

// codeObjectState is the SQLSTATE of SET TRANSACTION SNAPSHOT while the
// exporting transaction ends ("could not import the requested snapshot").
const codeObjectState = "55000"

// StatementTimeoutError is a read the source cancelled because it ran
// longer than the statement timeout.
type StatementTimeoutError = source.StatementTimeoutError

// IsStatementTimeout reports whether err is a read that ran into the
// statement timeout.
func IsStatementTimeout(err error) bool { return source.IsStatementTimeout(err) }
