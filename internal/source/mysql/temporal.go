package mysql

import (
	"encoding/binary"
	"fmt"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// A chunk read takes DATE, DATETIME, TIMESTAMP and TIME values as the
// binary protocol sends them (MySQL's "Binary Protocol Value": a length
// byte, then the fields, little-endian) and prints them itself: go-mysql
// prints each with fmt.Sprintf, which was the costliest step of reading a
// chunk. The common values are printed here directly; any other (zero
// dates and zero parts, unexpected lengths) goes through go-mysql's
// printer and the codec's text functions, exactly as before.

// isTemporalWire reports whether a result column's wire type is one of the
// temporal types read raw.
func isTemporalWire(t uint8) bool {
	switch t {
	case gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE, gomysql.MYSQL_TYPE_DATETIME,
		gomysql.MYSQL_TYPE_TIMESTAMP, gomysql.MYSQL_TYPE_TIME:
		return true
	}
	return false
}

// appendTemporal appends the text of a raw binary-protocol temporal value
// of wire type wire (its bytes after the length byte).
func (k codec) appendTemporal(dst []byte, wire uint8, raw []byte) ([]byte, error) {
	switch {
	case wire == gomysql.MYSQL_TYPE_TIME && k.kind == kindTime:
		if out, ok := appendTime(dst, raw); ok {
			return out, nil
		}
	case wire == gomysql.MYSQL_TYPE_DATE || wire == gomysql.MYSQL_TYPE_NEWDATE:
		if k.kind == kindDate {
			if out, ok := appendDate(dst, raw); ok {
				return out, nil
			}
		}
	case wire == gomysql.MYSQL_TYPE_DATETIME || wire == gomysql.MYSQL_TYPE_TIMESTAMP:
		zone := ""
		switch k.kind {
		case kindTimestamp:
			zone = "+00"
		case kindDatetime:
		default:
			return k.appendTemporalSlow(dst, wire, raw)
		}
		if out, ok := appendDatetime(dst, raw); ok {
			return append(out, zone...), nil
		}
	}
	return k.appendTemporalSlow(dst, wire, raw)
}

// appendTemporalSlow prints the value as go-mysql does and converts that
// text through the codec, as a chunk read did before it read them raw.
func (k codec) appendTemporalSlow(dst []byte, wire uint8, raw []byte) ([]byte, error) {
	var (
		s   []byte
		err error
	)
	switch wire {
	case gomysql.MYSQL_TYPE_TIME:
		s, err = gomysql.FormatBinaryTime(len(raw), raw)
	case gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE:
		s, err = gomysql.FormatBinaryDate(len(raw), raw)
	default:
		s, err = gomysql.FormatBinaryDateTime(len(raw), raw)
	}
	if err != nil {
		return dst, fmt.Errorf("temporal value of %d bytes: %w", len(raw), err)
	}
	text, err := k.text(s)
	return append(dst, text...), err
}

// appendDate prints a 4-byte DATE with a month and a day; ok is false for
// any other.
func appendDate(dst []byte, raw []byte) ([]byte, bool) {
	if len(raw) != 4 || !plainDate(raw) {
		return dst, false
	}
	return appendYMD(dst, raw), true
}

// appendDatetime prints a DATETIME or TIMESTAMP of 4, 7 or 11 bytes with a
// month and a day as PostgreSQL's timestamp prints it: the fraction
// without trailing zeros; ok is false for any other.
func appendDatetime(dst []byte, raw []byte) ([]byte, bool) {
	if (len(raw) != 4 && len(raw) != 7 && len(raw) != 11) || !plainDate(raw) {
		return dst, false
	}
	dst = appendYMD(dst, raw)
	if len(raw) == 4 {
		return append(dst, " 00:00:00"...), true
	}
	dst = append(dst, ' ')
	dst = appendHMS(dst, uint64(raw[4]), raw[5], raw[6])
	if len(raw) == 11 {
		dst = appendMicros(dst, binary.LittleEndian.Uint32(raw[7:11]))
	}
	return dst, true
}

// appendTime prints a TIME of 8 or 12 bytes as PostgreSQL's interval prints
// the same span: hours past 24 stay hours. ok is false for any other
// length, and for more than 255 days, which no TIME holds (±838:59:59).
func appendTime(dst []byte, raw []byte) ([]byte, bool) {
	if (len(raw) != 8 && len(raw) != 12) || raw[2] != 0 || raw[3] != 0 || raw[4] != 0 {
		return dst, false
	}
	if raw[0] == 1 {
		dst = append(dst, '-')
	}
	dst = appendHMS(dst, uint64(raw[1])*24+uint64(raw[5]), raw[6], raw[7])
	if len(raw) == 12 {
		dst = appendMicros(dst, binary.LittleEndian.Uint32(raw[8:12]))
	}
	return dst, true
}

// plainDate reports whether a raw date has a month and a day of one or two
// digits and a year of four at most: the dates the codec takes as they are.
func plainDate(raw []byte) bool {
	return raw[2]-1 < 99 && raw[3]-1 < 99 && binary.LittleEndian.Uint16(raw[:2]) <= 9999
}

// appendYMD prints the year (at least four digits), month and day of raw.
func appendYMD(dst []byte, raw []byte) []byte {
	dst = appendPadded(dst, uint64(binary.LittleEndian.Uint16(raw[:2])), 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, uint64(raw[2]), 2)
	dst = append(dst, '-')
	return appendPadded(dst, uint64(raw[3]), 2)
}

func appendHMS(dst []byte, h uint64, m, s byte) []byte {
	dst = appendPadded(dst, h, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, uint64(m), 2)
	dst = append(dst, ':')
	return appendPadded(dst, uint64(s), 2)
}

// appendMicros prints a fraction of a second, ".ffffff" without trailing
// zeros, nothing for 0.
func appendMicros(dst []byte, us uint32) []byte {
	if us == 0 {
		return dst
	}
	dst = append(dst, '.')
	dst = appendPadded(dst, uint64(us), 6)
	for dst[len(dst)-1] == '0' {
		dst = dst[:len(dst)-1]
	}
	return dst
}

// appendPadded prints n in decimal, left-padded with zeros to width digits
// (as %0*d does).
func appendPadded(dst []byte, n uint64, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for n >= 10 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	buf[i] = byte('0' + n)
	for pad := width - (len(buf) - i); pad > 0; pad-- {
		dst = append(dst, '0')
	}
	return append(dst, buf[i:]...)
}
