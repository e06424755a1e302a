package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/expr"
	"github.com/tidemark/tidemark/internal/batch/runner"
)

// prepare renders n's code for its next attempt. The error, if any, is
// the rendering's; the spec is then not to be run.
func (e *Engine) prepare(ctx context.Context, n *node) (runner.Spec, string, error) {
	t := n.task
	spec := runner.Spec{
		Type:    t.Type,
		Timeout: t.Timeout,
		Tag:     fmt.Sprintf("tidemark-i%d-a%d", n.id, n.attempt+1),
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
	rendered, err := expr.Render(code, env)
	if err != nil {
		return spec, "", fmt.Errorf("render the %s of task %s: %w", t.Type, t.ID, err)
	}
	spec.Script = rendered
	if t.Type == dag.TypeShell {
		spec.Env = append(shellEnv(n, env), runner.TagEnv+"="+spec.Tag)
	}
	return spec, rendered, nil
}

// exprEnv gathers what a task's templates may refer to: the instance's
// times, its parameters (rendered in order) and its upstream outputs.
func (e *Engine) exprEnv(ctx context.Context, n *node) (expr.Env, error) {
	loc := n.task.Schedule.Location
	env := expr.Env{
		BizTime:   n.biz.In(loc),
		BizEnd:    n.bizEnd.In(loc),
		Scheduled: n.scheduled.In(loc),
		Params:    map[string]string{},
		Outputs:   map[string]map[string]string{},
	}
	if env.BizEnd.IsZero() || n.bizEnd.IsZero() {
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
			for k, v := range d.outputs {
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

// shellEnv is what a shell task finds in its environment.
func shellEnv(n *node, env expr.Env) []string {
	out := []string{
		"TIDEMARK_TASK=" + n.task.ID,
		"TIDEMARK_INSTANCE=" + strconv.FormatInt(n.id, 10),
		"TIDEMARK_ATTEMPT=" + strconv.Itoa(n.attempt+1),
		"TIDEMARK_BIZDATE=" + env.BizTime.Format("20060102"),
		"TIDEMARK_BIZTIME=" + env.BizTime.Format("2006-01-02T15:04:05Z07:00"),
	}
	for _, p := range n.task.Params {
		out = append(out, "TIDEMARK_PARAM_"+strings.ToUpper(p.Name)+"="+env.Params[p.Name])
	}
	return out
}
