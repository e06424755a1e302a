package pg

import (
	"context"
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
)

// TestFilterOperatorsNotHijacked: operators of a role's own, in a schema on
// the search path, with argument types that match a varchar column better
// than the built-in ones, are never what a filter calls: tidemark names
// every operator by pg_catalog (NULLIF, IN, BETWEEN, LIKE and IS DISTINCT
// FROM are written out with them).
func TestFilterOperatorsNotHijacked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := `CREATE TABLE o (id int PRIMARY KEY, name varchar(10));
		INSERT INTO o VALUES (1, 'a'), (2, 'b'), (3, NULL), (4, 'ab');
		CREATE FUNCTION public.hijack(varchar, varchar) RETURNS boolean LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'hijacked operator ran'; END $$;`
	for _, op := range []string{"=", "<>", "<", "<=", ">", ">=", "~~", "~~*", "!~~", "!~~*"} {
		setup += "CREATE OPERATOR public." + op + " (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.hijack);"
	}
	dsn, _ := testDB(t, setup)
	src := openSource(t, dsn, ReadTimeouts{})
	tbl, err := src.Describe(ctx, change.TableID{Schema: "public", Name: "o"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for filter, want := range map[string][]string{
		`name = 'a'`:                              {"1"},
		`name <> 'a'`:                             {"2", "4"},
		`name in ('a', 'b')`:                      {"1", "2"},
		`name not in ('a', 'b')`:                  {"4"},
		`name between 'a' and 'az'`:               {"1", "4"},
		`name not between symmetric 'az' and 'a'`: {"2"},
		`name like 'a%'`:                          {"1", "4"},
		`name not ilike 'A!%' escape '!'`:         {"1", "2", "4"},
		`nullif(name, 'a') is null`:               {"1", "3"},
		`name is distinct from 'a'`:               {"2", "3", "4"},
		`name is not distinct from null`:          {"3"},
	} {
		f, err := rowfilter.Parse(filter)
		if err != nil {
			t.Fatalf("%s: %v", filter, err)
		}
		chunk, err := src.ReadChunk(ctx, tbl, ReadOptions{Filter: f})
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		var got []string
		for _, r := range chunk.Rows {
			got = append(got, r[0].Text)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: rows %v, want %v", filter, got, want)
		}
	}
}
