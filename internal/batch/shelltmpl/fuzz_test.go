package shelltmpl

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

// FuzzRender: the scanner never panics, every reference gets a context, and
// a rendered command never holds a free-text value itself, only the names
// of the variables that carry it.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		`echo ${outputs.up.v}`, `echo "${param.p}"`, `echo '${param.p}'`, "cat <<EOF\n${param.p}\nEOF",
		"cat <<-'E' | x\n\t${param.p}\n\tE\necho ${param.p}", "echo `${param.p}`", `echo $((${param.p}))`,
		`echo $'\'${param.p}'`, `echo "$(echo "${param.p}" ')' )"`, `echo $${x:-${param.p}} # ${param.p}`,
		`echo \${param.p} \\${param.p}`, `a=(${param.p}) ((${param.p}))`, `echo "${bizdate}" ${biztime:HH mm}`,
		"echo \"unterminated ${param.p}", "echo 'unterminated ${param.p}", "<<", "<<-", "$(", "$((", "${", "\\",
	} {
		f.Add(s)
	}
	const value = "\x01VALUE\x01"
	f.Fuzz(func(t *testing.T, tmpl string) {
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
		checkErr := Check(tmpl)
		script, vars, err := Render(tmpl, env, varName)
		if (checkErr == nil) != (err == nil) {
			t.Fatalf("%q: Check says %v, Render says %v", tmpl, checkErr, err)
		}
		if err != nil {
			return
		}
		if strings.Contains(script, value) {
			t.Fatalf("%q rendered %q: the value itself is in the command", tmpl, script)
		}
		for name := range vars {
			if !strings.Contains(script, "${"+name+"}") {
				t.Fatalf("%q rendered %q without variable %s", tmpl, script, name)
			}
		}
	})
}
