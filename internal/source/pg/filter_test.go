package pg

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
)

var filterTable = &change.Table{ID: change.TableID{Schema: "public", Name: "orders"}, Key: []int{0},
	Columns: []change.Column{{Name: "id"}, {Name: "region"}, {Name: "amount"}, {Name: "note"}, {Name: `Odd "name`}}}

func TestFilterSQL(t *testing.T) {
	for _, c := range []struct {
		filter, sql string
		params      []string
	}{
		{`region = 'eu'`, `("region" OPERATOR(pg_catalog.=) $1)`, []string{"eu"}},
		{`note = 'a\b''c'`, `("note" OPERATOR(pg_catalog.=) $1)`, []string{`a\b'c`}},
		{`note = E'a\\b\'c'`, `("note" OPERATOR(pg_catalog.=) $1)`, []string{`a\b'c`}},
		{`"Odd ""name" <> 'x' -- comment`, `("Odd ""name" OPERATOR(pg_catalog.<>) $1)`, []string{"x"}},
		{`amount > -5 and amount < 3000000000 or amount = 1.5`,
			`((("amount" OPERATOR(pg_catalog.>) CAST($1 AS pg_catalog.int4)) AND ("amount" OPERATOR(pg_catalog.<) CAST($2 AS pg_catalog.int8))) OR ("amount" OPERATOR(pg_catalog.=) CAST($3 AS pg_catalog.numeric)))`,
			[]string{"-5", "3000000000", "1.5"}},
		{`not (amount in (1, 2) or note is not null)`,
			`(NOT (((("amount" OPERATOR(pg_catalog.=) CAST($1 AS pg_catalog.int4)) OR ("amount" OPERATOR(pg_catalog.=) CAST($2 AS pg_catalog.int4)))) OR ("note" IS NOT NULL)))`, []string{"1", "2"}},
		{`amount not between symmetric 1 and 2`, `(NOT ((("amount" OPERATOR(pg_catalog.>=) CAST($1 AS pg_catalog.int4)) AND ("amount" OPERATOR(pg_catalog.<=) CAST($2 AS pg_catalog.int4))) OR (("amount" OPERATOR(pg_catalog.>=) CAST($3 AS pg_catalog.int4)) AND ("amount" OPERATOR(pg_catalog.<=) CAST($4 AS pg_catalog.int4)))))`, []string{"1", "2", "2", "1"}},
		{`note not ilike 'a!%' escape '!'`, `(NOT ("note" OPERATOR(pg_catalog.~~*) pg_catalog.like_escape($1, $2)))`, []string{"a!%", "!"}},
		{`region is distinct from null`, `(NOT (CASE WHEN ("region" IS NULL) OR TRUE THEN ("region" IS NULL) AND TRUE ELSE ("region" OPERATOR(pg_catalog.=) NULL) END))`, nil},
		{`amount::varchar(20) || 'x' = 'y'`, `((CAST("amount" AS pg_catalog.varchar(20)) OPERATOR(pg_catalog.||) $1) OPERATOR(pg_catalog.=) $2)`, []string{"x", "y"}},
		{`date_trunc('day', note::timestamptz) = timestamp with time zone '2025-01-01'`,
			`(pg_catalog."date_trunc"($1, CAST("note" AS pg_catalog.timestamptz)) OPERATOR(pg_catalog.=) CAST($2 AS pg_catalog.timestamptz))`, []string{"day", "2025-01-01"}},
		{`coalesce(region, 'x') = 'x' and greatest(amount, 1) > 0 and nullif(note, '') is null and true`,
			`((COALESCE("region", $1) OPERATOR(pg_catalog.=) $2) AND (GREATEST("amount", CAST($3 AS pg_catalog.int4)) OPERATOR(pg_catalog.>) CAST($4 AS pg_catalog.int4)) AND ((CASE WHEN ("note" OPERATOR(pg_catalog.=) $5) THEN NULL ELSE "note" END) IS NULL) AND CAST($6 AS pg_catalog.bool))`,
			[]string{"x", "x", "1", "0", "", "true"}},
		{`left(note, 2) = 'ab'`, `(pg_catalog."left"("note", CAST($1 AS pg_catalog.int4)) OPERATOR(pg_catalog.=) $2)`, []string{"2", "ab"}},
	} {
		f, err := rowfilter.Parse(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		sql, params, err := filterSQL(f, filterTable, 1)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		var got []string
		for _, p := range params {
			got = append(got, string(p))
		}
		if sql != c.sql || !slices.Equal(got, c.params) {
			t.Errorf("%s:\n got %s %q\nwant %s %q", c.filter, sql, got, c.sql, c.params)
		}
	}
	f, _ := rowfilter.Parse("nosuch = 1")
	var refused *rowfilter.Error
	if _, _, err := filterSQL(f, filterTable, 1); !errors.As(err, &refused) || !strings.Contains(err.Error(), `column "nosuch" does not exist in public.orders`) {
		t.Errorf("unknown column: %v", err)
	}
}

// TestChunkQueryFilter: the filter's parameters come first, the key
// range's after them.
func TestChunkQueryFilter(t *testing.T) {
	f, _ := rowfilter.Parse("region = 'eu'")
	sql, params, _, err := chunkQuery(filterTable, ReadOptions{Filter: f, After: change.Key{change.Text("7")}, Limit: 10})
	want := `SELECT "id", "region", "amount", "note", "Odd ""name" FROM "public"."orders" WHERE ("region" OPERATOR(pg_catalog.=) $1) AND ("id") > ($2) ORDER BY "id" LIMIT 10`
	if err != nil || sql != want || len(params) != 2 || string(params[0]) != "eu" || string(params[1]) != "7" {
		t.Fatalf("chunk query: %s %q %v\nwant %s", sql, params, err, want)
	}
	gone, _ := rowfilter.Parse("gone = 1")
	if _, _, _, err := chunkQuery(filterTable, ReadOptions{Filter: gone}); !IsPermanent(err) {
		t.Fatalf("a filter on a column the table lost: %v, want a permanent error", err)
	}
}

// FuzzFilterSQL: no text makes the parser or the renderer panic, and what
// they accept is SQL PostgreSQL's parser reads back as a condition holding
// no string constant, only the table's columns, parameters it binds, and
// functions of the allow-list.
func FuzzFilterSQL(f *testing.F) {
	for _, s := range []string{
		`region = 'eu'`, `note = 'a\b''c' -- x`, `amount between 1 and 2 and not (note like 'a%' escape '!')`,
		`amount in (1, 2.5, 3000000000, -0x1F, 1_000) or region is null`, `coalesce(region, 'x') || 'y' = 'xy'`,
		`extract(year from note::date) = 2025`, `date_trunc('day', note::timestamp(3)) > '2025-01-01'`,
		`interval '1' day > note::interval`, `"Odd ""name" is distinct from 'q'`, `pg_sleep(1) is null`,
		`false) UNION ALL SELECT * FROM other WHERE (true`, `id IN (SELECT 1)`, `ctid = '(0,1)'`, `$1 = 1`,
		`set_config('a', 'b', false) = ''`, `region = 'eu'; DROP TABLE x`, `((((amount))))`, `lower(upper(note)) ilike E'\\x41%'`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		flt, err := rowfilter.Parse(text)
		var refused *rowfilter.Error
		if err != nil {
			if !errors.As(err, &refused) {
				t.Fatalf("%q: an error that is not a refusal: %v", text, err)
			}
			return
		}
		cond, params, err := filterSQL(flt, filterTable, 1)
		if err != nil {
			if !errors.As(err, &refused) {
				t.Fatalf("%q: an error that is not a refusal: %v", text, err)
			}
			return
		}
		tree, err := pg_query.Parse("SELECT 1 FROM t WHERE " + cond)
		if err != nil || len(tree.Stmts) != 1 {
			t.Fatalf("%q renders %s, which PostgreSQL does not parse as one statement: %v", text, cond, err)
		}
		where := tree.Stmts[0].Stmt.GetSelectStmt().GetWhereClause()
		if where == nil {
			t.Fatalf("%q renders %s: no condition", text, cond)
		}
		if problem := renderedProblem(where.ProtoReflect(), len(params)); problem != "" {
			t.Fatalf("%q renders %s: %s", text, cond, problem)
		}
	})
}

// renderedProblem walks a parsed condition and says what in it a rendered
// filter must not hold ("" if nothing).
func renderedProblem(m protoreflect.Message, params int) string {
	var problem string
	switch n := m.Interface().(type) {
	case *pg_query.A_Const:
		if n.GetSval() != nil || n.GetBsval() != nil {
			problem = "a string constant in the SQL"
		}
	case *pg_query.ParamRef:
		if n.Number < 1 || int(n.Number) > params {
			problem = fmt.Sprintf("parameter $%d of %d", n.Number, params)
		}
	case *pg_query.ColumnRef:
		name := n.Fields[len(n.Fields)-1].GetString_().GetSval()
		if len(n.Fields) != 1 || filterTable.ColumnIndex(name) < 0 {
			problem = fmt.Sprintf("column reference %v", n.Fields)
		}
	case *pg_query.FuncCall:
		name := n.Funcname[len(n.Funcname)-1].GetString_().GetSval()
		spec, ok := rowfilter.Functions[name]
		ok = ok || name == "like_escape" // how the parser writes LIKE's ESCAPE
		if len(n.Funcname) != 2 || n.Funcname[0].GetString_().GetSval() != "pg_catalog" || !ok || spec.Keyword {
			problem = fmt.Sprintf("function %v", n.Funcname)
		}
	case *pg_query.SubLink, *pg_query.RangeVar, *pg_query.SelectStmt:
		problem = fmt.Sprintf("a %T", n)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case problem != "":
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && problem == ""; i++ {
				problem = renderedProblem(v.List().Get(i).Message(), params)
			}
		case fd.Message() != nil && !fd.IsMap():
			problem = renderedProblem(v.Message(), params)
		}
		return problem == ""
	})
	return problem
}
