package engine

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/expr"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/batch/shelltmpl"
	"github.com/tidemark/tidemark/internal/batch/sqltmpl"
)

// prepare renders n's code for its next attempt. The error, if any, is
// the rendering's; the spec is then not to be run.
func (e *Engine) prepare(ctx context.Context, n *node) (runner.Spec, string, error) {
	t := n.task
	spec := runner.Spec{
		Type:    t.Type,
		Timeout: t.Timeout,
		Tag:     runTag(n.id, n.attempt+1),
		Dir:     e.opts.WorkDir,
	}
	switch t.Type {
	case dag.TypeNoop:
		return spec, "", nil
	case dag.TypeShell, dag.TypeSQL:
	default:
		return spec, "", fmt.Errorf("task %s is no longer configured (or has type %q): restore the task, or stop the backfill", t.ID, t.Type)
	}
	env, err := e.exprEnv(ctx, n)
	if err != nil {
		return spec, "", err
	}
	code := t.Command
	if t.Type == dag.TypeSQL {
		code = t.SQL
		conn, found := e.opts.Connections[t.Connection]
		if !found {
			return spec, "", fmt.Errorf("task %s uses connection %q, which is not configured", t.ID, t.Connection)
		}
		spec.Conn = &conn
	}
	if t.Type == dag.TypeShell {
		script, _, err := shelltmpl.Render(code, env, func(r expr.Ref) string { return varName(t, r) })
		if err != nil {
			return spec, "", fmt.Errorf("render the command of task %s: %w", t.ID, err)
		}
		spec.Script = script
		spec.Env = e.shellEnv(n, env, spec.Tag)
		// shellEnv passes every parameter and output, the variables
		// script references among them.
		return spec, display(code, env), nil
	}
	stmts, err := sqltmpl.Render(code, dialect(spec.Conn.Type), env)
	if err != nil {
		return spec, "", fmt.Errorf("render the sql of task %s: %w", t.ID, err)
	}
	var script strings.Builder
	for _, st := range stmts {
		script.WriteString(st.SQL)
		spec.Statements = append(spec.Statements, runner.Statement{SQL: st.SQL, Args: st.Args, Line: st.Line})
	}
	spec.Script = script.String()
	return spec, display(code, env), nil
}

// display is the code as the console and the audit trail show it: the
// template with every value in place, for a person to read. What runs never
// holds a parameter or an output: they travel as environment variables or
// bound parameters.
func display(code string, env expr.Env) string {
	s, err := expr.Render(code, env)
	if err != nil {
		return code
	}
	return s
}

func dialect(connType string) sqltmpl.Dialect {
	if connType == runner.ConnSQLite {
		return sqltmpl.SQLite
	}
	return sqltmpl.Postgres
}

// varName is the environment variable carrying free-text reference r of
// task t's command.
func varName(t *dag.Task, r expr.Ref) string {
	if r.Kind == expr.Param {
		return shelltmpl.ParamVar(r.Name)
	}
	id := r.Task
	for _, up := range t.Upstream {
		if _, name, _ := strings.Cut(up, "."); name == r.Task {
			id = up
		}
	}
	v, _ := shelltmpl.OutputVar(id, r.Name) // a reference's names always map
	return v
}

// exprEnv gathers what a task's templates may refer to: the instance's
// times, its parameters (rendered in order) and its upstream outputs.
func (e *Engine) exprEnv(ctx context.Context, n *node) (expr.Env, error) {
	loc := n.task.Schedule.Location
	env := expr.Env{
		BizTime:   n.biz().In(loc),
		BizEnd:    n.bizEnd().In(loc),
		Scheduled: n.scheduled().In(loc),
		Params:    map[string]string{},
		Outputs:   map[string]map[string]string{},
	}
	if env.BizEnd.IsZero() || n.bizEnd().IsZero() {
		env.BizEnd = env.BizTime
	}
	for _, id := range n.task.Upstream {
		outs, err := e.upstreamOutputs(ctx, n, id)
		if err != nil {
			return env, err
		}
		env.Outputs[id] = outs
		if u, found := e.graph.Task(id); found {
			env.Outputs[u.Name] = outs
		}
	}
	for _, p := range n.task.Params {
		v, err := expr.Render(p.Value, env)
		if err != nil {
			return env, fmt.Errorf("render parameter %s of task %s: %w", p.Name, n.task.ID, err)
		}
		env.Params[p.Name] = v
	}
	return env, nil
}

// upstreamOutputs returns the output parameters of upstream task id as n
// sees them: from the instance n waits for when there is one; otherwise
// from the task's latest successful run within the lookback; otherwise the
// declared defaults.
func (e *Engine) upstreamOutputs(ctx context.Context, n *node, id string) (map[string]string, error) {
	outs := map[string]string{}
	if u, found := e.graph.Task(id); found {
		for _, p := range u.Outputs {
			outs[p.Name] = p.Value
		}
	}
	for _, depID := range n.deps {
		d := e.s.nodes[depID]
		if d == nil {
			in, err := e.st.GetBatchInstance(ctx, depID)
			if err != nil {
				return nil, fmt.Errorf("read upstream instance %d: %w", depID, err)
			}
			if in.Task != id {
				continue
			}
			for k, v := range in.Outputs {
				outs[k] = v
			}
			return outs, nil
		}
		if d.task.ID == id {
			for k, v := range d.seen().outputs {
				outs[k] = v
			}
			return outs, nil
		}
	}
	latest, found, err := e.st.LatestOutputs(ctx, id, e.now().Add(-e.opts.OutputLookback))
	if err != nil {
		return nil, fmt.Errorf("read the latest outputs of %s: %w", id, err)
	}
	if found {
		for k, v := range latest {
			outs[k] = v
		}
	}
	return outs, nil
}

// shellEnv is a shell task's whole environment: PATH, HOME, LANG and TZ
// and the variables the task lists under env, from the daemon's; then
// tidemark's own. Nothing else of the daemon's environment (its API token,
// the variables its configuration expands) reaches the task. A parameter or
// output whose value holds a NUL byte cannot be passed and is left out (a
// command that references it fails to render).
func (e *Engine) shellEnv(n *node, env expr.Env, tag string) []string {
	var out []string
	if !e.opts.Dispatch { // with Dispatch, the node that runs it fills them in
		for _, name := range e.inheritedEnv(n) {
			if v, ok := e.opts.LookupEnv(name); ok {
				out = append(out, name+"="+v)
			}
		}
	}
	out = append(out,
		"TIDEMARK_TASK="+n.task.ID,
		"TIDEMARK_INSTANCE="+strconv.FormatInt(n.id, 10),
		"TIDEMARK_ATTEMPT="+strconv.Itoa(n.attempt+1),
		"TIDEMARK_BIZDATE="+env.BizTime.Format("20060102"),
		"TIDEMARK_BIZTIME="+env.BizTime.Format("2006-01-02T15:04:05Z07:00"),
		runner.TagEnv+"="+tag,
	)
	add := func(name, value string) {
		if !strings.ContainsRune(value, 0) {
			out = append(out, name+"="+value)
		}
	}
	for _, p := range n.task.Params {
		add(shelltmpl.ParamVar(p.Name), env.Params[p.Name])
	}
	for _, id := range n.task.Upstream {
		outs := env.Outputs[id]
		for _, name := range slices.Sorted(maps.Keys(outs)) {
			if v, ok := shelltmpl.OutputVar(id, name); ok {
				add(v, outs[name])
			}
		}
	}
	return out
}

// inheritedEnv names the daemon's variables a shell task of n receives.
func (e *Engine) inheritedEnv(n *node) []string {
	if n.task.Type != dag.TypeShell {
		return nil
	}
	return slices.Concat(shelltmpl.Inherited, n.task.Env)
}

// runTag names one attempt's processes and SQL session, so that a restarted
// daemon ends exactly what that attempt started. Instance ids are per
// metadata store, so the tag also carries random bits: another daemon on
// the same machine (another store, or a test's) has its own instance 1,
// whose processes a tag of ids alone would also match. The tag is recorded
// with the attempt's claim, before anything runs.
func runTag(instance int64, attempt int) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux
	return fmt.Sprintf("tidemark-i%d-a%d-%x", instance, attempt, b)
}
