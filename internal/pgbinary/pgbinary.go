// Package pgbinary decides which PostgreSQL columns a backfill may carry
// in the servers' binary form from a PostgreSQL source to a PostgreSQL
// destination, and writes the rows in COPY's binary format.
//
// Text costs both servers: the source prints every value with its type's
// output function and the destination parses it again (a timestamptz's
// text is most of its cost). In binary form the source sends the value as
// stored and the destination takes it as is, and tidemark only copies
// bytes. A binary value means the same thing on both servers only when
// both columns have the same built-in type, whose binary form PostgreSQL
// keeps stable across versions; the destination checks that its columns
// have the source's types before it takes binary values (it would read an
// int8 sent as a float8 without complaint).
package pgbinary

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"

	"github.com/tidemark/tidemark/internal/change"
)

// Type OIDs: built-in, the same on every server.
const (
	boolOID        = 16
	byteaOID       = 17
	int8OID        = 20
	int2OID        = 21
	int4OID        = 23
	textOID        = 25
	jsonOID        = 114
	float4OID      = 700
	float8OID      = 701
	bpcharOID      = 1042
	varcharOID     = 1043
	dateOID        = 1082
	timeOID        = 1083
	timestampOID   = 1114
	timestamptzOID = 1184
	timetzOID      = 1266
	numericOID     = 1700
	uuidOID        = 2950
	jsonbOID       = 3802
)

// passable are the types whose values travel in binary form: built-in
// scalar types whose binary form holds no server-local identifier (no oid,
// no reg* type), no locale-dependent scale (no money) and means the same
// to every version (not interval: PostgreSQL 17 writes an infinite one as
// extreme values that 16 takes as a finite interval), and arrays of them
// (an array's binary form names its element type's oid, built-in too).
var passable = map[uint32]bool{
	boolOID: true, byteaOID: true, int8OID: true, int2OID: true, int4OID: true, textOID: true,
	jsonOID: true, float4OID: true, float8OID: true, bpcharOID: true, varcharOID: true,
	dateOID: true, timeOID: true, timestampOID: true, timestamptzOID: true,
	timetzOID: true, numericOID: true, uuidOID: true, jsonbOID: true,
	// Their arrays.
	1000: true, 1001: true, 1016: true, 1005: true, 1007: true, 1009: true, 199: true,
	1021: true, 1022: true, 1014: true, 1015: true, 1182: true, 1183: true, 1115: true,
	1185: true, 1270: true, 1231: true, 2951: true, 3807: true,
}

// Passable reports whether a column of the type oid travels in binary form
// when it is not a key column.
func Passable(oid uint32) bool { return passable[oid] }

// keyTypes are the key column types whose text tidemark turns into their
// binary form itself: key values stay text (the merge, the cursors and the
// range conditions use them), and COPY's binary format needs every value
// in binary.
var keyTypes = map[uint32]bool{int2OID: true, int4OID: true, int8OID: true, textOID: true, varcharOID: true, uuidOID: true}

// TableOK reports whether t's rows may travel in binary form: every key
// column of a type tidemark encodes itself and every other column of a
// passable type. A table with any other column travels as text.
func TableOK(t *change.Table) bool {
	if len(t.Key) == 0 {
		return false
	}
	isKey := make([]bool, len(t.Columns))
	for _, k := range t.Key {
		isKey[k] = true
	}
	for i, c := range t.Columns {
		if isKey[i] && !keyTypes[c.TypeOID] || !isKey[i] && !Passable(c.TypeOID) {
			return false
		}
	}
	return true
}

// Header is what a binary COPY stream starts with: the signature, no
// flags, no header extension.
var Header = []byte("PGCOPY\n\377\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// Trailer ends a binary COPY stream.
var Trailer = []byte{0xff, 0xff}

// AppendRow appends row as one tuple of a binary COPY stream: its binary
// values as they are, its key columns' text (isKey, of types TableOK
// accepts) encoded. A non-key value in text cannot be encoded: ok is false
// then, and buf is returned as it was.
func AppendRow(buf []byte, row change.Row, cols []change.Column, isKey []bool) (out []byte, ok bool, err error) {
	start := len(buf)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(row)))
	for i, v := range row {
		switch {
		case v.Unchanged:
			return buf[:start], false, nil
		case v.Null:
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
		case v.Binary:
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(v.Text)))
			buf = append(buf, v.Text...)
		case isKey[i]:
			if buf, err = appendKey(buf, cols[i].TypeOID, v.Text); err != nil {
				return buf[:start], false, fmt.Errorf("column %s: %w", cols[i].Name, err)
			}
		default:
			return buf[:start], false, nil
		}
	}
	return buf, true, nil
}

// appendKey appends a key value's length and binary form, from its text.
func appendKey(buf []byte, oid uint32, text string) ([]byte, error) {
	switch oid {
	case int2OID, int4OID, int8OID:
		bits := 64
		if oid == int2OID {
			bits = 16
		} else if oid == int4OID {
			bits = 32
		}
		n, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return buf, fmt.Errorf("key value %q: %w", text, err)
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(bits/8))
		switch bits {
		case 16:
			return binary.BigEndian.AppendUint16(buf, uint16(n)), nil
		case 32:
			return binary.BigEndian.AppendUint32(buf, uint32(n)), nil
		}
		return binary.BigEndian.AppendUint64(buf, uint64(n)), nil
	case textOID, varcharOID:
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(text)))
		return append(buf, text...), nil
	case uuidOID:
		// PostgreSQL prints a uuid as 8-4-4-4-12 lower-case hex digits.
		if len(text) != 36 || text[8] != '-' || text[13] != '-' || text[18] != '-' || text[23] != '-' {
			return buf, fmt.Errorf("key value %q is not a uuid as PostgreSQL prints one", text)
		}
		var raw [16]byte
		digits := text[0:8] + text[9:13] + text[14:18] + text[19:23] + text[24:36]
		if _, err := hex.Decode(raw[:], []byte(digits)); err != nil {
			return buf, fmt.Errorf("key value %q: %w", text, err)
		}
		buf = binary.BigEndian.AppendUint32(buf, 16)
		return append(buf, raw[:]...), nil
	}
	return buf, fmt.Errorf("no binary form for a key of type oid %d", oid)
}

// ResultFormats are the result formats of t's rows read for a binary
// chunk, by column: text (0) for the key columns, binary (1) for the
// others.
func ResultFormats(t *change.Table) []int16 {
	formats := make([]int16, len(t.Columns))
	for i := range formats {
		formats[i] = 1
	}
	for _, k := range t.Key {
		formats[k] = 0
	}
	return formats
}

// Row is a result row as a table row: the values copied out of the
// reader's buffer, marked Binary where formats says so (nil: all text).
func Row(vals [][]byte, formats []int16) change.Row {
	row := make(change.Row, len(vals))
	for i, v := range vals {
		if v == nil {
			row[i] = change.Null
		} else {
			row[i] = change.Value{Text: string(v), Binary: formats != nil && formats[i] == 1}
		}
	}
	return row
}

// HasBinary reports whether a row carries a binary value.
func HasBinary(rows []change.Row) bool {
	for _, r := range rows {
		for _, v := range r {
			if v.Binary {
				return true
			}
		}
	}
	return false
}
