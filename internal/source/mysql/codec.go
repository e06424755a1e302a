package mysql

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// codec turns one column's values, as either a chunk read (go-mysql's
// binary protocol, results unconverted from the column's character set) or
// a binlog row (go-mysql's replication decoder) gives them, into the one
// text form of the PostgreSQL type the column maps to. Both paths go
// through the same codec, so the same stored value always gives the same
// text.
type codec struct {
	kind     kind
	bits     int      // integers: width; bit: n
	unsigned bool     // integers
	length   int      // binary(n): n
	labels   []string // enum, set
	charset  charset  // text kinds
}

type kind uint8

const (
	kindInt kind = iota + 1
	kindDecimal
	kindFloat4
	kindFloat8
	kindBit
	kindDate
	kindDatetime
	kindTimestamp
	kindTime
	kindText
	kindChar // text whose trailing spaces MySQL never returns
	kindJSON
	kindEnum
	kindSet
	kindBytes
	kindBinary // fixed length, padded with 0x00
	kindGeometry
)

var intBits = map[string]int{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64, "year": 16}

// codecFor builds a column's codec from its change.Column alone (the native
// type in Native, the PostgreSQL type in TypeOID, the collation), so that the
// stream can decode rows of any table it is given.
func codecFor(c change.Column) (codec, error) {
	native := nativeType(c)
	dt := dataType(native)
	switch dt {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		return codec{kind: kindInt, bits: intBits[dt], unsigned: strings.Contains(native, "unsigned")}, nil
	case "decimal":
		return codec{kind: kindDecimal}, nil
	case "float":
		return codec{kind: kindFloat4}, nil
	case "double":
		return codec{kind: kindFloat8}, nil
	case "bit":
		return codec{kind: kindBit, bits: max(typeLength(native), 1)}, nil
	case "date":
		return codec{kind: kindDate}, nil
	case "datetime":
		return codec{kind: kindDatetime}, nil
	case "timestamp":
		return codec{kind: kindTimestamp}, nil
	case "time":
		return codec{kind: kindTime}, nil
	case "binary":
		return codec{kind: kindBinary, length: typeLength(native)}, nil
	case "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return codec{kind: kindBytes}, nil
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return codec{kind: kindGeometry}, nil
	case "enum", "set":
		labels, err := typeLabels(native)
		if err != nil {
			return codec{}, err
		}
		cs, err := charsetOf(c.Collation)
		return codec{kind: map[string]kind{"enum": kindEnum, "set": kindSet}[dt], labels: labels, charset: cs}, err
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json":
		cs, err := charsetOf(c.Collation)
		k := kindText
		switch {
		case c.TypeOID == oidJSON:
			k = kindJSON
		case dt == "char":
			k = kindChar
		}
		return codec{kind: k, charset: cs}, err
	}
	return codec{}, fmt.Errorf("type %s is not supported by the MySQL source", native)
}

// nativeType is a column's MySQL type: Native, or Type for a column
// described before Native existed.
func nativeType(c change.Column) string {
	if c.Native != "" {
		return c.Native
	}
	return c.Type
}

// value converts one value; nil is NULL.
func (k codec) value(v any) (change.Value, error) {
	if v == nil {
		return change.Null, nil
	}
	s, err := k.text(v)
	if err != nil {
		return change.Value{}, err
	}
	return change.Text(s), nil
}

func (k codec) text(v any) (string, error) {
	switch k.kind {
	case kindInt:
		return k.integer(v)
	case kindFloat4, kindFloat8:
		return floatText(v, k.kind)
	case kindBit:
		return k.bitString(v)
	case kindEnum:
		if n, ok := v.(int64); ok {
			return k.enumLabel(n)
		}
	case kindSet:
		if n, ok := v.(int64); ok {
			return k.setLabels(n), nil
		}
	}
	b, err := asBytes(v)
	if err != nil {
		return "", err
	}
	switch k.kind {
	case kindDecimal:
		return string(b), nil
	case kindDate:
		return dateText(string(b))
	case kindDatetime:
		return timestampText(string(b), "")
	case kindTimestamp:
		return timestampText(string(b), "+00")
	case kindTime:
		return intervalText(string(b))
	case kindBytes:
		return change.FormatBytes(b), nil
	case kindBinary:
		return change.FormatBytes(padZero(b, k.length)), nil
	case kindGeometry:
		// MySQL stores a 4-byte SRID before the WKB: the WKB alone is sent.
		if len(b) < 4 {
			return "", fmt.Errorf("geometry value of %d bytes is shorter than its SRID", len(b))
		}
		return change.FormatBytes(b[4:]), nil
	case kindChar:
		return k.charset.decode(trimSpaces(b))
	}
	return k.charset.decode(b) // text, json, enum and set labels
}

func asBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case fmt.Stringer:
		return []byte(x.String()), nil
	}
	return nil, fmt.Errorf("unexpected %T value", v)
}

// integer prints any Go integer; the binlog gives unsigned columns as
// signed integers of the column's width, reinterpreted here.
func (k codec) integer(v any) (string, error) {
	var n int64
	switch x := v.(type) {
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case int64:
		n = x
	case int32:
		n = int64(x)
	case int16:
		n = int64(x)
	case int8:
		n = int64(x)
	case int:
		n = int64(x)
	case uint32, uint16, uint8:
		return fmt.Sprint(x), nil
	case []byte, string:
		b, _ := asBytes(v)
		return string(b), nil
	default:
		return "", fmt.Errorf("unexpected %T value for an integer column", v)
	}
	var buf [20]byte
	return string(k.appendInt(buf[:0], n)), nil
}

// appendInt prints a signed integer, reinterpreted as unsigned of the
// column's width for an unsigned column.
func (k codec) appendInt(dst []byte, n int64) []byte {
	if k.unsigned && n < 0 {
		return strconv.AppendUint(dst, uint64(n)&(1<<k.bits-1), 10)
	}
	return strconv.AppendInt(dst, n, 10)
}

// bitString prints a BIT(n) value as n binary digits (PostgreSQL bit(n)):
// a chunk read gives big-endian bytes, the binlog an int64.
func (k codec) bitString(v any) (string, error) {
	var n uint64
	switch x := v.(type) {
	case int64:
		n = uint64(x)
	case []byte, string:
		b, _ := asBytes(v)
		if len(b) > 8 {
			return "", fmt.Errorf("bit value of %d bytes", len(b))
		}
		for _, c := range b {
			n = n<<8 | uint64(c)
		}
	default:
		return "", fmt.Errorf("unexpected %T value for a bit column", v)
	}
	if bits.Len64(n) > k.bits {
		return "", fmt.Errorf("bit value %b is wider than bit(%d)", n, k.bits)
	}
	s := strconv.FormatUint(n, 2)
	return strings.Repeat("0", k.bits-len(s)) + s, nil
}

// enumLabel is the label of a 1-based enum index; 0 is MySQL's error value
// ” (stored for an invalid label outside strict mode).
func (k codec) enumLabel(i int64) (string, error) {
	if i == 0 {
		return "", nil
	}
	if i < 0 || int(i) > len(k.labels) {
		return "", fmt.Errorf("enum index %d outside the %d labels", i, len(k.labels))
	}
	return k.labels[i-1], nil
}

// setLabels joins the labels of a set's bitmask, in definition order (as
// MySQL prints a set).
func (k codec) setLabels(mask int64) string {
	var picked []string
	for i, l := range k.labels {
		if mask&(1<<i) != 0 {
			picked = append(picked, l)
		}
	}
	return strings.Join(picked, ",")
}

func padZero(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return append(append(make([]byte, 0, n), b...), make([]byte, n-len(b))...)
}

func trimSpaces(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// floatText prints a float as PostgreSQL does with extra_float_digits = 1:
// the shortest digits that read back exactly (for float4, as a 32-bit
// float), in exponent form when the decimal exponent is below -4 or at
// least 6 (float4) or 15 (float8). MySQL has no NaN or infinities.
func floatText(v any, k kind) (string, error) {
	var f float64
	switch x := v.(type) {
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		return "", fmt.Errorf("unexpected %T value for a float column", v)
	}
	size, limit := 64, 15
	if k == kindFloat4 {
		size, limit = 32, 6
	}
	e := strconv.FormatFloat(f, 'e', -1, size)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= limit {
		return e, nil
	}
	return strconv.FormatFloat(f, 'f', -1, size), nil
}

// zeroDate is MySQL's zero date, written as PostgreSQL's -infinity.
const zeroDate = "0000-00-00"

// dateText checks a "YYYY-MM-DD" date: the zero date becomes -infinity, a
// date with a zero month or day (NO_ZERO_IN_DATE off) has no PostgreSQL
// form and fails.
func dateText(s string) (string, error) {
	if s == zeroDate {
		return "-infinity", nil
	}
	if len(s) != 10 || s[5:7] == "00" || s[8:10] == "00" {
		return "", fmt.Errorf("date %q has no PostgreSQL form (a zero month or day): fix the row, and set sql_mode NO_ZERO_IN_DATE to keep such dates out", s)
	}
	return s, nil
}

// timestampText prints "YYYY-MM-DD HH:MM:SS[.ffffff]" as PostgreSQL's
// timestamp does: fraction without trailing zeros, the zone suffix after.
func timestampText(s, zone string) (string, error) {
	if strings.HasPrefix(s, zeroDate) {
		if strings.Trim(s[len(zeroDate):], " 0:.") == "" {
			return "-infinity", nil
		}
	}
	if len(s) < 19 {
		return "", fmt.Errorf("unexpected date and time %q", s)
	}
	if _, err := dateText(s[:10]); err != nil {
		return "", err
	}
	return trimFraction(s) + zone, nil
}

// intervalText prints MySQL's "[-]H…H:MM:SS[.ffffff]" as PostgreSQL's
// interval prints the same span (IntervalStyle postgres): the hours stay
// hours, at least two digits, the fraction without trailing zeros.
func intervalText(s string) (string, error) {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	h, rest, ok := strings.Cut(s, ":")
	if !ok || len(rest) < 5 {
		return "", fmt.Errorf("unexpected time %q", s)
	}
	if len(h) < 2 {
		h = "0" + h
	}
	return sign + h + ":" + trimFraction(rest), nil
}

func trimFraction(s string) string {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
