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
		w("(" + n.Op + " ")
		r.expr(n.X)
		w(")")
	case rowfilter.Binary:
		w("(")
		r.expr(n.L)
		w(" " + n.Op + " ")
		r.expr(n.R)
		w(")")
	case rowfilter.Logic:
		r.list("(", " "+n.Op+" ", n.Args)
	case rowfilter.In:
		w("(")
		r.expr(n.X)
		w(not(n.Not) + " IN ")
		r.list("(", ", ", n.List)
		w(")")
	case rowfilter.Between:
		w("(")
		r.expr(n.X)
		w(not(n.Not) + " BETWEEN ")
		if n.Symmetric {
			w("SYMMETRIC ")
		}
		r.expr(n.Low)
		w(" AND ")
		r.expr(n.High)
		w(")")
	case rowfilter.Like:
		r.like(n)
	case rowfilter.IsNull:
		w("(")
		r.expr(n.X)
		w(" IS" + not(n.Not) + " NULL)")
	case rowfilter.Cast:
		w("CAST(")
		r.expr(n.X)
		w(" AS " + castType(n.Type) + ")")
	case rowfilter.Call:
		if rowfilter.Functions[n.Func].Keyword {
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

func (r *filterRenderer) like(n rowfilter.Like) {
	op := " LIKE "
	if n.IgnoreCase {
		op = " ILIKE "
	}
	r.b.WriteString("(")
	r.expr(n.X)
	r.b.WriteString(not(n.Not) + op)
	r.expr(n.Pattern)
	if n.Escape != nil {
		r.b.WriteString(" ESCAPE ")
		r.expr(n.Escape)
	}
	r.b.WriteString(")")
}

func not(b bool) string {
	if b {
		return " NOT"
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
