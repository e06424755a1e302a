package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgbinary"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source"
)

// Chunk is a run of rows read in key order inside one snapshot.
type Chunk = source.Chunk

// ReadOptions bound a chunk read.
type ReadOptions = source.ReadOptions

// ReadChunk reads up to Limit rows with key in (After, Upto], in key order,
// in a read-only repeatable-read transaction whose snapshot and position are
// returned with the rows. It takes no lock beyond what a SELECT takes.
func (s *Source) ReadChunk(ctx context.Context, t *change.Table, opt ReadOptions) (Chunk, error) {
	dc, err := s.defaultCollation(ctx)
	if err != nil {
		return Chunk{}, err
	}
	return s.inSnapshot(ctx, "read chunk of "+t.ID.String(), func(tx *readTx) (Chunk, error) {
		return readChunk(ctx, tx, t, dc, opt)
	})
}

// inSnapshot runs read in a read-only repeatable-read transaction, its
// error classified as a chunk read's (what names it).
func (s *Source) inSnapshot(ctx context.Context, what string, read func(tx *readTx) (Chunk, error)) (Chunk, error) {
	var chunk Chunk
	err := s.readAt(ctx, repeatableRead, func(tx *readTx) (err error) {
		chunk, err = read(tx)
		return err
	})
	if err != nil {
		return Chunk{}, classifyRead(ctx, fmt.Errorf("%s: %w", what, err), s.cfg.Timeouts.OrDefault().Statement)
	}
	return chunk, nil
}

func readChunk(ctx context.Context, tx *readTx, t *change.Table, dc defaultCollation, opt ReadOptions) (Chunk, error) {
	chunk, err := openChunk(ctx, tx, t, dc)
	if err != nil {
		return Chunk{}, err
	}
	return readRows(ctx, tx, chunk, opt)
}

// readRows reads the rows of a chunk openChunk opened.
func readRows(ctx context.Context, tx *readTx, chunk Chunk, opt ReadOptions) (Chunk, error) {
	t := chunk.Table
	sql, params, picked, err := chunkQuery(t, opt)
	if err != nil {
		return Chunk{}, err
	}
	formats := binaryFormats(t, opt)
	rr := tx.pgConn().ExecParams(ctx, sql, params, nil, nil, formats)
	if opt.Limit > 0 {
		chunk.Rows = make([]change.Row, 0, opt.Limit)
	}
	var scratch []byte
	for rr.NextRow() {
		row, n := textRow(rr.Values(), len(t.Columns), picked, formats, &scratch)
		chunk.Rows = append(chunk.Rows, row)
		chunk.Bytes += n
	}
	if _, err := rr.Close(); err != nil {
		return Chunk{}, err
	}
	// The transaction is rolled back (readAt): the rows, snapshot and
	// position are all it was for.
	return chunk, nil
}

// openChunk locks t against schema changes, takes the snapshot and reads
// the log position that frames it, and t's shape in that snapshot (dc:
// the database's default collation).
func openChunk(ctx context.Context, tx *readTx, t *change.Table, dc defaultCollation) (Chunk, error) {
	// The lock (the one the SELECT takes anyway) comes before the
	// snapshot: a schema change holding the table is committed before the
	// snapshot is taken, and none can happen until the read is done. So
	// the columns read below are the snapshot's, and a rewriting ALTER
	// TABLE (which leaves older snapshots an empty table) is either wholly
	// visible or not begun. LOCK takes no snapshot itself.
	//
	// The snapshot is taken when the SELECT, the transaction's first
	// statement to need one, is parsed; the WAL position is read while it
	// runs, so it is at or past every commit the snapshot sees. The two go
	// in one round trip, in this order, with the read of the columns
	// after them: in the extended protocol each statement is parsed only
	// once the one before it has run, so the snapshot follows the lock.
	var batch pgconn.Batch
	batch.ExecParams("LOCK TABLE "+quoteTable(t.ID)+" IN ACCESS SHARE MODE", nil, nil, nil, nil)
	batch.ExecParams("SELECT pg_current_snapshot()::text, pg_current_wal_lsn()::text", nil, nil, nil, nil)
	batch.ExecParams(attributesByNameSQL, append([][]byte{[]byte(quoteTable(t.ID))}, dc.params()...), nil, nil, nil)
	results, err := tx.pgConn().ExecBatch(ctx, &batch).ReadAll()
	if err != nil {
		return Chunk{}, err
	}
	if len(results) != 3 || len(results[1].Rows) != 1 {
		return Chunk{}, fmt.Errorf("lock, snapshot and columns: %d results, want 3, the second of one row", len(results))
	}
	row := results[1].Rows[0]
	var chunk Chunk
	if chunk.Snapshot, err = ParseSnapshot(string(row[0])); err != nil {
		return Chunk{}, err
	}
	if chunk.Position, err = change.ParseLSN(string(row[1])); err != nil {
		return Chunk{}, err
	}
	cols := results[2]
	attrs := make([]Attribute, 0, len(cols.Rows))
	for _, vals := range cols.Rows {
		a, err := scanAttribute(func(dest ...any) error {
			return pgx.ScanRow(tx.conn.TypeMap(), cols.FieldDescriptions, vals, dest...)
		})
		if err != nil {
			return Chunk{}, fmt.Errorf("read columns of %s: %w", t.ID, err)
		}
		attrs = append(attrs, a)
	}
	if chunk.Table, err = shapeOf(t, attrs); err != nil {
		return Chunk{}, err
	}
	return chunk, nil
}

// binaryFormats are the result formats of a chunk read that asks for
// binary values and may have them (pgbinary.TableOK): text (0) for the key
// columns, binary (1) for the others; nil (all text) otherwise.
func binaryFormats(t *change.Table, opt ReadOptions) []int16 {
	if !opt.Binary || opt.Columns != nil || !pgbinary.TableOK(t) {
		return nil
	}
	return pgbinary.ResultFormats(t)
}

// textRow turns one result row into a table row of width columns, its
// values placed by picked (nil: in order; the others Unchanged) and marked
// Binary where formats says so (nil: all text), and counts its bytes. One
// string per row, gathered in scratch: the values are slices of it.
func textRow(raw [][]byte, width int, picked []int, formats []int16, scratch *[]byte) (change.Row, int64) {
	all := (*scratch)[:0]
	for _, v := range raw {
		all = append(all, v...)
	}
	*scratch = all
	size := len(all)
	str := string(all)
	row := make(change.Row, width)
	if picked != nil {
		for j := range row {
			row[j] = change.Value{Unchanged: true}
		}
	}
	off := 0
	for j, v := range raw {
		if picked != nil {
			j = picked[j]
		}
		if v == nil {
			row[j] = change.Null
			continue
		}
		row[j] = change.Value{Text: str[off : off+len(v)], Binary: formats != nil && formats[j] == 1}
		off += len(v)
	}
	return row, int64(size)
}

// chunkQuery builds the SELECT of a chunk. Identifiers are quoted; bound
// values travel as text parameters of unknown type, so the server parses
// them with the key columns' own input functions. picked maps the selected
// columns to the table's when only some are read (nil: all are).
func chunkQuery(t *change.Table, opt ReadOptions) (sql string, params [][]byte, picked []int, err error) {
	if picked, err = pickColumns(t, opt.Columns); err != nil {
		return "", nil, nil, err
	}
	var cols []string
	for i, c := range t.Columns {
		if picked == nil || slices.Contains(picked, i) {
			cols = append(cols, quoteIdent(c.Name))
		}
	}
	keyList := keyTuple(t)
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT %s FROM %s", strings.Join(cols, ", "), quoteTable(t.ID))
	var where []string
	if opt.Filter != nil {
		cond, fparams, err := filterSQL(opt.Filter, t, 1)
		if err != nil {
			// A column renamed or dropped since the backfill was asked.
			return "", nil, nil, &PermanentError{Err: err, Hint: "initiate the backfill again with a filter on the table's columns"}
		}
		where, params = append(where, cond), fparams
	}
	conds, bounds := rangeConds(t, opt.After, opt.Upto, len(params)+1)
	where, params = append(where, conds...), append(params, bounds...)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY " + strings.TrimSuffix(strings.TrimPrefix(keyList, "("), ")"))
	if opt.Limit > 0 {
		b.WriteString(" LIMIT " + strconv.Itoa(opt.Limit))
	}
	return b.String(), params, picked, nil
}

// transientClass says whether a server error's SQLSTATE class may clear up
// on its own: connection, transaction rollback, resources, object state,
// operator intervention, system and internal errors. Any other error in a
// filter's query is the filter's.
func transientClass(code string) bool {
	switch code[:min(2, len(code))] {
	case "08", "40", "53", "55", "57", "58", "XX":
		return true
	}
	return false
}

// pickColumns returns, in table order, the key columns and the named ones
// (nil when names is nil: every column). A name the table lacks (renamed
// since the backfill was asked) is an error no retry cures.
func pickColumns(t *change.Table, names []string) ([]int, error) {
	if names == nil {
		return nil, nil
	}
	for _, n := range names {
		if t.ColumnIndex(n) < 0 {
			return nil, &PermanentError{Err: fmt.Errorf("%s has no column %q", t.ID, n),
				Hint: "initiate the backfill again with the table's columns"}
		}
	}
	var picked []int
	for i, c := range t.Columns {
		if slices.Contains(t.Key, i) || slices.Contains(names, c.Name) {
			picked = append(picked, i)
		}
	}
	return picked, nil
}

// CheckFilter asks the source whether filter is a valid condition on the
// table as the source has it now (a column renamed since the stream last
// saw the table is not the filter's fault), without reading a row: a
// column the table lacks is refused with its columns named, and the server
// plans the rendered query, refusing types and operators that do not fit.
func (s *Source) CheckFilter(ctx context.Context, t *change.Table, filter *rowfilter.Filter) error {
	var refused, shapeErr error
	err := s.readAt(ctx, readCommitted, func(tx *readTx) error {
		now, err := snapshotShape(ctx, tx, t)
		if err != nil {
			shapeErr = err
			return nil
		}
		cond, params, err := filterSQL(filter, now, 1)
		if err != nil {
			refused = err
			return nil
		}
		// EXPLAIN plans the query (names, types) without running it.
		sql := "EXPLAIN SELECT 1 FROM " + quoteTable(t.ID) + " WHERE " + cond + " LIMIT 1"
		return tx.pgConn().ExecParams(ctx, sql, params, nil, nil, nil).Read().Err
	})
	switch {
	case refused != nil:
		return refused
	case shapeErr != nil:
		return fmt.Errorf("check filter on %s: %w", t.ID, shapeErr)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !transientClass(pgErr.Code) {
		return fmt.Errorf("%w on %s: %s", ErrFilter, t.ID, pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("check filter on %s: %w", t.ID, err)
	}
	return nil
}

// ErrFilter is a backfill filter the source refused.
var ErrFilter = source.ErrFilter

func keyTuple(t *change.Table) string {
	keys := make([]string, len(t.Key))
	for i, c := range t.KeyColumns() {
		keys[i] = quoteIdent(c.Name)
	}
	return "(" + strings.Join(keys, ", ") + ")"
}

func placeholders(from, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "$" + strconv.Itoa(from+i)
	}
	return "(" + strings.Join(ps, ", ") + ")"
}

func keyParams(k change.Key) [][]byte {
	out := make([][]byte, len(k))
	for i, v := range k {
		if !v.Null {
			out[i] = []byte(v.Text)
		}
	}
	return out
}
