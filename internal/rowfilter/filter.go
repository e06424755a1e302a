// Package rowfilter reads a backfill's row filter — a condition as written
// after WHERE — into a small expression tree of its own, accepting only
// what a filter needs: the table's columns, literals, comparison and
// arithmetic operators, AND/OR/NOT, IN, BETWEEN, LIKE/ILIKE, IS [NOT]
// NULL, casts to built-in types and an allow-list of immutable built-in
// functions (allow.go). Anything else is refused, naming the part.
//
// The filter is data, never SQL sent anywhere: each source renders the
// tree in its own dialect, quoting the identifiers itself and binding the
// literals as parameters (internal/source/pg/filter.go), so nothing a user
// writes reaches a source server as code.
package rowfilter

import (
	"fmt"
	"slices"
	"strings"
)

// Filter is a parsed row filter.
type Filter struct {
	// Text is the filter as the user wrote it (what a run records).
	Text string
	// Root is the condition.
	Root Expr
}

// Expr is a node of a filter's tree: one of the types below.
type Expr interface{ expr() }

// Column is a column of the filtered table, by its exact name.
type Column struct{ Name string }

// LiteralKind is the type a literal has as written.
type LiteralKind int

// Literal kinds: a quoted string (its type is resolved from where it
// stands, as SQL resolves an untyped literal), an integer that fits 32
// bits, one that fits 64, any other number (exact decimal), a boolean,
// NULL.
const (
	String LiteralKind = iota
	Int32
	Int64
	Decimal
	Bool
	Null
)

// Literal is a constant; Text is its value (for Bool "true" or "false").
type Literal struct {
	Kind LiteralKind
	Text string
}

// Unary is a prefix operator: "-", "+" or "NOT".
type Unary struct {
	Op string
	X  Expr
}

// Binary is an infix operator: a comparison (= <> < <= > >=), arithmetic
// (+ - * / % ^), concatenation (||), or IS [NOT] DISTINCT FROM.
type Binary struct {
	Op   string
	L, R Expr
}

// Logic is AND or OR over two or more conditions.
type Logic struct {
	Op   string // "AND" or "OR"
	Args []Expr
}

// In is X [NOT] IN (List...).
type In struct {
	X    Expr
	List []Expr
	Not  bool
}

// Between is X [NOT] BETWEEN [SYMMETRIC] Low AND High.
type Between struct {
	X, Low, High   Expr
	Not, Symmetric bool
}

// Like is X [NOT] LIKE|ILIKE Pattern [ESCAPE Escape].
type Like struct {
	X, Pattern      Expr
	Escape          Expr // nil: the default escape
	Not, IgnoreCase bool
}

// IsNull is X IS [NOT] NULL.
type IsNull struct {
	X   Expr
	Not bool
}

// Cast converts X to a built-in type (types in allow.go).
type Cast struct {
	X    Expr
	Type Type
}

// Type is a built-in type by its canonical name ("int4", "timestamptz"),
// with its modifiers ("varchar(20)": [20]).
type Type struct {
	Name string
	Mods []int32
}

// Call is a call of an allowed function (functions in allow.go).
type Call struct {
	Func string
	Args []Expr
}

func (Column) expr()  {}
func (Literal) expr() {}
func (Unary) expr()   {}
func (Binary) expr()  {}
func (Logic) expr()   {}
func (In) expr()      {}
func (Between) expr() {}
func (Like) expr()    {}
func (IsNull) expr()  {}
func (Cast) expr()    {}
func (Call) expr()    {}

// Error is a filter tidemark refuses; it names the part and says what is
// allowed instead.
type Error struct{ Msg string }

func (e *Error) Error() string { return "tidemark refused the filter: " + e.Msg }

func refuse(format string, args ...any) *Error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Columns returns the columns the filter names, each once, in order of
// first use.
func (f *Filter) Columns() []string {
	var out []string
	walk(f.Root, func(e Expr) {
		if c, ok := e.(Column); ok && !slices.Contains(out, c.Name) {
			out = append(out, c.Name)
		}
	})
	return out
}

// CheckColumns refuses a filter naming a column that table (its name, for
// the message) does not have among columns.
func (f *Filter) CheckColumns(table string, columns []string) error {
	for _, c := range f.Columns() {
		if !slices.Contains(columns, c) {
			return refuse("column %q does not exist in %s: its columns are %s", c, table, strings.Join(columns, ", "))
		}
	}
	return nil
}

// walk calls fn for e and every node below it.
func walk(e Expr, fn func(Expr)) {
	if e == nil {
		return
	}
	fn(e)
	for _, c := range children(e) {
		walk(c, fn)
	}
}

// children are the nodes directly below e.
func children(e Expr) []Expr {
	switch n := e.(type) {
	case Unary:
		return []Expr{n.X}
	case Binary:
		return []Expr{n.L, n.R}
	case Logic:
		return n.Args
	case In:
		return append([]Expr{n.X}, n.List...)
	case Between:
		return []Expr{n.X, n.Low, n.High}
	case Like:
		return []Expr{n.X, n.Pattern, n.Escape}
	case IsNull:
		return []Expr{n.X}
	case Cast:
		return []Expr{n.X}
	case Call:
		return n.Args
	}
	return nil
}
