package change

// Built-in type oids the schema rules below know; they are the same on
// every PostgreSQL server.
const (
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidFloat4      = 700
	oidFloat8      = 701
	oidVarchar     = 1043
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidTimetz      = 1266
	oidVarbit      = 1562
	oidNumeric     = 1700
)

// Widens reports whether a column whose type changes from from's to to's
// keeps every value: an integer to a wider integer, real to double
// precision (whose text differs: WidenedTextDiffers), varchar(n) to a
// longer varchar, unbounded varchar or text, numeric(p,s) to
// numeric(p2,s) with p2 >= p or to unconstrained numeric, and a higher
// (or no) precision of time, timestamp, timestamptz and bit varying. Nothing else widens: timestamp
// to timestamptz, for one, reads each value in the session's time zone of
// the ALTER, which a destination cannot know. See docs/schema-changes.md.
func Widens(from, to Column) bool {
	if from.TypeOID == to.TypeOID && from.TypeMod == to.TypeMod {
		return false
	}
	switch from.TypeOID {
	case oidInt2:
		return to.TypeOID == oidInt4 || to.TypeOID == oidInt8
	case oidInt4:
		return to.TypeOID == oidInt8
	case oidFloat4:
		return to.TypeOID == oidFloat8
	case oidVarchar:
		return to.TypeOID == oidText || (to.TypeOID == oidVarchar && limitWidens(from.TypeMod, to.TypeMod))
	case oidNumeric:
		return to.TypeOID == oidNumeric && numericWidens(from.TypeMod, to.TypeMod)
	case oidTime, oidTimetz, oidTimestamp, oidTimestamptz, oidVarbit:
		return to.TypeOID == from.TypeOID && limitWidens(from.TypeMod, to.TypeMod)
	}
	return false
}

// WidenedTextDiffers reports whether a value's text in from's type differs
// from its text after the column widened to to's type: real to double
// precision (the ALTER turns 20.1 into 20.100000381469727). Every other
// widening keeps each value's text.
func WidenedTextDiffers(from, to Column) bool {
	return from.TypeOID == oidFloat4 && to.TypeOID == oidFloat8
}

// limitWidens: a length or precision modifier grows or goes (-1 is none).
func limitWidens(from, to int32) bool {
	return to == -1 || (from != -1 && to >= from)
}

// numericWidens: numeric(p,s) to numeric(p2,s), p2 >= p, or to numeric.
// The modifier is ((p << 16) | (s & 0x7ff)) + 4.
func numericWidens(from, to int32) bool {
	if to == -1 {
		return true
	}
	if from == -1 {
		return false
	}
	fp, fs := (from-4)>>16&0xffff, (from-4)&0x7ff
	tp, ts := (to-4)>>16&0xffff, (to-4)&0x7ff
	return tp >= fp && ts == fs
}

// SameType reports whether two columns have the same type and modifier.
func SameType(a, b Column) bool { return a.TypeOID == b.TypeOID && a.TypeMod == b.TypeMod }

// SameShape reports whether two shapes of a table have the same columns
// (attribute number, name, type and modifier) in the same order and the
// same key. Collations and NOT NULL do not count: no destination follows
// them.
func SameShape(a, b *Table) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.ID != b.ID || len(a.Columns) != len(b.Columns) || len(a.Key) != len(b.Key) {
		return false
	}
	for i, c := range a.Columns {
		d := b.Columns[i]
		if c.Num != d.Num || c.Name != d.Name || !SameType(c, d) {
			return false
		}
	}
	for i, k := range a.Key {
		if b.Key[i] != k {
			return false
		}
	}
	return true
}

// ColumnByNum returns the index of the column with attribute number n, or
// -1.
func (t *Table) ColumnByNum(n int16) int {
	for i, c := range t.Columns {
		if c.Num == n {
			return i
		}
	}
	return -1
}
