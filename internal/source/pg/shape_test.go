package pg

import (
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/tidemark/tidemark/internal/change"
)

func TestParseMissing(t *testing.T) {
	for in, want := range map[string]change.Value{
		`{7}`:               change.Text("7"),
		`{NULL}`:            change.Null,
		`{"NULL"}`:          change.Text("NULL"),
		`{"it's \"x\" \\"}`: change.Text(`it's "x" \`),
		`{"{1,2}"}`:         change.Text("{1,2}"),
		`{"a,b}{"}`:         change.Text("a,b}{"),
		`{""}`:              change.Text(""),
		`{2024-01-01}`:      change.Text("2024-01-01"),
	} {
		got, ok := parseMissing(in)
		if !ok || got != want {
			t.Errorf("parseMissing(%s) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{``, `{}`, `{"x}`, `7`, `{a b}`, `{"a"b"}`} {
		if v, ok := parseMissing(bad); ok {
			t.Errorf("parseMissing(%s) = %v, want no value", bad, v)
		}
	}
}

func TestAlign(t *testing.T) {
	attr := func(num int16, name string, dropped bool) Attribute {
		return Attribute{Column: change.Column{Name: name, Num: num}, Dropped: dropped}
	}
	msg := func(names ...string) []*pglogrepl.RelationMessageColumn {
		out := make([]*pglogrepl.RelationMessageColumn, len(names))
		for i, n := range names {
			out[i] = &pglogrepl.RelationMessageColumn{Name: n}
		}
		return out
	}
	prev := &change.Table{Columns: []change.Column{{Name: "id", Num: 1}, {Name: "a", Num: 2}, {Name: "b", Num: 3}}}
	gen := attr(4, "g", false)
	gen.Generated = true
	for _, tc := range []struct {
		name  string
		msg   []*pglogrepl.RelationMessageColumn
		attrs []Attribute
		want  []int16
	}{
		{"unchanged", msg("id", "a", "b"), []Attribute{attr(1, "id", false), attr(2, "a", false), attr(3, "b", false)}, []int16{1, 2, 3}},
		{"renamed", msg("id", "x", "b"), []Attribute{attr(1, "id", false), attr(2, "x", false), attr(3, "b", false)}, []int16{1, 2, 3}},
		{"renamed again since", msg("id", "x", "b"), []Attribute{attr(1, "id", false), attr(2, "y", false), attr(3, "b", false)}, []int16{1, 2, 3}},
		{"dropped and added", msg("id", "b", "c"), []Attribute{attr(1, "id", false), attr(2, "", true), attr(3, "b", false), attr(4, "c", false)}, []int16{1, 3, 4}},
		{"dropped, added under its name", msg("id", "b", "a"), []Attribute{attr(1, "id", false), attr(2, "", true), attr(3, "b", false), attr(4, "a", false)}, []int16{1, 3, 4}},
		{"dropped after the message", msg("id", "a", "b"), []Attribute{attr(1, "id", false), attr(2, "", true), attr(3, "b", false)}, []int16{1, 2, 3}},
		{"dropped after, added after", msg("id", "a", "b"), []Attribute{attr(1, "id", false), attr(2, "", true), attr(3, "b", false), attr(4, "c", false)}, []int16{1, 2, 3}},
		{"added after the message", msg("id", "a", "b"), []Attribute{attr(1, "id", false), attr(2, "a", false), attr(3, "b", false), attr(4, "c", false)}, []int16{1, 2, 3}},
		{"generated left out", msg("id", "a", "b", "c"), []Attribute{attr(1, "id", false), attr(2, "a", false), attr(3, "b", false), gen, attr(5, "c", false)}, []int16{1, 2, 3, 5}},
	} {
		if got := align(prev, tc.msg, tc.attrs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: align = %v, want %v", tc.name, got, tc.want)
		}
	}
}
