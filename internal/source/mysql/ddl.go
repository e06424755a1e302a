package mysql

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tidemark/tidemark/internal/change"
)

// What the binlog's DDL statements say about columns.
//
// A table map names a table's columns as they are, not what became of
// them: RENAME COLUMN a TO b looks like a dropped a and an added b, and so
// does DROP COLUMN a, ADD COLUMN b of the same type at the same place. The
// ALTER TABLE statement, which the binlog carries as a query event before
// any row written after it, tells them apart: parseAlter reads which
// columns it renames (RENAME COLUMN, CHANGE) and drops, and the stream
// renumbers them (colnums.go) before the next table map. Everything else in
// the statement is left to the table maps.

// columnOp is one column an ALTER TABLE renames (to != "") or drops.
type columnOp struct {
	from, to string
}

// alterTable is what an ALTER TABLE statement does to columns.
type alterTable struct {
	table change.TableID
	ops   []columnOp
}

// parseAlter reads an ALTER TABLE statement run with db as the default
// database; ok is false for any other statement.
func parseAlter(db, query string) (alterTable, bool) {
	toks := tokenize(query)
	i := 0
	word := func(w string) bool {
		if i < len(toks) && !toks[i].quoted && strings.EqualFold(toks[i].text, w) {
			i++
			return true
		}
		return false
	}
	if !word("ALTER") {
		return alterTable{}, false
	}
	for word("ONLINE") || word("IGNORE") {
	}
	if !word("TABLE") {
		return alterTable{}, false
	}
	if word("IF") && !word("EXISTS") {
		return alterTable{}, false
	}
	if i >= len(toks) || !toks[i].name() {
		return alterTable{}, false
	}
	a := alterTable{table: change.TableID{Schema: db, Name: toks[i].text}}
	i++
	if i+1 < len(toks) && toks[i].text == "." && !toks[i].quoted && toks[i+1].name() {
		a.table = change.TableID{Schema: a.table.Name, Name: toks[i+1].text}
		i += 2
	}
	for _, spec := range splitSpecs(toks[i:]) {
		if op, ok := columnOpOf(spec); ok {
			a.ops = append(a.ops, op)
		}
	}
	return a, true
}

// columnOpOf reads one alter specification: RENAME COLUMN a TO b, CHANGE
// [COLUMN] [IF EXISTS] a b …, DROP [COLUMN] [IF EXISTS] a.
func columnOpOf(spec []token) (columnOp, bool) {
	i := 0
	word := func(w string) bool {
		if i < len(spec) && !spec[i].quoted && strings.EqualFold(spec[i].text, w) {
			i++
			return true
		}
		return false
	}
	name := func() (string, bool) {
		if i < len(spec) && spec[i].name() {
			i++
			return spec[i-1].text, true
		}
		return "", false
	}
	ifExists := func() {
		if i+1 < len(spec) && !spec[i].quoted && !spec[i+1].quoted &&
			strings.EqualFold(spec[i].text, "IF") && strings.EqualFold(spec[i+1].text, "EXISTS") {
			i += 2
		}
	}
	switch {
	case word("RENAME"):
		if !word("COLUMN") {
			return columnOp{}, false // RENAME TO, RENAME INDEX, RENAME KEY
		}
		ifExists()
		from, ok := name()
		if !ok || !word("TO") {
			return columnOp{}, false
		}
		to, ok := name()
		return columnOp{from: from, to: to}, ok
	case word("CHANGE"):
		word("COLUMN")
		ifExists()
		from, ok := name()
		if !ok {
			return columnOp{}, false
		}
		to, ok := name()
		return columnOp{from: from, to: to}, ok
	case word("DROP"):
		if !word("COLUMN") {
			for _, w := range []string{"PRIMARY", "INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK", "PARTITION", "PERIOD", "SYSTEM", "FULLTEXT", "SPATIAL", "UNIQUE"} {
				if i < len(spec) && !spec[i].quoted && strings.EqualFold(spec[i].text, w) {
					return columnOp{}, false
				}
			}
		}
		ifExists()
		from, ok := name()
		return columnOp{from: from}, ok
	}
	return columnOp{}, false
}

// token is one word, quoted identifier, string, number or symbol.
type token struct {
	text   string
	quoted bool // a `quoted` identifier (text unquoted), or a string literal
	str    bool // a string literal
}

// name reports whether the token can be an identifier.
func (t token) name() bool {
	if t.str || t.text == "" {
		return false
	}
	if t.quoted {
		return true
	}
	r, _ := utf8.DecodeRuneInString(t.text)
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// splitSpecs splits the statement's rest at its top-level commas.
func splitSpecs(toks []token) [][]token {
	var out [][]token
	depth, start := 0, 0
	for i, t := range toks {
		if t.quoted {
			continue
		}
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
		case ",":
			if depth == 0 {
				out = append(out, toks[start:i])
				start = i + 1
			}
		}
	}
	return append(out, toks[start:])
}

// tokenize splits a statement into tokens, leaving out comments.
func tokenize(s string) []token {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || (c == '-' && strings.HasPrefix(s[i:], "-- ")):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return toks
			}
			i += end + 1
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return toks
			}
			i += end + 4
		case c == '`' || c == '\'' || c == '"':
			text, n := quoted(s[i:], c)
			toks = append(toks, token{text: text, quoted: true, str: c != '`'})
			i += n
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, token{text: s[i:j]})
			i = j
		default:
			toks = append(toks, token{text: s[i : i+1]})
			i++
		}
	}
	return toks
}

// isWordByte: letters, digits, _ and $, and any byte of a non-ASCII
// character (MySQL allows those in unquoted identifiers).
func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// quoted reads a quoted identifier or string at the start of s, where the
// quote doubled (or, in a string, after a backslash) stands for itself; it
// returns the text and the bytes read.
func quoted(s string, q byte) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case s[i] == q && i+1 < len(s) && s[i+1] == q:
			i++
			b.WriteByte(q)
		case s[i] == q:
			return b.String(), i + 1
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), len(s)
}

// schemaChange renumbers the columns an ALTER TABLE renames or drops, and
// forgets the table's last table map, before the next one comes.
func (r *binlogReader) schemaChange(e *replication.QueryEvent) {
	a, ok := parseAlter(string(e.Schema), string(e.Query))
	if !ok {
		return
	}
	for _, op := range a.ops {
		if op.to == "" {
			r.src.nums.dropped(a.table, op.from)
		} else {
			r.src.nums.renamed(a.table, op.from, op.to)
		}
	}
	delete(r.readers, a.table)
}
