package check

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrBadDSN is the error of a DSN that does not parse.
var ErrBadDSN = errors.New("cannot parse the DSN")

// PostgresConfig parses a PostgreSQL DSN for a connection named in
// application name tidemark-doctor. Its error never quotes the DSN: a parse
// error may hold it, password included.
func PostgresConfig(dsn string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, ErrBadDSN
	}
	cc.RuntimeParams["application_name"] = "tidemark-doctor"
	return cc, nil
}

// ConnectPostgres opens a PostgreSQL connection within Timeout.
func ConnectPostgres(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cc, err := PostgresConfig(dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return nil, &connectError{msg: fmt.Sprintf("cannot connect to %s: no answer within %s", Where(cc), Timeout), err: err}
	}
	if err != nil {
		// pgx's message repeats the user and database; what it wraps
		// says what went wrong at each address.
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) && errors.Unwrap(ce) != nil {
			err = errors.Unwrap(ce)
		}
		shown := error(err)
		if refusal := ServerRefusal(err); refusal != nil {
			shown = refusal
		}
		return nil, &connectError{msg: "cannot connect to " + Where(cc) + ": " + ErrText(shown), err: err}
	}
	return conn, nil
}

// ServerRefusal is the server's own refusal inside a failed connection (a
// wrong password, an unknown role or database), or nil when none answered.
// Under sslmode=prefer (the default) pgx first asks for TLS and lists that
// attempt's "server refused TLS connection" before the refusal that
// matters, which then read like a TLS problem.
func ServerRefusal(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// connectError is a failed connection, its message on one line.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// Where names a server and database without the password.
func Where(cc *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s as %s", cc.Host, cc.Port, cc.Database, cc.User)
}

// ClosePostgres closes a connection, bounded by Timeout.
func ClosePostgres(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn.Close(ctx)
}

// PostgresConnectFix says what to do about a failed connection; key is the
// configuration key of the DSN.
func PostgresConnectFix(err error, key string) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return "check the user and password in " + key + " and the server's pg_hba.conf"
	case errors.As(err, &pgErr) && pgErr.Code == "3D000":
		return "the database does not exist: fix the database name in " + key + " or create it (CREATE DATABASE)"
	case errors.As(err, &pgErr):
		return "fix " + key + " or the server's settings for this user"
	case errors.Is(err, ErrBadDSN):
		return "fix " + key + ": write postgres://user:password@host:5432/dbname, percent-encoding special characters"
	}
	return "check the host and port in " + key + ", that the server runs and listens there (listen_addresses, port) and that no firewall is in the way"
}
