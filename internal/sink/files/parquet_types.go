package files

import (
	"encoding/hex"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/tidemark/tidemark/internal/change"
)

// pqKind is how a table column's values are stored in a Parquet file,
// chosen by the column's tag (docs/destinations.md, "Parquet").
type pqKind uint8

const (
	pqString pqKind = iota
	pqBool
	pqInt16
	pqInt32
	pqInt64
	pqFloat
	pqDouble
	pqBytes
	pqDate
	pqTime
	pqTimestamp
	pqTimestampTZ
	pqUUID
	pqJSON
	pqDecimal
)

type pqType struct {
	kind             pqKind
	precision, scale int // of a decimal
}

var pqKinds = map[change.Tag]pqKind{
	change.TagBool: pqBool, change.TagInt16: pqInt16, change.TagInt32: pqInt32, change.TagInt64: pqInt64,
	change.TagFloat32: pqFloat, change.TagFloat64: pqDouble, change.TagBytes: pqBytes, change.TagDate: pqDate,
	change.TagTime: pqTime, change.TagTimestamp: pqTimestamp, change.TagTimestampTZ: pqTimestampTZ,
	change.TagUUID: pqUUID, change.TagJSON: pqJSON,
}

// pqTypeOf is a column's Parquet type. A decimal whose precision and
// scale the column type does not give (PostgreSQL's unconstrained
// numeric) is a string: DECIMAL needs both. Tags without a Parquet twin
// (text, intervals, times with zone, bits, arrays, other) are strings too.
func pqTypeOf(c change.Column) pqType {
	tag := change.TagOf(c)
	if tag == change.TagDecimal {
		if p, s, ok := numericModifier(c); ok {
			return pqType{kind: pqDecimal, precision: p, scale: s}
		}
		return pqType{kind: pqString}
	}
	return pqType{kind: pqKinds[tag]}
}

// numericModifier reads numeric(p,s) from a column's type modifier,
// ((p << 16) | s) + 4.
func numericModifier(c change.Column) (p, s int, ok bool) {
	const oidNumeric = 1700
	if (c.TypeOID != oidNumeric && c.BaseOID != oidNumeric) || c.TypeMod < 4 {
		return 0, 0, false
	}
	m := c.TypeMod - 4
	p, s = int(m>>16&0xffff), int(m&0x7ff)
	return p, s, p >= 1 && s <= p
}

// decimalBytes is the length of the FIXED_LEN_BYTE_ARRAY that holds any
// unscaled value of a precision in two's complement.
func decimalBytes(precision int) int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(precision)), nil)
	return (limit.BitLen() + 1 + 7) / 8
}

func (t pqType) node() parquet.Node {
	var n parquet.Node
	switch t.kind {
	case pqBool:
		n = parquet.Leaf(parquet.BooleanType)
	case pqInt16:
		n = parquet.Int(16)
	case pqInt32:
		n = parquet.Int(32)
	case pqInt64:
		n = parquet.Int(64)
	case pqFloat:
		n = parquet.Leaf(parquet.FloatType)
	case pqDouble:
		n = parquet.Leaf(parquet.DoubleType)
	case pqBytes:
		n = parquet.Leaf(parquet.ByteArrayType)
	case pqDate:
		n = parquet.Date()
	case pqTime:
		n = parquet.TimeAdjusted(parquet.Microsecond, false)
	case pqTimestamp:
		n = parquet.TimestampAdjusted(parquet.Microsecond, false)
	case pqTimestampTZ:
		n = parquet.TimestampAdjusted(parquet.Microsecond, true)
	case pqUUID:
		n = parquet.UUID()
	case pqJSON:
		n = parquet.JSON()
	case pqDecimal:
		phys := parquet.FixedLenByteArrayType(decimalBytes(t.precision))
		switch {
		case t.precision <= 9:
			phys = parquet.Int32Type
		case t.precision <= 18:
			phys = parquet.Int64Type
		}
		n = parquet.Decimal(t.scale, t.precision, phys)
	default:
		n = parquet.String()
	}
	return parquet.Optional(n)
}

// encode stores a value's canonical text in the column's type. false
// means the type cannot hold it exactly (±infinity, years outside
// 0001-9999, 24:00:00, a decimal's NaN or digits past its type): the
// value then goes as text in the event's out_of_range column. Every
// value is read back and compared, so none is altered silently.
func (t pqType) encode(s string) (parquet.Value, bool) {
	v, ok := t.encodeText(s)
	if !ok {
		return parquet.Value{}, false
	}
	back, ok := t.decode(v)
	return v, ok && back == s
}

func (t pqType) encodeText(s string) (parquet.Value, bool) {
	switch t.kind {
	case pqBool:
		return parquet.BooleanValue(s == "t"), s == "t" || s == "f"
	case pqInt16, pqInt32:
		bits := 32
		if t.kind == pqInt16 {
			bits = 16
		}
		n, err := strconv.ParseInt(s, 10, bits)
		return parquet.Int32Value(int32(n)), err == nil
	case pqInt64:
		n, err := strconv.ParseInt(s, 10, 64)
		return parquet.Int64Value(n), err == nil
	case pqFloat:
		f, err := strconv.ParseFloat(s, 32)
		return parquet.FloatValue(float32(f)), err == nil
	case pqDouble:
		f, err := strconv.ParseFloat(s, 64)
		return parquet.DoubleValue(f), err == nil
	case pqBytes:
		b, err := hex.DecodeString(strings.TrimPrefix(s, `\x`))
		return parquet.ByteArrayValue(b), err == nil && strings.HasPrefix(s, `\x`)
	case pqDate:
		d, err := time.Parse(time.DateOnly, s)
		return parquet.Int32Value(int32(d.Unix() / 86400)), err == nil && d.Year() >= 1
	case pqTime:
		c, err := time.Parse(time.TimeOnly, s)
		us := (int64(c.Hour())*3600+int64(c.Minute())*60+int64(c.Second()))*1e6 + int64(c.Nanosecond()/1e3)
		return parquet.Int64Value(us), err == nil
	case pqTimestamp, pqTimestampTZ:
		if t.kind == pqTimestampTZ {
			var utc bool
			if s, utc = strings.CutSuffix(s, "+00"); !utc {
				return parquet.Value{}, false
			}
		}
		ts, err := time.Parse(time.DateTime, s)
		return parquet.Int64Value(ts.UnixMicro()), err == nil && ts.Year() >= 1
	case pqUUID:
		b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
		return parquet.FixedLenByteArrayValue(b), err == nil && len(b) == 16
	case pqDecimal:
		return t.encodeDecimal(s)
	}
	return parquet.ByteArrayValue([]byte(s)), true
}

// encodeDecimal stores the unscaled digits; the text must have exactly
// the scale's fraction digits, as numeric(p,s) prints.
func (t pqType) encodeDecimal(s string) (parquet.Value, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) != t.scale {
		return parquet.Value{}, false
	}
	u, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok || len(strings.TrimLeft(u.String(), "-0")) > t.precision {
		return parquet.Value{}, false
	}
	switch {
	case t.precision <= 9:
		return parquet.Int32Value(int32(u.Int64())), true
	case t.precision <= 18:
		return parquet.Int64Value(u.Int64()), true
	}
	n := decimalBytes(t.precision)
	if u.Sign() < 0 { // two's complement: 2^(8n) + u
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	return parquet.FixedLenByteArrayValue(u.FillBytes(make([]byte, n))), true
}

// decode is a stored value's canonical text.
func (t pqType) decode(v parquet.Value) (string, bool) {
	switch t.kind {
	case pqBool:
		if v.Boolean() {
			return "t", true
		}
		return "f", true
	case pqInt16, pqInt32:
		return strconv.FormatInt(int64(v.Int32()), 10), true
	case pqInt64:
		return strconv.FormatInt(v.Int64(), 10), true
	case pqFloat:
		return formatFloat32(v.Float()), true
	case pqDouble:
		return change.FormatFloat(v.Double(), change.TagFloat64), true
	case pqBytes:
		return change.FormatBytes(v.ByteArray()), true
	case pqDate:
		return time.Unix(int64(v.Int32())*86400, 0).UTC().Format(time.DateOnly), true
	case pqTime:
		return time.UnixMicro(v.Int64()).UTC().Format("15:04:05.999999"), true
	case pqTimestamp:
		return time.UnixMicro(v.Int64()).UTC().Format("2006-01-02 15:04:05.999999"), true
	case pqTimestampTZ:
		return time.UnixMicro(v.Int64()).UTC().Format("2006-01-02 15:04:05.999999") + "+00", true
	case pqUUID:
		b := v.ByteArray()
		if len(b) != 16 {
			return "", false
		}
		h := hex.EncodeToString(b)
		return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
	case pqDecimal:
		return t.decodeDecimal(v), true
	}
	return string(v.ByteArray()), true
}

func (t pqType) decodeDecimal(v parquet.Value) string {
	var u *big.Int
	switch {
	case t.precision <= 9:
		u = big.NewInt(int64(v.Int32()))
	case t.precision <= 18:
		u = big.NewInt(v.Int64())
	default:
		b := v.ByteArray()
		u = new(big.Int).SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 {
			u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
	}
	sign, digits := "", u.String()
	if u.Sign() < 0 {
		sign, digits = "-", digits[1:]
	}
	if t.scale == 0 {
		return sign + digits
	}
	if len(digits) <= t.scale {
		digits = strings.Repeat("0", t.scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-t.scale] + "." + digits[len(digits)-t.scale:]
}

// formatFloat32 is change.FormatFloat for a float32's own shortest
// digits.
func formatFloat32(f float32) string {
	if s := change.FormatFloat(float64(f), change.TagFloat32); strings.ContainsAny(s, "NI") {
		return s // NaN, ±Infinity
	}
	e := strconv.FormatFloat(float64(f), 'e', -1, 32)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 6 {
		return e
	}
	return strconv.FormatFloat(float64(f), 'f', -1, 32)
}
