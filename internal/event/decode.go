package event

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// DecodeValue is the inverse of the encoder's value mapping: it reads a
// column's value in an event back into its tag's canonical text form
// (change.Canonical). For a canonical value v, DecodeValue(Encode(v)) is v,
// except where the mode drops information (docs/events.md, "Reading events
// back"): a time with zone comes back in UTC, a bit string of unbounded
// width as whole bytes. Comparable gives a source value in that same
// form, so a comparison of both sides sees no false difference.
func DecodeValue(c change.Column, raw json.RawMessage) (change.Value, error) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return change.Null, nil
	}
	if string(raw) == unavailableJSON || string(raw) == unavailableBase64JSON {
		return change.Value{Unchanged: true}, nil
	}
	s, err := decodeText(c, raw)
	if err != nil {
		return change.Value{}, fmt.Errorf("column %s (%s) value %.40s: %w", c.Name, change.TagOf(c), raw, err)
	}
	return change.Text(s), nil
}

func decodeText(c change.Column, raw json.RawMessage) (string, error) {
	tag := change.TagOf(c)
	switch tag {
	case change.TagBool:
		return decodeBool(raw, "t", "f")
	case change.TagInt16, change.TagInt32, change.TagInt64:
		if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
			return "", fmt.Errorf("not an integer")
		}
		return string(raw), nil
	case change.TagFloat32, change.TagFloat64:
		if raw[0] == '"' {
			return stringOf(raw)
		}
		if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
			return "", fmt.Errorf("not a number")
		}
		return string(raw), nil
	case change.TagBytes:
		b, err := base64Of(raw)
		if err != nil {
			return "", err
		}
		return change.FormatBytes(b), nil
	case change.TagBits:
		return decodeBits(c, raw)
	case change.TagDate:
		return decodeDate(raw)
	case change.TagTime:
		us, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return "", fmt.Errorf("not microseconds")
		}
		return formatClock(us), nil
	case change.TagTimeTZ:
		s, err := stringOf(raw)
		if err != nil {
			return "", err
		}
		if !reZonedTime.MatchString(s) {
			return "", fmt.Errorf("not a time of day in UTC")
		}
		return strings.TrimSuffix(s, "Z") + "+00", nil
	case change.TagTimestamp:
		return decodeTimestamp(c, raw)
	case change.TagTimestampTZ:
		return decodeZonedTimestamp(raw)
	case change.TagInterval:
		s, err := stringOf(raw)
		if err != nil {
			return "", err
		}
		return pgInterval(s)
	}
	// decimal, text, json, uuid, arrays and other types travel as their
	// canonical text.
	return stringOf(raw)
}

func stringOf(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("not a string")
	}
	return s, nil
}

func decodeBool(raw json.RawMessage, yes, no string) (string, error) {
	switch string(raw) {
	case "true":
		return yes, nil
	case "false":
		return no, nil
	}
	return "", fmt.Errorf("not a boolean")
}

func base64Of(raw json.RawMessage) ([]byte, error) {
	s, err := stringOf(raw)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	return b, nil
}

// decodeBits reads bit(1)'s boolean, or the little-endian bytes of a
// wider string: as many bits as the declared width, or whole bytes when
// the width is unbounded (the event does not carry the length).
func decodeBits(c change.Column, raw json.RawMessage) (string, error) {
	if raw[0] != '"' {
		return decodeBool(raw, "1", "0")
	}
	b, err := base64Of(raw)
	if err != nil {
		return "", err
	}
	n := bitWidth(c)
	if n == 0 {
		n = 8 * len(b)
	}
	out := make([]byte, n)
	for i := range n {
		bit := byte('0')
		if i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0 {
			bit = '1'
		}
		out[n-1-i] = bit
	}
	return string(out), nil
}

func decodeDate(raw json.RawMessage) (string, error) {
	days, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", fmt.Errorf("not a day number")
	}
	switch days {
	case math.MaxInt32:
		return "infinity", nil
	case math.MinInt32:
		return "-infinity", nil
	}
	if days > 1e11 || days < -1e11 {
		return "", fmt.Errorf("day %d is out of range", days)
	}
	return formatCivil(time.Unix(days*86400, 0).UTC(), false), nil
}

func decodeTimestamp(c change.Column, raw json.RawMessage) (string, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", fmt.Errorf("not a time since 1970")
	}
	millis := c.TypeMod >= 0 && c.TypeMod <= 3
	inf, negInf := int64(infinityMicros), int64(negInfinityMicros)
	if millis {
		inf, negInf = inf/1000, negInf/1000
	}
	switch n {
	case inf:
		return "infinity", nil
	case negInf:
		return "-infinity", nil
	}
	if millis {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return "", fmt.Errorf("milliseconds out of range")
		}
		n *= 1000
	}
	return formatCivil(time.UnixMicro(n).UTC(), true), nil
}

var (
	reZonedTime      = regexp.MustCompile(`^[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$`)
	reZonedTimestamp = regexp.MustCompile(`^([+-]?)([0-9]{4,})(-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?)Z$`)
	reISOInterval    = regexp.MustCompile(`^P(-?[0-9]+)Y(-?[0-9]+)M(-?[0-9]+)DT(-?[0-9]+)H(-?[0-9]+)M(-?[0-9]+(\.[0-9]{1,6})?)S$`)
)

// decodeZonedTimestamp reads ISO 8601 in UTC, its year signed as Java
// writes it (astronomical: -0043 is 44 BC).
func decodeZonedTimestamp(raw json.RawMessage) (string, error) {
	s, err := stringOf(raw)
	if err != nil {
		return "", err
	}
	if s == "infinity" || s == "-infinity" {
		return s, nil
	}
	m := reZonedTimestamp.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("not an ISO 8601 time in UTC")
	}
	y, err := strconv.Atoi(m[2])
	if err != nil {
		return "", fmt.Errorf("year: %w", err)
	}
	if m[1] == "-" {
		y = -y
	}
	bc := ""
	if y <= 0 {
		y, bc = 1-y, " BC"
	}
	return fmt.Sprintf("%04d%s %s+00%s", y, m[3], m[4], bc), nil
}

// formatCivil writes a UTC time as the canonical date, or date and time,
// BC suffixed (year 0 is 1 BC).
func formatCivil(t time.Time, clock bool) string {
	y, bc := t.Year(), ""
	if y <= 0 {
		y, bc = 1-y, " BC"
	}
	s := fmt.Sprintf("%04d-%02d-%02d", y, t.Month(), t.Day())
	if clock {
		us := int64(t.Hour()*3600+t.Minute()*60+t.Second())*1e6 + int64(t.Nanosecond()/1000)
		s += " " + formatClock(us)
	}
	return s + bc
}

// formatClock writes microseconds as [-]HH:MM:SS[.ffffff], the fraction
// without trailing zeros as PostgreSQL prints it.
func formatClock(us int64) string {
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	s := fmt.Sprintf("%s%02d:%02d:%02d", sign, us/3600e6, us/60e6%60, us/1e6%60)
	if f := us % 1e6; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", f), "0")
	}
	return s
}

// pgInterval reads what isoInterval writes back into PostgreSQL's
// interval output (IntervalStyle postgres): the non-zero parts, a part
// after a negative one signed, the time whenever it is not zero or
// nothing else is printed.
func pgInterval(s string) (string, error) {
	m := reISOInterval.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("not an ISO 8601 interval PnYnMnDTnHnMnS")
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return "", fmt.Errorf("interval %q: %w", s, err)
		}
		n[i] = v
	}
	sec, err := secondsMicros(m[6])
	if err != nil {
		return "", fmt.Errorf("interval %q: %w", s, err)
	}
	us := n[3]*3600e6 + n[4]*60e6 + sec
	var b strings.Builder
	zero, before := true, false
	for i, unit := range []string{"year", "mon", "day"} {
		v := n[i]
		if v == 0 {
			continue
		}
		if !zero {
			b.WriteByte(' ')
		}
		if before && v > 0 {
			b.WriteByte('+')
		}
		fmt.Fprintf(&b, "%d %s", v, unit)
		if v != 1 {
			b.WriteByte('s')
		}
		zero, before = false, v < 0
	}
	if zero || us != 0 {
		if !zero {
			b.WriteByte(' ')
		}
		if us >= 0 && before {
			b.WriteByte('+')
		}
		b.WriteString(formatClock(us))
	}
	return b.String(), nil
}

// secondsMicros reads [-]S[.ffffff] as microseconds, exactly.
func secondsMicros(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	f := int64(0)
	if frac != "" {
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, err
		}
	}
	us := w*1e6 + f
	if neg {
		us = -us
	}
	return us, nil
}

// EncodeValue is the encoder's JSON of one column value, as an event
// carries it.
func EncodeValue(c change.Column, v change.Value) (json.RawMessage, error) {
	return appendValue(nil, c, v)
}

// Comparable is a source value in the form an event destination gives it
// back: encoded as an event carries it, then decoded. Where the encoding
// is exact this is the value itself; where it drops information (a time
// zone's offset, a bit string's length) both sides of a comparison lose
// the same, so verify compares what the destination can hold.
func Comparable(c change.Column, v change.Value) (change.Value, error) {
	if v.Null || v.Unchanged {
		return v, nil
	}
	raw, err := appendValue(nil, c, v)
	if err != nil {
		return change.Value{}, fmt.Errorf("column %s: %w", c.Name, err)
	}
	return DecodeValue(c, raw)
}

// ComparableRows is Comparable for every value of rows of t; the rows are
// not changed, new ones are returned.
func ComparableRows(t *change.Table, rows []change.Row) ([]change.Row, error) {
	out := make([]change.Row, len(rows))
	for n, r := range rows {
		if len(r) != len(t.Columns) {
			return nil, fmt.Errorf("table %s: row of %d values, want %d", t.ID, len(r), len(t.Columns))
		}
		p := make(change.Row, len(r))
		for i, v := range r {
			var err error
			if p[i], err = Comparable(t.Columns[i], v); err != nil {
				return nil, fmt.Errorf("table %s: %w", t.ID, err)
			}
		}
		out[n] = p
	}
	return out, nil
}
