package plan_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
)

// randomHistory answers from a fixed seed per task and business time.
type randomHistory uint64

func (h randomHistory) Last(task string, biz time.Time) string {
	x := uint64(h) ^ uint64(biz.Unix())
	for _, c := range task {
		x = x*31 + uint64(c)
	}
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	return []string{"", "", "succeeded", "failed", "running", "stopped", "dry_run"}[x%7]
}

// TestBuildProperties builds random requests on random small DAGs: every
// refusal is a *RequestError, and every plan keeps its invariants (deps in
// range and earlier, Order respecting them, no task cycle twice) and waits
// only for upstream tasks or the task's own earlier cycle.
func TestBuildProperties(t *testing.T) {
	t.Parallel()
	schedules := []struct {
		spec string
		loc  *time.Location
	}{
		{"daily", time.UTC}, {"daily", berlin}, {"daily 01:30", berlin}, {"hourly", berlin}, {"every 6h", time.UTC},
		{"weekly mon,thu", time.UTC}, {"monthly 1,L", berlin}, {"cron 0 3 * * *", time.UTC}, {"every 30m", time.UTC},
	}
	r := rand.New(rand.NewPCG(7, 11))
	plans, refusals := 0, 0
	fields := make(map[string]int)
	for iter := range 600 {
		n := 2 + r.IntN(8)
		withRange := r.IntN(4) == 0
		tasks := make([]dag.Task, n)
		for i := range tasks {
			s := schedules[r.IntN(len(schedules))]
			// Mostly daily: other schedules make plans large. A time
			// range needs some that are not.
			if !withRange && r.IntN(3) > 0 {
				s = schedules[r.IntN(3)]
			}
			var up []string
			for j := range i {
				if r.IntN(3) == 0 {
					up = append(up, fmt.Sprintf("p%d.t%d", j%2, j))
				}
			}
			tasks[i] = tkIn(s.loc, fmt.Sprintf("p%d.t%d", i%2, i), s.spec, up...)
			tasks[i].Output = fmt.Sprintf("o%d", i%3)
			tasks[i].SelfDependent = r.IntN(12) == 0
			tasks[i].Paused = r.IntN(6) == 0
			tasks[i].DryRun = r.IntN(6) == 0
			tasks[i].SingleInstance = r.IntN(5) == 0
		}
		g, err := dag.New(tasks)
		if err != nil {
			t.Fatal(err)
		}
		root := r.IntN(n)
		from := now.AddDate(0, 0, -3-r.IntN(60))
		req := plan.Request{
			Task:           fmt.Sprintf("p%d.t%d", root%2, root),
			Dates:          rng(from.Format("2006-01-02"), from.AddDate(0, 0, r.IntN(6)).Format("2006-01-02")),
			Groups:         1 + r.IntN(4),
			Order:          []string{"", plan.OrderAsc, plan.OrderDesc}[r.IntN(3)],
			Paused:         []string{"", plan.PausedDryRun, plan.PausedRun}[r.IntN(3)],
			DryRunTask:     r.IntN(4) == 0,
			SingleInstance: r.IntN(3) == 0,
			Succeeded:      []string{"", plan.SucceededSkip, plan.SucceededFailedOnly}[r.IntN(3)],
			Running:        []string{"", plan.RunningSkip}[r.IntN(2)],
			Confirm:        true,
		}
		if withRange {
			req.TimeRange = &plan.TimeRange{From: "06:00", To: "18:30"}
			req.HourlyScope = []string{"", plan.HourlyScopeWithin}[r.IntN(2)]
		}
		switch r.IntN(4) {
		case 0:
		case 1:
			req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: r.IntN(3) - 1, Upstream: r.IntN(3) - 1}
		default:
			cov := []string{plan.CoverDescendants, plan.CoverAncestors, plan.CoverAncestorsDescendants, plan.CoverEndPoints,
				plan.CoverStartPoints, plan.CoverProjects, plan.CoverOutputs}[r.IntN(7)]
			req.Scope = plan.Scope{Mode: plan.ScopeMass, Coverage: cov}
			switch cov {
			case plan.CoverEndPoints, plan.CoverStartPoints:
				j := r.IntN(n)
				req.Scope.Values = []string{fmt.Sprintf("p%d.t%d", j%2, j)}
			case plan.CoverProjects:
				req.Scope.Values = []string{"p1"}
			case plan.CoverOutputs:
				req.Scope.Values = []string{"o1", "o2"}
			}
		}
		if r.IntN(3) == 0 {
			j := r.IntN(n)
			req.Scope.ExcludeTasks = []string{fmt.Sprintf("p%d.t%d", j%2, j)}
		}
		req.Scope.KeepPaused = r.IntN(2) == 0
		var hist plan.History
		if r.IntN(2) == 0 {
			hist = randomHistory(iter)
		}

		p, err := plan.Build(plan.Input{Graph: g, Request: req, Now: now, Sequence: 1, History: hist})
		if err != nil {
			var re *plan.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("iteration %d: %v is not a refusal", iter, err)
			}
			refusals++
			fields[re.Field]++
			continue
		}
		plans++
		checkInvariants(t, p)
		for i, in := range p.Instances {
			up := g.Upstream(in.Task)
			for _, d := range in.Deps {
				dep := p.Instances[d]
				self := dep.Task == in.Task && dep.BizTime.Before(in.BizTime)
				if !self && !slices.Contains(up, dep.Task) {
					t.Fatalf("iteration %d: instance %d (%s) waits for %s, not upstream", iter, i, in.Task, dep.Task)
				}
				if self && !func() bool { tk, _ := g.Task(in.Task); return tk.SelfDependent }() {
					t.Fatalf("iteration %d: %s waits for its own earlier cycle without being self-dependent", iter, in.Task)
				}
			}
		}
		if len(p.Tasks) == 0 || len(p.Instances) == 0 {
			t.Fatalf("iteration %d: an empty plan", iter)
		}
	}
	t.Logf("%d plans, %d refusals by field %v", plans, refusals, fields)
	if plans < 200 || refusals == 0 {
		t.Errorf("%d plans and %d refusals: the generator explores too little", plans, refusals)
	}
}
