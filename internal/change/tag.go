package change

import (
	"encoding/json"
	"fmt"
)

// Tag is a column's neutral type: what its values are, whatever the
// source. Each source's codec writes a value of a tag in that tag's
// canonical text form (see Canonical and docs/type-mapping.md), and sinks
// and event encoders choose their storage by the tag, never by a source's
// type name or oid.
type Tag uint8

const (
	// TagOther is a type without a neutral twin (a PostgreSQL enum, range,
	// composite, network type…): its text is the source's own, kept as is.
	TagOther Tag = iota
	TagBool
	TagInt16
	TagInt32
	TagInt64
	TagDecimal // exact numbers, MySQL's BIGINT UNSIGNED included
	TagFloat32
	TagFloat64
	TagText
	TagBytes
	TagDate
	TagTime   // time of day without zone
	TagTimeTZ // time of day with a UTC offset
	TagTimestamp
	TagTimestampTZ
	TagInterval // a duration: PostgreSQL's interval, MySQL's TIME
	TagJSON
	TagUUID
	TagBits
	TagArray
	tagCount
)

var tagNames = [tagCount]string{
	TagOther: "other", TagBool: "bool", TagInt16: "int16", TagInt32: "int32", TagInt64: "int64",
	TagDecimal: "decimal", TagFloat32: "float32", TagFloat64: "float64", TagText: "text",
	TagBytes: "bytes", TagDate: "date", TagTime: "time", TagTimeTZ: "timetz",
	TagTimestamp: "timestamp", TagTimestampTZ: "timestamptz", TagInterval: "interval",
	TagJSON: "json", TagUUID: "uuid", TagBits: "bits", TagArray: "array",
}

func (t Tag) String() string {
	if t < tagCount {
		return tagNames[t]
	}
	return fmt.Sprintf("tag(%d)", uint8(t))
}

// ParseTag reads a tag's name.
func ParseTag(s string) (Tag, error) {
	for t, n := range tagNames {
		if n == s {
			return Tag(t), nil
		}
	}
	return TagOther, fmt.Errorf("unknown type tag %q", s)
}

// MarshalJSON writes the tag's name, so stored shapes and API responses
// read as words.
func (t Tag) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads a tag's name; an empty or missing one is TagOther.
func (t *Tag) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("type tag: %w", err)
	}
	if s == "" {
		*t = TagOther
		return nil
	}
	v, err := ParseTag(s)
	*t = v
	return err
}

// Integer reports whether the tag holds whole numbers of at most 64 bits.
func (t Tag) Integer() bool { return t == TagInt16 || t == TagInt32 || t == TagInt64 }

// Float reports whether the tag holds IEEE floating-point numbers.
func (t Tag) Float() bool { return t == TagFloat32 || t == TagFloat64 }

// PostgresTag is the tag of a PostgreSQL built-in type by its oid (a
// domain's base type oid for a domain): PostgreSQL's output under the
// session settings tidemark pins is the canonical form, so its codec is
// the identity. Types without a twin are TagOther, character(n) among
// them: its values carry their padding, and it compares without it.
func PostgresTag(oid uint32) Tag {
	if t, ok := pgTags[oid]; ok {
		return t
	}
	if _, ok := pgArrayTypes[oid]; ok {
		return TagArray
	}
	return TagOther
}

var pgTags = map[uint32]Tag{
	16: TagBool, 21: TagInt16, 23: TagInt32, 20: TagInt64, 1700: TagDecimal,
	700: TagFloat32, 701: TagFloat64,
	25: TagText, 1043: TagText,
	17: TagBytes, 1082: TagDate, 1083: TagTime, 1266: TagTimeTZ,
	1114: TagTimestamp, 1184: TagTimestampTZ, 1186: TagInterval,
	114: TagJSON, 3802: TagJSON, 2950: TagUUID, 1560: TagBits, 1562: TagBits,
}

// pgArrayTypes are the array types of the built-in types above.
var pgArrayTypes = map[uint32]struct{}{
	1000: {}, 1005: {}, 1007: {}, 1016: {}, 1231: {}, 1021: {}, 1022: {},
	1009: {}, 1015: {}, 1001: {}, 1182: {}, 1183: {},
	1270: {}, 1115: {}, 1185: {}, 1187: {}, 199: {}, 3807: {}, 2951: {}, 1561: {}, 1563: {},
}

// TagOf is the column's tag: its own when the source set one, otherwise
// the tag of its PostgreSQL base type (columns described before tags
// existed, or built by hand in tests).
func TagOf(c Column) Tag {
	if c.Tag != TagOther {
		return c.Tag
	}
	oid := c.BaseOID
	if oid == 0 {
		oid = c.TypeOID
	}
	return PostgresTag(oid)
}
