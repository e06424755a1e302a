package genexpr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// Dialect is a destination's SQL.
type Dialect uint8

const (
	PostgreSQL Dialect = iota + 1
	SQLite
)

// Render gives the SQL computing column i of t, a stored generated column,
// in the destination's dialect: the source's expression parsed and written
// again. An error says why the destination cannot compute the column; its
// values are then read from the source.
func Render(d Dialect, t *change.Table, i int) (string, error) {
	c := t.Columns[i]
	if c.Generated == "" {
		return "", fmt.Errorf("column %q is not a generated column", c.Name)
	}
	n, err := Parse(c.Generated)
	if err != nil {
		return "", fmt.Errorf("generated column %q: %w", c.Name, err)
	}
	switch d {
	case PostgreSQL:
		r := pgRenderer{t: t, qualify: true}
		var b strings.Builder
		if err := r.render(&b, n); err != nil {
			return "", fmt.Errorf("generated column %q: %w", c.Name, err)
		}
		return b.String(), nil
	case SQLite:
		sql, typ, err := sqliteRenderer{t: t}.render(n)
		if want := kindOf(c); err == nil && (want == tyNull || typ != want) {
			err = fmt.Errorf("its value is %s, stored in a column of type %s", typ, c.Type)
		}
		if err != nil {
			return "", fmt.Errorf("generated column %q: SQLite cannot compute the same values: %w", c.Name, err)
		}
		return sql, nil
	}
	return "", fmt.Errorf("unknown dialect %d", d)
}

// Computes reports whether a destination of the dialect computes column i
// of t itself: a stored generated column whose expression renders.
func Computes(d Dialect, t *change.Table, i int) bool {
	if t.Columns[i].Generated == "" {
		return false
	}
	_, err := Render(d, t, i)
	return err == nil
}

// RenameColumn rewrites an expression read by Parse so that its references
// to column from name column to: a destination's shape of a table follows
// a rename of a column a generated column reads. An expression the grammar
// refuses is returned as it is (it is not rendered anyway).
func RenameColumn(expr, from, to string) string {
	n, err := Parse(expr)
	if err != nil {
		return expr
	}
	rename(n, from, to)
	var b strings.Builder
	if err := (pgRenderer{}).render(&b, n); err != nil {
		return expr
	}
	return b.String()
}

func rename(n *Node, from, to string) {
	if n.Kind == Column && n.Text == from {
		n.Text = to
	}
	for _, a := range n.Args {
		rename(a, from, to)
	}
}

// column finds a referenced column: one of t's, not itself generated.
func column(t *change.Table, name string) (change.Column, error) {
	i := t.ColumnIndex(name)
	if i < 0 {
		return change.Column{}, fmt.Errorf("column %q is not in the table", name)
	}
	if t.Columns[i].Generated != "" {
		return change.Column{}, fmt.Errorf("column %q is generated itself", name)
	}
	return t.Columns[i], nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// pgRenderer writes an expression for PostgreSQL: the same expression,
// every name quoted, every function qualified with pg_catalog (so that no
// function of the destination's search path stands in for it), string
// constants as escape strings whatever standard_conforming_strings says.
type pgRenderer struct {
	t       *change.Table // nil: any column name is taken
	qualify bool          // functions with pg_catalog
}

func (r pgRenderer) render(b *strings.Builder, n *Node) error {
	switch n.Kind {
	case Column:
		if r.t != nil {
			if _, err := column(r.t, n.Text); err != nil {
				return err
			}
		}
		b.WriteString(quoteIdent(n.Text))
	case Number:
		b.WriteString(n.Text)
	case String:
		b.WriteString("E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(n.Text) + "'")
	case Null:
		b.WriteString("NULL")
	case Binary:
		b.WriteByte('(')
		if err := r.render(b, n.Args[0]); err != nil {
			return err
		}
		b.WriteString(" " + n.Text + " ")
		if err := r.render(b, n.Args[1]); err != nil {
			return err
		}
		b.WriteByte(')')
	case Negate:
		b.WriteString("(- ")
		if err := r.render(b, n.Args[0]); err != nil {
			return err
		}
		b.WriteByte(')')
	case Cast:
		b.WriteByte('(')
		if err := r.render(b, n.Args[0]); err != nil {
			return err
		}
		b.WriteString(")::" + n.Type.Name)
		if len(n.Type.Mods) > 0 {
			b.WriteString("(" + strings.Join(n.Type.Mods, ",") + ")")
		}
	case Call:
		switch {
		case keywordCalls[n.Text]:
			b.WriteString(strings.ToUpper(n.Text))
		case r.qualify:
			b.WriteString("pg_catalog." + quoteIdent(n.Text))
		default:
			b.WriteString(quoteIdent(n.Text))
		}
		b.WriteByte('(')
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := r.render(b, a); err != nil {
				return err
			}
		}
		b.WriteByte(')')
	default:
		return fmt.Errorf("unknown node %d", n.Kind)
	}
	return nil
}

// sqlType is what an SQLite rendering computes, in the storage the SQLite
// destination gives the source's types (docs/type-mapping.md).
type sqlType uint8

const (
	tyNull sqlType = iota // an untyped NULL
	tyInt                 // integers, stored as INTEGER
	tyText                // text and character varying, stored as TEXT
)

func (t sqlType) String() string {
	switch t {
	case tyInt:
		return "an integer"
	case tyText:
		return "text"
	}
	return "NULL"
}

// kindOf is the SQLite computation type of a source column; false when
// SQLite would compute with it differently (numeric is text there, floats
// may be stored as text or blobs, char pads).
func kindOf(c change.Column) sqlType {
	switch change.TagOf(c) {
	case change.TagInt16, change.TagInt32, change.TagInt64:
		return tyInt
	case change.TagText:
		return tyText
	}
	return tyNull
}

// sqliteRenderer writes an expression for SQLite when SQLite computes the
// same value for every row the source can hold: integer arithmetic (the
// source refuses overflow and division by zero, so no such row exists), ||
// of text and integers, and coalesce, nullif, abs and length, whose
// meaning is the same. Anything else, lower and upper included (SQLite
// folds ASCII only), is refused.
type sqliteRenderer struct{ t *change.Table }

func (r sqliteRenderer) render(n *Node) (string, sqlType, error) {
	switch n.Kind {
	case Column:
		c, err := column(r.t, n.Text)
		if err != nil {
			return "", 0, err
		}
		typ := kindOf(c)
		if typ == tyNull {
			return "", 0, fmt.Errorf("column %q is %s, which SQLite stores or computes with differently", c.Name, c.Type)
		}
		return quoteIdent(c.Name), typ, nil
	case Number:
		if _, err := strconv.ParseInt(n.Text, 10, 64); err != nil {
			return "", 0, fmt.Errorf("the constant %s is numeric on the source", n.Text)
		}
		return n.Text, tyInt, nil
	case String:
		return "", 0, fmt.Errorf("a string constant without a type")
	case Null:
		return "NULL", tyNull, nil
	case Cast:
		return r.cast(n)
	case Negate:
		a, typ, err := r.render(n.Args[0])
		if err != nil {
			return "", 0, err
		}
		if typ != tyInt {
			return "", 0, fmt.Errorf("minus of %s", typ)
		}
		return "(-" + a + ")", tyInt, nil
	case Binary:
		return r.binary(n)
	case Call:
		return r.call(n)
	}
	return "", 0, fmt.Errorf("unknown node %d", n.Kind)
}

func (r sqliteRenderer) cast(n *Node) (string, sqlType, error) {
	arg := n.Args[0]
	switch n.Type.Name {
	case "text", "character varying":
		if len(n.Type.Mods) > 0 {
			return "", 0, fmt.Errorf("a cast to %s(%s) cuts values", n.Type.Name, strings.Join(n.Type.Mods, ","))
		}
		if arg.Kind == String {
			return "'" + strings.ReplaceAll(arg.Text, "'", "''") + "'", tyText, nil
		}
		a, typ, err := r.render(arg)
		switch {
		case err != nil:
			return "", 0, err
		case typ == tyInt:
			return "CAST(" + a + " AS TEXT)", tyText, nil
		}
		return a, tyText, nil
	case "integer", "bigint", "smallint":
		if arg.Kind == String {
			if !isInteger(arg.Text) {
				return "", 0, fmt.Errorf("the constant %q is not a plain integer", arg.Text)
			}
			return "(" + arg.Text + ")", tyInt, nil
		}
		a, typ, err := r.render(arg)
		switch {
		case err != nil:
			return "", 0, err
		case typ == tyText:
			return "", 0, fmt.Errorf("a cast of text to %s", n.Type.Name)
		}
		return a, tyInt, nil
	}
	return "", 0, fmt.Errorf("a cast to %s", n.Type.Name)
}

// isInteger: an optional minus and decimal digits, within 64 bits.
func isInteger(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil && !strings.HasPrefix(s, "+")
}

func (r sqliteRenderer) binary(n *Node) (string, sqlType, error) {
	a, ta, err := r.render(n.Args[0])
	if err != nil {
		return "", 0, err
	}
	b, tb, err := r.render(n.Args[1])
	if err != nil {
		return "", 0, err
	}
	if n.Text == "||" {
		if ta == tyInt {
			a = "CAST(" + a + " AS TEXT)"
		}
		if tb == tyInt {
			b = "CAST(" + b + " AS TEXT)"
		}
		if ta != tyText && tb != tyText {
			return "", 0, fmt.Errorf("|| of %s and %s", ta, tb)
		}
		return "(" + a + " || " + b + ")", tyText, nil
	}
	if ta == tyText || tb == tyText {
		return "", 0, fmt.Errorf("%s of text", n.Text)
	}
	return "(" + a + " " + n.Text + " " + b + ")", tyInt, nil
}

func (r sqliteRenderer) call(n *Node) (string, sqlType, error) {
	args := make([]string, len(n.Args))
	types := make([]sqlType, len(n.Args))
	for i, a := range n.Args {
		var err error
		if args[i], types[i], err = r.render(a); err != nil {
			return "", 0, err
		}
	}
	same := tyNull
	for _, t := range types {
		if t != tyNull && same != tyNull && t != same {
			return "", 0, fmt.Errorf("%s of %s and %s", n.Text, same, t)
		}
		if t != tyNull {
			same = t
		}
	}
	call := func(name string) string { return name + "(" + strings.Join(args, ", ") + ")" }
	switch {
	case n.Text == "coalesce" && len(args) >= 2:
		return call("coalesce"), same, nil
	case n.Text == "nullif" && len(args) == 2:
		return call("nullif"), same, nil
	case n.Text == "abs" && len(args) == 1 && same == tyInt:
		return call("abs"), tyInt, nil
	case (n.Text == "length" || n.Text == "char_length") && len(args) == 1 && same == tyText:
		// Both count characters; PostgreSQL text holds no NUL, where
		// SQLite's length would stop.
		return call("length"), tyInt, nil
	}
	return "", 0, fmt.Errorf("function %s is not one SQLite computes the same way", n.Text)
}
