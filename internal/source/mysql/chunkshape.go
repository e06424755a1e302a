package mysql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
)

// The shape a chunk is read in. A backfill asks for the columns it knew;
// the table may have changed since (a column added, renamed, widened or
// dropped). Like a PostgreSQL chunk, which reads the catalog in its
// snapshot, a chunk reads the table's columns in its transaction and the
// rows with them, and says so: the applier then follows the change or
// fails the object (docs/schema-changes.md, MySQL), whether or not a row
// written after the ALTER reaches the stream.

// errBinlogBehind is a chunk read whose columns include a name the stream
// has not numbered yet, while the binlog reader is still before the
// chunk's snapshot: the ALTER that made it (a rename keeps the column's
// number) is still ahead of it. The read is retried.
var errBinlogBehind = errors.New("the table changed after the position the stream has read the binlog to; reading the chunk again")

// snapshotShape is the shape of t's rows in the open snapshot, at binlog
// position at: t itself when its columns are the table's, else the
// table's columns numbered as the stream numbers them. A first SELECT
// takes the table's metadata lock for the transaction, so no ALTER changes
// the columns between reading them and reading the rows (an ALTER
// committed after the snapshot was taken fails the SELECT, and the read is
// retried).
func (s *Source) snapshotShape(c *client.Conn, t *change.Table, at change.LSN) (*change.Table, error) {
	if _, err := c.Execute("SELECT 1 FROM " + quoteTable(t.ID) + " LIMIT 0"); err != nil {
		return nil, err
	}
	now, err := describeColumns(c, t.ID)
	if err != nil {
		return nil, err
	}
	if sameColumns(t, now) {
		return t, nil
	}
	for _, k := range t.Key {
		name := t.Columns[k].Name
		i := columnFold(now, name)
		if i < 0 {
			return nil, fmt.Errorf("key column %s of %s is gone from the table", quoteIdent(name), quoteTable(t.ID))
		}
		now.Key = append(now.Key, i)
	}
	if err := s.nums.numberRead(now, s.binlogPast(at)); err != nil {
		return nil, err
	}
	return now, nil
}

// sameColumns reports whether the table now has t's columns, by name,
// decoded alike (t's may come from a table map, which says less than the
// catalog), in any order.
func sameColumns(t, now *change.Table) bool {
	if len(t.Columns) != len(now.Columns) {
		return false
	}
	for _, c := range now.Columns {
		i := t.ColumnIndex(c.Name)
		if i < 0 {
			return false
		}
		if !sameDecoding(c, t.Columns[i]) {
			return false
		}
	}
	return true
}

// columnFold is the index of a column by name, ignoring case as MySQL
// does; -1 when there is none.
func columnFold(t *change.Table, name string) int {
	for i, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// binlogPast reports whether no binlog reader of this source runs, or the
// one that runs has read the binlog to at least pos (a raw position, not
// in an epoch): every ALTER before pos has renumbered its columns.
func (s *Source) binlogPast(pos change.LSN) bool {
	return s.readers.Load() == 0 || change.LSN(s.readTo.Load()) >= pos
}
