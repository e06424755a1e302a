package sqltmpl

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

func testEnv(v string) expr.Env {
	return expr.Env{BizTime: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC),
		Params: map[string]string{"p": v, "tbl": "orders_eu"}, Outputs: map[string]map[string]string{"up": {"v": v}}}
}

func TestRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl string
		d    Dialect
		want []Statement
	}{
		// No free text: one script, as written.
		{"DELETE FROM t WHERE d = '${bizdate}'; SELECT 1", Postgres,
			[]Statement{{SQL: "DELETE FROM t WHERE d = '20250102'; SELECT 1", Line: 1}}},
		// A value, a whole literal, a name, a quoted name, a comment.
		{"CREATE TABLE a(x int);\nINSERT INTO ${tbl} VALUES (${outputs.up.v}, '${p}') -- ${p}\n;SELECT \"${tbl}\".x FROM s_${tbl};", Postgres,
			[]Statement{{SQL: "CREATE TABLE a(x int);", Line: 1},
				{SQL: "\nINSERT INTO orders_eu VALUES ($1, $2) -- ${p}\n;", Args: []string{"x'y", "x'y"}, Line: 1},
				{SQL: "SELECT \"orders_eu\".x FROM s_orders_eu;", Line: 3}}},
		{"INSERT INTO t VALUES (${p}, '${bizdate}'); SELECT '${p}' AS v", SQLite,
			[]Statement{{SQL: "INSERT INTO t VALUES (?1, '20250102');", Args: []string{"x'y"}, Line: 1},
				{SQL: " SELECT ?1 AS v", Args: []string{"x'y"}, Line: 1}}},
		// A ";" inside strings, names, comments and dollar quotes ends nothing.
		{"SELECT ';', \";\" /* ; /* ; */ ; */, $$;$$, $f$;$f$ -- ;\n, ${p}", Postgres,
			[]Statement{{SQL: "SELECT ';', \";\" /* ; /* ; */ ; */, $$;$$, $f$;$f$ -- ;\n, $1", Args: []string{"x'y"}, Line: 1}}},
	} {
		got, err := Render(tc.tmpl, tc.d, testEnv("x'y"))
		if err != nil {
			t.Errorf("Render(%q): %v", tc.tmpl, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Render(%q)\n got %#v\nwant %#v", tc.tmpl, got, tc.want)
		}
	}
}

// Where a parameter cannot be bound, the configuration is refused.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl, want string
		d          Dialect
	}{
		{"SELECT 'day ${p}'", "concatenation", Postgres},
		{"SELECT E'${p}'", "concatenation", Postgres},
		{"SELECT '${p} ${bizdate}'", "concatenation", SQLite},
		{"DO $$ BEGIN PERFORM '${p}'; END $$", "set_config", Postgres},
		{"CREATE FUNCTION f() RETURNS int AS $body$ SELECT ${p} $body$ LANGUAGE sql", "set_config", Postgres},
	} {
		err := Check(tc.tmpl, tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want an error about %s", tc.tmpl, err, tc.want)
		}
	}
	for _, ok := range []string{"SELECT '${bizdate} ${biztime}'", "SELECT $$${bizdate}$$", "SELECT '${p}'::date -- '${p} x'"} {
		if err := Check(ok, Postgres); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
}

// In a name's place, only a name is written in.
func TestNamePlaces(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{"SELECT * FROM ${p}", "SELECT * FROM s.${p}", "SELECT * FROM t_${p}", `SELECT "${p}" FROM t`,
		"UPDATE ${p} SET x = 1", "SELECT x AS ${p} FROM t", "SELECT * FROM t ORDER BY ${p}"} {
		for _, d := range []Dialect{Postgres, SQLite} {
			if _, err := Render(tmpl, d, testEnv("t; DROP TABLE t")); err == nil || !strings.Contains(err.Error(), "is not one") {
				t.Errorf("Render(%q) of a value that is no name = %v, want a refusal", tmpl, err)
			}
			got, err := Render(tmpl, d, testEnv("orders_2025"))
			if err != nil || len(got) != 1 || len(got[0].Args) != 0 || !strings.Contains(got[0].SQL, "orders_2025") {
				t.Errorf("Render(%q) of a name = %#v, %v", tmpl, got, err)
			}
		}
	}
	if _, err := Render("SELECT * FROM `${p}`", SQLite, testEnv("a`b")); err == nil {
		t.Error("a backtick name in SQLite took a value with a backtick")
	}
}
