package doctor

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/config"
)

// A shell command that reads a variable tasks no longer receive is warned
// about, naming the task and the env entry to add; listed, inherited and
// tidemark's own variables are not.
func TestTaskEnvWarnsAboutVariablesNoLongerPassed(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
tasks:
  - {name: load, type: shell, schedule: daily, command: "load --token $LOADER_TOKEN --home $HOME --day $TIDEMARK_BIZDATE $${AWS_PROFILE:-x}"}
  - {name: listed, type: shell, schedule: daily, command: "load --token $LOADER_TOKEN; x=1; echo $x '$QUOTED'", env: [LOADER_TOKEN]}
  - {name: sql, type: sql, connection: w, schedule: daily, sql: "SELECT '$NOT_SHELL'"}
connections: [{name: w, type: sqlite, path: w.db}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := checkTaskEnv(cfg)
	if len(checks) != 1 {
		t.Fatalf("checks = %+v, want one warning", checks)
	}
	c := checks[0]
	if c.Status != Warn || c.Name != "task default.load" ||
		!strings.Contains(c.Detail, "$LOADER_TOKEN, $AWS_PROFILE") ||
		!strings.Contains(c.Fix, "tasks[0].env, e.g. env: [LOADER_TOKEN, AWS_PROFILE]") {
		t.Errorf("check = %+v", c)
	}

	cfg.Tasks = cfg.Tasks[1:]
	if checks := checkTaskEnv(cfg); len(checks) != 1 || checks[0].Status != OK {
		t.Errorf("with every variable listed: %+v", checks)
	}
}
