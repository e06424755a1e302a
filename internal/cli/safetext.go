package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// safeText is s without what a terminal would obey rather than show:
// escape sequences (CSI such as ESC [ 2 J, OSC such as ESC ] 0 ; title BEL,
// DCS, SOS, PM and APC strings, and two- or three-byte ESC sequences), their
// 8-bit C1 forms, every other C0 and C1 control character and DEL. Tabs and
// line feeds stay: tables and multi-line messages are made of them. Bytes
// that are not UTF-8 become U+FFFD, since a lone 0x9b is CSI to some
// terminals. Names, reasons and errors come from the daemon, which has them
// from source tables, requests and task outputs: they must not retitle,
// clear or recolour the user's terminal.
func safeText(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case r == 0x1b:
			n += escapeLen(s[i+n:])
		case r == 0x9b: // CSI
			n += csiLen(s[i+n:])
		case r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f: // DCS, SOS, OSC, PM, APC
			n += stringLen(s[i+n:])
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isPlain reports whether s is printable ASCII, tabs and line feeds only.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t' && c != '\n') || c >= 0x7f {
			return false
		}
	}
	return true
}

// escapeLen is the length of the escape sequence whose ESC came just
// before s: what follows the ESC up to and including its end.
func escapeLen(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '[':
		return 1 + csiLen(s[1:])
	case ']', 'P', 'X', '^', '_':
		return 1 + stringLen(s[1:])
	}
	// ESC, intermediate bytes, one final byte (ESC c, ESC ( B, ESC 7…).
	n := 0
	for n < len(s) && s[n] >= 0x20 && s[n] <= 0x2f {
		n++
	}
	if n < len(s) && s[n] >= 0x30 && s[n] <= 0x7e {
		n++
	}
	return n
}

// csiLen is the length of a control sequence's parameter and intermediate
// bytes and its final byte, at the start of s.
func csiLen(s string) int {
	n := 0
	for n < len(s) && s[n] >= 0x20 && s[n] <= 0x3f {
		n++
	}
	if n < len(s) && s[n] >= 0x40 && s[n] <= 0x7e {
		n++
	}
	return n
}

// stringLen is the length of a control string (OSC, DCS…) at the start of
// s up to and including its terminator: BEL, ESC \ or ST; all of s when it
// has none.
func stringLen(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x07 || r == 0x9c:
			return i + n
		case r == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case r == 0x1b:
			return i // an ESC starting something else ends the string
		}
		i += n
	}
	return len(s)
}

// cell is a value from the daemon as one table cell: filtered, and on one
// line, so that a name or reason cannot make rows or columns of its own.
func cell(s string) string { return oneLine(safeText(s)) }

// textWriter writes through safeText: the CLI's tables and messages go to
// it, so that no value from the daemon reaches the terminal unfiltered.
// JSON and CSV output, which are data, and the progress display, which
// draws with escape sequences of its own, use the raw writer instead.
type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, safeText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rawOut is where JSON, CSV and the progress display go: stdout unfiltered.
func (g *globals) rawOut() io.Writer {
	if g.raw != nil {
		return g.raw
	}
	return g.stdout
}
