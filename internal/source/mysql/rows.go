package mysql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// rowReader decodes result rows of a table's columns (in column order)
// through their codecs.
type rowReader struct {
	t      *change.Table
	codecs []codec
	// picked maps the selected columns to the table's when only some are
	// read (nil: all, in order); the others are Unchanged.
	picked []int
	// expect is how many rows a read is likely to return (its LIMIT), to
	// size the result once; 0 when unknown.
	expect int
}

func newRowReader(t *change.Table) (*rowReader, error) {
	r := &rowReader{t: t, codecs: make([]codec, len(t.Columns))}
	for i, c := range t.Columns {
		k, err := codecFor(c)
		if err != nil {
			return nil, fmt.Errorf("table %s column %s: %w", quoteTable(t.ID), quoteIdent(c.Name), err)
		}
		r.codecs[i] = k
	}
	return r, nil
}

// row decodes one row of Go values, in column order (of the picked
// columns, when some are).
func (r *rowReader) row(vals []any) (change.Row, error) {
	row := r.newRow(len(vals))
	return row, r.decode(row, vals, r.picked)
}

// newRow is a row for n values read: n values, or the table's columns all
// Unchanged when only some are read.
func (r *rowReader) newRow(n int) change.Row {
	if r.picked == nil {
		return make(change.Row, n)
	}
	row := make(change.Row, len(r.t.Columns))
	for i := range row {
		row[i] = change.Value{Unchanged: true}
	}
	return row
}

// column is the table column of the i-th value read.
func (r *rowReader) column(i int) int {
	if r.picked != nil {
		return r.picked[i]
	}
	return i
}

// decode places vals in row, each at picked[i] (at i when picked is nil).
func (r *rowReader) decode(row change.Row, vals []any, picked []int) error {
	for i, v := range vals {
		j := i
		if picked != nil {
			j = picked[i]
		}
		val, err := r.codecs[j].value(v)
		if err != nil {
			return fmt.Errorf("table %s column %s: %w", quoteTable(r.t.ID), quoteIdent(r.t.Columns[j].Name), err)
		}
		row[j] = val
	}
	return nil
}

// selectRows runs a SELECT of the table's columns, in column order, as a
// prepared statement, always: the binary protocol gives every type the
// same Go value whether or not the query has parameters.
func (r *rowReader) selectRows(c *client.Conn, sql string, args ...any) ([]change.Row, int64, error) {
	stmt, err := c.Prepare(sql)
	if err != nil {
		return nil, 0, err
	}
	defer stmt.Close()
	var (
		res  gomysql.Result
		dec  = binaryRows{r: r, rows: make([]change.Row, 0, min(r.expect, 1<<16))}
		fail error
	)
	err = stmt.ExecuteSelectStreaming(&res, func(fields []gomysql.FieldValue) error {
		fail = dec.add(fields)
		return fail
	}, dec.retype, args...)
	if fail != nil {
		return nil, 0, fail
	}
	if err != nil {
		return nil, 0, err
	}
	dec.flush()
	return dec.rows, dec.bytes, nil
}

// fieldValue turns a binary-protocol field into a Go value the codecs
// take; strings are copied out of the packet buffer.
func fieldValue(f gomysql.FieldValue) any {
	switch f.Type {
	case gomysql.FieldValueTypeNull:
		return nil
	case gomysql.FieldValueTypeUnsigned:
		return f.AsUint64()
	case gomysql.FieldValueTypeSigned:
		return f.AsInt64()
	case gomysql.FieldValueTypeFloat:
		return f.AsFloat64()
	}
	return append([]byte(nil), f.AsString()...)
}

// selectList is the table's columns, quoted, in column order.
func selectList(t *change.Table) string {
	var b strings.Builder
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c.Name))
	}
	return b.String()
}

// pickedList is the picked columns, quoted, in column order (nil: all).
func pickedList(t *change.Table, picked []int) string {
	if picked == nil {
		return selectList(t)
	}
	names := make([]string, len(picked))
	for i, j := range picked {
		names[i] = quoteIdent(t.Columns[j].Name)
	}
	return strings.Join(names, ", ")
}

// pickColumns returns, in table order, the key columns and the named ones
// (nil when names is nil: every column). A name the table lacks (renamed
// since the backfill was asked) is an error no retry cures.
func pickColumns(t *change.Table, names []string) ([]int, error) {
	if names == nil {
		return nil, nil
	}
	var picked []int
	for i, c := range t.Columns {
		if slices.Contains(t.Key, i) || slices.Contains(names, c.Name) {
			picked = append(picked, i)
		}
	}
	if n := len(picked) - len(t.Key); n < len(names) {
		for _, name := range names {
			if t.ColumnIndex(name) < 0 {
				return nil, &source.PermanentError{Err: fmt.Errorf("%s has no column %q", quoteTable(t.ID), name),
					Hint: "initiate the backfill again with the table's columns"}
			}
		}
	}
	return picked, nil
}

// keyList is the key columns, quoted, in key order.
func keyList(t *change.Table) string {
	var b strings.Builder
	for i, c := range t.KeyColumns() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c.Name))
	}
	return b.String()
}
