// Package postgres is a sink.Sink writing to a PostgreSQL database.
//
// Values stay in PostgreSQL's text representation all the way: they are
// bound as untyped text parameters (or COPY text) so the destination's own
// input functions parse them, and read back in text format. The session
// settings below make the destination print values exactly as the source
// printed them. Destination tables use the source's column types (see
// docs/type-mapping.md); the checkpoint lives in schema _tidemark.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// sessionParams make text output match the source's (which runs with the
// same settings): UTC ISO timestamps, postgres intervals, shortest-exact
// floats; and text travels as UTF-8, as tidemark holds it, whatever the
// database's encoding (left unset, the session took the database's, and a
// LATIN1 database stored UTF-8 bytes as two characters each).
var sessionParams = map[string]string{
	"TimeZone":           "UTC",
	"DateStyle":          "ISO",
	"IntervalStyle":      "postgres",
	"extra_float_digits": "1",
	"client_encoding":    "UTF8",
}

// Sink writes to one PostgreSQL database over a single connection; like every
// sink it is used by one goroutine at a time. The ranges verify sums in
// snapshots (SumLater) run on a small pool of their own, in the
// background.
type Sink struct {
	cfg     *pgx.ConnConfig
	conn    *pgx.Conn
	stmts   map[string]string // SQL -> prepared statement name, per connection
	staging stagingTables     // staging tables on this connection
	tables  *sink.ShapeCache[*tableSQL]
	omit    *sink.Omitter // the generated columns the destination computes
	// destTypes are the destination's column types as the sink last saw
	// them: binary values need the source's (binary.go). A chunk lane
	// shares its sink's: its chunks teach what TakesBinary answers.
	destTypes *destTypes
	fence     fence // the stream's owner epoch every batch checks (fence.go)
	// resolved caches the destination types that source types resolved
	// to (resolveType).
	resolved map[resolveKey]resolvedType
	schemas  map[string]bool // schemas known to exist (ensureSchema)
	// justCreated is the table EnsureTable last made, until the check of
	// it that follows (CheckTable) or another change of shape. It is the
	// caller's shape, by pointer: a caller does not change a described
	// table in place (a changed shape is a new *change.Table).
	justCreated *change.Table
	// sumPool is where ranges are summed in snapshots (SumLater); nil
	// until the first.
	sumPool *pgxpool.Pool
}

var _ sink.Sink = (*Sink)(nil)

// Open connects to the destination and creates the checkpoint tables if they
// are missing.
func Open(ctx context.Context, dsn string) (*Sink, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// The DSN may hold a password: do not echo it.
		return nil, errors.New("postgres sink: cannot parse the connection string")
	}
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	s := &Sink{cfg: cfg, tables: sink.NewShapeCache(newTableSQL), omit: sink.NewOmitter(computes), destTypes: &destTypes{}}
	if err := s.ensureConn(ctx); err != nil {
		return nil, err
	}
	if err := s.ensureCheckpointTables(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ensureConn (re)connects when there is no live connection, so that a sink
// survives a dropped connection: the caller retries the batch.
func (s *Sink) ensureConn(ctx context.Context) error {
	if s.conn != nil && !s.conn.IsClosed() {
		return nil
	}
	if s.conn != nil {
		s.conn.Close(ctx)
	}
	conn, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		return fmt.Errorf("connect to postgres sink %s:%d/%s: %w", s.cfg.Host, s.cfg.Port, s.cfg.Database, err)
	}
	s.conn = conn
	s.stmts = make(map[string]string)
	s.staging = stagingTables{}
	return nil
}

// Close closes the connections.
func (s *Sink) Close() error {
	if s.sumPool != nil {
		s.sumPool.Close()
		s.sumPool = nil
	}
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close(context.Background())
	s.conn = nil
	return err
}

// prepare returns the name of a prepared statement for sql on the current
// connection (statementName).
func (s *Sink) prepare(ctx context.Context, sql string) (string, error) {
	return s.prepareTyped(ctx, sql, nil)
}

// prepareTyped is prepare with parameter types: oids (nil: all 0). A
// parameter of type 0 is left untyped: the server infers it from the
// column it meets, and its input function parses our text.
func (s *Sink) prepareTyped(ctx context.Context, sql string, oids []uint32) (string, error) {
	key := sql
	if oids != nil {
		key = fmt.Sprint(oids) + sql
	}
	if name, ok := s.stmts[key]; ok {
		return name, nil
	}
	name := statementName(key)
	if _, err := s.conn.PgConn().Prepare(ctx, name, sql, oids); err != nil {
		return "", fmt.Errorf("prepare %q: %w", sql, err)
	}
	s.stmts[key] = name
	return name, nil
}

// statementName names sql's prepared statement: derived from the SQL,
// because the server truncates statement names to NAMEDATALEN.
func statementName(sql string) string {
	h := sha256.Sum256([]byte(sql))
	return "tidemark_" + hex.EncodeToString(h[:16])
}

// table returns the statement builder of t.
func (s *Sink) table(t *change.Table) (*tableSQL, error) { return s.tables.Get(t) }

// exists reports whether a relation (given as a quoted, qualified name) exists.
func (s *Sink) exists(ctx context.Context, qualified string) (bool, error) {
	var ok bool
	err := s.conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qualified).Scan(&ok)
	return ok, err
}

// ensureSchema creates a schema unless it exists. It looks first because
// CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege even when the
// schema is already there.
func (s *Sink) ensureSchema(ctx context.Context, name string) error {
	if s.schemas[name] {
		return nil // a stream of many tables in one schema asks once
	}
	if err := s.lookUpSchema(ctx, name); err != nil {
		return err
	}
	if s.schemas == nil {
		s.schemas = map[string]bool{}
	}
	s.schemas[name] = true
	return nil
}

func (s *Sink) lookUpSchema(ctx context.Context, name string) error {
	var ok bool
	if err := s.conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok); err != nil {
		return fmt.Errorf("look up schema %s: %w", name, err)
	}
	if ok {
		return nil
	}
	if _, err := s.conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quote(name)); err != nil && !madeMeanwhile(err, "") {
		return fmt.Errorf("create schema %s: %w", name, err)
	}
	return nil
}

var _ sink.ChunkLaner = (*Sink)(nil)

// ChunkLane opens another writer on a connection of its own, under this
// sink's fence (taken already: the lane does not take it again, which
// would end this sink's session). Its caches are its own but for the
// destination's column types, which all of them keep.
func (s *Sink) ChunkLane(ctx context.Context) (sink.Sink, error) {
	l := &Sink{cfg: s.cfg.Copy(), tables: sink.NewShapeCache(newTableSQL), omit: sink.NewOmitter(computes), fence: s.fence,
		destTypes: s.destTypes}
	if err := l.ensureConn(ctx); err != nil {
		return nil, err
	}
	return l, nil
}
