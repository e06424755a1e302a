package mysql

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
)

// binaryRows decodes the rows of a chunk read, as go-mysql parses them from
// the binary protocol. Every value is printed into one buffer that becomes
// one string for a block of rows, and the rows' values are cut from one
// slice per block: a few allocations per block instead of a few per value.
type binaryRows struct {
	r *rowReader
	// wire is the wire type of each result column read raw (temporal
	// columns, see retype), 0 for the others.
	wire  []uint8
	rows  []change.Row
	bytes int64 // the length of the values' texts, added
	// The rows from pending on have their values' texts in buf still,
	// ends saying where each value ends in it (-1 for NULL).
	pending int
	buf     []byte
	ends    []int
	slab    []change.Value // values for the next rows
}

// blockRows and blockBytes bound a block: past either, its texts become a
// string and their buffer is used again.
const (
	blockRows  = 256
	blockBytes = 1 << 20
)

// retype is the per-result callback: it has go-mysql hand temporal columns
// over as their raw bytes instead of printing them with fmt.Sprintf. The
// binary protocol sends a temporal value as a length byte (0 to 12) and
// that many bytes of fields, which is how it sends a string of up to 250
// bytes, so go-mysql reads it as one.
func (b *binaryRows) retype(res *gomysql.Result) error {
	b.wire = make([]uint8, len(res.Fields))
	for i, f := range res.Fields {
		if isTemporalWire(f.Type) {
			b.wire[i], f.Type = f.Type, gomysql.MYSQL_TYPE_STRING
		}
	}
	return nil
}

// add decodes one row, in column order (of the picked columns, when some
// are; the others are Unchanged). Its values are set by flush.
func (b *binaryRows) add(fields []gomysql.FieldValue) error {
	if len(fields) != len(b.wire) {
		return fmt.Errorf("row of %d values in a result of %d columns", len(fields), len(b.wire))
	}
	for i := range fields {
		f := &fields[i]
		end := -1
		if f.Type != gomysql.FieldValueTypeNull {
			j := b.r.column(i)
			var err error
			if b.buf, err = b.r.codecs[j].appendField(b.buf, b.wire[i], f); err != nil {
				return fmt.Errorf("table %s column %s: %w", quoteTable(b.r.t.ID), quoteIdent(b.r.t.Columns[j].Name), err)
			}
			end = len(b.buf)
		}
		b.ends = append(b.ends, end)
	}
	b.rows = append(b.rows, b.newRow(len(fields)))
	if len(b.rows)-b.pending >= blockRows || len(b.buf) >= blockBytes {
		b.flush()
	}
	return nil
}

// newRow is a row for n values read, cut from the slab: n values, or the
// table's columns all Unchanged when only some are read.
func (b *binaryRows) newRow(n int) change.Row {
	if b.r.picked != nil {
		n = len(b.r.t.Columns)
	}
	if len(b.slab) < n {
		b.slab = make([]change.Value, n*blockRows)
	}
	row := change.Row(b.slab[:n:n])
	b.slab = b.slab[n:]
	if b.r.picked != nil {
		for i := range row {
			row[i] = change.Value{Unchanged: true}
		}
	}
	return row
}

// flush sets the values of the pending rows, from one string of their
// texts.
func (b *binaryRows) flush() {
	s := string(b.buf)
	b.bytes += int64(len(s))
	start, e := 0, 0
	for _, row := range b.rows[b.pending:] {
		for i := range b.wire {
			j, end := b.r.column(i), b.ends[e]
			e++
			if end < 0 {
				row[j] = change.Null
				continue
			}
			row[j] = change.Text(s[start:end])
			start = end
		}
	}
	b.pending, b.buf, b.ends = len(b.rows), b.buf[:0], b.ends[:0]
	if cap(b.buf) > blockBytes {
		b.buf = nil // a large value's buffer is not kept for the rows after it
	}
}

// appendField appends the text of a binary-protocol value that is not
// NULL; wire is the type of a temporal value read raw, 0 for the others.
// The common cases are printed here; the others go through text, as the
// binlog's values do, so both give the same text.
func (k codec) appendField(dst []byte, wire uint8, f *gomysql.FieldValue) ([]byte, error) {
	if wire != 0 {
		return k.appendTemporal(dst, wire, f.AsString())
	}
	switch f.Type {
	case gomysql.FieldValueTypeSigned:
		if k.kind == kindInt {
			return k.appendInt(dst, f.AsInt64()), nil
		}
	case gomysql.FieldValueTypeUnsigned:
		if k.kind == kindInt {
			return strconv.AppendUint(dst, f.AsUint64(), 10), nil
		}
	case gomysql.FieldValueTypeString:
		switch {
		case k.kind == kindDecimal:
			return append(dst, f.AsString()...), nil
		case k.charset == charsetUTF8 && (k.kind == kindText || k.kind == kindJSON):
			return appendUTF8(dst, f.AsString())
		case k.charset == charsetUTF8 && k.kind == kindChar:
			return appendUTF8(dst, trimSpaces(f.AsString()))
		}
	}
	s, err := k.text(fieldValue(*f))
	return append(dst, s...), err
}

// appendUTF8 appends b, which must be valid UTF-8 (as charset.decode).
func appendUTF8(dst, b []byte) ([]byte, error) {
	if !utf8.Valid(b) {
		return dst, errNotUTF8
	}
	return append(dst, b...), nil
}
