package shelltmpl

import "strings"

// Context is where a template reference stands in a shell command.
type Context int

const (
	Bare         Context = iota // an unquoted word (also inside $(…) and ${…})
	DoubleQuoted                // inside "…"
	SingleQuoted                // inside '…' or $'…': nothing expands there
	Heredoc                     // in a here-document's body or delimiter
	Comment                     // after an unquoted # that starts a word
	Backtick                    // inside `…`
	Arithmetic                  // inside $((…)) or ((…)): a value is evaluated
	Escaped                     // right after a backslash
	Unfollowed                  // after a case inside $(…), where the scanner may lose its place
)

var contextNames = [...]string{"unquoted", "inside double quotes", "inside single quotes", "inside a here-document",
	"inside a comment", "inside backticks", "inside an arithmetic expression", "right after a backslash",
	"after a case statement inside $(…)"}

func (c Context) String() string { return contextNames[c] }

// frame is one level of nesting the scanner is in.
type frame struct {
	kind  byte // 't' top or $(…), '"' double quotes, '{' ${…}, 'a' arithmetic
	depth int  // 't' inside $(…) and 'a': open parentheses
	quote bool // '{': the ${…} is inside double quotes
}

// scanner finds the shell context of given offsets of a script. It knows
// POSIX sh's quoting: '…', "…", $'…', backslashes, comments, here-documents,
// `…`, $(…), ${…} and $((…)). Where it cannot follow the script — a case
// pattern's ")" inside $(…) would close the substitution for it, and a
// here-document after it would pass unseen — it says so: every place after
// such a case is Unfollowed, which Render refuses.
type scanner struct {
	s     string
	at    map[int]int // offset → index into ctx
	ctx   []Context
	stack []frame
	// pending here-documents: delimiters waiting for the next newline.
	heredocs []heredoc
	// lost is set at a case inside $(…): what follows is Unfollowed.
	lost bool
}

type heredoc struct {
	delim    string
	stripTab bool
}

// contexts returns the context of each offset of s, in the order given.
// Each offset must be where a word character stands in s.
func contexts(s string, offsets []int) []Context {
	sc := &scanner{s: s, at: map[int]int{}, ctx: make([]Context, len(offsets)), stack: []frame{{kind: 't'}}}
	for i, o := range offsets {
		sc.at[o] = i
	}
	sc.run()
	return sc.ctx
}

// mark records ctx for every offset in [from, to).
func (sc *scanner) mark(from, to int, ctx Context) {
	if sc.lost {
		ctx = Unfollowed
	}
	for o, i := range sc.at {
		if o >= from && o < to {
			sc.ctx[i] = ctx
		}
	}
}

func (sc *scanner) top() *frame { return &sc.stack[len(sc.stack)-1] }

func (sc *scanner) pop() {
	if len(sc.stack) > 1 {
		sc.stack = sc.stack[:len(sc.stack)-1]
	}
}

// bareContext is the context of a plain character in the current frame.
func (sc *scanner) bareContext() Context {
	switch f := sc.top(); {
	case f.kind == '"' || f.kind == '{' && f.quote:
		return DoubleQuoted
	case f.kind == 'a':
		return Arithmetic
	}
	return Bare
}

func (sc *scanner) run() {
	s := sc.s
	for i := 0; i < len(s); {
		f := sc.top()
		c := s[i]
		inQuotes := f.kind == '"' || f.kind == '{' && f.quote
		switch {
		case c == '\\':
			sc.mark(i+1, i+2, Escaped)
			if i+1 < len(s) && s[i+1] == '\n' {
				sc.mark(i+1, i+2, sc.bareContext())
			}
			i += 2
			continue
		case c == '`':
			end := closing(s, i+1, '`')
			sc.mark(i+1, end, Backtick)
			i = end + 1
			continue
		case strings.HasPrefix(s[i:], "$(("):
			sc.mark(i, i+1, sc.bareContext())
			sc.stack = append(sc.stack, frame{kind: 'a', depth: 2})
			i += 3
			continue
		case strings.HasPrefix(s[i:], "$("):
			sc.mark(i, i+1, sc.bareContext())
			sc.stack = append(sc.stack, frame{kind: 't', depth: 1})
			i += 2
			continue
		case strings.HasPrefix(s[i:], "${"):
			sc.mark(i, i+1, sc.bareContext())
			sc.stack = append(sc.stack, frame{kind: '{', quote: inQuotes})
			i += 2
			continue
		case c == '}' && f.kind == '{':
			sc.pop()
		case c == '"' && f.kind == '"':
			sc.pop()
		case c == '"' && f.kind != 'a':
			sc.stack = append(sc.stack, frame{kind: '"'})
		case inQuotes:
			sc.mark(i, i+1, DoubleQuoted)
		case f.kind == 'a':
			switch c {
			case '(':
				f.depth++
			case ')':
				if f.depth--; f.depth == 0 {
					sc.pop()
				}
			}
			sc.mark(i, i+1, Arithmetic)
		case strings.HasPrefix(s[i:], "$'") || c == '\'':
			start := i + 1
			end := 0
			if c == '$' {
				start++
				end = closing(s, start, '\'')
			} else {
				end = strings.IndexByte(s[start:], '\'')
				if end < 0 {
					end = len(s)
				} else {
					end += start
				}
			}
			sc.mark(i, end+1, SingleQuoted)
			i = end + 1
			continue
		case c == '#' && wordStart(s, i):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			sc.mark(i, i+end, Comment)
			i += end
			continue
		case c == '\n' && len(sc.heredocs) > 0:
			i = sc.heredocBodies(i + 1)
			continue
		case strings.HasPrefix(s[i:], "<<") && !strings.HasPrefix(s[i:], "<<<"):
			i = sc.heredocStart(i + 2)
			continue
		case strings.HasPrefix(s[i:], "((") && f.kind == 't' && wordStart(s, i):
			sc.stack = append(sc.stack, frame{kind: 'a', depth: 2})
			i += 2
			continue
		case c == '(' && f.kind == 't' && len(sc.stack) > 1:
			f.depth++
		case c == ')' && f.kind == 't' && len(sc.stack) > 1:
			if f.depth--; f.depth == 0 {
				sc.pop()
			}
		default:
			if f.kind == 't' && len(sc.stack) > 1 && caseWord(s, i) {
				sc.lost = true
			}
			sc.mark(i, i+1, sc.bareContext())
		}
		i++
	}
}

// caseWord reports whether the word "case" starts at i.
func caseWord(s string, i int) bool {
	if !wordStart(s, i) || !strings.HasPrefix(s[i:], "case") {
		return false
	}
	return i+4 == len(s) || strings.IndexByte(" \t\n", s[i+4]) >= 0
}

// heredocStart reads a here-document's operator rest and delimiter word
// from i (just after "<<") and returns where the command goes on.
func (sc *scanner) heredocStart(i int) int {
	s := sc.s
	h := heredoc{}
	if i < len(s) && s[i] == '-' {
		h.stripTab = true
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	start := i
	var delim strings.Builder
	for i < len(s) && !strings.ContainsRune(" \t\n;&|<>()", rune(s[i])) {
		switch c := s[i]; c {
		case '\'', '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				end = len(s) - i - 1
			}
			delim.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case '\\':
			if i+1 < len(s) {
				delim.WriteByte(s[i+1])
			}
			i += 2
		default:
			delim.WriteByte(c)
			i++
		}
	}
	i = min(i, len(s))
	sc.mark(start, i, Heredoc)
	h.delim = delim.String()
	sc.heredocs = append(sc.heredocs, h)
	return i
}

// heredocBodies skips the bodies of the pending here-documents, which start
// at i, and returns where the script goes on after them.
func (sc *scanner) heredocBodies(i int) int {
	s := sc.s
	for _, h := range sc.heredocs {
		start := i
		for i < len(s) {
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			line := s[i : i+end]
			if h.stripTab {
				line = strings.TrimLeft(line, "\t")
			}
			i += end + 1
			if line == h.delim {
				break
			}
		}
		i = min(i, len(s))
		sc.mark(start, i, Heredoc)
	}
	sc.heredocs = nil
	return i
}

// closing returns the index of the first unescaped quote at or after i, or
// len(s).
func closing(s string, i int, quote byte) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case quote:
			return i
		}
	}
	return len(s)
}

// wordStart reports whether a word can start at i: at the beginning, or
// after a blank or an operator character.
func wordStart(s string, i int) bool {
	return i == 0 || strings.IndexByte(" \t\n;&|()<>", s[i-1]) >= 0
}
