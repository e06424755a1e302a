package config

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tidemark/tidemark/internal/change"
)

// Pattern matches source tables by name: "schema.table", where each part
// may use * (any run of characters, also none) and ? (exactly one
// character). Names match exactly, case included. A pattern without a dot
// names a table in schema "public". Double quotes make everything inside
// them literal, dots and wildcards included, and "" inside quotes is one
// quote: "my.schema"."Order Items", "app"."x*" (matches the table x*). Quoted
// and unquoted text may be mixed within a part: "Order"_* . Spaces and
// control characters must be quoted.
//
// The zero Pattern matches nothing.
type Pattern struct {
	schema, table []token
}

type tokenKind uint8

const (
	tokLit  tokenKind = iota // literal text
	tokStar                  // *
	tokOne                   // ?
)

type token struct {
	kind tokenKind
	text string // for tokLit
}

// ParsePattern parses a table pattern.
func ParsePattern(s string) (Pattern, error) {
	p, reason := parsePattern(s)
	if reason != "" {
		return Pattern{}, fmt.Errorf("table pattern %q: %s", s, reason)
	}
	return p, nil
}

// parsePattern returns the pattern, or a reason it is not one that says how
// to fix it.
func parsePattern(s string) (Pattern, string) {
	if s == "" {
		return Pattern{}, "empty pattern: write schema.table, e.g. public.*"
	}
	var parts [][]token
	for rest := s; ; {
		toks, n, reason := parsePart(rest)
		if reason != "" {
			return Pattern{}, reason
		}
		parts = append(parts, toks)
		if n == len(rest) {
			break
		}
		rest = rest[n+1:] // skip the dot
	}
	switch len(parts) {
	case 1:
		return Pattern{schema: []token{{kind: tokLit, text: "public"}}, table: parts[0]}, ""
	case 2:
		return Pattern{schema: parts[0], table: parts[1]}, ""
	}
	return Pattern{}, `more than one unquoted dot: write schema.table, and quote names that contain dots, e.g. "my.schema".orders`
}

// parsePart reads one part up to an unquoted dot or the end and returns its
// tokens and the number of bytes read.
func parsePart(s string) (toks []token, n int, reason string) {
	var lit strings.Builder
	empty := true
	flush := func() {
		if lit.Len() > 0 {
			toks = append(toks, token{kind: tokLit, text: lit.String()})
			lit.Reset()
		}
	}
	i := 0
	for i < len(s) && s[i] != '.' {
		switch c := s[i]; {
		case c == '"':
			text, m, ok := readQuoted(s[i:])
			if !ok {
				return nil, 0, `unterminated double quote: close the quoted name with "`
			}
			if text == "" {
				return nil, 0, `empty quoted name "": a name needs at least one character`
			}
			lit.WriteString(text)
			i += m
		case c == '*' || c == '?':
			flush()
			kind := tokOne
			if c == '*' {
				kind = tokStar
			}
			if kind == tokOne || len(toks) == 0 || toks[len(toks)-1].kind != tokStar {
				toks = append(toks, token{kind: kind})
			}
			i++
		case c <= ' ' || c == 0x7f:
			return nil, 0, `unquoted space or control character: put the name in double quotes, e.g. public."order items"`
		default:
			lit.WriteByte(c)
			i++
		}
		empty = false
	}
	if empty {
		return nil, 0, "empty schema or table name: write schema.table, e.g. public.orders"
	}
	flush()
	return toks, i, ""
}

// readQuoted reads a quoted name at the start of s and returns its text and
// length in s.
func readQuoted(s string) (text string, n int, ok bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), i + 1, true
	}
	return "", 0, false
}

// Match reports whether the pattern matches table t.
func (p Pattern) Match(t change.TableID) bool {
	if p.schema == nil {
		return false
	}
	return matchPart(p.schema, t.Schema) && matchPart(p.table, t.Name)
}

// matchPart matches one name against a part's tokens, backtracking to the
// last star on a mismatch (linear in practice, never exponential).
func matchPart(toks []token, s string) bool {
	ti, si := 0, 0
	starT, starS := -1, 0
	for {
		if ti < len(toks) {
			t := toks[ti]
			switch {
			case t.kind == tokStar:
				starT, starS = ti, si
				ti++
				continue
			case t.kind == tokOne && si < len(s):
				_, n := utf8.DecodeRuneInString(s[si:])
				si += n
				ti++
				continue
			case t.kind == tokLit && strings.HasPrefix(s[si:], t.text):
				si += len(t.text)
				ti++
				continue
			}
		} else if si == len(s) {
			return true
		}
		if starT < 0 || starS >= len(s) {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		ti, si = starT+1, starS
	}
}

// Table returns the one table a pattern without wildcards names.
func (p Pattern) Table() (change.TableID, bool) {
	schema, ok1 := literal(p.schema)
	name, ok2 := literal(p.table)
	return change.TableID{Schema: schema, Name: name}, ok1 && ok2 && p.schema != nil
}

func literal(toks []token) (string, bool) {
	var b strings.Builder
	for _, t := range toks {
		if t.kind != tokLit {
			return "", false
		}
		b.WriteString(t.text)
	}
	return b.String(), true
}

// String returns the pattern in canonical form, always with a schema, names
// quoted only where needed; ParsePattern reads it back as the same pattern.
func (p Pattern) String() string {
	if p.schema == nil {
		return ""
	}
	var b strings.Builder
	writePart(&b, p.schema)
	b.WriteByte('.')
	writePart(&b, p.table)
	return b.String()
}

func writePart(b *strings.Builder, toks []token) {
	for _, t := range toks {
		switch t.kind {
		case tokStar:
			b.WriteByte('*')
		case tokOne:
			b.WriteByte('?')
		default:
			writeName(b, t.text)
		}
	}
}

// writeName writes a name, quoted when it holds a character that is special
// in a pattern.
func writeName(b *strings.Builder, s string) {
	quote := strings.ContainsFunc(s, func(r rune) bool {
		return r == '.' || r == '"' || r == '*' || r == '?' || r <= ' ' || r == 0x7f
	})
	if !quote {
		b.WriteString(s)
		return
	}
	b.WriteByte('"')
	b.WriteString(strings.ReplaceAll(s, `"`, `""`))
	b.WriteByte('"')
}

// FormatTable writes a table the way a pattern (and an object name of the
// API) names it: "schema.table", parts quoted where they hold a dot, a quote,
// a wildcard, a space or a control character, so that ParsePattern reads it
// back as the same table.
func FormatTable(t change.TableID) string {
	var b strings.Builder
	writeName(&b, t.Schema)
	b.WriteByte('.')
	writeName(&b, t.Name)
	return b.String()
}
