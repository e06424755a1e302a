package genexpr

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// PostgreSQL base type oids of the test table's columns, which TagOf maps
// to tags.
const (
	oidInt8    = 20
	oidInt4    = 23
	oidText    = 25
	oidVarchar = 1043
)

// table has columns of the kinds the renderers tell apart.
var table = &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Columns: []change.Column{
	{Name: "id", Type: "integer", BaseOID: oidInt4},
	{Name: "qty", Type: "bigint", BaseOID: oidInt8},
	{Name: "name", Type: "text", BaseOID: oidText},
	{Name: "Odd \"Name\"", Type: "character varying(20)", BaseOID: oidVarchar},
	{Name: "price", Type: "numeric(10,2)", BaseOID: 1700},
	{Name: "ratio", Type: "double precision", BaseOID: 701},
	{Name: "g", Type: "bigint", BaseOID: oidInt8},
	{Name: "gt", Type: "text", BaseOID: oidText},
}}

// expressions as pg_get_expr prints them, and what each destination gets
// ("" where it cannot compute the column).
var cases = []struct {
	expr, col, pg, sqlite string
}{
	{`(id * 2)`, "g", `("id" * 2)`, `("id" * 2)`},
	{`((qty + id) - '-3'::integer)`, "g", `(("qty" + "id") - (E'-3')::integer)`, `(("qty" + "id") - (-3))`},
	{`((name || ' '::text) || ("Odd ""Name""")::text)`, "gt", `(("name" || (E' ')::text) || ("Odd ""Name""")::text)`, `(("name" || ' ') || "Odd ""Name""")`},
	{`lower(name)`, "gt", `pg_catalog."lower"("name")`, ""},
	{`(name || (id)::text)`, "gt", `("name" || ("id")::text)`, `("name" || CAST("id" AS TEXT))`},
	{`COALESCE(name, 'it''s'::text)`, "gt", `COALESCE("name", (E'it''s')::text)`, `coalesce("name", 'it''s')`},
	{`length(name)`, "g", `pg_catalog."length"("name")`, `length("name")`},
	{`(price * (qty)::numeric)`, "g", `("price" * ("qty")::numeric)`, ""},
	{`(ratio * (2)::double precision)`, "g", `("ratio" * (2)::double precision)`, ""},
	{`"left"(name, 2)`, "gt", `pg_catalog."left"("name", 2)`, ""},
	{`E'back\\slash'::text || name`, "gt", `((E'back\\slash')::text || "name")`, `('back\slash' || "name")`},
	{`abs((- id))`, "g", `pg_catalog."abs"((- "id"))`, `abs((-"id"))`},
	{`(id / 3) % 2`, "g", `(("id" / 3) % 2)`, `(("id" / 3) % 2)`},
	{`(2 + 3.5)`, "g", `(2 + 3.5)`, ""},
}

func TestRender(t *testing.T) {
	for _, c := range cases {
		tbl := *table
		tbl.Columns = append([]change.Column(nil), table.Columns...)
		i := tbl.ColumnIndex(c.col)
		tbl.Columns[i].Generated = c.expr
		pg, err := Render(PostgreSQL, &tbl, i)
		if err != nil || pg != c.pg {
			t.Errorf("%s: PostgreSQL %q (%v), want %q", c.expr, pg, err, c.pg)
		}
		lite, err := Render(SQLite, &tbl, i)
		if c.sqlite == "" {
			if err == nil {
				t.Errorf("%s: SQLite rendered %q, want a refusal", c.expr, lite)
			}
			continue
		}
		if err != nil || lite != c.sqlite {
			t.Errorf("%s: SQLite %q (%v), want %q", c.expr, lite, err, c.sqlite)
		}
	}
}

// Refused: whatever is not an expression of the grammar, said by name.
func TestRefused(t *testing.T) {
	for expr, want := range map[string]string{
		`now()`:                          "function now",
		`(SELECT 1)`:                     `expected ")"`,
		`pg_catalog.lower(name)`:         "qualified name",
		`lower(name); DROP TABLE t`:      "unexpected character",
		`name::regclass`:                 "cast to type regclass",
		`(id +- 1)`:                      "operator",
		`(id = 1)`:                       "unexpected character",
		`E'\n'::text`:                    "escape sequence",
		`'unterminated`:                  "unterminated",
		`f(` + strings.Repeat("(", 100):  "function f",
		strings.Repeat("(", 100) + "1":   "nests deeper",
		`(id /* comment */ + 1)`:         "operator",
		`x -- comment`:                   "operator",
		`ctid`:                           "",
		`(id)::character varying(10)(3)`: `operator "("`,
	} {
		_, err := Parse(expr)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", expr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", expr, err, want)
		}
	}
	tbl := *table
	tbl.Columns = append([]change.Column(nil), table.Columns...)
	tbl.Columns[6].Generated = "(ctid + xmin)"
	if _, err := Render(PostgreSQL, &tbl, 6); err == nil || !strings.Contains(err.Error(), `column "ctid" is not in the table`) {
		t.Errorf("system column: %v", err)
	}
	tbl.Columns[7].Generated = "name"
	tbl.Columns[6].Generated = "(gt || name)"
	if _, err := Render(PostgreSQL, &tbl, 6); err == nil || !strings.Contains(err.Error(), "generated itself") {
		t.Errorf("generated reference: %v", err)
	}
}

func TestRenameColumn(t *testing.T) {
	got := RenameColumn(`((name || ' '::text) || lower(name))`, "name", "full name")
	want := `(("full name" || (E' ')::text) || "lower"("full name"))`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := Parse(got); err != nil {
		t.Errorf("the renamed expression does not parse again: %v", err)
	}
}

// FuzzRender: no input panics, and what renders for PostgreSQL parses
// again to the same rendering (tidemark never emits what it would refuse).
func FuzzRender(f *testing.F) {
	for _, c := range cases {
		f.Add(c.expr)
	}
	f.Add(`E'a\\b''c'::text`)
	f.Add(`"a""b"`)
	f.Fuzz(func(t *testing.T, expr string) {
		tbl := *table
		tbl.Columns = append([]change.Column(nil), table.Columns...)
		tbl.Columns[6].Generated = expr
		Render(SQLite, &tbl, 6)
		n, err := Parse(expr)
		if err != nil {
			return
		}
		var b strings.Builder
		if err := (pgRenderer{}).render(&b, n); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(b.String())
		if err != nil {
			t.Fatalf("%q rendered %q, which does not parse: %v", expr, b.String(), err)
		}
		var b2 strings.Builder
		if err := (pgRenderer{}).render(&b2, again); err != nil || b2.String() != b.String() {
			t.Fatalf("%q: rendered %q, then %q", expr, b.String(), b2.String())
		}
	})
}
