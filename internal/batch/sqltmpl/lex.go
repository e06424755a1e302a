package sqltmpl

import "strings"

// place is what the lexer found about one reference.
type place struct {
	kind  placeKind
	start int // placeString: the literal's opening quote
	end   int // placeString: just after its closing quote
}

type placeKind int

const (
	placeValue        placeKind = iota // where an expression can stand
	placeName                          // after FROM, JOIN, … or next to a name
	placeQuotedName                    // inside "…" (or `…`, […] in SQLite)
	placeString                        // the whole of a string literal '${x}'
	placeInString                      // part of a longer string literal
	placeDollarQuoted                  // inside $$…$$: a function or DO body
	placeComment                       // inside a comment
)

// nameKeywords are the words after which a reference names something
// (a table, a column, an alias) rather than giving a value.
var nameKeywords = map[string]bool{
	"as": true, "by": true, "call": true, "copy": true, "exists": true, "from": true, "function": true,
	"index": true, "into": true, "join": true, "only": true, "schema": true, "sequence": true,
	"table": true, "trigger": true, "truncate": true, "update": true, "using": true, "view": true,
}

// lexed is a template's text with references replaced by one character
// each, where each reference stands and where its statements end.
type lexed struct {
	places map[int]place // offset of a reference → its place
	ends   []int         // offsets just after each top-level ";"
}

// lex reads s, SQL of dialect d in which the offsets refs hold references,
// the way the server would: string literals, quoted names, comments,
// dollar quotes (PostgreSQL) and statement ends. A PostgreSQL script is
// read with standard_conforming_strings on (backslashes escape only in
// E'…'), the default since PostgreSQL 9.1.
func lex(s string, d Dialect, refs []int) lexed {
	isRef := map[int]bool{}
	for _, r := range refs {
		isRef[r] = true
	}
	out := lexed{places: map[int]place{}}
	lastWord, lastEnd := "", -1 // the previous significant token, if a word, and where it ended
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			end := indexFrom(s, i, "\n")
			out.mark(refs, i, end, placeComment)
			i = end
			continue
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := blockComment(s, i, d == Postgres)
			out.mark(refs, i, end, placeComment)
			i = end
			continue
		case c == '\'':
			backslash := d == Postgres && i > 0 && (s[i-1] == 'E' || s[i-1] == 'e') && (i < 2 || !isNameChar(s[i-2]))
			end := quoted(s, i, '\'', backslash)
			whole := end == i+3 && s[i+2] == '\'' && isRef[i+1] && !(i > 0 && isNameChar(s[i-1]))
			for _, r := range refs {
				switch {
				case r <= i || r >= end:
				case whole:
					out.places[r] = place{kind: placeString, start: i, end: end}
				default:
					out.places[r] = place{kind: placeInString}
				}
			}
			lastWord, lastEnd = "", end
			i = end
			continue
		case c == '"' || d == SQLite && (c == '`' || c == '['):
			closer := c
			if c == '[' {
				closer = ']'
			}
			end := quoted(s, i, closer, false)
			out.mark(refs, i+1, end, placeQuotedName)
			lastWord, lastEnd = "", end
			i = end
			continue
		case c == '$' && d == Postgres && (i == 0 || !isNameChar(s[i-1])):
			if tag, ok := dollarTag(s, i); ok {
				end := indexFrom(s, i+len(tag), tag)
				if end < len(s) {
					end += len(tag)
				}
				out.mark(refs, i, end, placeDollarQuoted)
				lastWord, lastEnd = "", end
				i = end
				continue
			}
		case c == ';':
			out.ends = append(out.ends, i+1)
		}
		if isRef[i] {
			kind := placeValue
			glued := i > 0 && (isNameChar(s[i-1]) || s[i-1] == '.') || i+1 < len(s) && (isNameChar(s[i+1]) || s[i+1] == '.')
			if glued || lastEnd >= 0 && nameKeywords[strings.ToLower(lastWord)] {
				kind = placeName
			}
			out.places[i] = place{kind: kind}
			lastWord, lastEnd = "", i+1
			i++
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case isNameChar(c):
			j := i
			for j < len(s) && isNameChar(s[j]) && !isRef[j] {
				j++
			}
			lastWord, lastEnd = s[i:j], j
			i = j
		default:
			lastWord, lastEnd = "", i+1
			i++
		}
	}
	return out
}

func (l *lexed) mark(refs []int, from, to int, kind placeKind) {
	for _, r := range refs {
		if r >= from && r < to {
			l.places[r] = place{kind: kind}
		}
	}
}

// indexFrom returns the index of sub in s at or after i, or len(s).
func indexFrom(s string, i int, sub string) int {
	if j := strings.Index(s[i:], sub); j >= 0 {
		return i + j
	}
	return len(s)
}

// blockComment returns the end of the /* comment at i; PostgreSQL's nest.
func blockComment(s string, i int, nested bool) int {
	depth := 0
	for j := i; j < len(s)-1; j++ {
		switch {
		case s[j] == '/' && s[j+1] == '*' && (nested || depth == 0):
			depth++
			j++
		case s[j] == '*' && s[j+1] == '/':
			if depth--; depth == 0 {
				return j + 2
			}
			j++
		}
	}
	return len(s)
}

// quoted returns the end (just after the closing quote) of the quoted text
// starting at i. A doubled closer stands for itself; with backslash, a
// backslash escapes the next character.
func quoted(s string, i int, closer byte, backslash bool) int {
	for j := i + 1; j < len(s); j++ {
		switch {
		case backslash && s[j] == '\\':
			j++
		case s[j] == closer && j+1 < len(s) && s[j+1] == closer && closer != ']':
			j++
		case s[j] == closer:
			return j + 1
		}
	}
	return len(s)
}

// dollarTag returns the $tag$ that opens a dollar-quoted string at i.
func dollarTag(s string, i int) (string, bool) {
	j := i + 1
	for j < len(s) && (isNameChar(s[j]) && s[j] != '$') {
		if j == i+1 && s[j] >= '0' && s[j] <= '9' {
			return "", false // $1 is a parameter
		}
		j++
	}
	if j < len(s) && s[j] == '$' {
		return s[i : j+1], true
	}
	return "", false
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}
