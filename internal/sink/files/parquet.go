package files

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/tidemark/tidemark/internal/change"
)

// A Parquet data file holds one row per event: op, ts_ms, the source
// block and the chunk mark's fields as columns, before and after as
// groups with one column per table column, typed by its tag
// (parquet_types.go), and two JSON columns for what those types cannot
// carry: out_of_range ({"after":{"col":"infinity"}}: values kept as their
// canonical text) and unchanged (["col"]: out-of-line values an update
// left unchanged). The file's key-value metadata holds its layout, so a
// reader rebuilds each event's JSON exactly (docs/destinations.md,
// "Parquet").
const layoutKey = "tidemark.layout"

type parquetFormat struct{}

func (parquetFormat) ext() string { return ".parquet" }

func (parquetFormat) create(w *bufio.Writer) fileEncoder { return &parquetEncoder{out: w} }

func (parquetFormat) encodesRows() bool { return true }

// pqLayout is what a file's schema is built from: the table's shape and
// the source block's fields with their kinds (string, int64, bool).
type pqLayout struct {
	Table  *change.Table `json:"table"`
	Source []pqField     `json:"source"`

	types  []pqType
	schema *parquet.Schema
	groups map[string][]int // the leaf columns of each top-level group
	// rowLeaves are the leaves of before's and after's columns, by the
	// table's column; sourceLeaves the source block's, by field: looked
	// up once, not for every value.
	rowLeaves    map[string][]parquet.LeafColumn
	sourceLeaves []parquet.LeafColumn
}

type pqField struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// kindOf is a source field's kind by its JSON; "" for null, which fits
// any.
func kindOf(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return ""
	}
	return "int64"
}

func kindNode(kind string) parquet.Node {
	switch kind {
	case "int64":
		return parquet.Optional(parquet.Int(64))
	case "bool":
		return parquet.Optional(parquet.Leaf(parquet.BooleanType))
	}
	return parquet.Optional(parquet.String())
}

// init builds the schema, or takes a file's.
func (l *pqLayout) init(schema *parquet.Schema) {
	l.types = make([]pqType, len(l.Table.Columns))
	row := parquet.Group{}
	for i, c := range l.Table.Columns {
		l.types[i] = pqTypeOf(c)
		row[c.Name] = l.types[i].node()
	}
	if schema == nil {
		src := parquet.Group{}
		for _, f := range l.Source {
			src[f.Name] = kindNode(f.Kind)
		}
		opt := parquet.Optional
		schema = parquet.NewSchema("event", parquet.Group{
			"before": opt(row), "after": opt(row), "source": opt(src),
			"op": opt(parquet.String()), "ts_ms": opt(parquet.Int(64)),
			"chunk": opt(parquet.Group{
				"backfill": opt(parquet.Int(64)), "low": opt(parquet.JSON()), "high": opt(parquet.JSON()),
				"rows": opt(parquet.Int(64)), "reset": opt(parquet.Leaf(parquet.BooleanType)),
				"last": opt(parquet.Leaf(parquet.BooleanType)),
			}),
			"out_of_range": opt(parquet.JSON()), "unchanged": opt(parquet.JSON()),
		})
	}
	l.schema = schema
	l.groups = map[string][]int{}
	for i, path := range schema.Columns() {
		if len(path) > 1 {
			l.groups[path[0]] = append(l.groups[path[0]], i)
		}
	}
	l.rowLeaves = map[string][]parquet.LeafColumn{}
	for _, group := range []string{"before", "after"} {
		for _, c := range l.Table.Columns {
			leaf, _ := schema.Lookup(group, c.Name)
			l.rowLeaves[group] = append(l.rowLeaves[group], leaf)
		}
	}
	l.sourceLeaves = nil
	for _, f := range l.Source {
		leaf, _ := schema.Lookup("source", f.Name)
		l.sourceLeaves = append(l.sourceLeaves, leaf)
	}
}

// fits reports whether an event of this table and source block goes
// into a file of this layout.
func (l *pqLayout) fits(t *change.Table, src []rawField) bool {
	if !change.SameShape(l.Table, t) || len(src) != len(l.Source) {
		return false
	}
	for i, c := range t.Columns {
		if pqTypeOf(c) != l.types[i] {
			return false
		}
	}
	for i, f := range src {
		k := kindOf(f.value)
		if f.name != l.Source[i].Name || k != "" && k != l.Source[i].Kind {
			return false
		}
	}
	return true
}

// rawField is one field of an event's source block, in order.
type rawField struct {
	name  string
	value json.RawMessage
}

// parsedEvent is what a Parquet row keeps of an event's JSON besides
// before and after, which come from the change's values.
type parsedEvent struct {
	Op     string          `json:"op"`
	TsMs   int64           `json:"ts_ms"`
	Source json.RawMessage `json:"source"`
	Chunk  *chunkFields    `json:"chunk"`
	src    *sourceBlock
}

type chunkFields struct {
	Backfill int64           `json:"backfill"`
	Low      json.RawMessage `json:"low"`
	High     json.RawMessage `json:"high"`
	Rows     int64           `json:"rows"`
	Reset    bool            `json:"reset"`
	Last     bool            `json:"last"`
}

// sourceBlock is a source block's fields, in order, and their values.
type sourceBlock struct {
	raw    []byte
	fields []rawField
	values []parquet.Value // by field; null for a null one
}

// parseSource parses a source block and its fields' values.
func parseSource(raw []byte) (*sourceBlock, error) {
	fields, err := sourceFields(raw)
	if err != nil {
		return nil, fmt.Errorf("event source: %w", err)
	}
	sb := &sourceBlock{raw: raw, fields: fields, values: make([]parquet.Value, len(fields))}
	for i, f := range fields {
		if sb.values[i], err = fieldValue(f); err != nil {
			return nil, fmt.Errorf("parquet: source field %s: %w", f.name, err)
		}
	}
	return sb, nil
}

// fieldValue is a source field's value by its kind; null stays null.
func fieldValue(f rawField) (parquet.Value, error) {
	switch kindOf(f.value) {
	case "string":
		var s string
		if err := json.Unmarshal(f.value, &s); err != nil {
			return parquet.Value{}, err
		}
		return parquet.ByteArrayValue([]byte(s)), nil
	case "bool":
		return parquet.BooleanValue(string(f.value) == "true"), nil
	case "int64":
		n, err := strconv.ParseInt(string(f.value), 10, 64)
		if err != nil {
			return parquet.Value{}, fmt.Errorf("%s: not a whole number within 64 bits", f.value)
		}
		return parquet.Int64Value(n), nil
	}
	return parquet.Value{}, nil
}

// sourceFields splits the source block, an object of scalars as
// event.Encoder writes it, into its fields in their order, which a map
// would lose.
func sourceFields(raw []byte) ([]rawField, error) {
	s := bytes.TrimSpace(raw)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, errors.New("not an object")
	}
	var out []rawField
	for s = s[1 : len(s)-1]; len(s) > 0; {
		k, rest, ok := cutString(s)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return nil, fmt.Errorf("no field name at %.20q", s)
		}
		rest = rest[1:]
		var v []byte
		if len(rest) > 0 && rest[0] == '"' {
			if v, rest, ok = cutString(rest); !ok {
				return nil, fmt.Errorf("unterminated string at %.20q", rest)
			}
		} else {
			i := bytes.IndexByte(rest, ',')
			if i < 0 {
				i = len(rest)
			}
			v, rest = rest[:i], rest[i:]
		}
		var name string
		if err := json.Unmarshal(k, &name); err != nil {
			return nil, err
		}
		if len(v) == 0 || (v[0] == '{' || v[0] == '[') {
			return nil, fmt.Errorf("field %s is not a scalar", name)
		}
		out = append(out, rawField{name, v})
		if len(rest) > 0 && rest[0] != ',' {
			return nil, fmt.Errorf("no comma at %.20q", rest)
		}
		s = bytes.TrimPrefix(rest, []byte(","))
	}
	return out, nil
}

// cutString splits the JSON string s starts with, quotes included, from
// what follows it.
func cutString(s []byte) (str, rest []byte, ok bool) {
	if len(s) == 0 || s[0] != '"' {
		return nil, s, false
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return s[:i+1], s[i+1:], true
		}
	}
	return nil, s, false
}
