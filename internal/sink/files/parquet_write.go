package files

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// parquetEncoder writes one Parquet file. Its schema comes from the
// first event; an event it does not describe (the table's shape or the
// source block changed) ends the file.
type parquetEncoder struct {
	out    *bufio.Writer
	layout *pqLayout
	w      *parquet.Writer
	// next is the event fits parsed, which write then takes.
	next *parsedEvent
	// src is the last source block parsed: a chunk's rows, and a
	// transaction's changes, share one.
	src *sourceBlock
	// rows wait to be written together: the writer's cost is per call as
	// much as per row.
	rows []parquet.Row
}

// rowsPerWrite is how many rows go to the Parquet writer at once.
const rowsPerWrite = 256

func (e *parquetEncoder) fits(ev fileEvent) bool {
	p, err := e.parse(ev)
	e.next = p
	// An event that does not parse fails in write, with its error.
	return err != nil || e.layout == nil || e.layout.fits(ev.table, p.src.fields)
}

func (e *parquetEncoder) write(ev fileEvent) error {
	p := e.next
	e.next = nil
	if p == nil {
		var err error
		if p, err = e.parse(ev); err != nil {
			return err
		}
	}
	if e.layout == nil {
		if err := e.start(ev, p); err != nil {
			return err
		}
	}
	row, err := e.layout.row(ev, p)
	if err != nil {
		return err
	}
	if e.rows = append(e.rows, row); len(e.rows) >= rowsPerWrite {
		return e.flushRows()
	}
	return nil
}

func (e *parquetEncoder) flushRows() error {
	_, err := e.w.WriteRows(e.rows)
	e.rows = e.rows[:0]
	return err
}

// parse takes what a row keeps of an event: from its head, or its JSON.
func (e *parquetEncoder) parse(ev fileEvent) (*parsedEvent, error) {
	p := &parsedEvent{}
	if h := ev.head; h != nil {
		p.Op, p.TsMs, p.Source = h.Op, h.TsMs, h.Source
	} else if err := json.Unmarshal(ev.value, p); err != nil {
		return nil, fmt.Errorf("event: %w", err)
	}
	if e.src == nil || !bytes.Equal(e.src.raw, p.Source) {
		src, err := parseSource(p.Source)
		if err != nil {
			return nil, err
		}
		e.src = src
	}
	p.src = e.src
	return p, nil
}

func (e *parquetEncoder) start(ev fileEvent, p *parsedEvent) error {
	if ev.table == nil {
		return errors.New("parquet: an event without its table's shape")
	}
	l := &pqLayout{Table: ev.table}
	for _, f := range p.src.fields {
		l.Source = append(l.Source, pqField{Name: f.name, Kind: cmp.Or(kindOf(f.value), "string")})
	}
	meta, err := json.Marshal(l)
	if err != nil {
		return err
	}
	l.init(nil)
	e.layout = l
	e.w = parquet.NewWriter(e.out, l.schema, parquet.Compression(&parquet.Snappy), parquet.KeyValueMetadata(layoutKey, string(meta)))
	return nil
}

func (e *parquetEncoder) finish() error {
	if e.w == nil {
		return nil
	}
	if err := e.flushRows(); err != nil {
		return err
	}
	return e.w.Close()
}

// rowBuilder fills one row of a layout's schema.
type rowBuilder struct {
	l         *pqLayout
	row       parquet.Row
	outside   map[string]map[string]string // group, column: text
	unchanged []string
}

func (b *rowBuilder) set(v parquet.Value, path ...string) {
	leaf, _ := b.l.schema.Lookup(path...)
	b.setLeaf(v, leaf)
}

func (b *rowBuilder) setLeaf(v parquet.Value, leaf parquet.LeafColumn) {
	b.row[leaf.ColumnIndex] = v.Level(0, leaf.MaxDefinitionLevel, leaf.ColumnIndex)
}

// present marks a group present, its leaves null until set.
func (b *rowBuilder) present(group string) {
	for _, i := range b.l.groups[group] {
		b.row[i] = parquet.Value{}.Level(0, 1, i)
	}
}

// row is an event as a row of the layout's schema.
func (l *pqLayout) row(ev fileEvent, p *parsedEvent) (parquet.Row, error) {
	b := &rowBuilder{l: l, row: make(parquet.Row, len(l.schema.Columns())), outside: map[string]map[string]string{}}
	for i := range b.row {
		b.row[i] = parquet.Value{}.Level(0, 0, i)
	}
	if err := b.envelope(p); err != nil {
		return nil, err
	}
	switch p.Op {
	case event.OpCreate, event.OpUpdate, event.OpRead:
		if len(ev.row) != len(l.Table.Columns) {
			return nil, fmt.Errorf("parquet: row of %d values, table %s has %d columns", len(ev.row), l.Table.ID, len(l.Table.Columns))
		}
		b.values("after", allColumns(l.Table), ev.row)
	case event.OpDelete:
		if len(ev.oldKey) != len(l.Table.Key) {
			return nil, fmt.Errorf("parquet: key of %d values, table %s has %d key columns", len(ev.oldKey), l.Table.ID, len(l.Table.Key))
		}
		b.values("before", l.Table.Key, ev.oldKey)
	}
	if len(b.outside) > 0 {
		j, _ := json.Marshal(b.outside) // maps of strings always marshal
		b.set(parquet.ByteArrayValue(j), "out_of_range")
	}
	if len(b.unchanged) > 0 {
		j, _ := json.Marshal(b.unchanged)
		b.set(parquet.ByteArrayValue(j), "unchanged")
	}
	return b.row, nil
}

func allColumns(t *change.Table) []int {
	all := make([]int, len(t.Columns))
	for i := range all {
		all[i] = i
	}
	return all
}

// envelope sets op, ts_ms, the source block and the chunk mark.
func (b *rowBuilder) envelope(p *parsedEvent) error {
	b.set(parquet.ByteArrayValue([]byte(p.Op)), "op")
	b.set(parquet.Int64Value(p.TsMs), "ts_ms")
	b.present("source")
	for i, v := range p.src.values { // fits matched the fields to the layout's
		if !v.IsNull() {
			b.setLeaf(v, b.l.sourceLeaves[i])
		}
	}
	c := p.Chunk
	if c == nil {
		return nil
	}
	b.present("chunk")
	b.set(parquet.Int64Value(c.Backfill), "chunk", "backfill")
	for name, j := range map[string]json.RawMessage{"low": c.Low, "high": c.High} {
		if len(j) > 0 && string(j) != "null" {
			b.set(parquet.ByteArrayValue(j), "chunk", name)
		}
	}
	b.set(parquet.Int64Value(c.Rows), "chunk", "rows")
	b.set(parquet.BooleanValue(c.Reset), "chunk", "reset")
	b.set(parquet.BooleanValue(c.Last), "chunk", "last")
	return nil
}

// values sets a group's columns (cols index the table's columns); a value
// the column's type cannot hold goes to out_of_range as its text.
func (b *rowBuilder) values(group string, cols []int, vals []change.Value) {
	b.present(group)
	for j, i := range cols {
		c, v := b.l.Table.Columns[i], vals[j]
		switch {
		case v.Null:
		case v.Unchanged:
			b.unchanged = append(b.unchanged, c.Name)
		default:
			pv, ok := b.l.types[i].encode(v.Text)
			if ok {
				b.setLeaf(pv, b.l.rowLeaves[group][i])
				continue
			}
			if b.outside[group] == nil {
				b.outside[group] = map[string]string{}
			}
			b.outside[group][c.Name] = v.Text
		}
	}
}
