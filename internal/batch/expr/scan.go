package expr

import (
	"fmt"
	"strings"
)

type refKind int

const (
	refTime   refKind = iota // ${bizdate-1:yyyyMMdd}
	refParam                 // ${param.NAME} or ${NAME}
	refOutput                // ${outputs.TASK.NAME}
)

// ref is one ${…} of a template.
type ref struct {
	kind refKind
	off  int    // byte offset of "${" in the template
	text string // "${…}"
	name string // time name, parameter or output name
	task string // refOutput: the upstream task

	// refTime
	base   timeName
	n      int // signed amount of unit
	unit   unit
	format string
}

func (r *ref) errorf(at int, format string, args ...any) error {
	return &Error{Offset: r.off + at, Ref: r.text, Msg: fmt.Sprintf(format, args...)}
}

const forms = "write a time such as ${bizdate}, ${bizdate-1} or ${biztime-1h:yyyyMMddHH}, " +
	"a parameter ${param.NAME}, or an upstream output ${outputs.TASK.NAME}"

// scan walks tmpl, handing literal text to lit and each reference to each;
// it stops at the first error. "$${" is a literal "${".
func scan(tmpl string, lit func(string), each func(*ref) error) error {
	for i := 0; i < len(tmpl); {
		j := strings.Index(tmpl[i:], "${")
		if j < 0 {
			lit(tmpl[i:])
			return nil
		}
		j += i
		if j > i && tmpl[j-1] == '$' {
			// "$${": the first "$" escapes the reference.
			lit(tmpl[i : j-1])
			lit("${")
			i = j + 2
			continue
		}
		lit(tmpl[i:j])
		end := strings.IndexByte(tmpl[j:], '}')
		if end < 0 {
			return &Error{Offset: j, Msg: `unterminated "${": close it with "}", or write "$${" for a literal "${"`}
		}
		end += j
		r, err := parseRef(tmpl[j:end+1], j)
		if err != nil {
			return err
		}
		if err := each(r); err != nil {
			return err
		}
		i = end + 1
	}
	return nil
}

// parseRef reads text, a whole "${…}" found at byte off.
func parseRef(text string, off int) (*ref, error) {
	r := &ref{off: off, text: text}
	body := text[2 : len(text)-1]
	switch {
	case body == "":
		return nil, r.errorf(0, "empty reference: %s", forms)
	case strings.ContainsAny(namePart(body), " \t\r\n"):
		// Spaces are fine in a format (${biztime:yyyy-MM-dd HH}), not before.
		return nil, r.errorf(0, "no spaces inside ${…} before a format: %s", forms)
	case strings.HasPrefix(body, "param."):
		r.kind, r.name = refParam, body[len("param."):]
		if !validName(r.name, true) {
			return nil, r.errorf(2, "parameter name %q: use letters, digits, _, - and .", r.name)
		}
		return r, nil
	case strings.HasPrefix(body, "outputs."):
		rest := body[len("outputs."):]
		// Task IDs contain a dot ("project.name"): the output name is what
		// follows the last one.
		dot := strings.LastIndexByte(rest, '.')
		if dot <= 0 || dot == len(rest)-1 {
			return nil, r.errorf(2, "write ${outputs.TASK.NAME}, TASK an upstream task's name or ID")
		}
		r.kind, r.task, r.name = refOutput, rest[:dot], rest[dot+1:]
		if !validName(r.task, true) || !validName(r.name, false) {
			return nil, r.errorf(2, "write ${outputs.TASK.NAME}, with letters, digits, _ and - in the names")
		}
		return r, nil
	}
	id := identLen(body)
	if base, ok := timeNames[body[:id]]; ok {
		r.kind, r.base, r.name = refTime, base, body[:id]
		if err := r.parseTime(body[id:], 2+id); err != nil {
			return nil, err
		}
		return r, nil
	}
	if id == len(body) && validName(body, false) {
		r.kind, r.name = refParam, body
		return r, nil
	}
	return nil, r.errorf(2, "unknown reference %q: %s", body, forms)
}

// parseTime reads what follows a time name: [(+|-)N[unit]][:FORMAT]. at is
// the offset of s in the reference.
func (r *ref) parseTime(s string, at int) error {
	r.format = r.base.defaultFormat
	if s != "" && (s[0] == '+' || s[0] == '-') {
		i := 1
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == 1 || i > 7 {
			return r.errorf(at, "%q needs a number of 1 to 6 digits, e.g. ${%s%c1} or ${%s%c2h}", s[:1], r.name, s[0], r.name, s[0])
		}
		n := 0
		for _, c := range s[1:i] {
			n = n*10 + int(c-'0')
		}
		if s[0] == '-' {
			n = -n
		}
		j := i
		for j < len(s) && isLetter(s[j]) {
			j++
		}
		u, ok := units[s[i:j]]
		if !ok {
			return r.errorf(at+i, "unknown unit %q: use y (years), mon (months), w (weeks), d (days, the default), h (hours) or min (minutes)", s[i:j])
		}
		r.n, r.unit = n, u
		at, s = at+j, s[j:]
	}
	switch {
	case s == "":
		return nil
	case s[0] != ':':
		return r.errorf(at, "unexpected %q after %s: add a day count such as -1, a unit such as -1h, or a format after \":\", e.g. ${%s:yyyy-MM-dd}", s, r.name, r.name)
	case len(s) == 1:
		return r.errorf(at, "empty format after \":\": e.g. ${%s:yyyyMMdd}, or leave out the \":\"", r.name)
	}
	r.format = s[1:]
	if i := unsafeFormatChar(r.format); i >= 0 {
		return r.errorf(at+1+i, "%q cannot be in a format: a time prints only its tokens, letters, digits, space and %s, so that it is safe anywhere in a command", r.format[i:i+1], SafeFormatChars[1:])
	}
	return nil
}

// unsafeFormatChar returns the index of the first character of format that
// is not a letter, a digit or one of SafeFormatChars; -1 if none.
func unsafeFormatChar(format string) int {
	for i := 0; i < len(format); i++ {
		c := format[i]
		if !isLetter(c) && !isDigit(c) && !strings.ContainsRune(SafeFormatChars, rune(c)) {
			return i
		}
	}
	return -1
}

// namePart returns what precedes a format: the text before the first ":".
func namePart(body string) string {
	if i := strings.IndexByte(body, ':'); i >= 0 {
		return body[:i]
	}
	return body
}

// identLen returns the length of the leading run of letters, digits and
// underscores.
func identLen(s string) int {
	i := 0
	for i < len(s) && (isLetter(s[i]) || isDigit(s[i]) || s[i] == '_') {
		i++
	}
	return i
}

// validName reports whether s is a parameter, task or output name: letters,
// digits, "_", "-" and, where dotted, ".".
func validName(s string, dotted bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '_' && c != '-' && (c != '.' || !dotted) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
