package mysql

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// columnNums gives the columns of each table numbers that stay with a
// column across schema changes, like PostgreSQL's attnum: what the
// applier matches shapes by (docs/schema-changes.md). MySQL's ordinal
// positions move when a column is added FIRST or AFTER another, or one is
// dropped, so they cannot serve. A table's columns are numbered by name
// the first time the source sees them (in ordinal order, so an unchanged
// table keeps its ordinal numbers); a column renamed in a DDL statement the
// binlog carries keeps its number under the new name (renamed), one
// dropped loses it (dropped), and a new name gets the next number.
//
// The numbers live as long as the Source: a restart numbers the catalog's
// columns afresh, as a PostgreSQL catalog would show them.
type columnNums struct {
	mu     sync.Mutex
	tables map[change.TableID]*tableNums
}

type tableNums struct {
	byName map[string]int16 // by lower-case name: MySQL's column names ignore case
	names  map[int16]string // every number given, with its last name
	next   int16
}

func (c *columnNums) table(id change.TableID) *tableNums {
	if c.tables == nil {
		c.tables = map[change.TableID]*tableNums{}
	}
	t := c.tables[id]
	if t == nil {
		t = &tableNums{byName: map[string]int16{}, names: map[int16]string{}, next: 1}
		c.tables[id] = t
	}
	return t
}

// num is the number of a column by name, given now when it has none.
func (t *tableNums) num(name string) int16 {
	k := strings.ToLower(name)
	n, ok := t.byName[k]
	if !ok {
		n = t.next
		t.next++
		t.byName[k] = n
	}
	t.names[n] = name
	return n
}

// nums numbers names, in order.
func (c *columnNums) nums(id change.TableID, names []string) []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(id)
	out := make([]int16, len(names))
	for i, n := range names {
		out[i] = t.num(n)
	}
	return out
}

// numbered gives the numbers of names, 0 for a name never numbered.
func (c *columnNums) numbered(id change.TableID, names []string) []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(id)
	out := make([]int16, len(names))
	for i, n := range names {
		if num, ok := t.byName[strings.ToLower(n)]; ok {
			out[i] = num
			t.names[num] = n
		}
	}
	return out
}

// renamed gives column to the number of column from. The old name keeps
// the number too: rows logged before the rename, read again after a
// reconnect, still carry it.
func (c *columnNums) renamed(id change.TableID, from, to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(id)
	n, ok := t.byName[strings.ToLower(from)]
	if !ok {
		return // a column the source never showed us: numbered when seen
	}
	t.byName[strings.ToLower(to)] = n
	t.names[n] = to
}

// dropped forgets a column's name: a column added later under the same
// name is another column.
func (c *columnNums) dropped(id change.TableID, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.table(id).byName, strings.ToLower(name))
}

// number sets the Num of t's columns and orders them by it (an unchanged
// table keeps its ordinal order), keeping the key on the same columns.
func (c *columnNums) number(t *change.Table) {
	c.setNums(t, c.nums(t.ID, columnNames(t)))
}

// numberRead numbers the columns of a chunk's snapshot like number, but
// gives a name without a number one only when fresh says the binlog
// reader is past the snapshot: before, the name may be a rename the reader
// has not read yet, which keeps the column's number.
func (c *columnNums) numberRead(t *change.Table, fresh bool) error {
	names := columnNames(t)
	nums := c.numbered(t.ID, names)
	for i, n := range nums {
		if n == 0 {
			if !fresh {
				return errBinlogBehind
			}
			nums[i] = c.nums(t.ID, names[i:i+1])[0]
		}
	}
	c.setNums(t, nums)
	return nil
}

func columnNames(t *change.Table) []string {
	names := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		names[i] = col.Name
	}
	return names
}

// setNums gives t's columns their numbers and orders them by them,
// keeping the key on the same columns.
func (c *columnNums) setNums(t *change.Table, nums []int16) {
	keyNums := make([]int16, len(t.Key))
	for i, k := range t.Key {
		keyNums[i] = nums[k]
	}
	for i := range t.Columns {
		t.Columns[i].Num = nums[i]
	}
	slices.SortStableFunc(t.Columns, func(a, b change.Column) int { return int(a.Num) - int(b.Num) })
	for i, n := range keyNums {
		t.Key[i] = t.ColumnByNum(n)
	}
}

// attributes are the live columns by number, with every number given
// before whose column is gone marked Dropped.
func (c *columnNums) attributes(t *change.Table) map[int16]source.Attribute {
	c.number(t)
	out := make(map[int16]source.Attribute, len(t.Columns))
	for _, col := range t.Columns {
		out[col.Num] = source.Attribute{Column: col}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, name := range c.table(t.ID).names {
		if _, alive := out[n]; !alive {
			out[n] = source.Attribute{Column: change.Column{Name: name, Num: n}, Dropped: true}
		}
	}
	return out
}

// columnsWithDefaults names the columns that give rows a value without a
// row change in the binlog when they are added: an explicit DEFAULT other
// than NULL (MariaDB writes a nullable column's implicit one as 'NULL'),
// NOT NULL (its implicit default: 0, ”), or a generation expression.
func columnsWithDefaults(c *client.Conn, id change.TableID) (map[string]bool, error) {
	r, err := query(c, `SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?
		  AND ((COLUMN_DEFAULT IS NOT NULL AND COLUMN_DEFAULT <> 'NULL') OR IS_NULLABLE = 'NO'
		       OR COALESCE(GENERATION_EXPRESSION, '') <> '')`, id.Schema, id.Name)
	if err != nil {
		return nil, fmt.Errorf("read the defaults of %s: %w", quoteTable(id), err)
	}
	out := make(map[string]bool, r.RowNumber())
	for i := range r.RowNumber() {
		out[getString(r, i, 0)] = true
	}
	return out, nil
}
