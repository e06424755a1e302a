package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/shelltmpl"
	"github.com/tidemark/tidemark/internal/config"
)

// checkTaskEnv warns about shell commands that read a variable they will
// not get: a task's environment is PATH, HOME, LANG, TZ, tidemark's own
// TIDEMARK_* variables and what the task lists under env, no longer the
// daemon's whole environment.
func checkTaskEnv(cfg *config.Config) []Check {
	var out []Check
	for i := range cfg.Tasks {
		t := &cfg.Tasks[i]
		if t.Type != dag.TypeShell {
			continue
		}
		var missing []string
		for _, name := range shelltmpl.ReadVars(t.Command) {
			if !slices.Contains(shelltmpl.Inherited, name) && !slices.Contains(t.Env, name) && !strings.HasPrefix(name, "TIDEMARK_") {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			continue
		}
		out = append(out, warn("task "+t.ID,
			fmt.Sprintf("the command reads $%s, which tasks no longer receive from the daemon's environment", strings.Join(missing, ", $")),
			fmt.Sprintf("list what it needs under tasks[%d].env, e.g. env: [%s] (a TIDEMARK_ variable other than the task's own is never passed)", i, strings.Join(missing, ", "))))
	}
	if len(out) == 0 && usesShell(cfg.Tasks) {
		out = append(out, ok("task environment", "every variable the shell commands read is passed to them"))
	}
	return out
}
