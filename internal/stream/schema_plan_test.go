package stream

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source/pg"
)

const (
	oidInt4Test = 23
	oidInt8Test = 20
	oidTextTest = 25
)

func planCol(num int16, name string, oid uint32) change.Column {
	typ := map[uint32]string{oidInt4Test: "integer", oidInt8Test: "bigint", oidTextTest: "text"}[oid]
	return change.Column{Name: name, Type: typ, TypeOID: oid, BaseOID: oid, TypeMod: -1, Num: num}
}

func planTable(cols ...change.Column) *change.Table {
	return &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Columns: cols, Key: []int{0}}
}

func catalogOf(cols ...change.Column) map[int16]pg.Attribute {
	m := map[int16]pg.Attribute{}
	for _, c := range cols {
		m[c.Num] = pg.Attribute{Column: c}
	}
	return m
}

func TestPlanShape(t *testing.T) {
	id, v, n := planCol(1, "id", oidInt4Test), planCol(2, "v", oidTextTest), planCol(3, "n", oidInt4Test)
	d := planTable(id, v, n)
	renamed, wide, added := planCol(2, "w", oidTextTest), planCol(3, "n", oidInt8Test), planCol(4, "x", oidInt4Test)
	seven := change.Text("7")
	withMissing := catalogOf(id, v, n, added)
	withMissing[4] = pg.Attribute{Column: added, Missing: &seven, HasDefault: true}
	volatile := catalogOf(id, v, n, added)
	volatile[4] = pg.Attribute{Column: added, HasDefault: true}
	dropped := catalogOf(id, v, n)
	dropped[2] = pg.Attribute{Column: change.Column{Num: 2}, Dropped: true}
	for _, tc := range []struct {
		name   string
		dest   *change.Table // nil: d
		in     *change.Table
		attrs  map[int16]pg.Attribute
		steps  []sink.AlterKind
		fail   string
		refill bool
	}{
		{"same shape", nil, planTable(id, v, n), catalogOf(id, v, n), nil, "", false},
		{"added, constant default", nil, planTable(id, v, n, added), withMissing, []sink.AlterKind{sink.AddColumn}, "", false},
		{"added, volatile default", nil, planTable(id, v, n, added), volatile, []sink.AlterKind{sink.AddColumn}, "", true},
		{"renamed", nil, planTable(id, renamed, n), catalogOf(id, renamed, n), []sink.AlterKind{sink.RenameColumn}, "", false},
		{"older name", nil, planTable(id, renamed, n), catalogOf(id, v, n), nil, "", false},
		{"dropped", nil, planTable(id, n), dropped, nil, `column "v" was dropped`, false},
		{"added later", nil, planTable(id, v), catalogOf(id, v, n), nil, "", false},
		{"widened", nil, planTable(id, v, wide), catalogOf(id, v, wide), []sink.AlterKind{sink.SetType}, "", false},
		{"unknown catalog, widened", nil, planTable(id, v, wide), nil, []sink.AlterKind{sink.SetType}, "", false},
		{"narrowed", planTable(id, v, wide), planTable(id, v, n), catalogOf(id, v, n), nil, "changed type from bigint to integer", false},
		{"older type", planTable(id, v, wide), planTable(id, v, n), catalogOf(id, v, wide), nil, "", false},
		{"another type", nil, planTable(id, planCol(2, "v", oidInt4Test), n), catalogOf(id, planCol(2, "v", oidInt4Test), n), nil, "changed type from text to integer", false},
	} {
		dest := tc.dest
		if dest == nil {
			dest = d
		}
		p := planShape(dest, tc.in, tc.attrs)
		var kinds []sink.AlterKind
		for _, st := range p.steps {
			kinds = append(kinds, st.Kind)
		}
		if len(kinds) != len(tc.steps) || (tc.fail == "") != (p.fail == "") || !strings.Contains(p.fail, tc.fail) || p.refill != tc.refill {
			t.Errorf("%s: steps %v fail %q refill %v; want %v %q %v", tc.name, kinds, p.fail, p.refill, tc.steps, tc.fail, tc.refill)
			continue
		}
		for i := range kinds {
			if kinds[i] != tc.steps[i] {
				t.Errorf("%s: steps %v, want %v", tc.name, kinds, tc.steps)
			}
		}
		if tc.name == "added, constant default" && (p.steps[0].Default == nil || *p.steps[0].Default != seven) {
			t.Errorf("added column's default: %v, want 7", p.steps[0].Default)
		}
	}
}

func TestTranslation(t *testing.T) {
	id, v, n, x := planCol(1, "id", oidInt4Test), planCol(2, "v", oidTextTest), planCol(3, "n", oidInt4Test), planCol(4, "x", oidInt4Test)
	from := planTable(id, planCol(2, "old", oidTextTest), n)
	to := planTable(id, v, n, x)
	tr := newTranslation(from, to)
	got := tr.row(change.Row{change.Text("1"), change.Text("a"), change.Null})
	want := change.Row{change.Text("1"), change.Text("a"), change.Null, {Unchanged: true}}
	if tr.identity || len(got) != len(want) {
		t.Fatalf("translated row %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("translated row %v, want %v", got, want)
		}
	}
	if !newTranslation(to, to).identity {
		t.Error("a shape onto itself is not the identity")
	}
}
