package sinktest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// RunAlter runs the schema change suite (sink.Alterer) on sinks open
// returns, like Run.
func RunAlter(t *testing.T, open func(t *testing.T) sink.Sink) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s sink.Sink, a sink.Alterer)
	}{
		{"AlterTable", testAlterTable},
		{"CheckTable", testCheckTable},
		{"CheckCreated", testCheckCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			a, ok := s.(sink.Alterer)
			if !ok {
				t.Fatalf("%T does not follow schema changes", s)
			}
			tc.fn(t, s, a)
		})
	}
}

func alterCol(num int16, name, typ string, oid uint32, mod int32) change.Column {
	return change.Column{Name: name, Type: typ, TypeOID: oid, BaseOID: oid, TypeMod: mod, Num: num}
}

// alterTables is a table before and after a schema change.
func alterTables() (before, after *change.Table) {
	id := change.TableID{Schema: "public", Name: "altered"}
	before = &change.Table{ID: id, Key: []int{0}, Columns: []change.Column{
		alterCol(1, "id", "integer", 23, -1), alterCol(2, "v", "text", 25, -1), alterCol(3, "r", "real", 700, -1),
		alterCol(4, "s", "character varying(3)", 1043, 7), alterCol(5, "n", "integer", 23, -1)}}
	after = &change.Table{ID: id, Key: []int{0}, Columns: []change.Column{
		alterCol(1, "id", "integer", 23, -1), alterCol(2, "w", "text", 25, -1), alterCol(3, "r", "double precision", 701, -1),
		alterCol(4, "s", "text", 25, -1), alterCol(5, "n", "bigint", 20, -1),
		alterCol(6, "d", "integer", 23, -1), alterCol(7, "f", "double precision", 701, -1), alterCol(8, "q", "text", 25, -1), alterCol(9, "plain", "integer", 23, -1)}}
	return before, after
}

func alterSteps(before, after *change.Table) []sink.AlterStep {
	seven, tenth, quote := change.Text("7"), change.Text("0.1"), change.Text(`it's \ "q"`)
	return []sink.AlterStep{
		{Kind: sink.RenameColumn, Column: after.Columns[1], Prev: before.Columns[1]},
		{Kind: sink.SetType, Column: after.Columns[2], Prev: before.Columns[2]},
		{Kind: sink.SetType, Column: after.Columns[3], Prev: before.Columns[3]},
		{Kind: sink.SetType, Column: after.Columns[4], Prev: before.Columns[4]},
		{Kind: sink.AddColumn, Column: after.Columns[5], Default: &seven},
		{Kind: sink.AddColumn, Column: after.Columns[6], Default: &tenth},
		{Kind: sink.AddColumn, Column: after.Columns[7], Default: &quote},
		{Kind: sink.AddColumn, Column: after.Columns[8]},
	}
}

// testAlterTable: the rows already there keep their values under the new
// names and types and get the added columns' defaults, as do rows inserted
// later without them; running the steps again changes nothing.
func testAlterTable(t *testing.T, s sink.Sink, a sink.Alterer) {
	before, after := alterTables()
	ensure(t, s, before)
	apply(t, s, ins(before, r("1", "a", "0.1", "abc", "5")), ins(before, r("2", nil, "-2.5e-05", nil, nil)))
	steps := alterSteps(before, after)
	for range 2 {
		if err := a.AlterTable(t.Context(), after, steps); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, s, ins(after, r("3", "c", "0.1", "long text", "9999999999", unchanged, unchanged, unchanged, unchanged)),
		ins(after, r("4", "d", nil, nil, nil, "1", "2.5", nil, "3")))
	const q = `it's \ "q"`
	expect(t, s, after,
		r("1", "a", "0.10000000149011612", "abc", "5", "7", "0.1", q, nil),
		r("2", nil, "-2.499999936844688e-05", nil, nil, "7", "0.1", q, nil),
		r("3", "c", "0.1", "long text", "9999999999", "7", "0.1", q, nil),
		r("4", "d", nil, nil, nil, "1", "2.5", nil, "3"))
}

// testCheckTable: CheckTable finds a missing table, columns to add and
// differences it does not fix.
func testCheckTable(t *testing.T, s sink.Sink, a sink.Alterer) {
	before, _ := alterTables()
	check := func(tbl *change.Table) sink.TableCheck {
		t.Helper()
		c, err := a.CheckTable(t.Context(), tbl)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := check(before); c.Exists {
		t.Fatalf("check of a missing table: %+v", c)
	}
	ensure(t, s, before)
	if c := check(before); !c.Exists || len(c.Steps) != 0 || len(c.Problems) != 0 {
		t.Fatalf("check of the table it created: %+v", c)
	}
	wider := &change.Table{ID: before.ID, Key: []int{0}, Columns: append(slices.Clone(before.Columns), alterCol(6, "x", "text", 25, -1))}
	if c := check(wider); len(c.Steps) != 1 || c.Steps[0].Kind != sink.AddColumn || c.Steps[0].Column.Name != "x" || len(c.Problems) != 0 {
		t.Fatalf("check with a column the destination lacks: %+v", c)
	}
	narrower := &change.Table{ID: before.ID, Key: []int{0}, Columns: before.Columns[:4]}
	if c := check(narrower); len(c.Problems) != 1 || !strings.Contains(c.Problems[0], `destination column "n" is not in the source table`) {
		t.Fatalf("check with a column the source lacks: %+v", c)
	}
	other := &change.Table{ID: before.ID, Key: []int{0}, Columns: slices.Clone(before.Columns)}
	other.Columns[4] = alterCol(5, "n", "bytea", 17, -1)
	if c := check(other); len(c.Problems) != 1 || !strings.Contains(c.Problems[0], `column "n"`) {
		t.Fatalf("check with a type the destination cannot hold: %+v", c)
	}
	rekeyed := &change.Table{ID: before.ID, Key: []int{1}, Columns: before.Columns}
	if c := check(rekeyed); len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "primary key") {
		t.Fatalf("check with another key: %+v", c)
	}
}

// testCheckCreated: a table EnsureTable created checks clean, whatever its
// columns' types and key: no step, no problem. (A sink may answer the
// check of a table it has just created from the very same shape without
// asking the destination: a copy of the shape is checked.)
func testCheckCreated(t *testing.T, s sink.Sink, a sink.Alterer) {
	tables := []*change.Table{typed("check_created")}
	for c := 1; c < len(tables[0].Columns); c++ {
		if kt := keyedBy(tables[0], c); kt != nil {
			tables = append(tables, kt)
		}
	}
	for _, tbl := range tables {
		err := capable(t, s).EnsureTable(t.Context(), tbl)
		if errors.Is(err, sink.ErrKeyOrder) {
			continue // a key the sink cannot order is refused, not created
		}
		if err != nil {
			t.Fatal(err)
		}
		shape := *tbl
		c, err := a.CheckTable(t.Context(), &shape)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Exists || len(c.Steps) != 0 || len(c.Problems) != 0 {
			t.Errorf("check of %s, as created: %+v", tbl.ID, c)
		}
	}
}
