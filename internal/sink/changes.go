package sink

import (
	"context"
	"errors"

	"github.com/tidemark/tidemark/internal/change"
)

// ChangeReporter is a destination that tells what a chunk changed: for a
// chunk whose Changed is set it reads the range's rows in the
// transaction that writes the chunk, notes the tracked values of the rows
// the chunk inserts, deletes or changes (NoteChanges), and calls the
// batch's BeforeCommit before it commits. A destination that is not one
// cannot tell a row rewritten identically from a changed one: every row
// it writes counts (docs/lineage.md).
type ChangeReporter interface {
	ReportsChanges()
}

// Changes holds the values that tracked columns had or have in the rows a
// chunk changed, old and new: what places those rows on business dates.
type Changes struct {
	// Columns names the tracked columns.
	Columns []string
	// Values holds, per column, each distinct value; NULLs are left out.
	Values map[string]map[string]bool
}

// NewChanges tracks columns.
func NewChanges(columns []string) *Changes {
	return &Changes{Columns: columns, Values: map[string]map[string]bool{}}
}

func (c *Changes) reset() { clear(c.Values) }

// Note adds the tracked values of row, a row of t.
func (c *Changes) Note(t *change.Table, row change.Row) {
	for _, name := range c.Columns {
		if i := t.ColumnIndex(name); i >= 0 && i < len(row) {
			c.NoteValue(name, row[i])
		}
	}
}

// NoteValue adds v as a value of the tracked column name; NULL and
// Unchanged are not values.
func (c *Changes) NoteValue(name string, v change.Value) {
	if v.Null || v.Unchanged {
		return
	}
	vs := c.Values[name]
	if vs == nil {
		vs = map[string]bool{}
		c.Values[name] = vs
	}
	vs[v.Text] = true
}

// Indexes are the tracked columns' indexes in t, -1 for one t lacks.
func (c *Changes) Indexes(t *change.Table) []int {
	out := make([]int, len(c.Columns))
	for i, name := range c.Columns {
		out[i] = t.ColumnIndex(name)
	}
	return out
}

// ChangeKeys are the keys of the destination rows a change replaces, whose
// values a ChangeReporter reads before applying it: the old key of a delete
// or of an update that moved the key, and the row's key of an insert or
// update. A truncate has none (its rows are not read).
func ChangeKeys(c *change.Change) []change.Key {
	var keys []change.Key
	if c.OldKey != nil {
		keys = append(keys, c.OldKey)
	}
	if c.Kind == change.Insert || c.Kind == change.Update {
		if k := c.Table.RowKey(c.Row); c.OldKey == nil || k.Encode() != c.OldKey.Encode() {
			keys = append(keys, k)
		}
	}
	return keys
}

// NoteChanges fills ch.Changed from old, the destination's rows of the
// chunk's range as they were before the chunk (as ReadRange gives them):
// a row inserted counts its new values; a row deleted (neither Keep nor
// UpdateOnly delete), its old ones; a row updated with a different value, both. A row written
// identically counts nothing, and neither does a value the chunk leaves
// Unchanged. An UpdateOnly chunk's rows the destination lacks are not
// written, so do not count.
func (ch *Chunk) NoteChanges(old []change.Row) {
	c := ch.Changed
	if c == nil {
		return
	}
	c.reset()
	t := ch.Table
	have := make(map[string]change.Row, len(old))
	for _, r := range old {
		have[t.RowKey(r).Encode()] = r
	}
	for _, r := range ch.Rows {
		k := t.RowKey(r).Encode()
		d, ok := have[k]
		delete(have, k)
		switch {
		case !ok && ch.UpdateOnly:
		case !ok:
			c.Note(t, r)
		case !sameWritten(d, r):
			c.Note(t, d)
			c.Note(t, r)
		}
	}
	if !ch.Keep && !ch.UpdateOnly { // neither deletes
		for _, d := range have {
			c.Note(t, d)
		}
	}
}

// sameWritten reports whether writing row over old leaves it as it is.
func sameWritten(old, row change.Row) bool {
	if len(old) != len(row) {
		return false
	}
	for i, v := range row {
		if !v.Unchanged && (v.Null != old[i].Null || !v.Null && v.Text != old[i].Text) {
			return false
		}
	}
	return true
}

// CallBeforeCommit calls b's BeforeCommit, if any; its error is a
// BeforeCommitError.
func (b *Batch) CallBeforeCommit(ctx context.Context) error {
	if b.BeforeCommit == nil {
		return nil
	}
	if err := b.BeforeCommit(ctx); err != nil {
		return &BeforeCommitError{Err: err}
	}
	return nil
}

// BeforeCommitError is BeforeCommit's failure (the metadata store's): an
// outage to retry, never the destination refusing the batch, whatever
// database error it wraps.
type BeforeCommitError struct{ Err error }

func (e *BeforeCommitError) Error() string { return "before commit: " + e.Err.Error() }
func (e *BeforeCommitError) Unwrap() error { return e.Err }

// IsBeforeCommit reports whether err is BeforeCommit's failure.
func IsBeforeCommit(err error) bool {
	var bc *BeforeCommitError
	return errors.As(err, &bc)
}
