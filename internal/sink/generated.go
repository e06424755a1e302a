package sink

import (
	"slices"

	"github.com/tidemark/tidemark/internal/change"
)

// Computer is a destination that computes some of the source's stored
// generated columns itself, from their expression (see internal/genexpr):
// it never writes them, and the values a change lacks for them need not be
// read from the source. Both sinks implement it; the answer depends on the
// table's shape only.
type Computer interface {
	// Computes reports whether the destination computes column i of t.
	Computes(t *change.Table, i int) bool
}

// Omitter takes the columns a destination computes out of what it writes:
// the destination refuses writes to them. Like a Sink it is used by one
// goroutine at a time.
type Omitter struct {
	cache *ShapeCache[*omission]
}

// omission is a table's written shape: kept lists the columns written (by
// index in the full shape), nil when every column is.
type omission struct {
	table *change.Table
	kept  []int
	width int // columns of the full shape
}

// NewOmitter omits the columns computes says the destination computes.
func NewOmitter(computes func(t *change.Table, i int) bool) *Omitter {
	return &Omitter{cache: NewShapeCache(func(t *change.Table) (*omission, error) {
		var kept []int
		for i := range t.Columns {
			if !computes(t, i) {
				kept = append(kept, i)
			}
		}
		if len(kept) == len(t.Columns) {
			return &omission{table: t}, nil
		}
		w := &change.Table{ID: t.ID}
		for _, i := range kept {
			w.Columns = append(w.Columns, t.Columns[i])
		}
		for _, k := range t.Key {
			w.Key = append(w.Key, slices.Index(kept, k)) // a key column is never generated
		}
		return &omission{table: w, kept: kept, width: len(t.Columns)}, nil
	})}
}

// Written is t as the destination writes it: t itself when it computes
// none of its columns.
func (o *Omitter) Written(t *change.Table) *change.Table {
	om, _ := o.cache.Get(t)
	return om.table
}

// Op returns op as the destination writes it, and a function that copies
// what Apply reports on a chunk back to op's chunk once it is applied.
func (o *Omitter) Op(op Op) (Op, func()) {
	none := func() {}
	switch {
	case op.Change != nil:
		om, _ := o.cache.Get(op.Change.Table)
		if om.kept == nil {
			return op, none
		}
		c := *op.Change
		c.Table, c.Row = om.table, om.row(c.Row)
		return Op{Change: &c, Txn: op.Txn, Changed: op.Changed}, none
	case op.Chunk != nil:
		om, _ := o.cache.Get(op.Chunk.Table)
		if om.kept == nil {
			return op, none
		}
		orig := op.Chunk
		ch := *orig
		ch.Table = om.table
		ch.Rows = make([]change.Row, len(orig.Rows))
		for i, r := range orig.Rows {
			ch.Rows[i] = om.row(r)
		}
		return Op{Chunk: &ch}, func() { orig.Removed, orig.Skipped = ch.Removed, ch.Skipped }
	}
	return op, none
}

func (om *omission) row(r change.Row) change.Row {
	if len(r) != om.width {
		return r // malformed (the sink reports it), or none
	}
	out := make(change.Row, len(om.kept))
	for i, j := range om.kept {
		out[i] = r[j]
	}
	return out
}
