package plan_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
)

// layeredGraph is a random layered DAG of n daily tasks (fixed seed): the
// root, then layers of 100 tasks, each with one upstream in the layer above
// and, mostly, one more anywhere above. Every task is a descendant of the
// root.
func layeredGraph(tb testing.TB, n int) *dag.Graph {
	r := rand.New(rand.NewPCG(2025, 365))
	base := tk("p00.t0000", "daily")
	tasks := make([]dag.Task, n)
	id := func(i int) string { return fmt.Sprintf("p%02d.t%04d", layerOf(i), i) }
	for i := range tasks {
		t := base
		t.ID, t.Name, t.Project = id(i), fmt.Sprintf("t%04d", i), fmt.Sprintf("p%02d", layerOf(i))
		if i > 0 {
			l := layerOf(i)
			lo, hi := layerStart(l-1), layerStart(l) // the layer above
			first := lo + r.IntN(hi-lo)
			t.Upstream = []string{id(first)}
			if second := r.IntN(hi); second != first && r.IntN(10) > 0 {
				t.Upstream = append(t.Upstream, id(second))
			}
		}
		tasks[i] = t
	}
	return newGraph(tb, tasks...)
}

func layerOf(i int) int {
	if i == 0 {
		return 0
	}
	return 1 + (i-1)/100
}

func layerStart(l int) int {
	if l == 0 {
		return 0
	}
	return 1 + (l-1)*100
}

func bigRequest() plan.Request {
	return plan.Request{
		Task:    "p00.t0000",
		Scope:   plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverDescendants},
		Dates:   rng("2024-01-01", "2024-12-30"), // 365 days
		Confirm: true,
	}
}

func TestBuild365x2000(t *testing.T) {
	t.Parallel()
	g := layeredGraph(t, 2000)
	p, err := buildErr(g, bigRequest())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Instances) != 365*2000 || len(p.Tasks) != 2000 || len(p.Dates) != 365 {
		t.Fatalf("%d instances of %d tasks on %d dates", len(p.Instances), len(p.Tasks), len(p.Dates))
	}
	deps := 0
	for i, in := range p.Instances {
		deps += len(in.Deps)
		for _, d := range in.Deps {
			if d >= i || p.Instances[d].Date != in.Date {
				t.Fatalf("instance %d waits for %d", i, d)
			}
		}
	}
	if avg := float64(deps) / float64(len(p.Instances)); avg < 1.5 || avg > 2.5 {
		t.Errorf("%.2f dependencies per instance", avg)
	}
}

func BenchmarkBuild365x2000(b *testing.B) {
	g := layeredGraph(b, 2000)
	req := bigRequest()
	b.ReportAllocs()
	for b.Loop() {
		p, err := buildErr(g, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Instances) != 730_000 {
			b.Fatalf("%d instances", len(p.Instances))
		}
	}
}
