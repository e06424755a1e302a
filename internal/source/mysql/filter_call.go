package mysql

import (
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/rowfilter"
)

// sameFunctions are the allowed functions whose MySQL twin has the same
// arguments and result, by its MySQL name. length counts characters in
// PostgreSQL (MySQL's LENGTH counts bytes); ltrim, rtrim and btrim with one
// argument trim spaces in both.
var sameFunctions = map[string]string{
	"lower": "LOWER", "upper": "UPPER",
	"length": "CHAR_LENGTH", "char_length": "CHAR_LENGTH", "character_length": "CHAR_LENGTH",
	"octet_length": "OCTET_LENGTH", "reverse": "REVERSE", "replace": "REPLACE",
	"abs": "ABS", "ceil": "CEILING", "ceiling": "CEILING", "floor": "FLOOR", "round": "ROUND",
	"sign": "SIGN", "mod": "MOD", "sqrt": "SQRT", "power": "POW",
	"coalesce": "COALESCE", "nullif": "NULLIF",
}

// oneArg are functions rendered only in their one-argument form.
var oneArg = map[string]string{"btrim": "TRIM", "ltrim": "LTRIM", "rtrim": "RTRIM"}

// dateUnits are the units date_part and extract take that MySQL's EXTRACT
// gives alike (whole numbers; "second" would drop the fraction).
var dateUnits = map[string]string{
	"year": "YEAR", "quarter": "QUARTER", "month": "MONTH", "day": "DAY",
	"hour": "HOUR", "minute": "MINUTE",
}

// noTwin says why a function allowed on PostgreSQL is refused here.
var noTwin = map[string]string{
	"initcap":     "MySQL has no initcap",
	"translate":   "MySQL has no translate",
	"split_part":  "MySQL's SUBSTRING_INDEX counts differently",
	"starts_with": "MySQL has no starts_with: use LIKE 'prefix%'",
	"md5":         "MySQL hashes the column's own character set, not UTF-8",
	"date_trunc":  "MySQL has no date_trunc: compare with the bounds instead",
	"make_date":   "MySQL's MAKEDATE takes a day of the year",
}

func (r *filterRenderer) call(n rowfilter.Call) {
	name := n.Func
	switch {
	case sameFunctions[name] != "":
		r.list(sameFunctions[name]+"(", ", ", n.Args)
	case oneArg[name] != "" && len(n.Args) == 1:
		r.list(oneArg[name]+"(", ", ", n.Args)
	case oneArg[name] != "":
		r.refuse("%s with characters to trim has no MySQL twin (MySQL trims a whole string, not a set of characters): use %s(x) for spaces", name, name)
	case name == "strpos" || name == "position":
		// strpos(string, substring); position(sub IN string) is parsed
		// as position(string, sub): both are MySQL's INSTR.
		r.list("INSTR(", ", ", n.Args)
	case name == "trunc":
		r.trunc(n.Args)
	case name == "div":
		if len(n.Args) == 2 {
			r.infix(n.Args[0], "DIV", n.Args[1])
		} else {
			r.refuse("div takes two arguments")
		}
	case name == "substring" || name == "substr" || name == "left" || name == "right":
		r.substring(n)
	case name == "date_part" || name == "extract":
		r.extract(n)
	case name == "greatest" || name == "least":
		r.extreme(strings.ToUpper(name), n.Args)
	case noTwin[name] != "":
		r.refuse("function %s has no MySQL twin: %s", name, noTwin[name])
	default:
		r.refuse("function %s has no MySQL twin", name)
	}
}

// trunc is MySQL's TRUNCATE, whose places are not optional.
func (r *filterRenderer) trunc(args []rowfilter.Expr) {
	switch len(args) {
	case 1:
		r.w("TRUNCATE(")
		r.expr(args[0])
		r.w(", 0)")
	case 2:
		r.list("TRUNCATE(", ", ", args)
	default:
		r.refuse("trunc takes one or two arguments")
	}
}

// substring writes substring, substr, left and right where MySQL's count
// alike: from a position of 1 or more, for a length of 0 or more, both
// written as numbers (MySQL counts a start of 0 or less from the end, and
// a negative count of left or right is all but that many in PostgreSQL).
// substring(x, 'pattern') is PostgreSQL's regular expression form.
func (r *filterRenderer) substring(n rowfilter.Call) {
	isSub := n.Func == "substring" || n.Func == "substr"
	if (isSub && (len(n.Args) < 2 || len(n.Args) > 3)) || (!isSub && len(n.Args) != 2) {
		r.refuse("%s takes a string and %s", n.Func, map[bool]string{true: "a position and an optional length", false: "a count"}[isSub])
		return
	}
	for i, a := range n.Args[1:] {
		least := int64(0)
		if isSub && i == 0 {
			least = 1
		}
		lit, ok := a.(rowfilter.Literal)
		v, err := strconv.ParseInt(lit.Text, 10, 64)
		if !ok || lit.Kind != rowfilter.Int32 || err != nil || v < least {
			r.refuse("%s: write its position (1 or more) and length or count (0 or more) as whole numbers: MySQL counts others differently", n.Func)
			return
		}
	}
	name := map[string]string{"substring": "SUBSTRING", "substr": "SUBSTRING", "left": "LEFT", "right": "RIGHT"}[n.Func]
	r.list(name+"(", ", ", n.Args)
}

// extract writes date_part('unit', x) and extract(unit FROM x) as MySQL's
// EXTRACT, for the units both count alike.
func (r *filterRenderer) extract(n rowfilter.Call) {
	unit := strings.ToLower(n.Args[0].(rowfilter.Literal).Text) // rowfilter checks it is a string literal
	if len(n.Args) != 2 || dateUnits[unit] == "" {
		r.refuse("%s('%s', ...) has no MySQL twin: the units are year, quarter, month, day, hour and minute", n.Func, unit)
		return
	}
	r.w("EXTRACT(" + dateUnits[unit] + " FROM ")
	r.expr(n.Args[1])
	r.w(")")
}

// extreme writes GREATEST and LEAST as PostgreSQL's, which skip NULL
// arguments (MySQL's are NULL when one is): each argument is replaced by
// itself, else the first other that is not NULL.
func (r *filterRenderer) extreme(name string, args []rowfilter.Expr) {
	if len(args) == 1 {
		r.expr(args[0])
		return
	}
	r.w(name + "(")
	for i, a := range args {
		if i > 0 {
			r.w(", ")
		}
		alts := []rowfilter.Expr{a}
		for j, b := range args {
			if j != i {
				alts = append(alts, b)
			}
		}
		r.list("COALESCE(", ", ", alts)
	}
	r.w(")")
}

// numType is what a numeric expression is, as far as the renderer can
// tell: an integer, a decimal, a floating-point number, or unknown.
type numType int

const (
	numNone numType = iota
	numInt
	numDecimal
	numFloat
)

// numeric tells an expression's numeric type from its columns and
// literals.
func (r *filterRenderer) numeric(e rowfilter.Expr) numType {
	switch n := e.(type) {
	case rowfilter.Column:
		switch r.columnKind(n.Name) {
		case kindInt:
			return numInt
		case kindDecimal:
			return numDecimal
		case kindFloat4, kindFloat8:
			return numFloat
		}
	case rowfilter.Literal:
		switch n.Kind {
		case rowfilter.Int32, rowfilter.Int64:
			return numInt
		case rowfilter.Decimal:
			return numDecimal
		}
	case rowfilter.Unary:
		if n.Op != "NOT" {
			return r.numeric(n.X)
		}
	case rowfilter.Binary:
		if l, rt := r.numeric(n.L), r.numeric(n.R); l != numNone && rt != numNone && strings.Contains("+-*%", n.Op) {
			return max(l, rt) // the wider of the two
		}
	case rowfilter.Cast:
		switch n.Type.Name {
		case "int2", "int4", "int8":
			return numInt
		case "numeric":
			return numDecimal
		case "float4", "float8":
			return numFloat
		}
	}
	return numNone
}

// columnKind is a column's codec kind (0 when unknown).
func (r *filterRenderer) columnKind(name string) kind {
	i := r.t.ColumnIndex(name)
	if i < 0 {
		return 0
	}
	k, err := codecFor(r.t.Columns[i])
	if err != nil {
		return 0
	}
	return k.kind
}

func isTextKind(k kind) bool {
	switch k {
	case kindText, kindChar, kindJSON, kindEnum, kindSet:
		return true
	}
	return false
}
