package shelltmpl

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

// Values that would run commands, split words or break quotes if pasted.
var nastyValues = []string{
	"a;touch X;$(touch Y)",
	"`touch X`",
	"'; DROP TABLE t; --",
	"line1\nline2\n; touch X",
	`"quoted" and 'single' \ back`,
	"*", "-rf", "", " spaced  out ",
	"ünïcødé ☃ \t tab",
	"$HOME ${PATH} $(touch Y)",
}

func varName(r expr.Ref) string {
	if r.Kind == expr.Output {
		v, _ := OutputVar("p."+r.Task, r.Name)
		return v
	}
	return ParamVar(r.Name)
}

// A free-text value reaches the command byte for byte, unquoted or inside
// double quotes, and nothing in it runs.
func TestValueArrivesAndNothingRuns(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{
		`printf %s ${outputs.up.v} > got`,
		`printf %s "${outputs.up.v}" > got`,
		`printf %s "<${param.p}>" > got`,
		`printf %s "$(printf %s ${outputs.up.v})" > got`,
		`x=${outputs.up.v}; printf %s "$x" > got`,
		`printf %s $${unset:-${param.p}} > got # ${outputs.up.v}`,
	} {
		for _, value := range nastyValues {
			dir := t.TempDir()
			env := expr.Env{BizTime: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC),
				Params: map[string]string{"p": value}, Outputs: map[string]map[string]string{"up": {"v": value}}}
			script, vars, err := Render(tmpl, env, varName)
			if err != nil {
				t.Fatalf("Render(%q): %v", tmpl, err)
			}
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range vars {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%q with %q: %v: %s", script, value, err, out)
			}
			for _, f := range []string{"X", "Y"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Errorf("%q with value %q: file %s was created: the value ran", tmpl, value, f)
				}
			}
			got, err := os.ReadFile(filepath.Join(dir, "got"))
			if err != nil {
				t.Fatal(err)
			}
			want := value
			if strings.Contains(tmpl, "<") {
				want = "<" + value + ">"
			}
			if string(got) != want {
				t.Errorf("%q with %q: the command got %q", tmpl, value, got)
			}
		}
	}
}

// Calendar values may stand anywhere; free text only where a variable can.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl string
		want Context // -1: accepted
	}{
		{`echo ${bizdate} '${bizdate}' "${bizdate}"`, -1},
		{"cat <<EOF\n${bizdate}\nEOF", -1},
		{`echo ${outputs.up.v} "a ${param.p} b" # '${param.p}'`, -1},
		{`echo "$(echo "${param.p}")"`, -1},
		{`echo '${param.p}'`, SingleQuoted},
		{`echo 'a'"b"'c ${param.p}'`, SingleQuoted},
		{`echo $'a\'${param.p}'`, SingleQuoted},
		{`echo "it's" '${outputs.up.v}'`, SingleQuoted},
		{"cat <<EOF\nhello ${param.p}\nEOF", Heredoc},
		{"psql <<-'SQL'\n\tSELECT '${outputs.up.v}';\n\tSQL\necho after", Heredoc},
		{"cat <<EOF; echo ok\nbody\nEOF\necho ${param.p} '${param.p}'", SingleQuoted},
		{"echo `echo ${param.p}`", Backtick},
		{`echo $((${param.p} + 1))`, Arithmetic},
		{`((n = ${param.p}))`, Arithmetic},
		{`echo \${param.p}`, Escaped},
		// A case pattern's ")" inside $(…) would close it for the scanner,
		// and the here-document after it pass unseen.
		{"x=\"$(case a in a) sh <<EOF\necho ${outputs.up.v}\nEOF\n;; esac)\"", Unfollowed},
		{`x=$(case ${param.p} in a) echo a;; esac)`, Unfollowed},
		{`case ${param.p} in a) echo "${param.p}";; esac`, -1}, // outside $(…) the scanner follows it
		{`echo "$(echo casein ${param.p})"`, -1},
	} {
		err := Check(tc.tmpl)
		if tc.want < 0 {
			if err != nil {
				t.Errorf("Check(%q) = %v, want nil", tc.tmpl, err)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Context != tc.want {
			t.Errorf("Check(%q) = %v, want a refusal %s", tc.tmpl, err, tc.want)
		}
	}
}

// The variable names are one to one with the names.
func TestOutputVarIsOneToOne(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, task := range []string{"a.b", "a_b.c", "a.b_c", "a-b.c", "a.b-c", "a.b_O", "a_O.b", "a__b.c"} {
		for _, name := range []string{"c", "c_d", "d", "O_c", "c-d", "_c"} {
			v, ok := OutputVar(task, name)
			if !ok {
				t.Fatalf("OutputVar(%q, %q) not ok", task, name)
			}
			if prev, dup := seen[v]; dup {
				t.Errorf("%s: both %s and %s.%s", v, prev, task, name)
			}
			seen[v] = task + "." + name
		}
	}
	if v, _ := OutputVar("sales.orders_daily", "rows"); v != "TIDEMARK_OUTPUT_sales_Dorders__daily_Orows" {
		t.Errorf("OutputVar = %s", v)
	}
	if _, ok := OutputVar("p.t", "a b"); ok {
		t.Error("a name with a space has a variable")
	}
}

func TestReadVars(t *testing.T) {
	t.Parallel()
	got := ReadVars(`x=1; for f in a; do echo $f $x; done; read -r a b; echo "$HOME $${LOADER_TOKEN:-none}" '$QUOTED' $a $b $${BRACED} \$ESCAPED $PWD ${outputs.up.v} $HOME # $COMMENT`)
	if want := []string{"HOME", "LOADER_TOKEN", "BRACED"}; !slices.Equal(got, want) {
		t.Errorf("ReadVars = %q, want %q", got, want)
	}
}
