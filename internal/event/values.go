package event

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidemark/tidemark/internal/change"
)

// Unavailable is what an event carries for an out-of-line value an update
// left unchanged (PostgreSQL's TOAST), as Debezium's default
// unavailable.value.placeholder: the field is marked, never sent as null.
const Unavailable = "__debezium_unavailable_value"

// Debezium's MicroTimestamp for PostgreSQL's ±infinity timestamps.
const (
	infinityMicros    = 9223372036825200000
	negInfinityMicros = -9223372036832400000
)

// appendValue writes one column value as Debezium's JSON converter does
// with schemas.enable=false, in the modes docs/events.md names:
// decimal.handling.mode=string, time.precision.mode=
// adaptive_time_microseconds, interval.handling.mode=string,
// binary.handling.mode=base64.
func appendValue(b []byte, c change.Column, v change.Value) ([]byte, error) {
	tag := change.TagOf(c)
	switch {
	case v.Null:
		return append(b, "null"...), nil
	case v.Unchanged:
		if tag == change.TagBytes || tag == change.TagBits && bitWidth(c) > 1 {
			return appendString(b, base64.StdEncoding.EncodeToString([]byte(Unavailable))), nil
		}
		return appendString(b, Unavailable), nil
	}
	s := v.Text
	switch tag {
	case change.TagBool:
		return strconv.AppendBool(b, s == "t"), nil
	case change.TagInt16, change.TagInt32, change.TagInt64:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("integer %q: %w", s, err)
		}
		return append(b, s...), nil
	case change.TagFloat32, change.TagFloat64:
		return appendFloat(b, s)
	case change.TagBytes:
		raw, err := bytesOf(s)
		if err != nil {
			return nil, err
		}
		return appendString(b, base64.StdEncoding.EncodeToString(raw)), nil
	case change.TagBits:
		return appendBits(b, c, s)
	case change.TagDate:
		days, err := dateDays(s)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(b, days, 10), nil
	case change.TagTime:
		us, err := clockMicros(s)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(b, us, 10), nil
	case change.TagTimeTZ:
		z, err := zonedTime(s)
		if err != nil {
			return nil, err
		}
		return appendString(b, z), nil
	case change.TagTimestamp:
		return appendTimestamp(b, c, s)
	case change.TagTimestampTZ:
		z, err := zonedTimestamp(s)
		if err != nil {
			return nil, err
		}
		return appendString(b, z), nil
	case change.TagInterval:
		iso, err := isoInterval(s)
		if err != nil {
			return nil, err
		}
		return appendString(b, iso), nil
	}
	// decimal (as a string), text, json (io.debezium.data.Json is its
	// text), uuid, arrays and other types: the canonical text.
	return appendString(b, s), nil
}

// appendString writes s as encoding/json does. Most values are plain
// ASCII that it writes as they are, quoted, without its cost.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat writes a number; NaN and the infinities, which JSON lacks,
// as the strings Jackson writes for them.
func appendFloat(b []byte, s string) ([]byte, error) {
	switch s {
	case "NaN", "Infinity", "-Infinity":
		return appendString(b, s), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("float %q: not a finite number", s)
	}
	return append(b, s...), nil
}

// bytesOf decodes the canonical \x hex form.
func bytesOf(s string) ([]byte, error) {
	if !strings.HasPrefix(s, `\x`) {
		return nil, fmt.Errorf("bytes %.20q: not in \\x hex form", s)
	}
	out := make([]byte, (len(s)-2)/2)
	for i := range out {
		n, err := strconv.ParseUint(s[2+2*i:4+2*i], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("bytes %.20q: %w", s, err)
		}
		out[i] = byte(n)
	}
	return out, nil
}

// bitWidth is a bit column's declared width (its type modifier), 0 when
// unbounded.
func bitWidth(c change.Column) int {
	if c.TypeMod > 0 {
		return int(c.TypeMod)
	}
	return 0
}

// appendBits writes bit(1) as a boolean and wider bit strings as
// io.debezium.data.Bits: the bits' bytes, little-endian, base64.
func appendBits(b []byte, c change.Column, s string) ([]byte, error) {
	if bitWidth(c) == 1 && len(s) == 1 {
		return strconv.AppendBool(b, s == "1"), nil
	}
	out := make([]byte, (len(s)+7)/8)
	for i := range len(s) {
		bit := s[len(s)-1-i] // least significant first
		switch bit {
		case '1':
			out[i/8] |= 1 << (i % 8)
		case '0':
		default:
			return nil, fmt.Errorf("bits %q: not 0s and 1s", s)
		}
	}
	return appendString(b, base64.StdEncoding.EncodeToString(out)), nil
}

// civil reads "YYYY-MM-DD[ HH:MM:SS[.ffffff]][+00][ BC]" into a UTC time
// in the proleptic Gregorian calendar (1 BC is year 0).
func civil(s string) (time.Time, error) {
	bc := strings.HasSuffix(s, " BC")
	s = strings.TrimSuffix(strings.TrimSuffix(s, " BC"), "+00")
	date, clock, _ := strings.Cut(s, " ")
	parts := strings.Split(date, "-")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	y, err1 := strconv.Atoi(parts[0])
	m, err2 := strconv.Atoi(parts[1])
	d, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return time.Time{}, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	if bc {
		y = 1 - y
	}
	var us int64
	if clock != "" {
		var err error
		if us, err = clockMicros(clock); err != nil {
			return time.Time{}, err
		}
	}
	return time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Add(time.Duration(us) * time.Microsecond), nil
}

// dateDays is io.debezium.time.Date: days since 1970-01-01. ±infinity,
// which Debezium has no day for, are the int32 extremes.
func dateDays(s string) (int64, error) {
	switch s {
	case "infinity":
		return math.MaxInt32, nil
	case "-infinity":
		return math.MinInt32, nil
	}
	t, err := civil(s)
	if err != nil {
		return 0, err
	}
	return int64(math.Floor(float64(t.Unix()) / 86400)), nil
}

// clockMicros reads [-]H:MM:SS[.ffffff] (hours may exceed 24) as
// microseconds: io.debezium.time.MicroTime.
func clockMicros(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	parts := strings.Split(strings.TrimLeft(s, "+-"), ":")
	if len(parts) != 3 {
		return 0, fmt.Errorf("time %q: want HH:MM:SS", s)
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	sec, frac, _ := strings.Cut(parts[2], ".")
	sc, err3 := strconv.ParseInt(sec, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || len(frac) > 6 {
		return 0, fmt.Errorf("time %q: want HH:MM:SS[.ffffff]", s)
	}
	us := ((h*60+m)*60 + sc) * 1e6
	if frac != "" {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("time %q: %w", s, err)
		}
		us += f
	}
	if neg {
		us = -us
	}
	return us, nil
}

// appendTimestamp writes a timestamp without zone adaptively, as Debezium
// does: epoch milliseconds (io.debezium.time.Timestamp) for a precision up
// to 3, epoch microseconds (MicroTimestamp) above.
func appendTimestamp(b []byte, c change.Column, s string) ([]byte, error) {
	millis := c.TypeMod >= 0 && c.TypeMod <= 3
	switch s {
	case "infinity", "-infinity":
		v := int64(infinityMicros)
		if s == "-infinity" {
			v = negInfinityMicros
		}
		if millis {
			v /= 1000
		}
		return strconv.AppendInt(b, v, 10), nil
	}
	t, err := civil(s)
	if err != nil {
		return nil, err
	}
	// UnixMicro overflows past the year 294246; PostgreSQL goes to 294276.
	if t.Year() > 294246 || t.Year() < -290000 {
		return nil, fmt.Errorf("timestamp %q is beyond the 64-bit microseconds since 1970 the event format carries", s)
	}
	if millis {
		return strconv.AppendInt(b, t.UnixMilli(), 10), nil
	}
	return strconv.AppendInt(b, t.UnixMicro(), 10), nil
}

// zonedTimestamp is io.debezium.time.ZonedTimestamp: ISO 8601 in UTC
// ("2024-02-29T13:45:01.123456Z"), the year signed outside 0000-9999 as
// Java writes it.
func zonedTimestamp(s string) (string, error) {
	if s == "infinity" || s == "-infinity" {
		return s, nil
	}
	t, err := civil(s)
	if err != nil {
		return "", err
	}
	return isoYear(t.Year()) + t.Format("-01-02T15:04:05.999999Z"), nil
}

func isoYear(y int) string {
	switch {
	case y < 0:
		return fmt.Sprintf("-%04d", -y)
	case y > 9999:
		return fmt.Sprintf("+%d", y)
	}
	return fmt.Sprintf("%04d", y)
}

// zonedTime is io.debezium.time.ZonedTime: the time of day in UTC with Z.
func zonedTime(s string) (string, error) {
	i := strings.LastIndexAny(s, "+-")
	if i < 0 {
		return "", fmt.Errorf("time with zone %q: no offset", s)
	}
	us, err := clockMicros(s[:i])
	if err != nil {
		return "", err
	}
	off := strings.Split(s[i+1:], ":")
	var offSec int64
	for j, unit := range []int64{3600, 60, 1} {
		if j < len(off) {
			n, err := strconv.ParseInt(off[j], 10, 64)
			if err != nil {
				return "", fmt.Errorf("time with zone %q: offset: %w", s, err)
			}
			offSec += n * unit
		}
	}
	if s[i] == '+' {
		offSec = -offSec
	}
	const day = 86400 * 1e6
	us = ((us+offSec*1e6)%day + day) % day
	t := time.UnixMicro(us).UTC()
	return t.Format("15:04:05.999999Z"), nil
}

// isoInterval writes an interval as interval.handling.mode=string does:
// ISO 8601 with every part, signed each ("P1Y2M3DT4H5M6.78S").
func isoInterval(s string) (string, error) {
	var y, mo, d int64
	rest := s
	for _, unit := range []struct {
		names []string
		to    *int64
	}{{[]string{"years", "year"}, &y}, {[]string{"mons", "mon"}, &mo}, {[]string{"days", "day"}, &d}} {
		num, after, ok := strings.Cut(rest, " ")
		if !ok {
			break
		}
		word, tail, _ := strings.Cut(after, " ")
		matched := false
		for _, n := range unit.names {
			matched = matched || word == n
		}
		if !matched {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimPrefix(num, "+"), 10, 64)
		if err != nil {
			return "", fmt.Errorf("interval %q: %w", s, err)
		}
		*unit.to, rest = v, tail
	}
	var us int64
	if rest != "" {
		var err error
		if us, err = clockMicros(rest); err != nil {
			return "", fmt.Errorf("interval %q: %w", s, err)
		}
	}
	h, m := us/3600e6, us%3600e6/60e6
	sec := us % 60e6
	secText := strconv.FormatFloat(float64(sec)/1e6, 'f', -1, 64)
	return fmt.Sprintf("P%dY%dM%dDT%dH%dM%sS", y, mo, d, h, m, secText), nil
}
