package engine_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// The values an upstream task hands down in the tests below: each would
// run a command, end a statement or break quoting if pasted into code.
var nasty = map[string]string{
	"semi":      "a;touch X;$(touch Y)",
	"backticks": "`touch X`",
	"sqlquote":  "'; DROP TABLE t; --",
	"newlines":  "one\ntwo\n$(touch Y)\n",
	"quotes":    `"dq" 'sq' \ end`,
	"unicode":   "ünïcødé ☃ — 日本",
}

// nastyUpstream returns a SQLite database whose table vals holds the nasty
// values as one row, and a SQL task "up" that reads them as its outputs:
// outputs read from a table, as an attacker who can write to it would set.
func nastyUpstream(t *testing.T) (string, dag.Task) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wh.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cols, marks []string
	var args []any
	for name, v := range nasty {
		cols = append(cols, name+" TEXT")
		marks = append(marks, "?")
		args = append(args, v)
	}
	if _, err := db.Exec("CREATE TABLE vals (" + strings.Join(cols, ", ") + "); CREATE TABLE t (x INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO vals VALUES ("+strings.Join(marks, ", ")+")", args...); err != nil {
		t.Fatal(err)
	}
	up := task(t, "up", dag.TypeSQL, "")
	up.Connection, up.SQL = "wh", "SELECT * FROM vals"
	return path, up
}

func succeed(t *testing.T, v *env, req plan.Request) store.BatchBackfill {
	t.Helper()
	got := v.wait(v.submit(req).ID)
	if got.State != store.BatchSucceeded {
		t.Fatalf("backfill = %s (%s) %s", got.State, got.Error, v.debug())
	}
	return got
}

// An upstream output is passed to a shell task as data: unquoted or inside
// double quotes, whatever it holds, nothing in it runs and the task gets it
// byte for byte.
func TestShellTaskGetsOutputsAsData(t *testing.T) {
	path, up := nastyUpstream(t)
	var cmd []string
	for name := range nasty {
		cmd = append(cmd, "printf %s ${outputs.up."+name+"} > "+name+".bare",
			`printf %s "<${outputs.up.`+name+`}>" > `+name+".quoted")
	}
	down := task(t, "down", dag.TypeShell, strings.Join(cmd, "; "), "up")
	v := newEnv(t, []dag.Task{up, down}, envOpts{conns: map[string]runner.Connection{"wh": {Name: "wh", Type: "sqlite", DSN: path}}})
	req := rangeReq("up", "2025-05-01", "2025-05-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	succeed(t, v, req)
	for _, f := range []string{"X", "Y"} {
		if _, err := os.Stat(filepath.Join(v.dir, f)); err == nil {
			t.Errorf("file %s exists: an output ran as a command", f)
		}
	}
	for name, want := range nasty {
		for suffix, w := range map[string]string{".bare": want, ".quoted": "<" + want + ">"} {
			got, err := os.ReadFile(filepath.Join(v.dir, name+suffix))
			if err != nil || string(got) != w {
				t.Errorf("%s%s = %q (%v), want %q", name, suffix, got, err, w)
			}
		}
	}
}

// An output written to the outputs file by a shell task reaches the
// downstream shell task as data too.
func TestShellOutputFileToShellTask(t *testing.T) {
	up := task(t, "up", dag.TypeShell, `printf 'v=%s\n' 'a;touch X;$(touch Y) `+"`touch X`"+`' >> "$TIDEMARK_OUTPUT"`)
	down := task(t, "down", dag.TypeShell, `echo ${outputs.up.v} > bare; echo "${outputs.up.v}" > quoted`, "up")
	v := newEnv(t, []dag.Task{up, down}, envOpts{})
	req := rangeReq("up", "2025-05-01", "2025-05-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	succeed(t, v, req)
	for _, f := range []string{"X", "Y"} {
		if _, err := os.Stat(filepath.Join(v.dir, f)); err == nil {
			t.Errorf("file %s exists: an output ran as a command", f)
		}
	}
	for _, f := range []string{"bare", "quoted"} {
		if got, err := os.ReadFile(filepath.Join(v.dir, f)); err != nil || string(got) != "a;touch X;$(touch Y) `touch X`\n" {
			t.Errorf("%s = %q (%v)", f, got, err)
		}
	}
}

// A shell task's environment is PATH, HOME, LANG, TZ, tidemark's own
// variables and what the task lists under env: not the daemon's API token
// nor any other variable of the daemon.
func TestShellTaskEnvironment(t *testing.T) {
	t.Setenv("TIDEMARK_API_TOKEN", "token-must-not-leak")
	t.Setenv("SECRET", "secret-must-not-leak")
	t.Setenv("WANTED", "wanted value")
	t.Setenv("LANG", "C.UTF-8")
	plain := task(t, "plain", dag.TypeShell, "env > plain.env")
	plain.Params = []dag.Param{{Name: "region", Value: "eu;$(touch X)"}}
	listed := task(t, "listed", dag.TypeShell, "env > listed.env")
	listed.Env = []string{"WANTED", "SECRET"}
	v := newEnv(t, []dag.Task{plain, listed}, envOpts{})
	succeed(t, v, rangeReq("plain", "2025-05-01", "2025-05-01"))
	succeed(t, v, rangeReq("listed", "2025-05-01", "2025-05-01"))
	read := func(f string) map[string]string {
		b, err := os.ReadFile(filepath.Join(v.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, val, _ := strings.Cut(line, "=")
			m[k] = val
		}
		return m
	}
	p := read("plain.env")
	for _, name := range []string{"TIDEMARK_API_TOKEN", "SECRET", "WANTED"} {
		if _, found := p[name]; found {
			t.Errorf("the task's environment holds %s", name)
		}
	}
	for name, want := range map[string]string{"LANG": "C.UTF-8", "TIDEMARK_TASK": "p.plain", "TIDEMARK_BIZDATE": "20250501",
		"TIDEMARK_PARAM_REGION": "eu;$(touch X)", "PATH": os.Getenv("PATH")} {
		if p[name] != want {
			t.Errorf("%s = %q, want %q", name, p[name], want)
		}
	}
	if !strings.HasPrefix(p[runner.TagEnv], "tidemark-i") || p[runner.OutputEnv] == "" {
		t.Errorf("run tag %q, outputs file %q", p[runner.TagEnv], p[runner.OutputEnv])
	}
	l := read("listed.env")
	if l["WANTED"] != "wanted value" || l["SECRET"] != "secret-must-not-leak" {
		t.Errorf("listed variables: WANTED=%q SECRET=%q", l["WANTED"], l["SECRET"])
	}
	if _, found := l["TIDEMARK_API_TOKEN"]; found {
		t.Error("the API token reached a task")
	}
}

// An upstream output is passed to a SQL task as a bound parameter, on
// PostgreSQL and on SQLite: bare or as a whole string literal, whatever it
// holds, nothing in it runs (table t is still there) and the row gets it
// byte for byte.
func TestSQLTaskGetsOutputsAsData(t *testing.T) {
	path, up := nastyUpstream(t)
	pgDSN, err := server.CreateDatabase(t.Context(), "engine_sql_outputs")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := pgx.Connect(t.Context(), pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(t.Context())
	if _, err := pg.Exec(t.Context(), "CREATE TABLE got (k text, v text); CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	lite, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if _, err := lite.Exec("CREATE TABLE got (k TEXT, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for name := range nasty {
		rows = append(rows, "INSERT INTO got VALUES ('"+name+".bare', ${outputs.up."+name+"});",
			"INSERT INTO got VALUES ('"+name+".quoted', '${outputs.up."+name+"}');")
	}
	script := "DELETE FROM got WHERE k = '${bizdate}';\n" + strings.Join(rows, "\n") + "\nSELECT count(*) AS n FROM got"
	toPG := task(t, "to_pg", dag.TypeSQL, "", "up")
	toPG.Connection, toPG.SQL = "pg", script
	toLite := task(t, "to_lite", dag.TypeSQL, "", "up")
	toLite.Connection, toLite.SQL = "wh", script
	v := newEnv(t, []dag.Task{up, toPG, toLite}, envOpts{conns: map[string]runner.Connection{
		"wh": {Name: "wh", Type: "sqlite", DSN: path}, "pg": {Name: "pg", Type: "postgres", DSN: pgDSN}}})
	req := rangeReq("up", "2025-05-01", "2025-05-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	succeed(t, v, req)
	check := func(db string, query func(string, ...any) (map[string]string, error)) {
		got, err := query("SELECT k, v FROM got")
		if err != nil {
			t.Fatalf("%s: %v", db, err)
		}
		for name, want := range nasty {
			for _, k := range []string{name + ".bare", name + ".quoted"} {
				if got[k] != want {
					t.Errorf("%s: %s = %q, want %q", db, k, got[k], want)
				}
			}
		}
		if _, err := query("SELECT x, x FROM t"); err != nil {
			t.Errorf("%s: table t: %v (an output ran as SQL)", db, err)
		}
	}
	check("postgres", func(q string, _ ...any) (map[string]string, error) {
		rows, err := pg.Query(t.Context(), q)
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for rows.Next() {
			var k, val string
			if err := rows.Scan(&k, &val); err != nil {
				return nil, err
			}
			m[k] = val
		}
		return m, rows.Err()
	})
	check("sqlite", func(q string, _ ...any) (map[string]string, error) {
		rows, err := lite.Query(q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var k, val sql.NullString
			if err := rows.Scan(&k, &val); err != nil {
				return nil, err
			}
			m[k.String] = val.String
		}
		return m, rows.Err()
	})
}

// An output where a name stands is written in only if it is a name: the
// attempt fails with the reason otherwise, and nothing of it runs.
func TestSQLTaskRefusesAValueAsName(t *testing.T) {
	path, up := nastyUpstream(t)
	down := task(t, "down", dag.TypeSQL, "", "up")
	down.Connection, down.SQL = "wh", "DELETE FROM ${outputs.up.sqlquote}"
	v := newEnv(t, []dag.Task{up, down}, envOpts{conns: map[string]runner.Connection{"wh": {Name: "wh", Type: "sqlite", DSN: path}}})
	req := rangeReq("up", "2025-05-01", "2025-05-01")
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	if got := v.wait(v.submit(req).ID); got.State != store.BatchFailed {
		t.Fatalf("backfill = %s, want failed", got.State)
	}
	in := byTaskDate(v.instances(1))["p.down 2025-05-01"]
	if !strings.Contains(in.Error, "stands where a name does, and is not one") {
		t.Errorf("error = %q", in.Error)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("SELECT x FROM t"); err != nil {
		t.Errorf("table t: %v", err)
	}
}
