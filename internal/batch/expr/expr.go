// Package expr renders the scheduling expressions of task commands, SQL and
// parameters: ${bizdate}, ${biztime-1h:yyyyMMddHH}, ${param.NAME},
// ${outputs.TASK.NAME} and the rest documented in docs/batch-expressions.md.
//
// Validate checks a template when the configuration is loaded, against the
// task's parameter names and upstream tasks; Render fills it in for one
// instance. A template Validate accepts renders without error when the
// environment has every parameter and output it names.
package expr

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Env is what a template is rendered with.
type Env struct {
	BizTime time.Time // business time, in the task's location
	// BizEnd equals BizTime except for a single instance covering several
	// dates (the last date's business time). Zero means BizTime.
	BizEnd    time.Time
	Scheduled time.Time         // when the cycle is due, in the task's location
	Params    map[string]string // the task's parameters, already rendered
	// Outputs maps an upstream task, under both its ID ("project.name") and
	// its plain name, to its outputs by name.
	Outputs map[string]map[string]string
}

// Error is a problem with one reference of a template.
type Error struct {
	Offset int    // byte offset in the template where the problem is
	Ref    string // the reference, e.g. "${bizdate-1x}"; empty for none
	Msg    string // what is wrong and what to write instead
}

func (e *Error) Error() string {
	if e.Ref == "" {
		return fmt.Sprintf("at byte %d: %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("at byte %d, %s: %s", e.Offset, e.Ref, e.Msg)
}

// Render replaces every reference in tmpl with its value in env.
func Render(tmpl string, env Env) (string, error) {
	if !strings.Contains(tmpl, "${") {
		return tmpl, nil
	}
	var b strings.Builder
	b.Grow(len(tmpl) + 16)
	err := scan(tmpl, func(lit string) { b.WriteString(lit) }, func(r *ref) error {
		return r.render(&b, env)
	})
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// Validate checks tmpl's syntax and that every parameter it references is
// in params and every output reference names a task in upstream (IDs or
// names).
func Validate(tmpl string, params []string, upstream []string) error {
	return scan(tmpl, func(string) {}, func(r *ref) error {
		switch r.kind {
		case refParam:
			if !slices.Contains(params, r.name) {
				return r.errorf(0, "unknown parameter %q: %s", r.name, declared("parameters", params))
			}
		case refOutput:
			if !slices.Contains(upstream, r.task) {
				return r.errorf(0, "%q is not an upstream task: %s", r.task, declared("upstream tasks", upstream))
			}
		}
		return nil
	})
}

// declared lists what may be referenced, for an error message.
func declared(what string, names []string) string {
	if len(names) == 0 {
		return "the task declares no " + what
	}
	if len(names) > 10 {
		return fmt.Sprintf("the task declares %d %s: %s, …", len(names), what, strings.Join(names[:10], ", "))
	}
	return fmt.Sprintf("the task declares %s %s", what, strings.Join(names, ", "))
}
