package shelltmpl

import (
	"regexp"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

var (
	// expansion matches $NAME and ${NAME…}.
	expansion = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	// assignment matches what sets a variable in the command itself: NAME=,
	// for NAME, read [-r] NAME….
	assignment = regexp.MustCompile(`(?:^|[\s;&|(])(?:([A-Za-z_][A-Za-z0-9_]*)=|for\s+([A-Za-z_][A-Za-z0-9_]*)|read(?:\s+-r)?((?:\s+[A-Za-z_][A-Za-z0-9_]*)+))`)
)

// shellOwn are variables the shell sets itself.
var shellOwn = []string{"PWD", "OLDPWD", "IFS", "PPID", "LINENO", "OPTARG", "OPTIND", "PS1", "PS2", "PS4"}

// ReadVars returns the environment variables command tmpl reads that are
// not set in it (NAME=…, for NAME, read NAME) nor by the shell: $NAME and
// ${NAME…} outside single quotes and comments, in order, each once. It is
// a heuristic for doctor, not a parser: a variable set in a way it does not
// know is listed.
func ReadVars(tmpl string) []string {
	parts, err := expr.Parse(tmpl)
	if err != nil {
		return nil
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Ref == nil {
			b.WriteString(p.Lit)
		} else {
			b.WriteByte('x')
		}
	}
	s := b.String()
	set := map[string]bool{}
	for _, m := range assignment.FindAllStringSubmatch(s, -1) {
		for _, g := range m[1:] {
			for _, name := range strings.Fields(g) {
				set[name] = true
			}
		}
	}
	found := expansion.FindAllStringSubmatchIndex(s, -1)
	offsets := make([]int, len(found))
	for i, m := range found {
		offsets[i] = m[0] // the "$"
	}
	var out []string
	for i, ctx := range contexts(s, offsets) {
		name := s[found[i][2]:found[i][3]]
		if ctx == SingleQuoted || ctx == Comment || ctx == Escaped || set[name] || slices.Contains(shellOwn, name) || slices.Contains(out, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}
