package rowfilter

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// sexp writes a tree compactly, for comparing trees in tests.
func sexp(e Expr) string {
	switch n := e.(type) {
	case Column:
		return n.Name
	case Literal:
		return fmt.Sprintf("%s:%q", [...]string{"str", "i32", "i64", "dec", "bool", "null"}[n.Kind], n.Text)
	case Unary:
		return "(" + n.Op + " " + sexp(n.X) + ")"
	case Binary:
		return "(" + n.Op + " " + sexp(n.L) + " " + sexp(n.R) + ")"
	case Logic:
		return "(" + n.Op + " " + sexps(n.Args) + ")"
	case In:
		return fmt.Sprintf("(in%s %s [%s])", map[bool]string{true: "!"}[n.Not], sexp(n.X), sexps(n.List))
	case Between:
		return fmt.Sprintf("(between%s%s %s %s %s)", map[bool]string{true: "!"}[n.Not], map[bool]string{true: "~"}[n.Symmetric], sexp(n.X), sexp(n.Low), sexp(n.High))
	case Like:
		esc := ""
		if n.Escape != nil {
			esc = " " + sexp(n.Escape)
		}
		return fmt.Sprintf("(like%s%s %s %s%s)", map[bool]string{true: "!"}[n.Not], map[bool]string{true: "i"}[n.IgnoreCase], sexp(n.X), sexp(n.Pattern), esc)
	case IsNull:
		return fmt.Sprintf("(null%s %s)", map[bool]string{true: "!"}[n.Not], sexp(n.X))
	case Cast:
		return fmt.Sprintf("(cast %s %s%v)", sexp(n.X), n.Type.Name, n.Type.Mods)
	case Call:
		return "(" + n.Func + " " + sexps(n.Args) + ")"
	}
	return fmt.Sprintf("?%T", e)
}

func sexps(es []Expr) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = sexp(e)
	}
	return strings.Join(out, " ")
}

func TestParseAccepts(t *testing.T) {
	for _, c := range []struct{ filter, tree string }{
		{"region = 'eu' -- a comment", `(= region str:"eu")`},
		{`"Region" <> 'a\b''c'`, `(<> Region str:"a\\b'c")`},
		{`note = E'\x41\n'`, `(= note str:"A\n")`},
		{"a > -5 OR a < 3000000000 OR a = 1.5e3 OR a = 0x1F OR a = 1_000", `(OR (> a i32:"-5") (< a i64:"3000000000") (= a dec:"1.5e3") (= a i32:"31") (= a i32:"1000"))`},
		{"a = -0x8000000000000000 OR a = 99999999999999999999", `(OR (= a i64:"-9223372036854775808") (= a dec:"99999999999999999999"))`},
		{"a != 1 AND NOT b AND c IS NOT NULL", `(AND (<> a i32:"1") (NOT b) (null! c))`},
		{"a NOT IN (1, b + 1)", `(in! a [i32:"1" (+ b i32:"1")])`},
		{"a NOT BETWEEN SYMMETRIC 1 AND 2", `(between!~ a i32:"1" i32:"2")`},
		{"a NOT ILIKE 'x!%' ESCAPE '!'", `(like!i a str:"x!%" str:"!")`},
		{"a IS NOT DISTINCT FROM NULL", `(IS NOT DISTINCT FROM a null:"")`},
		{"a::int + CAST(b AS varchar(20))::text || -c = 'x'", `(= (|| (+ (cast a int4[]) (cast (cast b varchar[20]) text[])) (- c)) str:"x")`},
		{"timestamp with time zone '2025-01-01' < d AND interval '1' day > e", `(AND (< (cast str:"2025-01-01" timestamptz[]) d) (> (cast str:"1" interval[8]) e))`},
		{"extract(year FROM d) = 2025 AND date_trunc('day', d) = d", `(AND (= (extract str:"year" d) i32:"2025") (= (date_trunc str:"day" d) d))`},
		{"substring(a FROM 2 FOR 3) = trim(BOTH 'x' FROM b)", `(= (substring a i32:"2" i32:"3") (btrim b str:"x"))`},
		{"position('a' IN b) > 0 AND pg_catalog.lower(b) = 'x'", `(AND (> (position b str:"a") i32:"0") (= (lower b) str:"x"))`},
		{"coalesce(a, b) = greatest(a, 1) AND least(a) = nullif(b, 2)", `(AND (= (coalesce a b) (greatest a i32:"1")) (= (least a) (nullif b i32:"2")))`},
		{"flag = true AND f = false", `(AND (= flag bool:"true") (= f bool:"false"))`},
	} {
		f, err := Parse(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		if got := sexp(f.Root); got != c.tree {
			t.Errorf("%s:\n got %s\nwant %s", c.filter, got, c.tree)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ filter, want string }{
		{"  ", "it is blank"},
		{strings.Repeat("a = 1 OR ", 1000) + "true", "under 8192"},
		{"a = 1\x00", "NUL"},
		{"pg_sleep(10) IS NULL", "function pg_sleep is not allowed; allowed functions: abs, btrim,"},
		{"pg_terminate_backend(1)", "function pg_terminate_backend is not allowed"},
		{"pg_advisory_lock(1) IS NOT NULL", "function pg_advisory_lock is not allowed"},
		{"set_config('DateStyle', 'SQL, DMY', false) = ''", "function set_config is not allowed"},
		{"lo_export(lo_from_bytea(0, 'x'), '/tmp/x') = 1", "function lo_export is not allowed"},
		{"public.lower(a) = 'x'", "function public.lower is not allowed"},
		{"now() > d", "function now is not allowed: a filter must select the same rows on every read"},
		{"current_date > d", "current_date is not allowed"},
		{"d > 'now'::timestamptz - '1 day'::interval", `the literal "now" is not allowed`},
		{"d > ' Today '", `the literal " Today " is not allowed`},
		{"generate_series(1, 2) > 1", "set-returning functions are not allowed"},
		{"count(*) > 1", "function count is not allowed"},
		{"lower(DISTINCT a) = 'x'", "function lower: aggregate and window forms"},
		{"date_trunc(a, d) = d", "its unit must be a string literal"},
		{"false) UNION ALL SELECT * FROM other WHERE (true", "syntax error at or near \")\" (at character 6)"},
		{"false UNION ALL SELECT * FROM other", "set operations (UNION, INTERSECT, EXCEPT) are not allowed"},
		{"a = 1; DROP TABLE t", "more than one statement"},
		{"true ORDER BY 1", "ORDER BY is not allowed"},
		{"true LIMIT 1", "LIMIT, OFFSET and FETCH are not allowed"},
		{"true FOR UPDATE", "FOR UPDATE and FOR SHARE are not allowed"},
		{"true GROUP BY a", "GROUP BY and HAVING are not allowed"},
		{"a IN (SELECT id FROM other)", "subqueries are not allowed"},
		{"EXISTS (SELECT 1)", "subqueries are not allowed"},
		{"a = (SELECT 1)", "subqueries are not allowed"},
		{"ctid = '(0,1)'", "system column ctid is not allowed"},
		{"xmin::text = '1'", "system column xmin is not allowed"},
		{"other.id = 1", "column other.id: qualified names are not allowed"},
		{"t.* IS NULL", "* is not allowed"},
		{"$1 = 1", "parameters ($1) are not allowed"},
		{"(a, b) = (1, 2)", "row constructors"},
		{"a = ANY(ARRAY[1])", "ANY and ALL are not allowed"},
		{"a = ARRAY[1]", "arrays (ARRAY[...]) are not allowed"},
		{"CASE WHEN a THEN true END", "CASE expressions are not allowed"},
		{"a = 'x' COLLATE \"C\"", "COLLATE is not allowed"},
		{"a ~ 'x'", "operator ~ is not allowed"},
		{"a OPERATOR(pg_catalog.=) 1", "OPERATOR(...) is not allowed"},
		{"a SIMILAR TO 'x'", "SIMILAR TO is not allowed"},
		{"a IS TRUE", "IS TRUE, IS FALSE and IS UNKNOWN are not allowed"},
		{"a::regclass = 't'", "cast to regclass is not allowed"},
		{"a::public.thing = 't'", "cast to public.thing is not allowed"},
		{"a::int[] = '{}'", "array and %TYPE casts are not allowed"},
		{"d AT TIME ZONE 'UTC' > '2025-01-01'", "AT TIME ZONE is not allowed"},
		{"a = B'101'", "bit-string literals"},
		{"(a).b = 1", "subscripts and field selections are not allowed"},
		{"~a = 1", "prefix operator ~ is not allowed"},
		{"lower(a => 'x') = 'x'", "named arguments"},
		{strings.Repeat("NOT ", 70) + "a", "nests deeper than 64 levels"},
		{strings.Repeat("-(", 2700) + "a" + strings.Repeat(")", 2700) + " = 1", "nests deeper than 64 levels"},
		{"a IN (" + strings.Repeat("1,", 2100) + "1)", "more than 2000 parts"},
	} {
		_, err := Parse(c.filter)
		var refused *Error
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tidemark refused the filter: ") {
			t.Errorf("%.60s: %v; want a refusal saying %q", c.filter, err, c.want)
		}
	}
}

func TestCheckColumns(t *testing.T) {
	f, err := Parse(`a = 1 AND lower(b) = 'x' OR a IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Columns(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("columns %v, want [a b]", got)
	}
	if err := f.CheckColumns("public.t", []string{"a", "b", "c"}); err != nil {
		t.Errorf("check: %v", err)
	}
	err = f.CheckColumns("public.t", []string{"a", "c"})
	if err == nil || err.Error() != `tidemark refused the filter: column "b" does not exist in public.t: its columns are a, c` {
		t.Errorf("check without b: %v", err)
	}
}

// FuzzParse: no text makes Parse panic or fail other than by refusing, and
// a tree it accepts holds only what the allow-lists name.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"region = 'eu'", "a between 1 and 2 and not (b like 'x%' escape '!')", "extract(year from d) = 2025",
		"a::numeric(10,2) > 1.5 or b in (1, 2, 0x10)", "coalesce(a, 'x') || 'y' = 'xy'", "pg_sleep(1) is null",
		"false) UNION ALL SELECT 1 WHERE (true", "ctid = '(0,1)'", "a = 1; select 1", "/* x */ a = 1 -- y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		flt, err := Parse(text)
		var refused *Error
		if err != nil {
			if !errors.As(err, &refused) {
				t.Fatalf("%q: %v is not a refusal", text, err)
			}
			return
		}
		walk(flt.Root, func(e Expr) {
			switch n := e.(type) {
			case Call:
				if _, ok := Functions[n.Func]; !ok {
					t.Fatalf("%q: accepted function %s", text, n.Func)
				}
			case Cast:
				if !slices.Contains(Types, n.Type.Name) {
					t.Fatalf("%q: accepted cast to %s", text, n.Type.Name)
				}
			case Column:
				if systemColumns[n.Name] {
					t.Fatalf("%q: accepted system column %s", text, n.Name)
				}
			case Binary:
				if !slices.Contains(Operators, n.Op) && n.Op != "IS DISTINCT FROM" && n.Op != "IS NOT DISTINCT FROM" {
					t.Fatalf("%q: accepted operator %s", text, n.Op)
				}
			}
		})
	})
}
