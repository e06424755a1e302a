package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgbinary"
	"github.com/tidemark/tidemark/internal/sink"
)

// Chunk rows in binary form (pgbinary): a backfill from a PostgreSQL source
// reads a table's non-key values in binary once this sink has seen that
// the destination table's columns have the source's types, and every
// chunk that carries them checks that again in its own transaction, under
// a lock no type change can pass, before it writes a binary value.

var _ sink.BinaryChunks = (*Sink)(nil)

// destTypes holds, per table, the destination column types the last type
// check read (column name to type oid). The writer fills it; TakesBinary
// reads it from the backfills' goroutines.
type destTypes struct {
	mu    sync.Mutex
	types map[change.TableID]map[string]uint32
}

func (d *destTypes) set(id change.TableID, types map[string]uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.types == nil {
		d.types = map[change.TableID]map[string]uint32{}
	}
	d.types[id] = types
}

// match reports whether the last check found every column of t with t's
// type.
func (d *destTypes) match(t *change.Table) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sameTypes(d.types[t.ID], t)
}

func sameTypes(types map[string]uint32, t *change.Table) bool {
	if types == nil {
		return false
	}
	for _, c := range t.Columns {
		if oid, ok := types[c.Name]; !ok || oid != c.TypeOID {
			return false
		}
	}
	return true
}

// TakesBinary reports whether chunks of t may carry binary values: all its
// columns' types travel in binary (pgbinary.TableOK) and the destination's
// columns were last seen with the same types. Until a first chunk's check
// has seen them, t's chunks are read in text.
func (s *Sink) TakesBinary(t *change.Table) bool {
	return pgbinary.TableOK(t) && s.destTypes.match(t)
}

// typeCheck is one chunk's reading of its destination table's column
// types, in the chunk's transaction.
type typeCheck struct {
	t     *change.Table
	types map[string]uint32
	read  bool // the statement's round trip is done
}

// queueTypeCheck queues, in the chunk's first round trip, the lock that
// keeps the table's columns as they are until the transaction ends and
// the read of their types. A chunk of a table whose rows cannot travel in
// binary needs neither (nil); nor does a text chunk of a table already
// known to match.
func (s *Sink) queueTypeCheck(ctx context.Context, p *pipeline, ts *tableSQL, ch *sink.Chunk, binary bool) (*typeCheck, error) {
	if !pgbinary.TableOK(ch.Table) || !binary && s.destTypes.match(ch.Table) {
		return nil, nil
	}
	tc := &typeCheck{t: ch.Table, types: map[string]uint32{}}
	of := " of " + ts.id.String()
	p.queueUnprepared("LOCK TABLE "+ts.name+" IN ACCESS SHARE MODE", "lock"+of)
	err := p.queueRows(ctx, destTypesSQL, [][]byte{[]byte(ts.name)}, "read the column types"+of,
		func(pgconn.CommandTag) { tc.read = true },
		func(vals [][]byte) {
			if oid, err := strconv.ParseUint(string(vals[1]), 10, 32); err == nil {
				tc.types[string(vals[0])] = uint32(oid)
			}
		})
	return tc, err
}

// destTypesSQL reads a table's column types; $1 is its quoted, qualified
// name.
const destTypesSQL = "SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute AS a " +
	"WHERE a.attrelid = $1::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped"

// verdict is nil when binary values may be written: the check was read,
// and found the source's types. It records what it found for TakesBinary.
func (s *Sink) verdict(tc *typeCheck) error {
	if tc == nil || !tc.read {
		// The source read binary values of a table the sink cannot check
		// (pgbinary.TableOK refused its shape here): a rejection, as
		// retrying the batch would meet the same.
		return fmt.Errorf("%w: %s: binary values without a check of the destination's column types", errBinaryRefused, tc.tableID())
	}
	s.destTypes.set(tc.t.ID, tc.types)
	if !sameTypes(tc.types, tc.t) {
		return fmt.Errorf("%w: a column of %s no longer has the source's type (it changed while a chunk read in binary was in flight); "+
			"initiate the backfill again: it reads in text", errBinaryRefused, tc.t.ID)
	}
	return nil
}

// errBinaryRefused: the destination cannot take a chunk's binary values
// (a column of another type, a value its type does not read). Apply
// reports it as a rejection: the batch cannot be written as it is.
var errBinaryRefused = errors.New("binary values refused")

func (tc *typeCheck) tableID() string {
	if tc == nil {
		return "a table whose columns do not all travel in binary"
	}
	return tc.t.ID.String()
}

// noteTypes records what a text chunk's check found.
func (s *Sink) noteTypes(tc *typeCheck) {
	if tc != nil && tc.read {
		s.destTypes.set(tc.t.ID, tc.types)
	}
}

// splitBinary renders the rows that are binary but for their key values
// in COPY's binary format (nil when none is), and returns the others: text
// rows, and rows that mix binary values with text ones (a window's update
// that kept a binary value of the chunk's row).
func splitBinary(ts *tableSQL, t *change.Table, rows []change.Row) (data []byte, text, mixed []change.Row, err error) {
	tuples := 0
	for n, r := range rows {
		if len(r) != len(ts.cols) {
			return nil, nil, nil, fmt.Errorf("chunk row %d has %d values, table has %d columns", n, len(r), len(ts.cols))
		}
		if !pgbinary.HasBinary(rows[n : n+1]) {
			text = append(text, r)
			continue
		}
		if data == nil {
			data = append(make([]byte, 0, binarySize(rows[n:])), pgbinary.Header...)
		}
		var ok bool
		if data, ok, err = pgbinary.AppendRow(data, r, t.Columns, ts.isKey); err != nil {
			return nil, nil, nil, fmt.Errorf("chunk row %d: %w", n, err)
		}
		if !ok {
			mixed = append(mixed, r)
			continue
		}
		tuples++
	}
	if tuples == 0 {
		return nil, text, mixed, nil
	}
	return append(data, pgbinary.Trailer...), text, mixed, nil
}

// binarySize bounds the binary COPY data of rows (key values' binary forms
// are no longer than 16 bytes or their text).
func binarySize(rows []change.Row) int {
	size := len(pgbinary.Header) + len(pgbinary.Trailer)
	for _, r := range rows {
		size += 2
		for _, v := range r {
			size += 4 + max(len(v.Text), 16)
		}
	}
	return size
}

// copyBinary COPYs binary data (splitBinary) into into. A value the
// server cannot read in its column's binary form is a rejection, not an
// outage: the same batch would fail again.
func (s *Sink) copyBinary(ctx context.Context, ts *tableSQL, data []byte, into string) error {
	_, err := s.conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), ts.copySQL(into)+" WITH (FORMAT binary)")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "08P01" || pgErr.Code == "22P03") {
		return fmt.Errorf("copy binary rows of %s: %w: %w", ts.id, errBinaryRefused, err)
	}
	if err != nil {
		return fmt.Errorf("copy binary rows of %s: %w", ts.id, err)
	}
	return nil
}

// queueUpsert queues the upsert of a chunk row, its binary values sent as
// binary parameters.
func queueUpsert(ctx context.Context, p *pipeline, ts *tableSQL, r change.Row, what string) error {
	sql, args := upsertStmt(ts, r, nil)
	return p.queueFormatted(ctx, sql, args, argFormats(r), nil, step{what: what})
}

// argFormats are the formats of upsertStmt's parameters for r (nil: all
// text).
func argFormats(r change.Row) []int16 {
	if !pgbinary.HasBinary([]change.Row{r}) {
		return nil
	}
	var formats []int16
	for _, v := range r {
		switch {
		case v.Unchanged:
		case v.Binary:
			formats = append(formats, 1)
		default:
			formats = append(formats, 0)
		}
	}
	return formats
}
