package config

import (
	"testing"
	"unicode/utf8"

	"github.com/tidemark/tidemark/internal/change"
)

// awkwardTables are names PostgreSQL allows and patterns must tell apart.
var awkwardTables = []change.TableID{
	{Schema: "public", Name: "orders"},
	{Schema: "Select Schema", Name: `My "Quoted" Table.v2`},
	{Schema: "public", Name: `x"; DROP TABLE victim; --`},
	{Schema: "weird.schema", Name: "t"},
	{Schema: "public", Name: "a.b"},
	{Schema: "Ünïcødé", Name: "表 名"},
	{Schema: "s", Name: "it's"},
	{Schema: "s", Name: "*"},
	{Schema: "s", Name: "a?b"},
	{Schema: "tab\there", Name: "new\nline"},
	{Schema: `"`, Name: `""`},
	{Schema: "select", Name: "from"},
}

// TestFormatTableReadsBack: the name an object is shown by is a pattern
// naming exactly that table, and no other of the list.
func TestFormatTableReadsBack(t *testing.T) {
	for _, id := range awkwardTables {
		name := FormatTable(id)
		p, err := ParsePattern(name)
		if err != nil {
			t.Fatalf("%v is shown as %q, which does not parse: %v", id, name, err)
		}
		if got, ok := p.Table(); !ok || got != id {
			t.Fatalf("%v is shown as %q, which names %v (literal %v)", id, name, got, ok)
		}
		for _, other := range awkwardTables {
			if p.Match(other) != (other == id) {
				t.Errorf("pattern %q of %v: matches %v is %v", name, id, other, p.Match(other))
			}
		}
	}
	if got := FormatTable(change.TableID{Schema: "public", Name: "orders"}); got != "public.orders" {
		t.Errorf("a plain name is shown as %q, want public.orders", got)
	}
}

// TestQuotedPatternsMatchAwkwardNames: the quoting a user writes in include
// and exclude.
func TestQuotedPatternsMatchAwkwardNames(t *testing.T) {
	cases := []struct {
		pattern string
		match   change.TableID
		not     change.TableID
	}{
		{`"Select Schema".*`, change.TableID{Schema: "Select Schema", Name: `My "Quoted" Table.v2`}, change.TableID{Schema: "select schema", Name: "x"}},
		{`"Select Schema"."My ""Quoted"" Table.v2"`, change.TableID{Schema: "Select Schema", Name: `My "Quoted" Table.v2`}, change.TableID{Schema: "Select Schema", Name: `My "Quoted" Table`}},
		{`"weird.schema".t`, change.TableID{Schema: "weird.schema", Name: "t"}, change.TableID{Schema: "weird", Name: "schema.t"}},
		{`"a.b"`, change.TableID{Schema: "public", Name: "a.b"}, change.TableID{Schema: "a", Name: "b"}},
		{`Ünïcødé.*`, change.TableID{Schema: "Ünïcødé", Name: "表 名"}, change.TableID{Schema: "Unicode", Name: "x"}},
		{`public."x""; DROP TABLE victim; --"`, change.TableID{Schema: "public", Name: `x"; DROP TABLE victim; --`}, change.TableID{Schema: "public", Name: "x"}},
	}
	for _, tc := range cases {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if !p.Match(tc.match) || p.Match(tc.not) {
			t.Errorf("%s: matches %v: %v (want true), %v: %v (want false)", tc.pattern, tc.match, p.Match(tc.match), tc.not, p.Match(tc.not))
		}
	}
}

func FuzzFormatTable(f *testing.F) {
	for _, id := range awkwardTables {
		f.Add(id.Schema, id.Name)
	}
	f.Fuzz(func(t *testing.T, schema, name string) {
		if schema == "" || name == "" || !utf8.ValidString(schema) || !utf8.ValidString(name) {
			return // not a PostgreSQL name
		}
		id := change.TableID{Schema: schema, Name: name}
		p, err := ParsePattern(FormatTable(id))
		if err != nil {
			t.Fatalf("%q: %v", FormatTable(id), err)
		}
		if got, ok := p.Table(); !ok || got != id {
			t.Fatalf("%v shown as %q names %v", id, FormatTable(id), got)
		}
	})
}
