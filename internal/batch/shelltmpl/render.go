// Package shelltmpl renders a shell task's command template so that free
// text never becomes code. Calendar references (${bizdate}, …) are written
// into the command: expr guarantees they print only digits, letters and
// harmless separators. A parameter or an upstream output becomes a
// reference to an environment variable holding the value: "${VAR}" where
// the template stands unquoted, ${VAR} inside double quotes. The shell
// expands a variable's value without reading it as code, so
// `a;touch X;$(touch Y)` is one argument, not three commands.
//
// Where a variable cannot stand — inside single quotes (nothing expands), a
// here-document (its body usually feeds another interpreter: psql, python),
// backticks, an arithmetic expression (bash evaluates a value there) or
// right after a backslash — Check refuses the template, so that the
// configuration fails to load rather than a task failing later. In a
// comment a free-text reference is left as written.
package shelltmpl

import (
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

// Inherited are the variables of the daemon's environment every shell task
// receives; a task lists any other under env.
var Inherited = []string{"PATH", "HOME", "LANG", "TZ"}

// Variable name prefixes. See ParamVar and OutputVar.
const (
	ParamPrefix  = "TIDEMARK_PARAM_"
	OutputPrefix = "TIDEMARK_OUTPUT_"
)

// ParamVar is the environment variable of task parameter name, which
// config restricts to letters, digits and _: TIDEMARK_PARAM_ and the name
// in upper case (two parameters of a task may not differ only in case).
func ParamVar(name string) string { return ParamPrefix + strings.ToUpper(name) }

// OutputVar is the environment variable of output name of upstream task
// taskID ("project.name"): TIDEMARK_OUTPUT_, the task ID, "_O", the output
// name, where in both names "_" is written "__", "-" "_H" and "." "_D". The
// mapping is one to one: task sales.orders_daily's output rows is
// TIDEMARK_OUTPUT_sales_Dorders__daily_Orows. ok is false when a name holds
// another character (an output file may name outputs that no template can
// reference).
func OutputVar(taskID, name string) (v string, ok bool) {
	t, ok1 := encode(taskID)
	n, ok2 := encode(name)
	return OutputPrefix + t + "_O" + n, ok1 && ok2 && name != ""
}

func encode(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '_':
			b.WriteString("__")
		case c == '-':
			b.WriteString("_H")
		case c == '.':
			b.WriteString("_D")
		default:
			return "", false
		}
	}
	return b.String(), true
}

// Error is a free-text reference in a place of the command where it cannot
// be passed safely.
type Error struct {
	Ref     string
	Offset  int
	Context Context
}

func (e *Error) Error() string {
	fix := `write it unquoted or inside double quotes, where tidemark passes it as an environment variable`
	switch e.Context {
	case SingleQuoted:
		fix = `nothing expands inside single quotes: close them before the reference and write it inside double quotes, e.g. 'abc'"${…}"`
	case Heredoc:
		fix = `a here-document usually feeds another interpreter, where the value would become code: read the value from the environment inside it (see docs/batch-runners.md) or pass it as an argument`
	case Backtick:
		fix = "write $(…) instead of backticks"
	case Arithmetic:
		fix = "a value in an arithmetic expression is evaluated: check that it is a number first, e.g. n=${…}; case $n in *[!0-9]*) exit 1;; esac"
	case Escaped:
		fix = "remove the backslash"
	case Unfollowed:
		fix = "tidemark cannot follow a case statement inside $(…): move the case into a shell function defined before it, or set a variable from the value before the $(…)"
	}
	return fmt.Sprintf("at byte %d, %s: a parameter or output %s cannot be passed safely: %s", e.Offset, e.Ref, e.Context, fix)
}

// placed is a parsed template with the shell context of each reference.
type placed struct {
	parts []expr.Part
	ctx   map[*expr.Ref]Context
}

func place(tmpl string) (placed, error) {
	parts, err := expr.Parse(tmpl)
	if err != nil {
		return placed{}, err
	}
	var b strings.Builder
	var offsets []int
	var refs []*expr.Ref
	for _, p := range parts {
		if p.Ref == nil {
			b.WriteString(p.Lit)
			continue
		}
		offsets = append(offsets, b.Len())
		refs = append(refs, p.Ref)
		b.WriteByte('x') // a word character where the reference stands
	}
	pl := placed{parts: parts, ctx: map[*expr.Ref]Context{}}
	for i, c := range contexts(b.String(), offsets) {
		pl.ctx[refs[i]] = c
	}
	return pl, nil
}

// Check reports the first free-text reference of tmpl that stands where it
// cannot be passed safely, as an *Error; or tmpl's syntax error.
func Check(tmpl string) error {
	pl, err := place(tmpl)
	if err != nil {
		return err
	}
	for _, p := range pl.parts {
		if p.Ref == nil || !p.Ref.Free() {
			continue
		}
		switch c := pl.ctx[p.Ref]; c {
		case Bare, DoubleQuoted, Comment:
		default:
			return &Error{Ref: p.Ref.Text, Offset: p.Ref.Offset, Context: c}
		}
	}
	return nil
}

// Render returns the command for env: calendar references written in,
// free-text references replaced by references to the variables varName
// names, and those variables with their values. A value with a NUL byte
// cannot be passed (the environment cannot hold one).
func Render(tmpl string, env expr.Env, varName func(expr.Ref) string) (string, map[string]string, error) {
	if err := Check(tmpl); err != nil {
		return "", nil, err
	}
	pl, _ := place(tmpl)
	vars := map[string]string{}
	var b strings.Builder
	for _, p := range pl.parts {
		r := p.Ref
		if r == nil {
			b.WriteString(p.Lit)
			continue
		}
		ctx := pl.ctx[r]
		if r.Free() && ctx == Comment {
			b.WriteString(r.Text)
			continue
		}
		v, err := r.Value(env)
		if err != nil {
			return "", nil, err
		}
		if !r.Free() {
			b.WriteString(v)
			continue
		}
		if strings.IndexByte(v, 0) >= 0 {
			return "", nil, fmt.Errorf("%s: the value holds a NUL byte, which no environment variable can", r.Text)
		}
		name := varName(*r)
		vars[name] = v
		if ctx == DoubleQuoted {
			b.WriteString("${" + name + "}")
		} else {
			b.WriteString(`"${` + name + `}"`)
		}
	}
	return b.String(), vars, nil
}
