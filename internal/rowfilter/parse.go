package rowfilter

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/proto"
)

// Limits on a filter's size: what a person writes by hand fits well
// within them, and they bound the work of parsing and planning it.
const (
	MaxBytes = 8 << 10
	maxDepth = 64
	maxNodes = 2000
)

// wrapper is the statement a filter is parsed in: PostgreSQL's own parser
// reads it as the WHERE of a query of nothing else, and Parse then checks
// that the query is still nothing else. The filter is followed by a line
// break so that a trailing -- comment ends where it should.
const wrapper = "SELECT 1 FROM t WHERE "

// bare is the wrapper's query without its WHERE, to compare with.
var bare = sync.OnceValues(func() (*pg_query.SelectStmt, error) {
	tree, err := pg_query.Parse(strings.TrimSuffix(wrapper, " WHERE "))
	if err != nil {
		return nil, err
	}
	return tree.Stmts[0].Stmt.GetSelectStmt(), nil
})

// Parse reads a filter into its tree, or says which part is refused. It
// does not know the table: CheckColumns checks the names against it.
func Parse(text string) (*Filter, error) {
	if strings.TrimSpace(text) == "" {
		return nil, refuse("it is blank: give a condition on the table's columns, as after WHERE")
	}
	if len(text) > MaxBytes {
		return nil, refuse("it is %d bytes: keep it under %d", len(text), MaxBytes)
	}
	if strings.ContainsRune(text, 0) {
		return nil, refuse("it holds a NUL character")
	}
	where, err := parseWhere(text)
	if err != nil {
		return nil, err
	}
	c := converter{}
	root, err := c.expr(where, 0)
	if err != nil {
		return nil, err
	}
	return &Filter{Text: text, Root: root}, nil
}

// parseWhere parses the filter inside the wrapper and returns its WHERE
// condition, refusing anything the filter added to the query around it.
func parseWhere(text string) (*pg_query.Node, error) {
	tree, err := pg_query.Parse(wrapper + text + "\n")
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) {
			if at := pe.Cursorpos - len(wrapper); at > 0 && at <= len(text)+1 {
				return nil, refuse("%s (at character %d)", pe.Message, at)
			}
			return nil, refuse("%s", pe.Message)
		}
		return nil, refuse("%v", err)
	}
	if len(tree.Stmts) != 1 {
		return nil, refuse("it holds more than one statement: write one condition, without ';'")
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil {
		return nil, refuse("it is not a condition")
	}
	if sel.Op != pg_query.SetOperation_SETOP_NONE {
		return nil, refuse("set operations (UNION, INTERSECT, EXCEPT) are not allowed: write one condition on the table's columns")
	}
	want, err := bare()
	if err != nil {
		return nil, fmt.Errorf("parse the filter's wrapper: %w", err)
	}
	where := sel.WhereClause
	rest := proto.Clone(sel).(*pg_query.SelectStmt)
	rest.WhereClause = nil
	if where == nil || !proto.Equal(rest, want) {
		return nil, refuse("%s: write only a condition, as after WHERE", extraClause(sel))
	}
	return where, nil
}

// extraClause names what a filter added to the query beyond its WHERE.
func extraClause(s *pg_query.SelectStmt) string {
	switch {
	case len(s.GroupClause) > 0 || s.HavingClause != nil:
		return "GROUP BY and HAVING are not allowed"
	case len(s.WindowClause) > 0:
		return "WINDOW is not allowed"
	case len(s.SortClause) > 0:
		return "ORDER BY is not allowed"
	case s.LimitCount != nil || s.LimitOffset != nil:
		return "LIMIT, OFFSET and FETCH are not allowed"
	case len(s.LockingClause) > 0:
		return "FOR UPDATE and FOR SHARE are not allowed"
	}
	return "clauses after the condition are not allowed"
}

// converter turns PostgreSQL's parse tree into a filter's, counting nodes.
type converter struct{ nodes int }

func (c *converter) expr(n *pg_query.Node, depth int) (Expr, error) {
	if n == nil || n.Node == nil {
		return nil, refuse("an expression is missing")
	}
	if c.nodes++; c.nodes > maxNodes {
		return nil, refuse("it has more than %d parts: split the backfill, or use BETWEEN for ranges", maxNodes)
	}
	if depth > maxDepth {
		return nil, refuse("it nests deeper than %d levels", maxDepth)
	}
	depth++
	switch v := n.Node.(type) {
	case *pg_query.Node_ColumnRef:
		return column(v.ColumnRef)
	case *pg_query.Node_AConst:
		return literal(v.AConst)
	case *pg_query.Node_AExpr:
		return c.aExpr(v.AExpr, depth)
	case *pg_query.Node_BoolExpr:
		return c.boolExpr(v.BoolExpr, depth)
	case *pg_query.Node_NullTest:
		x, err := c.expr(v.NullTest.Arg, depth)
		if err != nil {
			return nil, err
		}
		return IsNull{X: x, Not: v.NullTest.Nulltesttype == pg_query.NullTestType_IS_NOT_NULL}, nil
	case *pg_query.Node_TypeCast:
		return c.cast(v.TypeCast, depth)
	case *pg_query.Node_FuncCall:
		return c.call(v.FuncCall, depth)
	case *pg_query.Node_CoalesceExpr:
		return c.keywordCall("coalesce", v.CoalesceExpr.Args, depth)
	case *pg_query.Node_MinMaxExpr:
		name := "greatest"
		if v.MinMaxExpr.Op == pg_query.MinMaxOp_IS_LEAST {
			name = "least"
		}
		return c.keywordCall(name, v.MinMaxExpr.Args, depth)
	case *pg_query.Node_SubLink:
		return nil, refuse("subqueries are not allowed: write a condition on the table's own columns")
	case *pg_query.Node_ParamRef:
		return nil, refuse("parameters ($%d) are not allowed: write the value itself", v.ParamRef.Number)
	case *pg_query.Node_RowExpr:
		return nil, refuse("row constructors (ROW(...) or (a, b)) are not allowed: compare the columns one by one")
	case *pg_query.Node_AArrayExpr:
		return nil, refuse("arrays (ARRAY[...]) are not allowed: use IN (...)")
	case *pg_query.Node_SqlvalueFunction:
		name := strings.TrimSuffix(strings.ToLower(strings.TrimPrefix(v.SqlvalueFunction.Op.String(), "SVFOP_")), "_n")
		return nil, refuse("%s is not allowed: a filter must select the same rows on every read, so write the value itself", name)
	case *pg_query.Node_CaseExpr:
		return nil, refuse("CASE expressions are not allowed: combine conditions with AND, OR and NOT")
	case *pg_query.Node_CollateClause:
		return nil, refuse("COLLATE is not allowed")
	case *pg_query.Node_AIndirection:
		return nil, refuse("subscripts and field selections are not allowed")
	case *pg_query.Node_BooleanTest:
		return nil, refuse("IS TRUE, IS FALSE and IS UNKNOWN are not allowed: compare with = true, = false or use IS NULL")
	case *pg_query.Node_NamedArgExpr:
		return nil, refuse("named arguments (name => value) are not allowed: pass the arguments in order")
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", n.Node), "*pg_query.Node_")
	return nil, refuse("%s expressions are not allowed: see docs/backfill.md for what a filter may hold", kind)
}

// column reads a column reference: a bare name of the table's.
func column(r *pg_query.ColumnRef) (Expr, error) {
	names := make([]string, 0, len(r.Fields))
	for _, f := range r.Fields {
		if f.GetAStar() != nil {
			return nil, refuse("* is not allowed: name a column")
		}
		names = append(names, f.GetString_().GetSval())
	}
	if len(names) != 1 {
		return nil, refuse("column %s: qualified names are not allowed, only the table's own columns by name (%s)",
			strings.Join(names, "."), names[len(names)-1])
	}
	if systemColumns[names[0]] {
		return nil, refuse("system column %s is not allowed: name the table's own columns", names[0])
	}
	return Column{Name: names[0]}, nil
}

// literal reads a constant with the type PostgreSQL gives it as written.
func literal(a *pg_query.A_Const) (Expr, error) {
	if a.Isnull {
		return Literal{Kind: Null}, nil
	}
	switch v := a.Val.(type) {
	case *pg_query.A_Const_Ival:
		return Literal{Kind: Int32, Text: strconv.FormatInt(int64(v.Ival.GetIval()), 10)}, nil
	case *pg_query.A_Const_Fval:
		return number(v.Fval.GetFval())
	case *pg_query.A_Const_Boolval:
		return Literal{Kind: Bool, Text: strconv.FormatBool(v.Boolval.GetBoolval())}, nil
	case *pg_query.A_Const_Sval:
		if clockWord(v.Sval.GetSval()) {
			return nil, refuse("the literal %q is not allowed: read as a date or time it is the clock, and a filter must select the same rows on every read; write the date or time itself", v.Sval.GetSval())
		}
		return Literal{Kind: String, Text: v.Sval.GetSval()}, nil
	case *pg_query.A_Const_Bsval:
		return nil, refuse("bit-string literals (B'…', X'…') are not allowed")
	}
	return nil, refuse("a constant of an unknown kind")
}

// clockWord reports whether s is one of the special date/time inputs
// that PostgreSQL reads as the current time ('now', 'today', …), which a
// string compared with a date or time column is read as.
func clockWord(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "now", "today", "tomorrow", "yesterday":
		return true
	}
	return false
}

// number reads a numeric constant too large for 32 bits or not whole, in
// plain decimal (the parser keeps 0x1F, 0o17, 0b101 and 1_000 as written):
// an integer of 64 bits, else a decimal, as PostgreSQL types it.
func number(s string) (Expr, error) {
	neg := strings.HasPrefix(s, "-")
	digits := strings.ReplaceAll(strings.TrimPrefix(s, "-"), "_", "")
	base := 10
	if len(digits) > 2 && digits[0] == '0' {
		switch digits[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
	}
	if base != 10 {
		n, ok := new(big.Int).SetString(digits[2:], base)
		if !ok {
			return nil, refuse("number %s cannot be read", s)
		}
		if neg {
			n.Neg(n)
		}
		digits, neg = n.String(), false
	}
	if neg {
		digits = "-" + digits
	}
	if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return Literal{Kind: Int32, Text: digits}, nil
		}
		return Literal{Kind: Int64, Text: digits}, nil
	}
	if _, ok := new(big.Float).SetString(digits); !ok {
		return nil, refuse("number %s cannot be read", s)
	}
	return Literal{Kind: Decimal, Text: digits}, nil
}

func (c *converter) list(ns []*pg_query.Node, depth int) ([]Expr, error) {
	out := make([]Expr, len(ns))
	for i, n := range ns {
		e, err := c.expr(n, depth)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (c *converter) boolExpr(b *pg_query.BoolExpr, depth int) (Expr, error) {
	args, err := c.list(b.Args, depth)
	if err != nil {
		return nil, err
	}
	switch {
	case b.Boolop == pg_query.BoolExprType_NOT_EXPR && len(args) == 1:
		return Unary{Op: "NOT", X: args[0]}, nil
	case b.Boolop == pg_query.BoolExprType_AND_EXPR && len(args) >= 2:
		return Logic{Op: "AND", Args: args}, nil
	case b.Boolop == pg_query.BoolExprType_OR_EXPR && len(args) >= 2:
		return Logic{Op: "OR", Args: args}, nil
	}
	return nil, refuse("a malformed AND, OR or NOT")
}

// operatorName is an A_Expr's operator, refusing OPERATOR(schema.op).
func operatorName(names []*pg_query.Node) (string, error) {
	if len(names) != 1 {
		return "", refuse("OPERATOR(...) is not allowed: write the operator itself")
	}
	return names[0].GetString_().GetSval(), nil
}

func (c *converter) aExpr(a *pg_query.A_Expr, depth int) (Expr, error) {
	op, err := operatorName(a.Name)
	if err != nil {
		return nil, err
	}
	switch a.Kind {
	case pg_query.A_Expr_Kind_AEXPR_OP:
		return c.operator(op, a, depth)
	case pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		l, r, err := c.pair(a, depth)
		if err != nil {
			return nil, err
		}
		name := "IS DISTINCT FROM"
		if a.Kind == pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT {
			name = "IS NOT DISTINCT FROM"
		}
		return Binary{Op: name, L: l, R: r}, nil
	case pg_query.A_Expr_Kind_AEXPR_NULLIF:
		l, r, err := c.pair(a, depth)
		if err != nil {
			return nil, err
		}
		return Call{Func: "nullif", Args: []Expr{l, r}}, nil
	case pg_query.A_Expr_Kind_AEXPR_IN:
		return c.in(op, a, depth)
	case pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE:
		return c.like(op, a, depth)
	case pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		return c.between(a, depth)
	case pg_query.A_Expr_Kind_AEXPR_OP_ANY, pg_query.A_Expr_Kind_AEXPR_OP_ALL:
		return nil, refuse("ANY and ALL are not allowed: use IN (...)")
	case pg_query.A_Expr_Kind_AEXPR_SIMILAR:
		return nil, refuse("SIMILAR TO is not allowed: use LIKE")
	}
	return nil, refuse("operator %s is not allowed", op)
}

// operator reads an infix or prefix operator of the allow-list.
func (c *converter) operator(op string, a *pg_query.A_Expr, depth int) (Expr, error) {
	if a.Lexpr == nil {
		if op != "-" && op != "+" {
			return nil, refuse("prefix operator %s is not allowed: the prefix operators are - and +", op)
		}
		x, err := c.expr(a.Rexpr, depth)
		if err != nil {
			return nil, err
		}
		return Unary{Op: op, X: x}, nil
	}
	if !isOperator(op) {
		return nil, refuse("operator %s is not allowed: the operators are %s, AND, OR, NOT, IN, BETWEEN, LIKE, ILIKE, IS [NOT] NULL and IS [NOT] DISTINCT FROM",
			op, strings.Join(Operators, " "))
	}
	l, r, err := c.pair(a, depth)
	if err != nil {
		return nil, err
	}
	return Binary{Op: op, L: l, R: r}, nil
}

func isOperator(op string) bool {
	for _, o := range Operators {
		if o == op {
			return true
		}
	}
	return false
}

func (c *converter) pair(a *pg_query.A_Expr, depth int) (Expr, Expr, error) {
	l, err := c.expr(a.Lexpr, depth)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.expr(a.Rexpr, depth)
	if err != nil {
		return nil, nil, err
	}
	return l, r, nil
}

func (c *converter) in(op string, a *pg_query.A_Expr, depth int) (Expr, error) {
	items := a.Rexpr.GetList().GetItems()
	if len(items) == 0 {
		return nil, refuse("IN takes a list of values: IN (1, 2, 3)")
	}
	x, err := c.expr(a.Lexpr, depth)
	if err != nil {
		return nil, err
	}
	list, err := c.list(items, depth)
	if err != nil {
		return nil, err
	}
	return In{X: x, List: list, Not: op == "<>"}, nil
}

func (c *converter) like(op string, a *pg_query.A_Expr, depth int) (Expr, error) {
	x, err := c.expr(a.Lexpr, depth)
	if err != nil {
		return nil, err
	}
	pattern := a.Rexpr
	var escape Expr
	if p, e := likeEscape(pattern); p != nil {
		pattern = p
		if escape, err = c.expr(e, depth); err != nil {
			return nil, err
		}
	}
	p, err := c.expr(pattern, depth)
	if err != nil {
		return nil, err
	}
	return Like{X: x, Pattern: p, Escape: escape, Not: strings.HasPrefix(op, "!"),
		IgnoreCase: a.Kind == pg_query.A_Expr_Kind_AEXPR_ILIKE}, nil
}

// likeEscape splits LIKE's right side when it has an ESCAPE, which the
// parser writes as pg_catalog.like_escape(pattern, escape); nil otherwise.
func likeEscape(n *pg_query.Node) (pattern, escape *pg_query.Node) {
	f := n.GetFuncCall()
	if f == nil || len(f.Funcname) != 2 || len(f.Args) != 2 || f.Funcname[0].GetString_().GetSval() != "pg_catalog" ||
		f.Funcname[1].GetString_().GetSval() != "like_escape" || callForm(f) != "" {
		return nil, nil
	}
	return f.Args[0], f.Args[1]
}

// callForm says why a call's form is refused: aggregate, window and
// VARIADIC forms are ("" for a plain call).
func callForm(f *pg_query.FuncCall) string {
	switch {
	case f.AggStar || f.AggDistinct || len(f.AggOrder) > 0 || f.AggFilter != nil || f.AggWithinGroup || f.Over != nil:
		return "aggregate and window forms (*, DISTINCT, ORDER BY, FILTER, OVER) are not allowed"
	case f.FuncVariadic:
		return "VARIADIC is not allowed"
	}
	return ""
}

func (c *converter) between(a *pg_query.A_Expr, depth int) (Expr, error) {
	bounds := a.Rexpr.GetList().GetItems()
	if len(bounds) != 2 {
		return nil, refuse("a malformed BETWEEN")
	}
	x, err := c.expr(a.Lexpr, depth)
	if err != nil {
		return nil, err
	}
	b, err := c.list(bounds, depth)
	if err != nil {
		return nil, err
	}
	k := a.Kind
	return Between{X: x, Low: b[0], High: b[1],
		Not:       k == pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN || k == pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM,
		Symmetric: k == pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM || k == pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM}, nil
}

func (c *converter) cast(tc *pg_query.TypeCast, depth int) (Expr, error) {
	typ, err := typeOf(tc.TypeName)
	if err != nil {
		return nil, err
	}
	x, err := c.expr(tc.Arg, depth)
	if err != nil {
		return nil, err
	}
	return Cast{X: x, Type: typ}, nil
}

// typeOf reads a cast's type: a built-in type of the allow-list, its
// modifiers whole numbers.
func typeOf(tn *pg_query.TypeName) (Type, error) {
	if tn == nil {
		return Type{}, refuse("a cast without a type")
	}
	names := make([]string, len(tn.Names))
	for i, n := range tn.Names {
		names[i] = n.GetString_().GetSval()
	}
	full := strings.Join(names, ".")
	name := names[len(names)-1]
	if (len(names) == 2 && names[0] != "pg_catalog") || len(names) > 2 || !allowedType(name) {
		return Type{}, refuse("cast to %s is not allowed: the types are %s", full, strings.Join(Types, ", "))
	}
	if tn.Setof || tn.PctType || len(tn.ArrayBounds) > 0 {
		return Type{}, refuse("cast to %s: array and %%TYPE casts are not allowed", full)
	}
	t := Type{Name: name}
	for _, m := range tn.Typmods {
		iv, ok := m.GetAConst().GetVal().(*pg_query.A_Const_Ival)
		if !ok {
			return Type{}, refuse("cast to %s: its modifiers must be whole numbers", full)
		}
		t.Mods = append(t.Mods, iv.Ival.GetIval())
	}
	return t, nil
}

func allowedType(name string) bool {
	for _, t := range Types {
		if t == name {
			return true
		}
	}
	return false
}

// sqlSyntax names the functions PostgreSQL's parser makes of SQL syntax,
// for a refusal to name what the user wrote.
var sqlSyntax = map[string]string{
	"timezone": "AT TIME ZONE", "overlay": "OVERLAY", "normalize": "NORMALIZE", "is_normalized": "IS NORMALIZED",
	"pg_collation_for": "COLLATION FOR", "like_escape": "ESCAPE outside LIKE", "similar_to_escape": "SIMILAR TO",
	"system_user": "SYSTEM_USER", "xmlexists": "XMLEXISTS",
}

func (c *converter) call(f *pg_query.FuncCall, depth int) (Expr, error) {
	names := make([]string, len(f.Funcname))
	for i, n := range f.Funcname {
		names[i] = n.GetString_().GetSval()
	}
	full := strings.Join(names, ".")
	name := names[len(names)-1]
	spec, known := Functions[name]
	switch {
	case f.Funcformat == pg_query.CoercionForm_COERCE_SQL_SYNTAX && !known && sqlSyntax[name] != "":
		return nil, refuse("%s is not allowed; allowed functions: %s", sqlSyntax[name], FunctionNames())
	case setReturning[name]:
		return nil, refuse("function %s is not allowed: set-returning functions are not allowed in a filter", full)
	case timeOfCall[name]:
		return nil, refuse("function %s is not allowed: a filter must select the same rows on every read; allowed functions: %s", full, FunctionNames())
	case !known || spec.Keyword || (len(names) == 2 && names[0] != "pg_catalog") || len(names) > 2:
		return nil, refuse("function %s is not allowed; allowed functions: %s", full, FunctionNames())
	}
	if why := callForm(f); why != "" {
		return nil, refuse("function %s: %s", full, why)
	}
	args, err := c.list(f.Args, depth)
	if err != nil {
		return nil, err
	}
	if spec.UnitFirst {
		if len(args) == 0 {
			return nil, refuse("function %s takes the unit first: %s('day', ...)", name, name)
		}
		if l, ok := args[0].(Literal); !ok || l.Kind != String {
			return nil, refuse("function %s: its unit must be a string literal, such as 'day'", name)
		}
	}
	return Call{Func: name, Args: args}, nil
}

// keywordCall reads COALESCE, GREATEST and LEAST.
func (c *converter) keywordCall(name string, ns []*pg_query.Node, depth int) (Expr, error) {
	args, err := c.list(ns, depth)
	if err != nil {
		return nil, err
	}
	return Call{Func: name, Args: args}, nil
}
