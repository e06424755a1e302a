package change

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The canonical text form of each tag, which every source's codec writes
// and every sink reads (docs/type-mapping.md, "Canonical forms"). They
// are PostgreSQL's output forms under the session settings tidemark pins
// (ISO dates, UTC, shortest-exact floats, hex bytes), chosen so that the
// PostgreSQL codec is the identity; other sources convert.
var (
	reInt       = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)
	reDecimal   = regexp.MustCompile(`^(NaN|Infinity|-Infinity|-?(0|[1-9][0-9]*)(\.[0-9]+)?)$`)
	reBytes     = regexp.MustCompile(`^\\x([0-9a-f]{2})*$`)
	reDate      = regexp.MustCompile(`^(infinity|-infinity|[0-9]{4,}-[0-9]{2}-[0-9]{2}( BC)?)$`)
	reClock     = `[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?`
	reOffset    = `[+-][0-9]{2}(:[0-9]{2}(:[0-9]{2})?)?`
	reTime      = regexp.MustCompile(`^` + reClock + `$`)
	reTimeTZ    = regexp.MustCompile(`^` + reClock + reOffset + `$`)
	reTimestamp = regexp.MustCompile(`^(infinity|-infinity|[0-9]{4,}-[0-9]{2}-[0-9]{2} ` + reClock + `( BC)?)$`)
	reTimeUTC   = regexp.MustCompile(`^(infinity|-infinity|[0-9]{4,}-[0-9]{2}-[0-9]{2} ` + reClock + `\+00( BC)?)$`)
	reInterval  = regexp.MustCompile(`^([+-]?[0-9]+ years? ?)?([+-]?[0-9]+ mons? ?)?([+-]?[0-9]+ days? ?)?([+-]?[0-9]+:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?)?$`)
	reUUID      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reBits      = regexp.MustCompile(`^[01]*$`)
)

// Canonical checks that s is a value of tag t in its canonical form, and
// says which form was expected when it is not. Sources' codec tests call
// it on every value they produce.
func Canonical(t Tag, s string) error {
	ok := true
	switch t {
	case TagBool:
		ok = s == "t" || s == "f"
	case TagInt16, TagInt32, TagInt64:
		ok = reInt.MatchString(s) && intFits(t, s)
	case TagDecimal:
		// PostgreSQL never prints a negative zero.
		ok = reDecimal.MatchString(s) && (strings.Trim(s, "-0.") != "" || !strings.HasPrefix(s, "-"))
	case TagFloat32, TagFloat64:
		f, err := strconv.ParseFloat(s, 64)
		ok = (err == nil || s == "NaN" || s == "Infinity" || s == "-Infinity") && FormatFloat(f, t) == s
	case TagBytes:
		ok = reBytes.MatchString(s)
	case TagDate:
		ok = reDate.MatchString(s)
	case TagTime:
		ok = reTime.MatchString(s)
	case TagTimeTZ:
		ok = reTimeTZ.MatchString(s)
	case TagTimestamp:
		ok = reTimestamp.MatchString(s)
	case TagTimestampTZ:
		ok = reTimeUTC.MatchString(s)
	case TagInterval:
		ok = s != "" && reInterval.MatchString(s) && !strings.HasSuffix(s, " ")
	case TagJSON:
		ok = json.Valid([]byte(s))
	case TagUUID:
		ok = reUUID.MatchString(s)
	case TagBits:
		ok = reBits.MatchString(s)
	case TagArray:
		ok = strings.HasSuffix(s, "}") && utf8.ValidString(s)
	case TagText, TagOther:
		ok = utf8.ValidString(s) && !strings.ContainsRune(s, 0)
	}
	if !ok {
		return fmt.Errorf("%q is not a %s in canonical form (%s)", s, t, canonicalForms[t])
	}
	return nil
}

func intFits(t Tag, s string) bool {
	bits := map[Tag]int{TagInt16: 16, TagInt32: 32, TagInt64: 64}[t]
	_, err := strconv.ParseInt(s, 10, bits)
	return err == nil
}

// canonicalForms says each tag's form in words, for errors and the docs.
var canonicalForms = [tagCount]string{
	TagOther:       "the source's own text, valid UTF-8",
	TagBool:        "t or f",
	TagInt16:       "decimal digits, optional minus, no leading zeros, within 16 bits",
	TagInt32:       "decimal digits, optional minus, no leading zeros, within 32 bits",
	TagInt64:       "decimal digits, optional minus, no leading zeros, within 64 bits",
	TagDecimal:     "digits with an optional fraction (its scale's zeros kept), or NaN, Infinity, -Infinity",
	TagFloat32:     "the shortest digits that read back exactly, exponent form below 1e-4 or from 1e+06, or NaN, Infinity, -Infinity",
	TagFloat64:     "the shortest digits that read back exactly, exponent form below 1e-4 or from 1e+15, or NaN, Infinity, -Infinity",
	TagText:        "the characters, valid UTF-8 without NUL",
	TagBytes:       `\x and two lowercase hex digits per byte`,
	TagDate:        "YYYY-MM-DD, BC suffixed, or ±infinity",
	TagTime:        "HH:MM:SS with up to six fraction digits",
	TagTimeTZ:      "HH:MM:SS[.ffffff] and a UTC offset ±HH[:MM[:SS]]",
	TagTimestamp:   "YYYY-MM-DD HH:MM:SS[.ffffff], BC suffixed, or ±infinity",
	TagTimestampTZ: "YYYY-MM-DD HH:MM:SS[.ffffff]+00 in UTC, or ±infinity",
	TagInterval:    "[N years] [N mons] [N days] [-]H:MM:SS[.ffffff], each part signed",
	TagJSON:        "JSON text as the source holds it",
	TagUUID:        "lowercase 8-4-4-4-12 hex",
	TagBits:        "one 0 or 1 per bit",
	TagArray:       "PostgreSQL's array literal {…}",
}

// CanonicalForm says the canonical form of a tag in words.
func CanonicalForm(t Tag) string {
	if t < tagCount {
		return canonicalForms[t]
	}
	return ""
}

// FormatBytes prints b in the canonical form of TagBytes, PostgreSQL's hex
// bytea text (`\x` and two lowercase hex digits a byte), in one allocation:
// the text of a large value is twice its size.
func FormatBytes(b []byte) string {
	var sb strings.Builder
	sb.Grow(2 + hex.EncodedLen(len(b)))
	sb.WriteString(`\x`)
	var buf [512]byte
	for len(b) > 0 {
		n := min(len(b), len(buf)/2)
		hex.Encode(buf[:], b[:n])
		sb.Write(buf[:2*n])
		b = b[n:]
	}
	return sb.String()
}

// FormatFloat prints f in the canonical form of a float tag, which is
// PostgreSQL's with extra_float_digits > 0: the shortest digits that read
// back exactly, in exponent form when the decimal exponent is below -4 or
// at least 15 (float64) or 6 (float32), with at least two exponent digits
// ("1e+100", "1.5e-07").
func FormatFloat(f float64, t Tag) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	limit := 15
	if t == TagFloat32 {
		limit = 6
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= limit {
		return e
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
