package pg

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
)

// filterSQL renders a backfill's filter as a condition on t for this
// source. Nothing of the user's text reaches the server as SQL: columns are
// quoted here from t's own names, every literal is a bound parameter
// (numbered from first, sent as text), numbers and booleans cast to the
// type their literal has, strings left untyped so that the server resolves
// them from where they stand as it resolves a quoted literal; functions and
// types are named in pg_catalog; every operation is parenthesized. So
// standard_conforming_strings, search_path and the like change nothing. A
// filter naming a column t lacks is refused.
func filterSQL(f *rowfilter.Filter, t *change.Table, first int) (string, [][]byte, error) {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	if err := f.CheckColumns(t.ID.String(), names); err != nil {
		return "", nil, err
	}
	r := filterRenderer{next: first}
	r.expr(f.Root)
	return r.b.String(), r.params, nil
}

type filterRenderer struct {
	b      strings.Builder
	params [][]byte
	next   int
}

// param binds a value and writes its placeholder, cast when typ is set.
func (r *filterRenderer) param(value, typ string) {
	r.params = append(r.params, []byte(value))
	ph := "$" + strconv.Itoa(r.next)
	r.next++
	if typ != "" {
		ph = "CAST(" + ph + " AS pg_catalog." + typ + ")"
	}
	r.b.WriteString(ph)
}

// literalTypes are the types PostgreSQL gives numeric and boolean
// literals as written; a string literal is untyped ("").
var literalTypes = map[rowfilter.LiteralKind]string{
	rowfilter.Int32: "int4", rowfilter.Int64: "int8", rowfilter.Decimal: "numeric", rowfilter.Bool: "bool",
}

func (r *filterRenderer) expr(e rowfilter.Expr) {
	w := r.b.WriteString
	switch n := e.(type) {
	case rowfilter.Column:
		w(quoteIdent(n.Name))
	case rowfilter.Literal:
		if n.Kind == rowfilter.Null {
			w("NULL")
			return
		}
		r.param(n.Text, literalTypes[n.Kind])
	case rowfilter.Unary:
		if n.Op == "NOT" {
			w("(NOT ")
		} else {
			w("(" + catalogOp(n.Op) + " ")
		}
		r.expr(n.X)
		w(")")
	case rowfilter.Binary:
		r.binary(n)
	case rowfilter.Logic:
		r.list("(", " "+n.Op+" ", n.Args)
	case rowfilter.In:
		// x IN (a, b) is x = a OR x = b, NULLs included.
		w("(" + not(n.Not) + "(")
		for i, e := range n.List {
			if i > 0 {
				w(" OR ")
			}
			r.op(n.X, "=", e)
		}
		w("))")
	case rowfilter.Between:
		w("(" + not(n.Not) + "(")
		r.between(n.X, n.Low, n.High)
		if n.Symmetric {
			w(" OR ")
			r.between(n.X, n.High, n.Low)
		}
		w("))")
	case rowfilter.Like:
		r.like(n)
	case rowfilter.IsNull:
		w("(")
		r.expr(n.X)
		w(" IS " + not(n.Not) + "NULL)")
	case rowfilter.Cast:
		w("CAST(")
		r.expr(n.X)
		w(" AS " + castType(n.Type) + ")")
	case rowfilter.Call:
		if n.Func == "nullif" { // NULLIF looks "=" up by the search path
			w("(CASE WHEN ")
			r.op(n.Args[0], "=", n.Args[1])
			w(" THEN NULL ELSE ")
			r.expr(n.Args[0])
			w(" END)")
		} else if rowfilter.Functions[n.Func].Keyword {
			r.list(strings.ToUpper(n.Func)+"(", ", ", n.Args)
		} else {
			r.list("pg_catalog."+quoteIdent(n.Func)+"(", ", ", n.Args)
		}
	default:
		panic(fmt.Sprintf("filterSQL: a node of type %T", e)) // rowfilter makes none other
	}
}

// list writes open, the expressions separated by sep, and ")".
func (r *filterRenderer) list(open, sep string, es []rowfilter.Expr) {
	r.b.WriteString(open)
	for i, e := range es {
		if i > 0 {
			r.b.WriteString(sep)
		}
		r.expr(e)
	}
	r.b.WriteString(")")
}

// like writes LIKE and ILIKE as the operators they stand for (~~, ~~*),
// an ESCAPE as like_escape of the pattern, as PostgreSQL's parser does.
func (r *filterRenderer) like(n rowfilter.Like) {
	op := "~~"
	if n.IgnoreCase {
		op += "*"
	}
	r.b.WriteString("(" + not(n.Not) + "(")
	r.expr(n.X)
	r.b.WriteString(" " + catalogOp(op) + " ")
	if n.Escape != nil {
		r.list("pg_catalog.like_escape(", ", ", []rowfilter.Expr{n.Pattern, n.Escape})
	} else {
		r.expr(n.Pattern)
	}
	r.b.WriteString("))")
}

// binary writes an infix operation. IS [NOT] DISTINCT FROM is spelled out
// with "=", which the server would otherwise look up by the search path.
func (r *filterRenderer) binary(n rowfilter.Binary) {
	w := r.b.WriteString
	switch n.Op {
	case "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		w("(" + not(n.Op == "IS DISTINCT FROM") + "(CASE WHEN ")
		r.isNull(n.L)
		w(" OR ")
		r.isNull(n.R)
		w(" THEN ")
		r.isNull(n.L)
		w(" AND ")
		r.isNull(n.R)
		w(" ELSE ")
		r.op(n.L, "=", n.R)
		w(" END))")
	default:
		r.op(n.L, n.Op, n.R)
	}
}

// isNull writes (e IS NULL); for a literal, whose parameter would have no
// type the server could infer there, the answer.
func (r *filterRenderer) isNull(e rowfilter.Expr) {
	if lit, ok := e.(rowfilter.Literal); ok {
		r.b.WriteString(strings.ToUpper(strconv.FormatBool(lit.Kind == rowfilter.Null)))
		return
	}
	r.b.WriteString("(")
	r.expr(e)
	r.b.WriteString(" IS NULL)")
}

// op writes (l OPERATOR(pg_catalog.op) r).
func (r *filterRenderer) op(l rowfilter.Expr, op string, rt rowfilter.Expr) {
	r.b.WriteString("(")
	r.expr(l)
	r.b.WriteString(" " + catalogOp(op) + " ")
	r.expr(rt)
	r.b.WriteString(")")
}

// between writes x >= low AND x <= high, what BETWEEN stands for.
func (r *filterRenderer) between(x, low, high rowfilter.Expr) {
	r.b.WriteString("(")
	r.op(x, ">=", low)
	r.b.WriteString(" AND ")
	r.op(x, "<=", high)
	r.b.WriteString(")")
}

// catalogOp names a built-in operator by its schema: written bare, an
// operator is looked up by the search path, where any role that may
// create objects in a schema on it (public, before PostgreSQL 15) could
// put one of its own with argument types that match better.
func catalogOp(op string) string { return "OPERATOR(pg_catalog." + op + ")" }

func not(b bool) string {
	if b {
		return "NOT "
	}
	return ""
}

// castType is a cast's type in pg_catalog with its modifiers.
func castType(t rowfilter.Type) string {
	s := "pg_catalog." + t.Name
	if len(t.Mods) > 0 {
		mods := make([]string, len(t.Mods))
		for i, m := range t.Mods {
			mods[i] = strconv.FormatInt(int64(m), 10)
		}
		s += "(" + strings.Join(mods, ", ") + ")"
	}
	return s
}
