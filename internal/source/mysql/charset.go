package mysql

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// charset decodes a column's bytes to UTF-8.
type charset uint8

const (
	charsetUTF8   charset = iota // utf8mb4, utf8mb3, ascii: checked, kept
	charsetLatin1                // MySQL's latin1, which is cp1252
)

// charsetOf reads the character set from a collation name
// ("latin1_swedish_ci" is latin1).
func charsetOf(collation string) (charset, error) {
	name, _, _ := strings.Cut(collation, "_")
	switch name {
	case "utf8mb4", "utf8mb3", "utf8", "ascii", "":
		return charsetUTF8, nil
	case "latin1":
		return charsetLatin1, nil
	}
	return 0, fmt.Errorf("character set %s is not supported by the MySQL source: convert the column to utf8mb4 (ALTER TABLE … CONVERT TO CHARACTER SET utf8mb4) or latin1", name)
}

var errNotUTF8 = errors.New("text value is not valid UTF-8")

func (c charset) decode(b []byte) (string, error) {
	if c == charsetLatin1 {
		return decodeLatin1(b), nil
	}
	if !utf8.Valid(b) {
		return "", errNotUTF8
	}
	return string(b), nil
}

// cp1252 maps bytes 0x80..0x9F; MySQL's latin1 maps the five bytes cp1252
// leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) to the same code point.
var cp1252 = [32]rune{
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
}

func decodeLatin1(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range b {
		switch {
		case c < 0x80:
			sb.WriteByte(c)
		case c < 0xA0:
			sb.WriteRune(cp1252[c-0x80])
		default:
			sb.WriteRune(rune(c))
		}
	}
	return sb.String()
}
