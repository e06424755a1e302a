// Package store is tidemark's metadata store: stream states, per-table object
// status, backfill runs and daily event counters.
//
// There is one implementation over database/sql with a small dialect seam
// (see dialect.go). SQLite (modernc.org/sqlite, cgo-free) is the default;
// PostgreSQL is used when Open is given a postgres:// or postgresql:// URL.
// Both get the same schema from embedded, numbered migrations, and every query
// is written once with ? placeholders, rebound to $n for PostgreSQL.
//
// Times are stored in UTC (RFC 3339 text in SQLite, timestamptz in
// PostgreSQL) with microsecond precision, and are returned in UTC.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib" // also the database/sql driver "pgx"
	_ "modernc.org/sqlite"           // database/sql driver "sqlite"
)

// ErrNotFound is returned (wrapped) when a stream, object or backfill does
// not exist. Test for it with errors.Is.
var ErrNotFound = errors.New("not found")

// Stream states.
const (
	StateNotStarted = "not_started"
	StateStarting   = "starting"
	StateRunning    = "running"
	StateRetrying   = "retrying"
	StatePaused     = "paused"
	StateFailed     = "failed"
)

// Object and backfill statuses. An object's status may also be "" (shown as
// "-"), meaning no backfill applies; Object.Reason says why.
const (
	StatusNone      = ""
	StatusPending   = "pending"
	StatusActive    = "active"
	StatusCompleted = "completed"
	StatusStopped   = "stopped"
	StatusFailed    = "failed"
)

// Who started a backfill. The API uses "api" or "api:<token name>".
const (
	StartedByAutomatic = "automatic"
	StartedByCLI       = "cli"
	StartedByAPI       = "api"
)

// acceptedURLs is appended to every URL error.
const acceptedURLs = `accepted forms: "sqlite:///abs/path.db", "sqlite://relative/path.db", a plain file path such as "tidemark.db", or "postgres://user:pass@host:5432/db" (also "postgresql://")`

// Store is the metadata store. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	d   *dialect
	obs atomic.Pointer[Observer]
	// fence, when set, is checked by every batch write (cluster.go).
	fence atomic.Pointer[leaseFence]
	// url is what Open was given and dsn the driver's form of it; file is
	// the SQLite database file ("" for PostgreSQL). Claim uses them.
	url, dsn, file string
}

// Open opens (creating if needed) the store at url and brings its schema up to
// date. url is one of:
//
//	sqlite:///abs/path.db      SQLite, absolute path
//	sqlite://relative/path.db  SQLite, path relative to the working directory
//	path/to/file.db            SQLite, a plain path
//	postgres://… postgresql://… PostgreSQL
func Open(ctx context.Context, url string, options ...Option) (*Store, error) {
	var set openSettings
	for _, o := range options {
		o(&set)
	}
	d, dsn, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	db, err := openDB(d, dsn, set)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", d.name, err)
	}
	if d.name == dialectSQLite {
		// One connection: SQLite has one writer anyway, and this keeps
		// transactions from queueing on busy_timeout inside this process.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	}
	if d.name == dialectPostgres {
		// The batch engine and a cluster node's worker write from many
		// goroutines: keep their connections rather than reopen them.
		db.SetMaxIdleConns(8)
	}
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s store %s: %w", d.name, redact(url), err)
	}
	s := &Store{db: db, d: d, url: url, dsn: dsn}
	if d.name == dialectSQLite {
		s.file, _, _ = strings.Cut(dsn, "?")
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s store %s: %w", d.name, redact(url), err)
	}
	return s, nil
}

// Option tunes Open.
type Option func(*openSettings)

type openSettings struct {
	idleInTransaction time.Duration
}

// IdleTransactionLimit has a PostgreSQL store end a session that sits idle
// inside a transaction for longer than d. A cluster node sets it to its
// lease: a node frozen (SIGSTOP, a stalled VM) in the middle of a fenced
// write holds the lease row's share lock, and without this no other node
// could take the lease over until it woke. SQLite ignores it.
func IdleTransactionLimit(d time.Duration) Option {
	return func(s *openSettings) { s.idleInTransaction = d }
}

// openDB opens the pool, with the session settings of set on PostgreSQL.
func openDB(d *dialect, dsn string, set openSettings) (*sql.DB, error) {
	if d.name != dialectPostgres || set.idleInTransaction <= 0 {
		return sql.Open(d.driver, dsn)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("cannot parse the connection string") // it may hold a password
	}
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(set.idleInTransaction.Milliseconds(), 10)
	return stdlib.OpenDB(*cfg), nil
}

// ping opens the first connection. SQLite can answer SQLITE_BUSY at once,
// without waiting out busy_timeout, while another process switches a fresh
// file to WAL mode; that passes, so it is retried for a while.
func ping(ctx context.Context, db *sql.DB) error {
	var err error
	for attempt := 1; attempt <= 50; attempt++ {
		if err = db.PingContext(ctx); err == nil || !isBusy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
	return err
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (code 5, with any
// extended code).
func isBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5
}

// Close closes the database handle.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Dialect reports the backing database: "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// parseURL picks the dialect for url and returns the driver DSN.
func parseURL(url string) (*dialect, string, error) {
	u := strings.TrimSpace(url)
	if u == "" {
		return nil, "", fmt.Errorf("store URL is empty; %s", acceptedURLs)
	}
	scheme, rest, hasScheme := strings.Cut(u, "://")
	if hasScheme {
		switch strings.ToLower(scheme) {
		case "postgres", "postgresql":
			return postgresDialect, u, nil
		case "sqlite", "sqlite3":
			return sqliteFile(rest, url)
		default:
			return nil, "", fmt.Errorf("store URL %s: unsupported scheme %q; %s", redact(url), scheme, acceptedURLs)
		}
	}
	lower := strings.ToLower(u)
	for _, p := range []string{"postgres:", "postgresql:", "sqlite:", "sqlite3:"} {
		if strings.HasPrefix(lower, p) {
			return nil, "", fmt.Errorf("store URL %q: missing \"//\" after %q; %s", url, p, acceptedURLs)
		}
	}
	if looksLikeKeywordDSN(u) {
		return nil, "", fmt.Errorf("store URL %s looks like a PostgreSQL keyword/value string, which is not supported; %s", redact(url), acceptedURLs)
	}
	return sqliteFile(u, url)
}

// sqliteFile builds a modernc.org/sqlite DSN for a file path.
func sqliteFile(path, url string) (*dialect, string, error) {
	if path == "" {
		return nil, "", fmt.Errorf("store URL %q: no database file path; %s", url, acceptedURLs)
	}
	if strings.ContainsAny(path, "?#") {
		return nil, "", fmt.Errorf("store URL %q: query parameters and fragments are not supported for SQLite; %s", url, acceptedURLs)
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, "", fmt.Errorf("store URL %q: SQLite needs a database file path; %s", url, acceptedURLs)
	}
	// busy_timeout first (the driver orders it so), then WAL and foreign keys.
	// A 64 MiB page cache (the default is 2 MiB) and statement journals in
	// memory: a backfill's bulk insert otherwise spills index pages and
	// writes a statement journal file per multi-row INSERT (a 730,000-instance
	// backfill recorded in 12.5 s becomes 9.0 s).
	// _txlock=immediate takes the write lock at BEGIN, so a transaction never
	// fails upgrading a read lock when another process writes the same file.
	dsn := path + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)" +
		"&_pragma=cache_size(-65536)&_pragma=temp_store(2)&_txlock=immediate"
	return sqliteDialect, dsn, nil
}

// looksLikeKeywordDSN reports whether s is a libpq "host=… dbname=…" string
// rather than a file path.
func looksLikeKeywordDSN(s string) bool {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		k, _, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return false
		}
	}
	for _, k := range []string{"host=", "dbname=", "user=", "port=", "password=", "sslmode="} {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// redact hides the password of a URL so it can go into error messages.
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return fmt.Sprintf("%q", url)
	}
	hostEnd := strings.IndexAny(rest, "/?#")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	auth := rest[:hostEnd]
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return fmt.Sprintf("%q", url)
	}
	user, _, hasPass := strings.Cut(auth[:at], ":")
	if hasPass {
		user += ":xxxxx"
	}
	return fmt.Sprintf("%q", scheme+"://"+user+auth[at:]+rest[hostEnd:])
}

// Small wrappers that rebind ? placeholders for the dialect.

func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	defer s.timedQuery(q, time.Now())
	if f := s.writeFenceOf(ctx); f != nil {
		var res sql.Result
		err := s.fencedTx(ctx, f, func(tx *sql.Tx) (err error) {
			res, err = tx.ExecContext(ctx, s.d.rebind(q), args...)
			return err
		})
		return res, err
	}
	return s.db.ExecContext(ctx, s.d.rebind(q), args...)
}

// insertID runs an INSERT … RETURNING "id" and returns the id.
func (s *Store) insertID(ctx context.Context, q string, args ...any) (int64, error) {
	defer s.timedQuery(q, time.Now())
	var id int64
	if f := s.writeFenceOf(ctx); f != nil {
		err := s.fencedTx(ctx, f, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, s.d.rebind(q), args...).Scan(&id)
		})
		return id, err
	}
	err := s.db.QueryRowContext(ctx, s.d.rebind(q), args...).Scan(&id)
	return id, err
}

func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	defer s.timedQuery(q, time.Now())
	return s.db.QueryContext(ctx, s.d.rebind(q), args...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	defer s.timedQuery(q, time.Now())
	return s.db.QueryRowContext(ctx, s.d.rebind(q), args...)
}

// now is the store's clock, truncated to the precision both dialects keep.
func now() time.Time { return normTime(time.Now()) }

// normTime returns t in UTC at microsecond precision, which is what both
// dialects store, so values round-trip exactly.
func normTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
