// Package genexpr reads the expression of a stored generated column as
// PostgreSQL prints it (pg_get_expr) and writes it again for a destination
// that computes the column itself, so that the column holds the source's
// values although the log never carries them (see docs/type-mapping.md).
//
// Only a small grammar is read: column references, literals, arithmetic,
// ||, casts to built-in types and a list of immutable built-in functions.
// What it does not know is refused, and the column's values are then read
// from the source instead. The expression is never passed on as given: the
// destination's SQL is rendered from the parsed tree, identifiers quoted
// and literals escaped by tidemark, so a table owner's expression cannot
// become other SQL on the destination.
package genexpr

import (
	"fmt"
	"strings"
)

// maxDepth bounds nesting, so that no expression exhausts the stack.
const maxDepth = 64

// Kind is what a node of an expression is.
type Kind uint8

const (
	Column Kind = iota + 1 // a column reference: Text is its name
	Number                 // a numeric literal: Text as written
	String                 // a string literal: Text is its value
	Null                   // NULL
	Binary                 // Text is the operator, Args the two operands
	Negate                 // unary minus of Args[0]
	Cast                   // Args[0] cast to Type
	Call                   // function Text (lower case) of Args
)

// Node is one node of a parsed expression.
type Node struct {
	Kind Kind
	Text string
	Type TypeName // of a Cast
	Args []*Node
}

// TypeName is a built-in type a cast names: Name is its canonical
// spelling (format_type's), Mods its modifiers.
type TypeName struct {
	Name string
	Mods []string
}

// castTypes are the type names a cast may use, by spelling.
var castTypes = map[string]string{
	"text": "text", "integer": "integer", "int": "integer", "int4": "integer",
	"bigint": "bigint", "int8": "bigint", "smallint": "smallint", "int2": "smallint",
	"numeric": "numeric", "double precision": "double precision", "float8": "double precision",
	"real": "real", "float4": "real", "character varying": "character varying", "varchar": "character varying",
	"boolean": "boolean", "date": "date",
}

// functions are the immutable built-in functions the grammar knows.
var functions = map[string]bool{
	"lower": true, "upper": true, "initcap": true, "length": true, "char_length": true,
	"abs": true, "round": true, "trunc": true, "floor": true, "ceil": true, "ceiling": true,
	"btrim": true, "ltrim": true, "rtrim": true, "replace": true, "substr": true,
	"left": true, "right": true, "md5": true, "repeat": true, "lpad": true, "rpad": true,
	"reverse": true, "mod": true, "power": true, "sqrt": true, "sign": true,
	"split_part": true, "strpos": true,
	// written as keywords
	"coalesce": true, "nullif": true, "greatest": true, "least": true,
}

// keywordCalls are functions written as SQL keywords, never qualified.
var keywordCalls = map[string]bool{"coalesce": true, "nullif": true, "greatest": true, "least": true}

// Parse reads an expression as pg_get_expr prints it. An error names the
// part the grammar refuses.
func Parse(s string) (*Node, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.expr(0, 0)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, fmt.Errorf("unexpected %s", p.peek())
	}
	return n, nil
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == op
}

func (p *parser) expect(op string) error {
	if !p.isOp(op) {
		return fmt.Errorf("expected %q, found %s", op, p.peek())
	}
	p.next()
	return nil
}

// precedence of the binary operators known, PostgreSQL's: * / % bind
// tighter than + -, which bind tighter than ||.
var precedence = map[string]int{"||": 1, "+": 2, "-": 2, "*": 3, "/": 3, "%": 3}

// expr parses operators binding at least as tight as min.
func (p *parser) expr(min, depth int) (*Node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the expression nests deeper than %d", maxDepth)
	}
	left, err := p.unary(depth + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		prec, ok := precedence[t.text]
		if t.kind != tOp || !ok || prec < min {
			if t.kind == tOp && !ok && t.text != ")" && t.text != "," {
				return nil, fmt.Errorf("operator %q is not supported", t.text)
			}
			return left, nil
		}
		p.next()
		right, err := p.expr(prec+1, depth+1)
		if err != nil {
			return nil, err
		}
		left = &Node{Kind: Binary, Text: t.text, Args: []*Node{left, right}}
	}
}

func (p *parser) unary(depth int) (*Node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the expression nests deeper than %d", maxDepth)
	}
	if p.isOp("-") {
		p.next()
		n, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Node{Kind: Negate, Args: []*Node{n}}, nil
	}
	n, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	for p.isOp("::") {
		p.next()
		typ, err := p.typeName()
		if err != nil {
			return nil, err
		}
		n = &Node{Kind: Cast, Type: typ, Args: []*Node{n}}
	}
	return n, nil
}

func (p *parser) primary(depth int) (*Node, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		return &Node{Kind: Number, Text: t.text}, nil
	case tString:
		return &Node{Kind: String, Text: t.text}, nil
	case tQuoted:
		if p.isOp("(") { // a function whose name is a keyword: "left"(s, 2)
			return p.call(t.text, depth)
		}
		return &Node{Kind: Column, Text: t.text}, nil
	case tWord:
		if t.text == "null" {
			return &Node{Kind: Null}, nil
		}
		if p.isOp("(") {
			return p.call(t.text, depth)
		}
		if p.isOp(".") {
			return nil, fmt.Errorf("qualified name %q is not supported", t.text)
		}
		return &Node{Kind: Column, Text: t.text}, nil
	case tOp:
		if t.text == "(" {
			n, err := p.expr(0, depth+1)
			if err != nil {
				return nil, err
			}
			return n, p.expect(")")
		}
	}
	return nil, fmt.Errorf("unexpected %s", t)
}

func (p *parser) call(name string, depth int) (*Node, error) {
	if !functions[name] {
		return nil, fmt.Errorf("function %s is not in the list of functions tidemark renders", name)
	}
	p.next() // (
	n := &Node{Kind: Call, Text: name}
	if p.isOp(")") {
		p.next()
		return n, nil
	}
	for {
		arg, err := p.expr(0, depth+1)
		if err != nil {
			return nil, err
		}
		n.Args = append(n.Args, arg)
		if p.isOp(",") {
			p.next()
			continue
		}
		return n, p.expect(")")
	}
}

// typeName reads a cast's type: one or two words of castTypes, then
// optional integer modifiers.
func (p *parser) typeName() (TypeName, error) {
	t := p.next()
	if t.kind != tWord {
		return TypeName{}, fmt.Errorf("expected a type name, found %s", t)
	}
	name := t.text
	if p.peek().kind == tWord {
		if two, ok := castTypes[name+" "+p.peek().text]; ok {
			p.next()
			name = two
		}
	}
	canon, ok := castTypes[name]
	if !ok {
		return TypeName{}, fmt.Errorf("cast to type %s is not supported", name)
	}
	typ := TypeName{Name: canon}
	if !p.isOp("(") {
		return typ, nil
	}
	p.next()
	for {
		m := p.next()
		if m.kind != tNumber || strings.ContainsAny(m.text, ".eE") {
			return TypeName{}, fmt.Errorf("expected a type modifier, found %s", m)
		}
		typ.Mods = append(typ.Mods, m.text)
		if p.isOp(",") {
			p.next()
			continue
		}
		return typ, p.expect(")")
	}
}
