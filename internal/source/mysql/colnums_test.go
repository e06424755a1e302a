package mysql

import (
	"errors"
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// A chunk's snapshot numbered while the binlog reader is behind it: a
// name the stream has not numbered may be a rename it has not read yet, so
// the read waits for the reader; past it, the name is a new column. A
// rename read keeps the column's number, and columns are ordered by it.
func TestNumberRead(t *testing.T) {
	id := change.TableID{Schema: "d", Name: "t"}
	var c columnNums
	c.number(&change.Table{ID: id, Columns: []change.Column{{Name: "id"}, {Name: "old"}, {Name: "n"}}, Key: []int{0}})
	snap := func(names ...string) *change.Table {
		s := &change.Table{ID: id, Key: []int{len(names) - 1}}
		for _, n := range names {
			s.Columns = append(s.Columns, change.Column{Name: n})
		}
		return s
	}
	if err := c.numberRead(snap("new", "n", "id"), false); !errors.Is(err, errBinlogBehind) {
		t.Fatalf("an unnumbered name before the reader read the ALTER: %v, want errBinlogBehind", err)
	}
	c.renamed(id, "old", "new")
	s := snap("new", "N", "id")
	if err := c.numberRead(s, false); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, col := range s.Columns {
		got = append(got, col.Name)
	}
	if want := []string{"id", "new", "N"}; !slices.Equal(got, want) || s.Columns[1].Num != 2 || s.Key[0] != 0 {
		t.Fatalf("renamed: columns %v %+v key %v, want %v with new numbered 2 and the key on id", got, s.Columns, s.Key, want)
	}
	s = snap("added", "id")
	if err := c.numberRead(s, true); err != nil || s.Columns[1].Name != "added" || s.Columns[1].Num != 4 {
		t.Fatalf("a column added, the reader past the snapshot: %+v %v, want it numbered 4", s.Columns, err)
	}
}
