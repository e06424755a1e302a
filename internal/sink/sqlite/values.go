package sqlite

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// kind is how a column's values are stored (docs/type-mapping.md).
type kind uint8

const (
	kindText   kind = iota // TEXT holding the canonical text form
	kindInt                // smallint, integer, bigint: INTEGER
	kindBool               // boolean: INTEGER 0/1
	kindFloat4             // real: REAL, non-finite as TEXT
	kindFloat8             // double precision: REAL, non-finite as TEXT
	kindBytes              // bytea: BLOB
)

// kindOf maps a column by its neutral type tag (so a PostgreSQL domain
// over integer, or a MySQL INT, is stored as INTEGER).
func kindOf(c change.Column) kind {
	switch change.TagOf(c) {
	case change.TagInt16, change.TagInt32, change.TagInt64:
		return kindInt
	case change.TagBool:
		return kindBool
	case change.TagBytes:
		return kindBytes
	case change.TagFloat32:
		return kindFloat4
	case change.TagFloat64:
		return kindFloat8
	}
	return kindText
}

// floatTag is the tag whose canonical form a float kind prints.
func (k kind) floatTag() change.Tag {
	if k == kindFloat4 {
		return change.TagFloat32
	}
	return change.TagFloat64
}

// declType is the column's declared SQLite type, which sets its affinity.
// No DATE/TIME names: the driver would turn such values into time.Time.
func (k kind) declType() string {
	switch k {
	case kindInt, kindBool:
		return "INTEGER"
	case kindFloat4, kindFloat8:
		return "REAL"
	case kindBytes:
		return "BLOB"
	}
	return "TEXT"
}

// encode turns a source text value into the value to store. A value is
// stored natively only when decode gives back exactly the same text;
// anything else is kept as its text, so the mapping is lossless.
func encode(k kind, v change.Value) any {
	if v.Null {
		return nil
	}
	s := v.Text
	switch k {
	case kindText:
		return s
	case kindInt:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
			return n
		}
	case kindBool:
		switch s {
		case "t":
			return int64(1)
		case "f":
			return int64(0)
		}
	case kindFloat4, kindFloat8:
		// REAL cannot hold NaN (SQLite makes it NULL) nor -0 (it comes
		// back as 0); infinities are kept as text as documented.
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && !(f == 0 && math.Signbit(f)) && formatFloat(f, k) == s {
			return f
		}
	case kindBytes:
		if b, ok := decodeHex(s); ok {
			return b
		}
		// BLOB affinity converts nothing: other text stays text.
		return s
	}
	// INTEGER and REAL affinity would turn text that looks like a number
	// into one ("-0" into 0): such text goes in as a BLOB of its bytes.
	if looksNumeric(s) {
		return []byte(s)
	}
	return s
}

// decode renders a stored value in its canonical text form.
func decode(k kind, raw any) change.Value {
	switch v := raw.(type) {
	case nil:
		return change.Null
	case int64:
		switch k {
		case kindBool:
			if v != 0 {
				return change.Text("t")
			}
			return change.Text("f")
		case kindFloat4, kindFloat8:
			return change.Text(formatFloat(float64(v), k))
		}
		return change.Text(strconv.FormatInt(v, 10))
	case float64:
		return change.Text(formatFloat(v, k))
	case []byte:
		if k == kindBytes {
			return change.Text(change.FormatBytes(v))
		}
		return change.Text(string(v))
	case string:
		return change.Text(v)
	}
	// Not produced for the declared types we create; shown, not hidden.
	return change.Text(fmt.Sprint(raw))
}

// decodeHex reads bytea's hex output (\x followed by lowercase hex digits).
func decodeHex(s string) ([]byte, bool) {
	if !strings.HasPrefix(s, `\x`) {
		return nil, false
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil || hex.EncodeToString(b) != s[2:] {
		return nil, false
	}
	return b, true
}

// formatFloat prints f in its float kind's canonical form.
func formatFloat(f float64, k kind) string { return change.FormatFloat(f, k.floatTag()) }

// looksNumeric approximates when SQLite's numeric affinity would convert a
// text: digits, signs, a point and an exponent, around a parseable number.
// Words such as NaN or Infinity stay text in SQLite.
func looksNumeric(s string) bool {
	t := strings.TrimSpace(s)
	if strings.ContainsFunc(t, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.' || r == 'e' || r == 'E')
	}) {
		return false
	}
	_, err := strconv.ParseFloat(t, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}
