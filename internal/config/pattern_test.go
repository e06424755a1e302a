package config

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

func mustPattern(t testing.TB, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParsePatternCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"public.*", "public.*"},
		{"orders", "public.orders"},
		{"*", "public.*"},
		{"*.*", "*.*"},
		{"app.order_?", "app.order_?"},
		{"**.a**b", "*.a*b"},
		{`"my.schema"."Order Items"`, `"my.schema"."Order Items"`},
		{`"public"."orders"`, "public.orders"},
		{`"Order"*`, "public.Order*"},
		{`"Order Items"*`, `public."Order Items"*`},
		{`"a""b".c`, `"a""b".c`},
		{`"x*".y`, `"x*".y`},
		{`"x?"?`, `public."x?"?`},
		{`pre"."post.t`, `"pre.post".t`},
		{"public.café_?", "public.café_?"},
		{`"tab	x".y`, `"tab	x".y`},
	} {
		p, err := ParsePattern(tc.in)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", tc.in, err)
			continue
		}
		if got := p.String(); got != tc.want {
			t.Errorf("ParsePattern(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		again := mustPattern(t, p.String())
		if again.String() != p.String() {
			t.Errorf("%q does not read back as itself: %q", p.String(), again.String())
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `table pattern "": empty pattern: write schema.table, e.g. public.*`},
		{".", "empty schema or table name"},
		{"public.", "empty schema or table name"},
		{".orders", "empty schema or table name"},
		{"a.b.c", `more than one unquoted dot: write schema.table, and quote names that contain dots, e.g. "my.schema".orders`},
		{`"public.orders`, `unterminated double quote: close the quoted name with "`},
		{`public.""`, `empty quoted name "": a name needs at least one character`},
		{"public.order items", `unquoted space or control character: put the name in double quotes, e.g. public."order items"`},
		{" public.x", "unquoted space"},
		{"public.x\n", "unquoted space"},
	} {
		_, err := ParsePattern(tc.in)
		if err == nil {
			t.Errorf("ParsePattern(%q) succeeded", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePattern(%q) = %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	tab := func(schema, name string) change.TableID { return change.TableID{Schema: schema, Name: name} }
	for _, tc := range []struct {
		pattern string
		table   change.TableID
		want    bool
	}{
		{"public.*", tab("public", "orders"), true},
		{"public.*", tab("public", ""), true},
		{"public.*", tab("app", "orders"), false},
		{"orders", tab("public", "orders"), true},
		{"orders", tab("app", "orders"), false},
		{"*", tab("public", "anything"), true},
		{"*", tab("app", "anything"), false},
		{"*.*", tab("app", "x"), true},
		{"public.order_?", tab("public", "order_1"), true},
		{"public.order_?", tab("public", "order_12"), false},
		{"public.order_?", tab("public", "order_"), false},
		{"public.caf?", tab("public", "café"), true},
		{"public.*_log", tab("public", "audit_log"), true},
		{"public.*_log", tab("public", "_log"), true},
		{"public.*_log", tab("public", "audit_logs"), false},
		{"public.a*b*c", tab("public", "aXbYc"), true},
		{"public.a*b*c", tab("public", "abc"), true},
		{"public.a*b*c", tab("public", "acb"), false},
		{"public.*a*a*a*b", tab("public", strings.Repeat("a", 200)), false},
		{"public.*a*a*a*b", tab("public", strings.Repeat("a", 200)+"b"), true},
		{"p?blic.x", tab("public", "x"), true},
		{"public.Orders", tab("public", "orders"), false},
		{"public.Orders", tab("public", "Orders"), true},
		{`"my.schema"."Order Items"`, tab("my.schema", "Order Items"), true},
		{`"my.schema"."Order Items"`, tab("my", "schema.Order Items"), false},
		{`"my.schema".*`, tab("my.schema", "t"), true},
		{`"x*".y`, tab("x*", "y"), true},
		{`"x*".y`, tab("xa", "y"), false},
		{`public."a?"`, tab("public", "a?"), true},
		{`public."a?"`, tab("public", "ab"), false},
		{`public."a""b"`, tab("public", `a"b`), true},
		{`app."Order"_*`, tab("app", "Order_lines"), true},
		{`app."Order"_*`, tab("app", "order_lines"), false},
	} {
		if got := mustPattern(t, tc.pattern).Match(tc.table); got != tc.want {
			t.Errorf("%s matches %q.%q = %v, want %v", tc.pattern, tc.table.Schema, tc.table.Name, got, tc.want)
		}
	}
	if (Pattern{}).Match(tab("public", "x")) {
		t.Error("the zero Pattern matched")
	}
}

func TestPatternTable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want change.TableID
		ok   bool
	}{
		{"events", change.TableID{Schema: "public", Name: "events"}, true},
		{`"my.schema"."Order Items"`, change.TableID{Schema: "my.schema", Name: "Order Items"}, true},
		{`"x*".y`, change.TableID{Schema: "x*", Name: "y"}, true},
		{"public.*", change.TableID{}, false},
		{"?.x", change.TableID{}, false},
	} {
		got, ok := mustPattern(t, tc.in).Table()
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("ParsePattern(%q).Table() = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := (Pattern{}).Table(); ok {
		t.Error("the zero Pattern names a table")
	}
	if s := (Pattern{}).String(); s != "" {
		t.Errorf("zero Pattern String() = %q", s)
	}
}

func FuzzPattern(f *testing.F) {
	for _, s := range []string{"public.*", "orders", `"my.schema"."Order Items"`, `"a""b".c?*`, "a.b.c", `"x`, "*.*"} {
		f.Add(s, "public", "orders")
	}
	f.Fuzz(func(t *testing.T, s, schema, name string) {
		p, err := ParsePattern(s)
		if err != nil {
			return
		}
		p.Match(change.TableID{Schema: schema, Name: name})
		again, err := ParsePattern(p.String())
		if err != nil {
			t.Fatalf("%q reads as %q, which does not read back: %v", s, p.String(), err)
		}
		if again.String() != p.String() {
			t.Fatalf("%q reads back as %q", p.String(), again.String())
		}
		if tab, ok := p.Table(); ok && !p.Match(tab) {
			t.Fatalf("%q does not match its own table %+v", s, tab)
		}
	})
}
