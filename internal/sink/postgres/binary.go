package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

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

// destTypes holds, per table, the destination column types (column name
// to type oid) the sink last saw: when it created the table, when its
// check read the columns, or when a chunk's check did. The writer fills
// it; TakesBinary reads it from the backfills' goroutines.
//
// What was seen is trusted for typesTrusted: a table altered by hand since
// would refuse a chunk read in binary on that trust (its object fails), so
// a table not seen for longer (a manual backfill days after the stream's
// start, or after the last) has its first chunk read in text, whose check
// sees the types again. A backfill's chunks, each checked, keep it fresh.
type destTypes struct {
	mu   sync.Mutex
	seen map[change.TableID]seenTypes
	now  func() time.Time // time.Now; tests set it
}

type seenTypes struct {
	types map[string]uint32
	at    time.Time
}

// typesTrusted is how long what the sink saw of a table's types is
// trusted to choose binary reads.
const typesTrusted = time.Minute

func (d *destTypes) set(id change.TableID, types map[string]uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[change.TableID]seenTypes{}
	}
	d.seen[id] = seenTypes{types: types, at: d.clock()}
}

// match reports whether the sink saw, within typesTrusted, every column of
// t with t's type.
func (d *destTypes) match(t *change.Table) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen, ok := d.seen[t.ID]
	return ok && d.clock().Sub(seen.at) < typesTrusted && sameTypes(seen.types, t)
}

func (d *destTypes) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
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
// columns were last seen, within typesTrusted, with the same types (see
// destTypes). Until then t's chunks are read in text.
func (s *Sink) TakesBinary(t *change.Table) bool {
	return pgbinary.TableOK(t) && s.destTypes.match(t)
}

// typeCheck is one chunk's reading of its destination table's column
// types, and its session's staging table's, in the chunk's transaction.
type typeCheck struct {
	t     *change.Table
	types map[string]uint32
	// mods are the target's typmods, staging the staging table's types
	// and typmods (nil: no staging table).
	mods    map[string]int32
	staging map[string]typeMod
	read    bool // the statement's round trip is done
}

type typeMod struct {
	oid uint32
	mod int32
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
	tc := &typeCheck{t: ch.Table, types: map[string]uint32{}, mods: map[string]int32{}}
	of := " of " + ts.id.String()
	p.queueUnprepared("LOCK TABLE "+ts.name+" IN ACCESS SHARE MODE", "lock"+of)
	err := p.queueRows(ctx, destTypesSQL, [][]byte{[]byte(ts.name), []byte(ts.tmp)}, "read the column types"+of,
		func(pgconn.CommandTag) { tc.read = true },
		func(vals [][]byte) {
			oid, err1 := strconv.ParseUint(string(vals[2]), 10, 32)
			mod, err2 := strconv.ParseInt(string(vals[3]), 10, 32)
			if err1 != nil || err2 != nil {
				return
			}
			name := string(vals[1])
			if string(vals[0]) == "t" {
				tc.types[name], tc.mods[name] = uint32(oid), int32(mod)
				return
			}
			if tc.staging == nil {
				tc.staging = map[string]typeMod{}
			}
			tc.staging[name] = typeMod{uint32(oid), int32(mod)}
		})
	return tc, err
}

// destTypesSQL reads the column types of a table ($1, its quoted, qualified
// name) and of its staging table ($2), if the session has one: the target
// first.
const destTypesSQL = "SELECT a.attrelid = $1::pg_catalog.regclass, a.attname, a.atttypid, a.atttypmod FROM pg_catalog.pg_attribute AS a " +
	"WHERE a.attrelid IN ($1::pg_catalog.regclass, pg_catalog.to_regclass($2)) AND a.attnum > 0 AND NOT a.attisdropped"

// stagingStale reports whether the session's staging table of the chunk's
// table has columns of other types or typmods than the table now has (the
// table was altered by hand since it was made): it must be made again
// before rows go through it, or its columns would convert or round them.
func (tc *typeCheck) stagingStale() bool {
	if tc == nil || tc.staging == nil {
		return false
	}
	for name, oid := range tc.types {
		if tc.staging[name] != (typeMod{oid, tc.mods[name]}) {
			return true
		}
	}
	return false
}

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
		// The table's own refusal: its object fails, the stream goes on.
		return sink.Rejected(tc.t.ID, fmt.Errorf("%w: a column of %s no longer has the source's type (it changed after the sink last saw the table's types, as a chunk "+
			"read in binary on that sight was on its way); initiate the backfill again: it reads in text", errBinaryRefused, tc.t.ID))
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
			data = append(make([]byte, 0, binarySize(rows[n:], ts.isKey)), pgbinary.Header...)
		}
		var ok bool
		if data, ok, err = pgbinary.AppendRow(data, r, t.Columns, ts.isKey); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: chunk row %d: %w", errBinaryRefused, n, err)
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

// binarySize bounds the binary COPY data of rows: a binary value is sent
// as it is, a key value (isKey) in no more than its text or 16 bytes.
func binarySize(rows []change.Row, isKey []bool) int {
	size := len(pgbinary.Header) + len(pgbinary.Trailer)
	for _, r := range rows {
		size += 2
		for i, v := range r {
			size += 4 + len(v.Text)
			if isKey[i] {
				size += 16
			}
		}
	}
	return size
}

// copyBinary COPYs binary data (splitBinary) into into. A value the
// server cannot read in its column's binary form is a rejection, not an
// outage: the same batch would fail again.
func (s *Sink) copyBinary(ctx context.Context, ts *tableSQL, data []byte, into string) error {
	if _, err := s.conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), ts.copySQL(into)+" WITH (FORMAT binary)"); err != nil {
		return binaryFailure(fmt.Errorf("copy binary rows of %s: %w", ts.id, err))
	}
	return nil
}

// queueUpsert queues the upsert of a chunk row of t, its binary values sent
// as binary parameters of t's types: the server reads each as the type it
// was read from, whatever the column's type now is (a statement prepared
// before a column was altered by hand would read it as the old type).
func queueUpsert(ctx context.Context, p *pipeline, ts *tableSQL, t *change.Table, r change.Row, what string) error {
	if len(r) != len(t.Columns) {
		return fmt.Errorf("%s: the row has %d values, the table %d columns", what, len(r), len(t.Columns))
	}
	sql, args := upsertStmt(ts, r, nil)
	formats, oids := binaryParams(t, r)
	st := step{what: what}
	if formats != nil {
		st.fail = func(err error) error { return binaryFailure(fmt.Errorf("%s: %w", what, err)) }
	}
	return p.queueTyped(ctx, sql, args, oids, formats, st)
}

// binaryParams are the formats and types of upsertStmt's parameters for a
// row of t (nil, nil: all text, typed by the server).
func binaryParams(t *change.Table, r change.Row) (formats []int16, oids []uint32) {
	if !pgbinary.HasBinary([]change.Row{r}) {
		return nil, nil
	}
	for i, v := range r {
		switch {
		case v.Unchanged:
		case v.Binary:
			formats, oids = append(formats, 1), append(oids, t.Columns[i].TypeOID)
		default:
			formats, oids = append(formats, 0), append(oids, 0)
		}
	}
	return formats, oids
}

// binaryFailure makes a server's refusal of a binary value (a protocol
// violation, a bad binary representation) a rejection: the same batch
// would meet it again.
func binaryFailure(err error) error {
	var pgErr *pgconn.PgError
	// Not a FATAL one, which ends the session: a reconnect and a retry
	// may cure that.
	if errors.As(err, &pgErr) && pgErr.Severity != "FATAL" && (pgErr.Code == "08P01" || pgErr.Code == "22P03") {
		return fmt.Errorf("%w: %w", errBinaryRefused, err)
	}
	return err
}
