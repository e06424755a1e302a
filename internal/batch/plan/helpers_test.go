package plan_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
)

// now is the fixed clock of the tests: 2025-06-01 12:00 in Berlin.
var now = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

var berlin = func() *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	return l
}()

// tk is a task "project.name" with a schedule in UTC.
func tk(id, schedule string, upstream ...string) dag.Task {
	return tkIn(time.UTC, id, schedule, upstream...)
}

func tkIn(loc *time.Location, id, schedule string, upstream ...string) dag.Task {
	s, err := calendar.Parse(schedule, loc)
	if err != nil {
		panic(fmt.Sprintf("schedule %q: %v", schedule, err))
	}
	project, name, _ := strings.Cut(id, ".")
	return dag.Task{ID: id, Name: name, Project: project, Type: dag.TypeNoop, Schedule: s, Upstream: upstream}
}

func with(t dag.Task, f func(*dag.Task)) dag.Task {
	f(&t)
	return t
}

func newGraph(t testing.TB, tasks ...dag.Task) *dag.Graph {
	t.Helper()
	g, err := dag.New(tasks)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func date(s string) calendar.Date {
	d, err := calendar.ParseDate(s)
	if err != nil {
		panic(err)
	}
	return d
}

func dates(ss ...string) []calendar.Date {
	var out []calendar.Date
	for _, s := range ss {
		out = append(out, date(s))
	}
	return out
}

func rng(from, to string) plan.Dates {
	return plan.Dates{From: date(from), To: date(to)}
}

// build plans req on g at now and checks the plan's invariants.
func build(t testing.TB, g *dag.Graph, req plan.Request, opts ...func(*plan.Input)) *plan.Plan {
	t.Helper()
	p, err := buildErr(g, req, opts...)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	checkInvariants(t, p)
	return p
}

func buildErr(g *dag.Graph, req plan.Request, opts ...func(*plan.Input)) (*plan.Plan, error) {
	in := plan.Input{Graph: g, Request: req, Now: now, Sequence: 1}
	for _, o := range opts {
		o(&in)
	}
	return plan.Build(in)
}

// refused builds req and returns the refusal, failing when there is none.
func refused(t testing.TB, g *dag.Graph, req plan.Request, opts ...func(*plan.Input)) *plan.RequestError {
	t.Helper()
	p, err := buildErr(g, req, opts...)
	if err == nil {
		t.Fatalf("Build accepted the request: %d instances", len(p.Instances))
	}
	var re *plan.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RequestError", err, err)
	}
	return re
}

func expectRefusal(t testing.TB, re *plan.RequestError, field string, parts ...string) {
	t.Helper()
	if re.Field != field {
		t.Errorf("refusal field = %q, want %q (%v)", re.Field, field, re)
	}
	for _, s := range parts {
		if !strings.Contains(re.Message, s) {
			t.Errorf("refusal %q does not contain %q", re.Message, s)
		}
	}
}

// checkInvariants holds for every plan: instances in Order, every
// dependency earlier and in range, deps ascending without repeats, no
// duplicate task cycle, groups and steps consistent.
func checkInvariants(t testing.TB, p *plan.Plan) {
	t.Helper()
	type key struct {
		task string
		biz  int64
	}
	seen := make(map[key]bool, len(p.Instances))
	step := make(map[calendar.Date][2]int)
	for g, ds := range p.Groups {
		for k, d := range ds {
			step[d] = [2]int{g + 1, k}
		}
	}
	for i, in := range p.Instances {
		if in.Order != i {
			t.Fatalf("instance %d has Order %d", i, in.Order)
		}
		for k, d := range in.Deps {
			if d < 0 || d >= i {
				t.Fatalf("instance %d (%s %s) depends on %d", i, in.Task, in.BizTime, d)
			}
			if k > 0 && in.Deps[k-1] >= d {
				t.Fatalf("instance %d deps %v not ascending", i, in.Deps)
			}
		}
		kk := key{in.Task, in.BizTime.UnixNano()}
		if seen[kk] {
			t.Fatalf("task %s at %s planned twice", in.Task, in.BizTime)
		}
		seen[kk] = true
		if !in.BizEnd.Equal(in.BizTime) { // a single instance: first step of group 1
			if in.Group != 1 || in.Seq != 0 {
				t.Fatalf("single instance %d is in group %d step %d", i, in.Group, in.Seq)
			}
		} else if s, ok := step[in.Date]; !ok || s != [2]int{in.Group, in.Seq} {
			t.Fatalf("instance %d on %s is in group %d step %d; the date is at %v", i, in.Date, in.Group, in.Seq, s)
		}
		if in.Mode != plan.ModeRun && in.Reason == "" {
			t.Fatalf("instance %d is %s without a reason", i, in.Mode)
		}
	}
	// Steps of a group run in sequence: no instance precedes one of an
	// earlier step of its group.
	maxSeq := make(map[int]int)
	for _, in := range p.Instances {
		if in.Seq < maxSeq[in.Group] {
			t.Fatalf("instance %s %s (group %d step %d) comes after step %d", in.Task, in.Date, in.Group, in.Seq, maxSeq[in.Group])
		}
		maxSeq[in.Group] = in.Seq
	}
}

// of returns the instances of task, in plan order.
func of(p *plan.Plan, task string) []plan.Instance {
	var out []plan.Instance
	for _, in := range p.Instances {
		if in.Task == task {
			out = append(out, in)
		}
	}
	return out
}

// on returns task's only instance on d.
func on(t testing.TB, p *plan.Plan, task, d string) plan.Instance {
	t.Helper()
	var out []plan.Instance
	for _, in := range of(p, task) {
		if in.Date == date(d) {
			out = append(out, in)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d instances of %s on %s", len(out), task, d)
	}
	return out[0]
}

// depTasks returns "task@date" for each dependency of in.
func depTasks(p *plan.Plan, in plan.Instance) []string {
	var out []string
	for _, d := range in.Deps {
		out = append(out, p.Instances[d].Task+"@"+p.Instances[d].Date.String())
	}
	slices.Sort(out)
	return out
}

// history is a fixed History: task → biz (UTC RFC 3339) → state.
type history map[string]map[string]string

func (h history) Last(task string, biz time.Time) string {
	return h[task][biz.UTC().Format(time.RFC3339)]
}
