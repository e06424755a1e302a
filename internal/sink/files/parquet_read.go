package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// parquetEvents reads a Parquet data file's rows, in order, as the event
// JSON a JSONL file of the same batch holds, byte for byte.
func parquetEvents(path string, each func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	meta, ok := pf.Lookup(layoutKey)
	var l pqLayout
	if !ok || json.Unmarshal([]byte(meta), &l) != nil || l.Table == nil {
		return fmt.Errorf("%s: no %s metadata: not a file the files destination wrote", path, layoutKey)
	}
	l.init(pf.Schema())
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, 256)
	for n := 1; ; {
		k, err := r.ReadRows(rows)
		for _, row := range rows[:k] {
			ev, err := l.event(row)
			if err == nil {
				err = each(ev)
			}
			if err != nil {
				return fmt.Errorf("%s row %d: %w", path, n, err)
			}
			n++
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// rowReader reads one row of a layout's schema.
type rowReader struct {
	l         *pqLayout
	row       parquet.Row
	outside   map[string]map[string]string
	unchanged []string
}

func (r *rowReader) get(path ...string) parquet.Value {
	leaf, _ := r.l.schema.Lookup(path...)
	return r.row[leaf.ColumnIndex]
}

func (r *rowReader) present(group string) bool {
	cols := r.l.groups[group]
	return len(cols) > 0 && r.row[cols[0]].DefinitionLevel() > 0
}

// values reads a group's columns (cols index the table's columns) back
// into canonical values.
func (r *rowReader) values(group string, cols []int) (change.Row, error) {
	out := make(change.Row, len(cols))
	for j, i := range cols {
		c := r.l.Table.Columns[i]
		v := r.get(group, c.Name)
		text, kept := r.outside[group][c.Name]
		switch {
		case kept:
			out[j] = change.Text(text)
		case !v.IsNull():
			s, ok := r.l.types[i].decode(v)
			if !ok {
				return nil, fmt.Errorf("%s.%s: a value its type cannot hold", group, c.Name)
			}
			out[j] = change.Text(s)
		case group == "after" && slices.Contains(r.unchanged, c.Name):
			out[j] = change.Value{Unchanged: true}
		default:
			out[j] = change.Null
		}
	}
	return out, nil
}

// event rebuilds a row's event JSON as event.Encoder wrote it.
func (l *pqLayout) event(row parquet.Row) ([]byte, error) {
	if len(row) != len(l.schema.Columns()) {
		return nil, fmt.Errorf("row of %d values, the schema has %d columns", len(row), len(l.schema.Columns()))
	}
	r := &rowReader{l: l, row: row}
	for name, to := range map[string]any{"out_of_range": &r.outside, "unchanged": &r.unchanged} {
		if v := r.get(name); !v.IsNull() {
			if err := json.Unmarshal(v.ByteArray(), to); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	before, after := []byte("null"), []byte("null")
	if r.present("before") {
		k, err := r.values("before", l.Table.Key)
		if err == nil {
			before, err = event.KeyObject(l.Table, change.Key(k))
		}
		if err != nil {
			return nil, err
		}
	}
	if r.present("after") {
		row, err := r.values("after", allColumns(l.Table))
		if err == nil {
			after, err = event.RowObject(l.Table, row)
		}
		if err != nil {
			return nil, err
		}
	}
	b := append([]byte(`{"before":`), before...)
	b = append(b, `,"after":`...)
	b = append(b, after...)
	b = append(b, `,"source":`...)
	b = l.appendSource(b, r.get)
	b = append(b, `,"op":`...)
	b = appendJSONString(b, string(r.get("op").ByteArray()))
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, r.get("ts_ms").Int64(), 10)
	if r.present("chunk") {
		b = r.appendChunk(b)
	}
	return append(b, '}'), nil
}

func (r *rowReader) appendChunk(b []byte) []byte {
	b = append(b, `,"chunk":{"backfill":`...)
	b = strconv.AppendInt(b, r.get("chunk", "backfill").Int64(), 10)
	for _, bound := range []string{"low", "high"} {
		b = append(b, `,"`+bound+`":`...)
		if v := r.get("chunk", bound); v.IsNull() {
			b = append(b, "null"...)
		} else {
			b = append(b, v.ByteArray()...)
		}
	}
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, r.get("chunk", "rows").Int64(), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendBool(b, r.get("chunk", "reset").Boolean())
	b = append(b, `,"last":`...)
	b = strconv.AppendBool(b, r.get("chunk", "last").Boolean())
	return append(b, '}')
}

func (l *pqLayout) appendSource(b []byte, get func(...string) parquet.Value) []byte {
	b = append(b, '{')
	for i, f := range l.Source {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, f.Name)
		b = append(b, ':')
		switch v := get("source", f.Name); {
		case v.IsNull():
			b = append(b, "null"...)
		case f.Kind == "int64":
			b = strconv.AppendInt(b, v.Int64(), 10)
		case f.Kind == "bool":
			b = strconv.AppendBool(b, v.Boolean())
		default:
			b = appendJSONString(b, string(v.ByteArray()))
		}
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
