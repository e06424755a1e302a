package mysql

import (
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/rowfilter"
)

// binary writes an infix operation as MySQL's twin: || as CONCAT (MySQL's
// || is OR unless PIPES_AS_CONCAT), ^ as POW (MySQL's ^ is XOR), / as DIV
// between integers (PostgreSQL truncates there), IS [NOT] DISTINCT FROM
// with the NULL-safe <=>.
func (r *filterRenderer) binary(n rowfilter.Binary) {
	switch n.Op {
	case "=", "<>", "<", "<=", ">", ">=":
		r.compare(n.L, n.Op, n.R)
	case "IS DISTINCT FROM":
		r.w("(NOT ")
		r.compare(n.L, "<=>", n.R)
		r.w(")")
	case "IS NOT DISTINCT FROM":
		r.compare(n.L, "<=>", n.R)
	case "||":
		r.list("CONCAT(", ", ", []rowfilter.Expr{n.L, n.R})
	case "^":
		r.list("POW(", ", ", []rowfilter.Expr{n.L, n.R})
	case "+", "-", "*", "%":
		r.infix(n.L, n.Op, n.R)
	case "/":
		r.divide(n)
	default:
		r.refuse("operator %s has no MySQL twin", n.Op)
	}
}

// infix writes (l op r).
func (r *filterRenderer) infix(l rowfilter.Expr, op string, rt rowfilter.Expr) {
	r.w("(")
	r.expr(l)
	r.w(" " + op + " ")
	r.expr(rt)
	r.w(")")
}

// divide writes /: between integers PostgreSQL's quotient is truncated
// (MySQL's DIV), with a floating-point side both divide alike; a decimal
// quotient MySQL rounds to div_precision_increment digits, so it is
// refused.
func (r *filterRenderer) divide(n rowfilter.Binary) {
	l, rt := r.numeric(n.L), r.numeric(n.R)
	switch {
	case l == numInt && rt == numInt:
		r.infix(n.L, "DIV", n.R)
	case (l == numFloat && rt != numNone) || (rt == numFloat && l != numNone):
		r.infix(n.L, "/", n.R)
	default:
		r.refuse("/ is allowed between integers or with a float or double side: MySQL rounds other quotients to div_precision_increment digits; compare with a product instead (a > 2 * b rather than a / b > 2)")
	}
}

// compare writes (l op r), refusing what PostgreSQL would refuse but MySQL
// would compare after converting both sides to double: a text column with
// a number. A string compared with a number column is bound as that number,
// as PostgreSQL reads it: compared as a string, MySQL would go through a
// double and lose digits past 2^53.
func (r *filterRenderer) compare(l rowfilter.Expr, op string, rt rowfilter.Expr) {
	if r.err != nil {
		return
	}
	for _, p := range [][2]rowfilter.Expr{{l, rt}, {rt, l}} {
		col, isCol := p[0].(rowfilter.Column)
		lit, isLit := p[1].(rowfilter.Literal)
		if !isCol || !isLit || lit.Kind == rowfilter.Null {
			continue
		}
		k := r.columnKind(col.Name)
		switch {
		case isTextKind(k) && lit.Kind != rowfilter.String:
			r.refuse("column %s is text and %s is not: quote the value ('%s') to compare text", col.Name, lit.Text, lit.Text)
			return
		case (k == kindInt || k == kindDecimal) && lit.Kind == rowfilter.String:
			r.w("(")
			r.numberFor(p[0] == l, l, op, rt, col.Name, k, lit.Text)
			r.w(")")
			return
		}
	}
	r.infix(l, op, rt)
}

// numberFor writes "l op r" with the string literal (on the left when
// litRight is false) bound as the number it spells for a column of kind k:
// a whole number for an integer column, a decimal for a decimal one, as
// PostgreSQL reads the string for that column's type.
func (r *filterRenderer) numberFor(litRight bool, l rowfilter.Expr, op string, rt rowfilter.Expr, col string, k kind, text string) {
	bind := func() {
		s := strings.TrimSpace(text)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			r.param(i)
		} else if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			r.param(u)
		} else if _, _, _, ok := plainDecimal(s); ok && k == kindDecimal {
			r.decimal(s)
		} else {
			r.refuse("column %s is %s and %q is not one", col, map[kind]string{kindInt: "a whole number", kindDecimal: "a number"}[k], text)
		}
	}
	if litRight {
		r.expr(l)
		r.w(" " + op + " ")
		bind()
	} else {
		bind()
		r.w(" " + op + " ")
		r.expr(rt)
	}
}

// between writes x >= low AND x <= high, what BETWEEN stands for.
func (r *filterRenderer) between(x, low, high rowfilter.Expr) {
	r.w("(")
	r.compare(x, ">=", low)
	r.w(" AND ")
	r.compare(x, "<=", high)
	r.w(")")
}

// like writes LIKE in the column's collation (case-insensitive under a
// _ci one, as the source's own LIKE) and ILIKE as LOWER() LIKE LOWER(),
// case-insensitive under every collation. The escape is always bound:
// MySQL has none by default under NO_BACKSLASH_ESCAPES, PostgreSQL has \.
func (r *filterRenderer) like(n rowfilter.Like) {
	if c, ok := n.X.(rowfilter.Column); ok && !isTextKind(r.columnKind(c.Name)) {
		r.refuse("LIKE on column %s, which is not text: cast it to text first", c.Name)
		return
	}
	escape := `\`
	if n.Escape != nil {
		lit, ok := n.Escape.(rowfilter.Literal)
		if !ok || lit.Kind != rowfilter.String || len([]rune(lit.Text)) != 1 {
			r.refuse("LIKE's ESCAPE must be one character, written as a quoted string")
			return
		}
		escape = lit.Text
	}
	r.w("(" + not(n.Not) + "(")
	if n.IgnoreCase {
		r.list("LOWER(", "", []rowfilter.Expr{n.X})
		r.w(" LIKE ")
		r.list("LOWER(", "", []rowfilter.Expr{n.Pattern})
	} else {
		r.expr(n.X)
		r.w(" LIKE ")
		r.expr(n.Pattern)
	}
	r.w(" ESCAPE ")
	r.param(escape)
	r.w("))")
}

// castTypes are MySQL's CAST types for PostgreSQL's, where one converts
// alike; numeric without modifiers is PostgreSQL's unbounded numeric,
// DECIMAL(65,30) the widest MySQL has.
var castTypes = map[string]string{
	"int2": "SIGNED", "int4": "SIGNED", "int8": "SIGNED", "numeric": "DECIMAL",
	"float4": "FLOAT", "float8": "DOUBLE",
	"text": "CHAR", "varchar": "CHAR", "bpchar": "CHAR",
	"date": "DATE", "time": "TIME", "timestamp": "DATETIME", "bytea": "BINARY",
}

func (r *filterRenderer) cast(n rowfilter.Cast) {
	to, ok := castTypes[n.Type.Name]
	if !ok {
		r.refuse("cast to %s has no MySQL twin: the casts are to %s", n.Type.Name, castTypeNames())
		return
	}
	mods := make([]string, len(n.Type.Mods))
	for i, m := range n.Type.Mods {
		mods[i] = strconv.FormatInt(int64(m), 10)
	}
	switch {
	case to == "DECIMAL" && len(mods) == 0:
		mods = []string{"65", "30"}
	case to == "DATETIME" && len(mods) == 0:
		mods = []string{"6"} // PostgreSQL keeps microseconds
	case (to == "SIGNED" || to == "FLOAT" || to == "DOUBLE" || to == "DATE" || to == "BINARY") && len(mods) > 0:
		mods = nil
	}
	if len(mods) > 0 {
		to += "(" + strings.Join(mods, ",") + ")"
	}
	r.w("CAST(")
	r.expr(n.X)
	r.w(" AS " + to + ")")
}

func castTypeNames() string {
	var names []string
	for _, t := range rowfilter.Types {
		if castTypes[t] != "" {
			names = append(names, t)
		}
	}
	return strings.Join(names, ", ")
}
