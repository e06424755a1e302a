package mysql

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tidemark/tidemark/internal/change"
)

// eventTable maps a table map event's columns to a described table's.
type eventTable struct {
	names string // the event's column names, joined: what the mapping depends on
	rows  *rowReader
	// cols[i] is the event column holding table column i.
	cols []int
}

// tableFor resolves the described table's column order against the
// event's (by name with binlog_row_metadata=FULL, else by position when
// the counts agree). Every transaction repeats the table map, so the
// mapping is kept while the event's column names stay the same.
func (r *binlogReader) tableFor(t *change.Table, tme *replication.TableMapEvent) (*eventTable, error) {
	names := tme.ColumnNameString()
	key := strings.Join(names, "\x00") + "\x00" + strconv.FormatUint(tme.ColumnCount, 10)
	if et := r.readers[t]; et != nil && et.names == key {
		return et, nil
	}
	rows, err := newRowReader(t)
	if err != nil {
		return nil, err
	}
	et := &eventTable{names: key, rows: rows, cols: make([]int, len(t.Columns))}
	for i, c := range t.Columns {
		et.cols[i] = -1
		for j, n := range names {
			if n == c.Name {
				et.cols[i] = j
				break
			}
		}
		if len(names) == 0 && len(t.Columns) == int(tme.ColumnCount) {
			et.cols[i] = i
		}
		if et.cols[i] < 0 {
			return nil, fmt.Errorf("binlog row of %s has no column %s (its columns: %q): the table changed since it was described", quoteTable(t.ID), quoteIdent(c.Name), names)
		}
	}
	r.readers[t] = et
	return et, nil
}

func (et *eventTable) row(vals []any) (change.Row, error) {
	ordered := make([]any, len(et.cols))
	for i, j := range et.cols {
		if j < len(vals) {
			ordered[i] = vals[j]
		}
	}
	return et.rows.row(ordered)
}

// rows adds a rows event's changes to the open transaction.
func (r *binlogReader) rows(h *replication.EventHeader, e *replication.RowsEvent) error {
	if e.Table == nil {
		return fmt.Errorf("rows event at %s:%d without its table map", r.file, h.LogPos)
	}
	t := r.lookup(change.TableID{Schema: string(e.Table.Schema), Name: string(e.Table.Table)})
	if t == nil {
		return nil
	}
	if r.txn == nil {
		return fmt.Errorf("rows event for %s at %s:%d outside a transaction", quoteTable(t.ID), r.file, h.LogPos)
	}
	et, err := r.tableFor(t, e.Table)
	if err != nil {
		return err
	}
	size := int(h.EventSize) / max(len(e.Rows), 1)
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		for _, vals := range e.Rows {
			row, err := et.row(vals)
			if err != nil {
				return err
			}
			r.txn.Changes = append(r.txn.Changes, change.Change{Kind: change.Insert, Table: t, Row: row, Bytes: size})
		}
	case replication.EnumRowsEventTypeDelete:
		for _, vals := range e.Rows {
			row, err := et.row(vals)
			if err != nil {
				return err
			}
			r.txn.Changes = append(r.txn.Changes, change.Change{Kind: change.Delete, Table: t, OldKey: t.RowKey(row), Bytes: size})
		}
	case replication.EnumRowsEventTypeUpdate:
		return r.updates(et, t, e.Rows, size*2)
	default:
		return fmt.Errorf("unexpected rows event %s for %s", h.EventType, quoteTable(t.ID))
	}
	return nil
}

// updates reads an update event's rows, before and after images in turn.
func (r *binlogReader) updates(et *eventTable, t *change.Table, rows [][]any, size int) error {
	if len(rows)%2 != 0 {
		return fmt.Errorf("update event for %s with an odd number of row images", quoteTable(t.ID))
	}
	for i := 0; i < len(rows); i += 2 {
		before, err := et.row(rows[i])
		if err != nil {
			return err
		}
		after, err := et.row(rows[i+1])
		if err != nil {
			return err
		}
		c := change.Change{Kind: change.Update, Table: t, Row: after, Bytes: size}
		if old := t.RowKey(before); old.Encode() != t.RowKey(after).Encode() {
			c.OldKey = old
		}
		r.txn.Changes = append(r.txn.Changes, c)
	}
	return nil
}
