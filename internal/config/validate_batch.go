package config

// Stage 3, continued: recurring tasks and the resource groups and
// connections they use.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/expr"
	"github.com/tidemark/tidemark/internal/batch/shelltmpl"
	"github.com/tidemark/tidemark/internal/batch/sqltmpl"
)

const (
	maxOutputLookbackDays = 3650
	minLogLimitBytes      = 4096
	maxLogLimitBytes      = 1 << 30
	maxConcurrency        = 10000
	maxRetries            = 100
	maxConfirmAbove       = 1_000_000_000
	maxRetryBackoff       = 24 * time.Hour
	maxTaskTimeout        = 30 * 24 * time.Hour
)

var (
	// taskNameRE is the syntax of task, project and resource group names.
	taskNameRE       = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	connectionNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	paramNameRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envNameRE        = paramNameRE
)

func (v *Checker) batch(c *Config) {
	bs := &c.Batch
	if bs.Timezone == nil {
		v.add("batch.timezone", "missing: use an IANA time zone name, e.g. Europe/Paris or UTC")
	}
	v.intRange("batch.output_lookback_days", bs.OutputLookbackDays, 1, maxOutputLookbackDays)
	v.atLeast("batch.confirm_above", int64(bs.ConfirmAbove), 1, maxConfirmAbove)
	v.intRange("batch.log_limit_bytes", bs.LogLimitBytes, minLogLimitBytes, maxLogLimitBytes)
	v.resourceGroups(c.ResourceGroups)
	v.connections(c.Connections)
	v.tasks(c)
}

func (v *Checker) resourceGroups(groups []ResourceGroup) {
	names := map[string]int{}
	for i, g := range groups {
		p := fmt.Sprintf("resource_groups[%d]", i)
		first, dup := names[g.Name]
		switch {
		case g.Name == "":
			v.add(p+".name", "missing: name the group with letters, digits, _ and -, e.g. heavy")
		case !taskNameRE.MatchString(g.Name):
			v.add(p+".name", "%q is not a valid name: use letters, digits, _ and -", shown(g.Name))
		case dup:
			v.add(p+".name", "%q is used twice (also resource_groups[%d]): resource group names must be unique", shown(g.Name), first)
		default:
			names[g.Name] = i
		}
		v.intRange(p+".concurrency", g.Concurrency, 1, maxConcurrency)
	}
}

func (v *Checker) connections(conns []Connection) {
	names := map[string]int{}
	for i, c := range conns {
		p := fmt.Sprintf("connections[%d]", i)
		first, dup := names[c.Name]
		switch {
		case c.Name == "":
			v.add(p+".name", "missing: name the connection with lower-case letters, digits and underscores, e.g. warehouse")
		case !connectionNameRE.MatchString(c.Name):
			v.add(p+".name", "%q is not a valid name: use lower-case letters, digits and underscores, starting with a letter", shown(c.Name))
		case dup:
			v.add(p+".name", "%q is used twice (also connections[%d]): connection names must be unique", shown(c.Name), first)
		default:
			names[c.Name] = i
		}
		v.database(p, "connection", c.Type, c.DSN, c.Path, "warehouse.db")
	}
}

func (v *Checker) tasks(c *Config) {
	first := map[string]int{} // task ID → index of its first task
	for i, t := range c.Tasks {
		if _, dup := first[t.ID]; !dup {
			first[t.ID] = i
		}
	}
	// The graph is built only when the checks it would repeat pass, so
	// that its error is a cycle.
	graphable := true
	for i := range c.Tasks {
		t := &c.Tasks[i]
		p := fmt.Sprintf("tasks[%d]", i)
		if !v.taskName(p, t, first[t.ID], i) {
			graphable = false
		}
		v.taskType(p, t, c)
		if t.Schedule.Kind == "" {
			v.add(p+".schedule", "missing: give a schedule, e.g. daily 01:30, hourly or cron 0 3 * * *")
		}
		if !v.dependsOn(p, t, c.Tasks, first) {
			graphable = false
		}
		v.params(p, t, c)
		v.env(p, t)
		v.reads(p, t, c)
		v.onChange(p+".on_change", t)
		v.intRange(p+".retries", t.Retries, 0, maxRetries)
		v.nonNegative(p+".retry_backoff", t.RetryBackoff, maxRetryBackoff, "0 (retry at once) or more, e.g. 10s")
		v.nonNegative(p+".timeout", t.Timeout, maxTaskTimeout, "0 (no timeout) or more, e.g. 1h")
		if t.ResourceGroup == "" {
			v.add(p+".resource_group", "missing: leave it out to use %s", DefaultResourceGroup)
		} else if _, ok := c.ResourceGroup(t.ResourceGroup); !ok {
			v.add(p+".resource_group", "no resource group %q: declare it under resource_groups%s",
				shown(t.ResourceGroup), orUse(c.ResourceGroups, func(g ResourceGroup) string { return g.Name }))
		}
	}
	if graphable && len(c.Tasks) > 0 {
		if _, err := dag.New(c.Tasks); err != nil {
			v.add("tasks", "%v: remove one of the depends_on entries on the cycle", err)
		}
	}
}

// taskName checks the name, project and ID of task i, first being the
// index of the first task with its ID; it reports whether the ID can be in
// the graph.
func (v *Checker) taskName(p string, t *dag.Task, first, i int) bool {
	nameOK, projectOK := false, false
	switch {
	case t.Name == "":
		v.add(p+".name", "missing: name the task with letters, digits, _ and -, e.g. orders_daily")
	case !taskNameRE.MatchString(t.Name):
		v.add(p+".name", "%q is not a valid name: use letters, digits, _ and -", shown(t.Name))
	default:
		nameOK = true
	}
	switch {
	case t.Project == "":
		v.add(p+".project", "missing: leave it out to use %s", DefaultProject)
	case !taskNameRE.MatchString(t.Project):
		v.add(p+".project", "%q is not a valid project name: use letters, digits, _ and -", shown(t.Project))
	default:
		projectOK = true
	}
	switch {
	case !nameOK || !projectOK:
	case t.ID != t.Project+"."+t.Name:
		v.add(p, "ID %q is not project.name: set it to %q", shown(t.ID), t.Project+"."+t.Name)
		return false
	case first != i:
		v.add(p+".name", "%q is used twice in project %s (also tasks[%d]): task names must be unique within a project",
			t.Name, t.Project, first)
		return false
	}
	return true
}

// taskType checks the type and the keys that belong to each type.
func (v *Checker) taskType(p string, t *dag.Task, c *Config) {
	v.oneOf(p+".type", t.Type, dag.TypeShell, dag.TypeSQL, dag.TypeNoop)
	only := func(key, what string, set bool, owner string) {
		if set {
			v.add(p+"."+key, "only %s tasks have %s: remove it, or set type: %s", owner, what, owner)
		}
	}
	switch t.Type {
	case dag.TypeShell:
		if t.Command == "" {
			v.add(p+".command", "missing: give the command to run, e.g. command: load --day ${bizdate}")
		}
		only("connection", "a connection", t.Connection != "", dag.TypeSQL)
		only("sql", "sql", t.SQL != "", dag.TypeSQL)
	case dag.TypeSQL:
		only("command", "a command", t.Command != "", dag.TypeShell)
		switch _, ok := c.Connection(t.Connection); {
		case t.Connection == "" && len(c.Connections) == 0:
			v.add(p+".connection", "missing: declare the database under connections and name it here")
		case t.Connection == "":
			v.add(p+".connection", "missing: use %s", list(c.Connections, func(c Connection) string { return c.Name }))
		case !ok:
			v.add(p+".connection", "no connection %q: declare it under connections%s",
				shown(t.Connection), orUse(c.Connections, func(c Connection) string { return c.Name }))
		}
		if t.SQL == "" {
			v.add(p+".sql", "missing: give the statements to run, e.g. sql: DELETE FROM daily WHERE day = '${bizdate}'")
		}
	case dag.TypeNoop:
		for _, f := range []struct {
			key string
			set bool
		}{{"command", t.Command != ""}, {"connection", t.Connection != ""}, {"sql", t.SQL != ""}} {
			if f.set {
				v.add(p+"."+f.key, "noop tasks run nothing: remove it, or set type: shell or sql")
			}
		}
	}
}

// dependsOn checks the upstream IDs of task t; it reports whether they can
// be in the graph.
func (v *Checker) dependsOn(p string, t *dag.Task, tasks []dag.Task, ids map[string]int) bool {
	ok := true
	seen := map[string]int{}
	for j, id := range t.Upstream {
		dp := fmt.Sprintf("%s.depends_on[%d]", p, j)
		_, known := ids[id]
		k, dup := seen[id]
		switch {
		case id == "":
			v.add(dp, "empty: name a task of project %s, or write project.name for a task of another project", shown(t.Project))
		case id == t.ID:
			v.add(dp, "a task cannot depend on itself: remove it, or set self_dependent: true to depend on its previous cycle")
		case dup:
			v.add(dp, "listed twice (also depends_on[%d]): keep one", k)
		case !known:
			v.add(dp, "%s", unknownTask(t, id, tasks))
		default:
			seen[id] = j
			continue
		}
		seen[id] = j
		ok = false
	}
	return ok
}

// unknownTask says that task t depends on a task that does not exist, and
// suggests the tasks it could have meant: those with a similar ID, and those
// of the same name in other projects.
func unknownTask(t *dag.Task, id string, tasks []dag.Task) string {
	project, name, _ := strings.Cut(id, ".")
	msg := fmt.Sprintf("no task %q", shown(id))
	if project == t.Project {
		msg = fmt.Sprintf("no task %q in project %s", shown(name), shown(project))
	}
	best, bestD := []string(nil), 3
	for _, o := range tasks {
		if o.ID == t.ID {
			continue
		}
		d := distance(id, o.ID)
		if o.Name == name {
			d = min(d, 1)
		}
		if d > 2 || d*3 > len(o.ID) || d > bestD {
			continue
		}
		ref := o.ID
		if o.Project == t.Project {
			ref = o.Name
		}
		if d < bestD {
			best, bestD = nil, d
		}
		if !slices.Contains(best, ref) {
			best = append(best, ref)
		}
	}
	if len(best) == 0 {
		return msg + ": declare it under tasks, or write project.name for a task of another project"
	}
	slices.Sort(best)
	return msg + ": did you mean " + orList(best) + "?"
}

// params checks the names of params and outputs, and the expressions of
// params, command and sql.
func (v *Checker) params(p string, t *dag.Task, c *Config) {
	for _, l := range []struct {
		key string
		ps  []dag.Param
	}{{"params", t.Params}, {"outputs", t.Outputs}} {
		for i, prm := range l.ps {
			pp := p + "." + l.key + "." + redactLike(prm.Name)
			switch {
			case !paramNameRE.MatchString(prm.Name):
				v.add(pp, "%q is not a valid name: use letters, digits and _, starting with a letter or _", shown(prm.Name))
			case slices.IndexFunc(l.ps, func(q dag.Param) bool { return q.Name == prm.Name }) < i:
				v.add(pp, "listed twice: keep one")
			case l.key == "params":
				// Their environment variables would be one.
				if j := slices.IndexFunc(l.ps, func(q dag.Param) bool { return strings.EqualFold(q.Name, prm.Name) }); j < i {
					v.add(pp, "differs from %q only in case, and shell tasks receive both as %s: rename one", l.ps[j].Name, shelltmpl.ParamVar(prm.Name))
				}
			}
		}
	}
	upstream := upstreamRefs(t.Upstream)
	var names []string
	for _, prm := range t.Params {
		if err := expr.Validate(prm.Value, names, upstream); err != nil {
			v.add(p+".params."+redactLike(prm.Name), "%v", err)
		}
		names = append(names, prm.Name)
	}
	for _, f := range []struct{ key, tmpl string }{{"command", t.Command}, {"sql", t.SQL}} {
		if f.tmpl == "" {
			continue
		}
		if err := expr.Validate(f.tmpl, names, upstream); err != nil {
			v.add(p+"."+f.key, "%v", err)
		} else if err := safeTemplate(t, f.key, f.tmpl, c); err != nil {
			v.add(p+"."+f.key, "task %s: %v", t.ID, err)
		}
	}
}

// safeTemplate checks that the parameters and outputs in a shell command
// stand where they can be passed as data (see shelltmpl).
func safeTemplate(t *dag.Task, key, tmpl string, c *Config) error {
	switch {
	case t.Type == dag.TypeShell && key == "command":
		return shelltmpl.Check(tmpl)
	case t.Type == dag.TypeSQL && key == "sql":
		d := sqltmpl.Postgres
		if conn, ok := c.Connection(t.Connection); ok && conn.Type == TypeSQLite {
			d = sqltmpl.SQLite
		}
		return sqltmpl.Check(tmpl, d)
	}
	return nil
}

// env checks the names of the variables a shell task receives from the
// daemon's environment.
func (v *Checker) env(p string, t *dag.Task) {
	if len(t.Env) > 0 && t.Type != dag.TypeShell {
		v.add(p+".env", "only shell tasks have env: remove it, or set type: shell")
		return
	}
	for i, name := range t.Env {
		ep := fmt.Sprintf("%s.env[%d]", p, i)
		switch {
		case !envNameRE.MatchString(name):
			v.add(ep, "%q is not a variable name: use letters, digits and _, starting with a letter or _", shown(name))
		case strings.HasPrefix(name, "TIDEMARK_"):
			v.add(ep, "%s: TIDEMARK_ variables are tidemark's own (its API token among them) and never passed to a task: remove it", name)
		case slices.Contains(shelltmpl.Inherited, name):
			v.add(ep, "%s is passed to every shell task: remove it", name)
		case slices.Index(t.Env, name) < i:
			v.add(ep, "%s is listed twice: keep one", name)
		}
	}
}

// upstreamRefs returns the ways expressions may name upstream tasks: their
// IDs, and their names when no two of them share one.
func upstreamRefs(ids []string) []string {
	count := map[string]int{}
	var unique []string
	for _, id := range ids {
		if id == "" || slices.Contains(unique, id) {
			continue
		}
		unique = append(unique, id)
		_, name, _ := strings.Cut(id, ".")
		count[name]++
	}
	var refs []string
	for _, id := range unique {
		if _, name, _ := strings.Cut(id, "."); count[name] == 1 {
			refs = append(refs, name)
		}
		refs = append(refs, id)
	}
	return refs
}

// list returns the names of items as "a, b or c".
func list[T any](items []T, name func(T) string) string {
	names := make([]string, 0, len(items))
	for _, it := range items {
		if n := name(it); n != "" {
			names = append(names, shown(n))
		}
	}
	return orList(names)
}

// or is s, or else when s is empty.
func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// orUse returns ", or use a, b or c" naming items, or "" when there are
// none.
func orUse[T any](items []T, name func(T) string) string {
	if l := list(items, name); l != "" {
		return ", or use " + l
	}
	return ""
}

func orList(s []string) string {
	if n := len(s); n > 1 {
		return strings.Join(s[:n-1], ", ") + " or " + s[n-1]
	}
	return strings.Join(s, "")
}

// reads checks what a task reads: a configured stream, one table it
// replicates, named once, and a date column. Whether the table and column
// exist, and the column's type, are checked when the daemon starts
// (docs/lineage.md).
func (v *Checker) reads(p string, t *dag.Task, c *Config) {
	seen := map[string]int{}
	for i, r := range t.Reads {
		rp := fmt.Sprintf("%s.reads[%d]", p, i)
		s, ok := c.Stream(r.Stream)
		switch {
		case r.Stream == "":
			v.add(rp+".stream", "missing: name the stream that replicates the table (%s)", or(list(c.Streams, func(s Stream) string { return s.Name }), "declare one under streams"))
		case !ok:
			v.add(rp+".stream", "no stream %q: declare it under streams%s", shown(r.Stream), orUse(c.Streams, func(s Stream) string { return s.Name }))
		}
		pat, err := ParsePattern(r.Object)
		_, literal := pat.Table()
		switch {
		case r.Object == "":
			v.add(rp+".object", "missing: name the table the task reads, e.g. object: public.orders")
		case err != nil:
			v.add(rp+".object", "%v", err)
		case !literal:
			v.add(rp+".object", "%q names several tables: name one table, without * or ?", shown(r.Object))
		case ok && !s.Includes(r.Table):
			v.add(rp+".object", "stream %s does not replicate %s: add it to the stream's include (or remove it from exclude)", s.Name, FormatTable(r.Table))
		}
		if r.DateColumn == "" {
			v.add(rp+".date_column", "missing: name the column that places a row on a business date (a date, timestamp or timestamptz column)")
		}
		if r.LateAfter != 0 && (r.LateAfter < time.Minute || r.LateAfter > maxLateAfter) {
			v.add(rp+".late_after", "%s is out of range: use 1m to 3650d, or leave it out for no late data", r.LateAfter)
		}
		key := r.Stream + "\x00" + FormatTable(r.Table)
		if k, dup := seen[key]; dup && literal && r.Stream != "" {
			v.add(rp, "reads %s of stream %s again (also reads[%d]): keep one", FormatTable(r.Table), r.Stream, k)
		} else {
			seen[key] = i
		}
	}
}

// Bounds of a task's on_change policy, and of a read's late_after.
const (
	maxLateAfter         = 3650 * 24 * time.Hour
	maxOnChangeSettle    = 24 * time.Hour
	maxOnChangeMaxPerDay = 100
)

// onChange checks a task's on_change policy.
func (v *Checker) onChange(p string, t *dag.Task) {
	oc := t.OnChange
	if oc == nil {
		return
	}
	v.oneOf(p+".action", oc.Action, dag.OnChangeOff, dag.OnChangePropose, dag.OnChangeRun)
	v.nonNegative(p+".settle", oc.Settle, maxOnChangeSettle, "0 (act at once) or more, e.g. 10m")
	v.intRange(p+".max_per_day", oc.MaxPerDay, 1, maxOnChangeMaxPerDay)
	if oc.Action != dag.OnChangeOff && len(t.Reads) == 0 {
		v.add(p+".action", "%s needs reads: name the streamed objects the task reads under reads, or set action: off", oc.Action)
	}
}
