package mysql

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// eventTable is the shape of a table as one table map event describes it,
// and how its rows decode.
type eventTable struct {
	sig   string // what the shape depends on (tableMapSignature)
	shape *change.Table
	rows  *rowReader
	// cols[i] is the event column holding shape column i.
	cols []int
}

// tableFor gives the shape of the table as the event describes it (see
// tablemap.go): columns numbered by columnNums, in number order, keyed
// like t (the table the stream has), and t itself when nothing differs, so
// that an unchanged table never looks changed. Every transaction repeats
// the table map, so the shape is kept while the event stays the same.
func (r *binlogReader) tableFor(ctx context.Context, t *change.Table, tme *replication.TableMapEvent) (*eventTable, error) {
	sig := tableMapSignature(tme)
	if et := r.readers[t.ID]; et != nil && et.sig == sig {
		return et, nil
	}
	names := tme.ColumnNameString()
	if len(names) == 0 {
		return nil, &source.PermanentError{Err: fmt.Errorf("binlog rows of %s come without column names", quoteTable(t.ID)),
			Hint: "set binlog_row_metadata=FULL on the server (see tidemark doctor), then run `tidemark stream reset`"}
	}
	colls, err := r.src.collations(ctx)
	if err != nil {
		return nil, err
	}
	m := newTableMapColumns(tme, colls)
	nums, err := r.numbers(ctx, t.ID, names)
	if err != nil {
		return nil, err
	}
	shape := &change.Table{ID: t.ID, Columns: make([]change.Column, len(names))}
	for i := range names {
		n, err := m.native(i)
		if err != nil {
			return nil, fmt.Errorf("binlog rows of %s: %w", quoteTable(t.ID), err)
		}
		col, err := n.column()
		if err != nil {
			return nil, fmt.Errorf("binlog rows of %s: %w", quoteTable(t.ID), err)
		}
		if j := t.ColumnByNum(nums[i]); j >= 0 && sameDecoding(t.Columns[j], col) {
			col = t.Columns[j] // the catalog's description: JSON, NOT NULL, COLUMN_TYPE
			col.Name = names[i]
		}
		col.Num = nums[i]
		shape.Columns[i] = col
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return sortNum(nums[a]) - sortNum(nums[b]) })
	sorted := make([]change.Column, len(order))
	for i, j := range order {
		sorted[i] = shape.Columns[j]
	}
	shape.Columns = sorted
	for _, k := range t.KeyColumns() {
		if i := shape.ColumnByNum(k.Num); i >= 0 {
			shape.Key = append(shape.Key, i)
		}
	}
	if change.SameShape(shape, t) && sameNatives(shape, t) {
		shape = t
	}
	rows, err := newRowReader(shape)
	if err != nil {
		return nil, err
	}
	et := &eventTable{sig: sig, shape: shape, rows: rows, cols: order}
	r.readers[t.ID] = et
	return et, nil
}

// numbers numbers a table map's columns. A name never numbered is a
// column added since (numbered now) when the catalog has it; when the
// catalog does not, the rows are older than the catalog by a rename or a
// drop the stream has not read yet (a restart from a position before
// them): the column keeps number 0, which the applier leaves out, as it
// leaves out a PostgreSQL relation message's column the catalog no longer
// has.
func (r *binlogReader) numbers(ctx context.Context, id change.TableID, names []string) ([]int16, error) {
	nums := r.src.nums.numbered(id, names)
	if !slices.Contains(nums, 0) {
		return nums, nil
	}
	var now *change.Table
	err := r.src.with(ctx, func(c *client.Conn) (err error) {
		now, err = describeColumns(c, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", quoteTable(id), err)
	}
	for i, n := range names {
		if nums[i] == 0 && slices.ContainsFunc(now.Columns, func(c change.Column) bool { return strings.EqualFold(c.Name, n) }) {
			nums[i] = r.src.nums.nums(id, []string{n})[0]
		}
	}
	return nums, nil
}

// sortNum orders columns by number, those without one last.
func sortNum(n int16) int {
	if n == 0 {
		return math.MaxInt32
	}
	return int(n)
}

// tableMapSignature is everything of a table map a shape is made of.
func tableMapSignature(tme *replication.TableMapEvent) string {
	return fmt.Sprintf("%q|%x|%v|%x|%x|%v|%v|%q|%q|%v|%v", tme.ColumnNameString(), tme.ColumnType, tme.ColumnMeta,
		tme.SignednessBitmap, tme.NullBitmap, tme.DefaultCharset, tme.ColumnCharset, tme.EnumStrValue, tme.SetStrValue,
		tme.EnumSetDefaultCharset, tme.EnumSetColumnCharset)
}

// sameDecoding reports whether a described column and the one a table map
// gives are the same type decoded the same way: the same PostgreSQL type,
// MySQL type, character set and labels. A table map cannot tell MariaDB's
// JSON (a LONGTEXT with a json_valid check) from LONGTEXT: the catalog's
// word is taken.
func sameDecoding(described, logged change.Column) bool {
	if described.TypeOID == oidJSON && logged.TypeOID == oidText && dataType(logged.Native) == "longtext" {
		return true
	}
	if !change.SameType(described, logged) || dataType(nativeType(described)) != dataType(logged.Native) {
		return false
	}
	a, errA := charsetOf(described.Collation)
	b, errB := charsetOf(logged.Collation)
	if a != b || (errA == nil) != (errB == nil) {
		return false
	}
	switch dataType(logged.Native) {
	case "enum", "set":
		la, _ := typeLabels(nativeType(described))
		lb, _ := typeLabels(logged.Native)
		return slices.Equal(la, lb)
	case "binary":
		return typeLength(nativeType(described)) == typeLength(logged.Native)
	}
	return true
}

// sameNatives: two shapes of equal columns also decode alike.
func sameNatives(a, b *change.Table) bool {
	for i, c := range a.Columns {
		if c.Native != b.Columns[i].Native || c.Collation != b.Columns[i].Collation {
			return false
		}
	}
	return true
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
func (r *binlogReader) rows(ctx context.Context, h *replication.EventHeader, e *replication.RowsEvent) error {
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
	et, err := r.tableFor(ctx, t, e.Table)
	if err != nil {
		return err
	}
	t = et.shape
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
