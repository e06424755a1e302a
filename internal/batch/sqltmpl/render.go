// Package sqltmpl renders a SQL task's template so that free text never
// becomes code. Calendar references (${bizdate}, …) are written into the
// SQL: expr guarantees they print only digits, letters and harmless
// separators. A parameter or an upstream output becomes a bound parameter
// ($1 for PostgreSQL, ?1 for SQLite), sent apart from the SQL text:
//
//   - where a value can stand: WHERE day = ${param.day} → WHERE day = $1;
//   - as the whole of a string literal: '${outputs.up.day}' → $1 (the
//     server infers its type, as for the literal);
//   - in a name's place (right after FROM, JOIN, INTO, UPDATE, TABLE, AS,
//     BY, …; next to a name or a dot, as in sales_${p}; or inside "…") a
//     parameter cannot stand: the value is written in only if it is a name,
//     letters, digits and _ of 1 to 63 bytes (NamePattern), and the
//     rendering fails otherwise;
//   - inside a longer string literal, E'…', or a dollar-quoted body ($$…$$:
//     DO blocks, function bodies) it is refused when the configuration is
//     read, with the fix;
//   - in a comment it is left as written.
//
// A template with parameters is split into statements, each sent with its
// own parameters (PostgreSQL's extended protocol takes one statement at a
// time); statements between them without parameters are sent together, as
// before.
package sqltmpl

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

// Dialect is the database a template is written for.
type Dialect int

const (
	Postgres Dialect = iota
	SQLite
)

// NamePattern is what a free-text value must match to be written where a
// name stands.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,63}$`)

// Statement is one or more statements to send, with the values of their
// parameters: Args[0] is $1 (PostgreSQL) or ?1 (SQLite). Text with Args
// holds exactly one statement.
type Statement struct {
	SQL  string
	Args []string
	Line int // the line of the template the text starts on, from 1
}

// Error is a free-text reference where it cannot be passed as data.
type Error struct {
	Ref    string
	Offset int
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("at byte %d, %s: %s", e.Offset, e.Ref, e.Msg)
}

type placed struct {
	parts []expr.Part
	text  string // the template with each reference one 'x'
	at    []int  // offset in text of each part that is a reference; -1 for text
	lex   lexed
}

func placeAll(tmpl string, d Dialect) (placed, error) {
	parts, err := expr.Parse(tmpl)
	if err != nil {
		return placed{}, err
	}
	var b strings.Builder
	pl := placed{parts: parts, at: make([]int, len(parts))}
	var refs []int
	for i, p := range parts {
		pl.at[i] = -1
		if p.Ref == nil {
			b.WriteString(p.Lit)
			continue
		}
		pl.at[i] = b.Len()
		refs = append(refs, b.Len())
		b.WriteByte('x')
	}
	pl.text = b.String()
	pl.lex = lex(pl.text, d, refs)
	return pl, nil
}

// Check reports the first free-text reference of tmpl that stands where it
// cannot be passed as data, as an *Error; or tmpl's syntax error.
func Check(tmpl string, d Dialect) error {
	pl, err := placeAll(tmpl, d)
	if err != nil {
		return err
	}
	for i, p := range pl.parts {
		if p.Ref == nil || !p.Ref.Free() {
			continue
		}
		switch pl.lex.places[pl.at[i]].kind {
		case placeInString:
			return &Error{p.Ref.Text, p.Ref.Offset, "a parameter or output inside a longer string literal (or E'…') cannot be bound: " +
				"write the literal as a concatenation, e.g. 'prefix ' || " + p.Ref.Text + " || ' suffix', or the reference alone as '" + p.Ref.Text + "'"}
		case placeDollarQuoted:
			return &Error{p.Ref.Text, p.Ref.Offset, "a dollar-quoted body (a DO block, a function) cannot take parameters: " +
				"set the value before it, SELECT set_config('task.value', " + p.Ref.Text + ", true);, and read current_setting('task.value') inside"}
		}
	}
	return nil
}

// Render returns the statements to send for env. It fails when a value in
// a name's place is not a name.
func Render(tmpl string, d Dialect, env expr.Env) ([]Statement, error) {
	if err := Check(tmpl, d); err != nil {
		return nil, err
	}
	pl, _ := placeAll(tmpl, d)
	type sub struct {
		start, end int
		text       string
		arg        *string
	}
	var subs []sub
	for i, p := range pl.parts {
		r := p.Ref
		if r == nil {
			continue
		}
		at := pl.at[i]
		pc := pl.lex.places[at]
		if r.Free() && pc.kind == placeComment {
			subs = append(subs, sub{at, at + 1, r.Text, nil})
			continue
		}
		v, err := r.Value(env)
		if err != nil {
			return nil, err
		}
		switch {
		case !r.Free():
			subs = append(subs, sub{at, at + 1, v, nil})
		case pc.kind == placeName || pc.kind == placeQuotedName:
			if !NamePattern.MatchString(v) {
				return nil, &Error{r.Text, r.Offset, fmt.Sprintf("the value %s stands where a name does, and is not one: "+
					"a name is letters, digits and _ (1 to 63 bytes); or write the reference where a value goes", shortQuote(v))}
			}
			subs = append(subs, sub{at, at + 1, v, nil})
		case pc.kind == placeString:
			subs = append(subs, sub{pc.start, pc.end, "", &v})
		default:
			subs = append(subs, sub{at, at + 1, "", &v})
		}
	}
	if len(subs) == 0 || !hasArg(subs, func(s sub) bool { return s.arg != nil }) {
		var b strings.Builder
		last := 0
		for _, s := range subs {
			b.WriteString(pl.text[last:s.start])
			b.WriteString(s.text)
			last = s.end
		}
		b.WriteString(pl.text[last:])
		return []Statement{{SQL: b.String(), Line: 1}}, nil
	}
	// Split at the statement ends, each statement numbering its own
	// parameters.
	var out []Statement
	start, k := 0, 0
	ends := append(pl.lex.ends, len(pl.text))
	for _, end := range ends {
		if end <= start {
			continue
		}
		st := Statement{Line: 1 + strings.Count(pl.text[:start], "\n")}
		var b strings.Builder
		last := start
		for ; k < len(subs) && subs[k].start < end; k++ {
			s := subs[k]
			b.WriteString(pl.text[last:s.start])
			if s.arg != nil {
				st.Args = append(st.Args, *s.arg)
				b.WriteString(placeholder(d, len(st.Args)))
			} else {
				b.WriteString(s.text)
			}
			last = s.end
		}
		b.WriteString(pl.text[last:max(end, last)])
		st.SQL = b.String()
		start = max(end, last)
		if n := len(out); n > 0 && len(st.Args) == 0 && len(out[n-1].Args) == 0 {
			out[n-1].SQL += st.SQL
			continue
		}
		if strings.TrimSpace(st.SQL) == "" && len(out) > 0 {
			out[len(out)-1].SQL += st.SQL
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func hasArg[T any](s []T, f func(T) bool) bool {
	for _, x := range s {
		if f(x) {
			return true
		}
	}
	return false
}

func placeholder(d Dialect, n int) string {
	if d == SQLite {
		return "?" + strconv.Itoa(n)
	}
	return "$" + strconv.Itoa(n)
}

func shortQuote(v string) string {
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return strconv.Quote(v)
}
