package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgbinary"
	"github.com/tidemark/tidemark/internal/sink"
)

// applyChunk replaces the destination rows of (Low, High] by the chunk's
// rows, set-based: COPY the rows into a staging table, delete the range's
// rows the staging table lacks (unless Keep), upsert the rest, skipping
// identical rows; or COPY them straight in when the range is empty. An
// UpdateOnly chunk is written row by row (queueUpdates). The statements after
// the COPY stay queued and go with the next round trip. staged records the
// staging tables this transaction has filled.
func (s *Sink) applyChunk(ctx context.Context, p *pipeline, ch *sink.Chunk, staged map[change.TableID]bool) error {
	ts, err := s.table(ch.Table)
	if err != nil {
		return err
	}
	for _, b := range []change.Key{ch.Low, ch.High} {
		if b != nil && len(b) != len(ts.key) {
			return fmt.Errorf("chunk bound has %d values, key has %d columns", len(b), len(ts.key))
		}
	}
	ch.Removed, ch.Skipped, ch.Identical = 0, 0, false
	// Binary values need the destination's column types checked in this
	// transaction first (binary.go); a text chunk's check learns them.
	binary := pgbinary.HasBinary(ch.Rows)
	if binary && (ch.Changed != nil || ch.UpdateOnly) {
		return fmt.Errorf("%w: a chunk noting changes or writing some columns carries binary values", errBinaryRefused)
	}
	tc, err := s.queueTypeCheck(ctx, p, ts, ch, binary)
	if err != nil {
		return err
	}
	defer s.noteTypes(tc)
	// A tracked chunk's range is read first, in this transaction, to tell
	// what the chunk changes (sink.ChangeReporter).
	var old []change.Row
	if ch.Changed != nil {
		if old, err = s.readRangeIn(ctx, p, ts, ch.Low, ch.High, nil); err != nil {
			return err
		}
		ch.NoteChanges(old)
	}
	if ch.UpdateOnly {
		return queueUpdates(ctx, p, ts, ch)
	}
	// A filtered chunk's range holds rows it did not read, perhaps most of
	// the table: it is not read, the chunk's rows are upserted.
	if !ch.Keep && !hasUnchanged(ch.Rows) {
		if done, err := s.applyAgainstRange(ctx, p, ts, ch, old, tc, binary); err != nil || done {
			return err
		}
	}
	// Only now: a first backfill of a table of one chunk never needs its
	// staging table, whose creation (and the eviction of another's) was
	// most of such a chunk's cost in a stream of many small tables.
	if err := s.ensureStaging(ctx, p, ts); err != nil {
		return err
	}
	bounds := append(keyArgs(ch.Low), keyArgs(ch.High)...)
	var partial []change.Row
	if len(ch.Rows) > 0 {
		var done bool
		if done, partial, err = s.copyRows(ctx, p, ts, ch, bounds, staged, tc); err != nil || done {
			return err
		}
	}
	of := " of " + ts.id.String()
	if !ch.Keep { // a filtered chunk's range holds rows it did not read
		err := p.queueTagged(ctx, ts.chunkDeleteSQL(ch.Low != nil, ch.High != nil, len(ch.Rows) > 0), bounds,
			"delete rows missing from the chunk"+of, func(tag pgconn.CommandTag) { ch.Removed += tag.RowsAffected() })
		if err != nil {
			return err
		}
	}
	if len(ch.Rows) == 0 {
		return nil
	}
	// Rows with Unchanged values (rare) cannot be upserted set-based: their
	// staged copies served the delete above, now they go row by row.
	for _, r := range partial {
		if err := p.queue(ctx, ts.tmpDeleteSQL(), keyArgs(ch.Table.RowKey(r)), "unstage partial row"+of); err != nil {
			return err
		}
		if err := queueUpsert(ctx, p, ts, ch.Table, r, "upsert partial row"+of); err != nil {
			return err
		}
	}
	return p.queue(ctx, ts.chunkUpsertSQL(), nil, "upsert chunk rows"+of)
}

// copyRows COPYs the chunk's rows: straight into the table when its range
// holds no row (a first backfill: nothing to delete or merge; done is true
// then), else into the staging table. It returns the rows carrying
// Unchanged values or binary values among text ones, which are staged
// with NULL in their place.
func (s *Sink) copyRows(ctx context.Context, p *pipeline, ts *tableSQL, ch *sink.Chunk, bounds [][]byte, staged map[change.TableID]bool, tc *typeCheck) (done bool, partial []change.Row, err error) {
	binData, text, mixed, err := splitBinary(ts, ch.Table, ch.Rows)
	if err != nil {
		return false, nil, err
	}
	rest := append(text, mixed...)
	data, partial, err := copyData(ts, rest)
	if err != nil {
		return false, nil, err
	}
	of := " of " + ts.id.String()
	empty := false
	if len(partial) == 0 {
		// The probe goes with the round trip the COPY needs anyway.
		err := p.queueTagged(ctx, ts.probeSQL(ch.Low != nil, ch.High != nil), bounds, "probe range"+of,
			func(tag pgconn.CommandTag) { empty = tag.RowsAffected() == 0 })
		if err != nil {
			return false, nil, err
		}
	}
	if staged[ts.id] {
		// Commit empties it (ON COMMIT DELETE ROWS); within one
		// transaction an earlier chunk's rows are still there.
		if err := p.queue(ctx, "DELETE FROM "+ts.tmp, nil, "empty staging table"+of); err != nil {
			return false, nil, err
		}
	}
	if err := p.flush(ctx); err != nil {
		return false, nil, err
	}
	into := ts.tmp
	if empty {
		into = ts.name
	} else {
		staged[ts.id] = true
		if tc.stagingStale() { // read by the flush above
			if err := s.remakeStaging(ctx, ts); err != nil {
				return false, nil, err
			}
		}
	}
	if binData != nil || len(mixed) > 0 {
		if err := s.verdict(tc); err != nil {
			return false, nil, err
		}
	}
	if binData != nil {
		if err := s.copyBinary(ctx, ts, binData, into); err != nil {
			return false, nil, err
		}
	}
	if len(rest) > 0 {
		if _, err := s.conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), ts.copySQL(into)); err != nil {
			return false, nil, fmt.Errorf("copy rows: %w", err)
		}
	}
	return empty, partial, nil
}

// applyAgainstRange writes a chunk against its range's rows: straight in
// when the range is empty (a first backfill), else only what differs
// (applyChunkDiff); done is false when the set-based path is to follow.
// binary says the chunk carries binary values.
func (s *Sink) applyAgainstRange(ctx context.Context, p *pipeline, ts *tableSQL, ch *sink.Chunk, old []change.Row, tc *typeCheck, binary bool) (bool, error) {
	existing, err := s.rangeRows(ctx, p, ch, old, binary)
	if err != nil {
		return false, err
	}
	if binary {
		if err := s.verdict(tc); err != nil {
			return false, err
		}
	}
	if len(existing) == 0 {
		return true, s.copyNew(ctx, p, ts, ch.Table, ch.Rows)
	}
	return s.applyChunkDiff(ctx, p, ts, ch, existing)
}

// hasUnchanged reports whether a row carries an Unchanged value.
func hasUnchanged(rows []change.Row) bool {
	for _, r := range rows {
		for _, v := range r {
			if v.Unchanged {
				return true
			}
		}
	}
	return false
}

// rangeRows is the destination's rows of the chunk's range, read in this
// transaction (old, when a tracked chunk read them already); in the
// chunk's form, its non-key values binary when it carries binary ones.
func (s *Sink) rangeRows(ctx context.Context, p *pipeline, ch *sink.Chunk, old []change.Row, binary bool) ([]change.Row, error) {
	if ch.Changed != nil {
		return old, nil
	}
	ts, err := s.table(ch.Table)
	if err != nil {
		return nil, err
	}
	var formats []int16
	if binary {
		formats = pgbinary.ResultFormats(ch.Table)
	}
	return s.readRangeIn(ctx, p, ts, ch.Low, ch.High, formats)
}

// readRangeIn reads the rows of ts with key in (low, high] in p's
// transaction, in p's next round trip: with the transaction's start and
// the fence check when it is the first. formats are the results' (nil:
// all text).
func (s *Sink) readRangeIn(ctx context.Context, p *pipeline, ts *tableSQL, low, high change.Key, formats []int16) ([]change.Row, error) {
	var rows []change.Row
	err := p.queueFormatted(ctx, ts.selectRangeSQL(low != nil, high != nil), append(keyArgs(low), keyArgs(high)...), nil, formats,
		step{what: "read the range of " + ts.id.String(), rows: func(vals [][]byte) { rows = append(rows, pgbinary.Row(vals, formats)) }})
	if err != nil {
		return nil, err
	}
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	return rows, nil
}

// copyNew writes rows without Unchanged values that the table lacks (this
// transaction read their range): binary rows by a binary COPY, text rows
// by a text COPY, each straight into the table, and rows mixing binary
// values with text ones by upserts. A COPY's error is returned as it is
// (wrapped), so that a caller may tell a duplicate key.
func (s *Sink) copyNew(ctx context.Context, p *pipeline, ts *tableSQL, t *change.Table, rows []change.Row) error {
	if len(rows) == 0 {
		return nil
	}
	binData, text, mixed, err := splitBinary(ts, t, rows)
	if err != nil {
		return err
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	if binData != nil {
		if err := s.copyBinary(ctx, ts, binData, ts.name); err != nil {
			return err
		}
	}
	if len(text) > 0 {
		data, _, err := copyData(ts, text)
		if err != nil {
			return err
		}
		if _, err := s.conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), ts.copySQL(ts.name)); err != nil {
			return fmt.Errorf("copy rows of %s: %w", ts.id, err)
		}
	}
	for _, r := range mixed {
		if err := queueUpsert(ctx, p, ts, t, r, "upsert row of "+ts.id.String()); err != nil {
			return err
		}
	}
	return nil
}

// copyData renders rows in COPY's text format. It also returns the rows
// carrying Unchanged or binary values, staged with NULL in their place.
func copyData(ts *tableSQL, rows []change.Row) ([]byte, []change.Row, error) {
	var partial []change.Row
	size := 0
	for _, r := range rows {
		for _, v := range r {
			size += len(v.Text) + 1
		}
	}
	buf := make([]byte, 0, size+size/64+16)
	for n, r := range rows {
		if len(r) != len(ts.cols) {
			return nil, nil, fmt.Errorf("chunk row %d has %d values, table has %d columns", n, len(r), len(ts.cols))
		}
		isPartial := false
		for i, v := range r {
			if i > 0 {
				buf = append(buf, '\t')
			}
			isPartial = isPartial || v.Unchanged || v.Binary
			buf = appendCopyValue(buf, v)
		}
		buf = append(buf, '\n')
		if isPartial {
			partial = append(partial, r)
		}
	}
	return buf, partial, nil
}

// appendCopyValue escapes one value for COPY's text format: \N is NULL, and
// backslash, tab, newline and carriage return are backslash-escaped (the
// rest, including every other byte of UTF-8 text, goes through as is).
func appendCopyValue(buf []byte, v change.Value) []byte {
	if v.Null || v.Unchanged || v.Binary {
		return append(buf, '\\', 'N')
	}
	s := v.Text
	if !needsEscape(s) {
		return append(buf, s...)
	}
	start := 0
	for i := 0; i < len(s); i++ {
		var esc byte
		switch s[i] {
		case '\\':
			esc = '\\'
		case '\t':
			esc = 't'
		case '\n':
			esc = 'n'
		case '\r':
			esc = 'r'
		default:
			continue
		}
		buf = append(buf, s[start:i]...)
		buf = append(buf, '\\', esc)
		start = i + 1
	}
	return append(buf, s[start:]...)
}

// escapable marks the bytes COPY's text format escapes.
var escapable = [256]bool{'\\': true, '\t': true, '\n': true, '\r': true}

func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if escapable[s[i]] {
			return true
		}
	}
	return false
}

// applyChunkDiff compares the range's destination rows (existing, read in
// this transaction) with the chunk's, which carry no Unchanged values
// (as text: the session settings fix every type's text form), and writes
// only what differs: rows the range lacks are COPYed straight in (it was
// read in this transaction, and the sink is the table's writer), the few
// that differ are upserted and the extra ones deleted. A backfill over a
// destination that already holds the rows then writes almost nothing, and
// one over a range that live changes partly filled keeps COPY's speed.
// done is false when the caller's set-based path is the better one (many
// differing rows), or when a row the range lacked turned out to be there
// (the COPY is undone).
func (s *Sink) applyChunkDiff(ctx context.Context, p *pipeline, ts *tableSQL, ch *sink.Chunk, existing []change.Row) (bool, error) {
	have := make(map[string]change.Row, len(existing))
	for _, r := range existing {
		have[ch.Table.RowKey(r).Encode()] = r
	}
	var changed, absent []change.Row
	for _, r := range ch.Rows {
		k := ch.Table.RowKey(r).Encode()
		d, ok := have[k]
		delete(have, k)
		switch {
		case !ok:
			absent = append(absent, r)
		case !sameRow(d, r):
			changed = append(changed, r)
		}
	}
	// Row by row pays off only for a few differences.
	if len(changed)+len(have) > len(ch.Rows)/8+16 {
		return false, nil
	}
	of := " of " + ts.id.String()
	for _, r := range changed {
		if err := queueUpsert(ctx, p, ts, ch.Table, r, "upsert changed row"+of); err != nil {
			return false, err
		}
	}
	for _, d := range have {
		if err := p.queue(ctx, ts.deleteSQL(), keyArgs(ch.Table.RowKey(d)), "delete extra row"+of); err != nil {
			return false, err
		}
		ch.Removed++
	}
	if len(absent) == 0 {
		ch.Identical = len(changed) == 0 && len(have) == 0
		return true, nil
	}
	// Under a savepoint: should a row the read missed be there after all
	// (another writer, a key the destination compares otherwise), the
	// COPY's duplicate key undoes only it, and the set-based path, which
	// upserts, takes over.
	if err := p.queue(ctx, "SAVEPOINT absent_rows", nil, "savepoint"+of); err != nil {
		return false, err
	}
	err := s.copyNew(ctx, p, ts, ch.Table, absent)
	if err == nil {
		err = p.flush(ctx) // the upserts of mixed rows, if any, under the savepoint too
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		if err := p.queue(ctx, "ROLLBACK TO SAVEPOINT absent_rows", nil, "roll back absent rows"+of); err != nil {
			return false, err
		}
		return false, p.flush(ctx) // before the next statement is prepared
	}
	if err != nil {
		return false, fmt.Errorf("write absent rows%s: %w", of, err)
	}
	return true, nil
}

func sameRow(a, b change.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Null != b[i].Null || a[i].Binary != b[i].Binary || a[i].Text != b[i].Text {
			return false
		}
	}
	return true
}

// queueUpdates writes an update-only chunk row by row: each row's values
// over the destination row with its key, Unchanged columns left alone; a
// row the destination lacks is not written.
func queueUpdates(ctx context.Context, p *pipeline, ts *tableSQL, ch *sink.Chunk) error {
	of := " of " + ts.id.String()
	for n, r := range ch.Rows {
		if len(r) != len(ts.cols) {
			return fmt.Errorf("chunk row %d has %d values, table has %d columns", n, len(r), len(ts.cols))
		}
		set := make([]bool, len(r))
		args := make([][]byte, 0, len(r)+len(ts.key))
		for i, v := range r {
			if !v.Unchanged && !ts.isKey[i] {
				set[i] = true
				args = append(args, valueArg(v))
			}
		}
		if len(args) == 0 {
			continue
		}
		args = append(args, keyArgs(ch.Table.RowKey(r))...)
		err := p.queueTagged(ctx, ts.updateSQL(set), args, "update chunk row"+of, func(tag pgconn.CommandTag) {
			if tag.RowsAffected() == 0 {
				ch.Skipped++
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}
