package mysql

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
)

// rowReader decodes result rows of a table's columns (in column order)
// through their codecs.
type rowReader struct {
	t      *change.Table
	codecs []codec
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

// row decodes one row of Go values, in column order.
func (r *rowReader) row(vals []any) (change.Row, error) {
	row := make(change.Row, len(vals))
	for i, v := range vals {
		val, err := r.codecs[i].value(v)
		if err != nil {
			return nil, fmt.Errorf("table %s column %s: %w", quoteTable(r.t.ID), quoteIdent(r.t.Columns[i].Name), err)
		}
		row[i] = val
	}
	return row, nil
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
		rows  []change.Row
		bytes int64
		res   gomysql.Result
		vals  = make([]any, len(r.t.Columns))
		fail  error
	)
	err = stmt.ExecuteSelectStreaming(&res, func(fields []gomysql.FieldValue) error {
		for i, f := range fields {
			vals[i] = fieldValue(f)
		}
		row, err := r.row(vals)
		if err != nil {
			fail = err
			return err
		}
		for _, v := range row {
			bytes += int64(len(v.Text))
		}
		rows = append(rows, row)
		return nil
	}, nil, args...)
	if fail != nil {
		return nil, 0, fail
	}
	if err != nil {
		return nil, 0, err
	}
	return rows, bytes, nil
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
