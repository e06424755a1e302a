// Package sqlite is a sink.Sink writing to a SQLite database file.
//
// Tables are named after the source table ("orders" for public.orders,
// "sales.lines" as one identifier otherwise). Values are stored natively
// where that is lossless (integers, booleans, finite floats, bytea) and as
// PostgreSQL's text form otherwise; ReadRange gives back exactly the text
// that went in. See docs/type-mapping.md. The checkpoint lives in the
// tables _tidemark_checkpoint and _tidemark_cursor.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/collate"
	"github.com/tidemark/tidemark/internal/sink"

	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// Connection settings: WAL for readers alongside the writer, FULL sync so a
// committed checkpoint survives power loss, a busy timeout for other
// processes reading the file, and BEGIN IMMEDIATE so a batch takes the write
// lock up front instead of failing to upgrade half way.
const dsnParams = "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate"

// Sink writes to one SQLite file; like every sink it is used by one
// goroutine at a time.
type Sink struct {
	db     *sql.DB
	turn   *fileTurn // taken for each write (turns.go)
	closed sync.Once
	tables *sink.ShapeCache[*tableSQL]
	omit   *sink.Omitter             // the generated columns SQLite computes
	claims map[string]change.TableID // folded destination name → source table, see checkNames
}

var _ sink.Sink = (*Sink)(nil)

// Open opens (creating if needed) the database file at path and its
// checkpoint tables.
func Open(ctx context.Context, path string) (*Sink, error) {
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open sqlite sink %q: the path may not contain '?'", path)
	}
	db, err := sql.Open("sqlite", path+dsnParams)
	if err != nil {
		return nil, fmt.Errorf("open sqlite sink %q: %w", path, err)
	}
	// One connection: the sink has one user, and SQLite one writer.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s := &Sink{db: db, turn: joinTurns(path), tables: sink.NewShapeCache(newTableSQL), omit: sink.NewOmitter(computes)}
	err = s.inTurn(ctx, func() error {
		for _, ddl := range checkpointDDL {
			if _, err := db.ExecContext(ctx, ddl); err != nil {
				return fmt.Errorf("create checkpoint tables: %w", err)
			}
		}
		return ensureResumeColumn(ctx, db)
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite sink %q: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Sink) Close() error {
	s.closed.Do(s.turn.leave)
	return s.db.Close()
}

// querier runs queries: the database itself, or a txn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// txn runs the statements of one batch in its transaction, preparing each
// distinct statement once per transaction (Commit and Rollback close them).
type txn struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (t *txn) prepare(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	t.stmts[query] = st
	return st, nil
}

func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.prepare(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.prepare(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// table returns the statement builder of t.
func (s *Sink) table(t *change.Table) (*tableSQL, error) { return s.tables.Get(t) }

// EnsureTable creates the table unless it exists, with the declared types of
// the storage mapping and the key as primary key.
func (s *Sink) EnsureTable(ctx context.Context, t *change.Table) error {
	if err := checkKeyOrder(t); err != nil {
		return err
	}
	if err := s.checkNames(ctx, t); err != nil {
		return err
	}
	ts, err := s.table(t)
	if err != nil {
		return fmt.Errorf("ensure table %s: %w", t.ID, err)
	}
	err = s.inTurn(ctx, func() error {
		_, err := s.db.ExecContext(ctx, ts.createSQL())
		return err
	})
	if err != nil {
		return fmt.Errorf("ensure table %s: %w", t.ID, err)
	}
	return nil
}

// ReadRange returns the rows whose key lies in (low, high], in key order
// (SQLite's: see docs/type-mapping.md), as PostgreSQL text values.
func (s *Sink) ReadRange(ctx context.Context, t *change.Table, low, high change.Key) ([]change.Row, error) {
	ts, err := s.table(t)
	if err != nil {
		return nil, fmt.Errorf("read range of %s: %w", t.ID, err)
	}
	var rows []change.Row
	err = scanRange(ctx, s.db, ts, ts.all(), low, high, func(vals []any) { rows = append(rows, ts.decodeRow(vals)) })
	if err != nil {
		return nil, fmt.Errorf("read range of %s: %w", t.ID, err)
	}
	return rows, nil
}

// ReadKeys returns the rows with the given keys that the table holds.
func (s *Sink) ReadKeys(ctx context.Context, t *change.Table, keys []change.Key) ([]change.Row, error) {
	ts, err := s.table(t)
	if err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", t.ID, err)
	}
	stmt, err := s.db.PrepareContext(ctx, ts.selectByKeySQL(ts.all()))
	if err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", t.ID, err)
	}
	defer stmt.Close()
	var out []change.Row
	for _, k := range keys {
		row, err := readKey(ctx, stmt, ts, k)
		if err != nil {
			return nil, fmt.Errorf("read keys of %s: %w", t.ID, err)
		}
		if row != nil {
			out = append(out, row)
		}
	}
	return out, nil
}

// readKey returns the row with key k, nil when there is none.
func readKey(ctx context.Context, stmt *sql.Stmt, ts *tableSQL, k change.Key) (change.Row, error) {
	rows, err := stmt.QueryContext(ctx, ts.keyArgs(k)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals, err := scanValues(rows, len(ts.cols))
	if err != nil {
		return nil, err
	}
	return ts.decodeRow(vals), nil
}

// all lists every column's index.
func (ts *tableSQL) all() []int {
	all := make([]int, len(ts.cols))
	for i := range all {
		all[i] = i
	}
	return all
}

// decodeRow turns every column's stored value into source text.
func (ts *tableSQL) decodeRow(vals []any) change.Row {
	row := make(change.Row, len(vals))
	for i, v := range vals {
		row[i] = decode(ts.kinds[i], v)
	}
	return row
}

// scanRange calls fn with the stored values of the cols columns (indexes)
// of each row in (low, high], in key order.
func scanRange(ctx context.Context, q querier, ts *tableSQL, cols []int, low, high change.Key, fn func([]any)) error {
	query := ts.selectRangeSQL(cols, low != nil, high != nil)
	rows, err := q.QueryContext(ctx, query, append(ts.keyArgs(low), ts.keyArgs(high)...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := scanValues(rows, len(cols))
		if err != nil {
			return err
		}
		fn(vals)
	}
	return rows.Err()
}

// scanValues reads the current row's n values as stored.
func scanValues(rows *sql.Rows, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, rows.Scan(ptrs...)
}

// keyArgs encodes a key's values as the key columns store them.
func (ts *tableSQL) keyArgs(k change.Key) []any {
	args := make([]any, len(k))
	for i, v := range k {
		args[i] = encode(ts.kinds[ts.key[i]], v)
	}
	return args
}

// checkKeyOrder refuses keys SQLite would compare in another order than
// the source: chunk ranges would then delete rows of other chunks. SQLite
// reproduces the order of integers (stored as INTEGER), uuids (canonical
// text sorts like their bytes), and text whose collation sorts like bytes
// or is one of package collate's.
func checkKeyOrder(t *change.Table) error {
	for _, c := range t.KeyColumns() {
		switch {
		case change.TagOf(c).Integer() || change.TagOf(c) == change.TagUUID:
		default:
			if _, ok := sourceCollation(c); ok {
				continue
			}
			return fmt.Errorf("table %s: key column %q (%s, collation %q): %w: SQLite destinations order integer, uuid and C-collated text keys, and MySQL text keys under %s; use a PostgreSQL destination, or name other key columns under keys: in the config", t.ID, c.Name, c.Type, c.Collation, sink.ErrKeyOrder, strings.Join(collate.Names(), ", "))
		}
	}
	return nil
}
