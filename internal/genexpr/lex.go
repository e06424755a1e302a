package genexpr

import (
	"fmt"
	"strings"
)

type tokenKind uint8

const (
	tEOF    tokenKind = iota
	tWord             // an unquoted identifier or keyword, lower-cased
	tQuoted           // a quoted identifier, as its name
	tNumber           // digits, a point, an exponent
	tString           // a string constant, as its value
	tOp               // an operator or punctuation
)

type token struct {
	kind tokenKind
	text string
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "the end"
	case tString:
		return "a string"
	case tQuoted:
		return fmt.Sprintf("%q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

// operators longest first, so that "||" is not read as two "|".
var operators = []string{"::", "||", "(", ")", ",", "+", "-", "*", "/", "%", "."}

// maxTokens bounds the work one expression can cause.
const maxTokens = 4096

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		if len(toks) > maxTokens {
			return nil, fmt.Errorf("the expression is longer than %d tokens", maxTokens)
		}
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isLetter(c):
			j := i
			for j < len(s) && (isLetter(s[j]) || isDigit(s[j]) || s[j] == '$') {
				j++
			}
			word := s[i:j]
			if (word == "E" || word == "e") && j < len(s) && s[j] == '\'' {
				v, n, err := escapeString(s[j:])
				if err != nil {
					return nil, err
				}
				toks = append(toks, token{tString, v})
				i = j + n
				continue
			}
			// PostgreSQL folds unquoted names to lower case; pg_get_expr
			// quotes every name that is not already lower case.
			toks = append(toks, token{tWord, asciiLower(word)})
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			n := numberLen(s[i:])
			toks = append(toks, token{tNumber, s[i : i+n]})
			i += n
		case c == '"':
			v, n, err := quoted(s[i:], '"')
			if err != nil {
				return nil, err
			}
			if v == "" {
				return nil, fmt.Errorf("empty quoted identifier")
			}
			toks = append(toks, token{tQuoted, v})
			i += n
		case c == '\'':
			v, n, err := quoted(s[i:], '\'')
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{tString, v})
			i += n
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("unexpected character %q", rune(c))
			}
			// An operator PostgreSQL would read as a longer one (like
			// "+-" or "/*") is refused rather than split.
			if j := i + len(op); strings.Contains(opChars, op[:1]) && j < len(s) && strings.ContainsRune(opChars, rune(s[j])) {
				return nil, fmt.Errorf("operator at %q is not supported", s[i:j+1])
			}
			toks = append(toks, token{tOp, op})
			i += len(op)
		}
	}
	return append(toks, token{kind: tEOF}), nil
}

// opChars are the characters PostgreSQL operators are made of.
const opChars = "+-*/<>=~!@#%^&|`?"

// asciiLower folds ASCII letters only, as PostgreSQL folds unquoted names.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func isLetter(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80 }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// numberLen measures a numeric constant: digits, a point, an exponent.
func numberLen(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

// quoted reads a constant or identifier between q characters, a doubled q
// standing for one. It returns the value and the length read.
func quoted(s string, q byte) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			b.WriteByte(q)
			i++
			continue
		}
		return b.String(), i + 1, nil
	}
	return "", 0, fmt.Errorf("unterminated %c", q)
}

// escapeString reads an E'…' constant's body (s starts at its quote):
// pg_get_expr writes one, with backslashes doubled, when
// standard_conforming_strings is off. Other escapes are refused.
func escapeString(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '\\' && s[i+1] != '\'') {
				return "", 0, fmt.Errorf("escape sequence in a string constant is not supported")
			}
			b.WriteByte(s[i+1])
			i++
		case '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, fmt.Errorf("unterminated '")
}
