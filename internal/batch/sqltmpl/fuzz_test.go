package sqltmpl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

// FuzzRender: the lexer never panics, Render fails only where Check does
// or for a value in a name's place, and no free-text value is ever in the
// SQL: it travels as an argument.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"SELECT ${p}", "SELECT '${p}'", "SELECT 'a${p}'", "SELECT E'${p}'", `SELECT "${p}"`, "SELECT * FROM ${p}",
		"DO $$ ${p} $$", "SELECT $a$ $$ ${p} $a$", "-- ${p}\nSELECT ${p}; /* ${p} /* */ ${p} */ SELECT ${p}",
		"SELECT 1; SELECT ${p};; SELECT '${bizdate}';", "SELECT [${p}], `${p}`", "SELECT ${p}${p}", "SELECT '", "SELECT \"", "/*", "$",
		"SELECT 'it''s ${p}'", "SELECT $1, $${p}",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	const value = "\x01VALUE\x01"
	f.Fuzz(func(t *testing.T, tmpl string, sqlite bool) {
		d := Postgres
		if sqlite {
			d = SQLite
		}
		parts, err := expr.Parse(tmpl)
		if err != nil {
			return
		}
		env := expr.Env{BizTime: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC), Scheduled: time.Date(2025, 1, 3, 0, 0, 0, 0, time.UTC),
			Params: map[string]string{}, Outputs: map[string]map[string]string{}}
		for _, p := range parts {
			if r := p.Ref; r != nil && r.Kind == expr.Param {
				env.Params[r.Name] = value
			} else if r != nil && r.Kind == expr.Output {
				if env.Outputs[r.Task] == nil {
					env.Outputs[r.Task] = map[string]string{}
				}
				env.Outputs[r.Task][r.Name] = value
			}
		}
		checkErr := Check(tmpl, d)
		stmts, err := Render(tmpl, d, env)
		var e *Error
		if checkErr != nil && err == nil || checkErr == nil && err != nil && !(errors.As(err, &e) && strings.Contains(e.Msg, "is not one")) {
			t.Fatalf("%q: Check says %v, Render says %v", tmpl, checkErr, err)
		}
		var all strings.Builder
		for _, st := range stmts {
			if strings.Contains(st.SQL, value) {
				t.Fatalf("%q rendered %q: the value itself is in the SQL", tmpl, st.SQL)
			}
			all.WriteString(st.SQL)
		}
	})
}
