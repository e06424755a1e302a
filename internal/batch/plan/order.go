package plan

import (
	"fmt"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
)

// order makes Plan.Instances a dispatch order that respects every
// dependency and the groups' steps (a step of a group starts when every
// instance of its previous step has finished).
//
// The instances come from emit in the preferred order. When every instance
// depends only on earlier ones, that order stands: then no dependency and
// no step points forward, so nothing can wait in a circle. Otherwise a
// topological sort that always picks the earliest ready instance in the
// preferred order finds the dispatch order, or the request is refused when
// the dependencies and the steps wait for each other (an upstream cycle on
// a date that runs in a later step of the same group).
func (b *builder) order(insts []Instance) ([]Instance, error) {
	forward := false
	for i := range insts {
		if d := insts[i].Deps; len(d) > 0 && d[len(d)-1] >= i {
			forward = true
			break
		}
	}
	if !forward {
		return insts, nil
	}

	n := len(insts)
	steps := len(b.dates)
	step := func(in *Instance) int { return b.starts[in.Group-1] + in.Seq }
	lastOfLane := make([]bool, steps)
	for g := range b.nGroups {
		lastOfLane[b.starts[g+1]-1] = true
	}

	// Instances per step (CSR), and dependents per instance (CSR).
	stepOff := make([]int32, steps+1)
	for i := range insts {
		stepOff[step(&insts[i])+1]++
	}
	for p := range steps {
		stepOff[p+1] += stepOff[p]
	}
	stepLeft := make([]int32, steps)
	members := make([]int32, n)
	fill := slices.Clone(stepOff[:steps])
	for i := range insts {
		p := step(&insts[i])
		members[fill[p]] = int32(i)
		fill[p]++
		stepLeft[p]++
	}
	depOff := make([]int32, n+1)
	for i := range insts {
		for _, d := range insts[i].Deps {
			depOff[d+1]++
		}
	}
	for i := range n {
		depOff[i+1] += depOff[i]
	}
	dependents := make([]int32, depOff[n])
	dfill := slices.Clone(depOff[:n])
	indeg := make([]int32, n)
	for i := range insts {
		in := &insts[i]
		indeg[i] = int32(len(in.Deps))
		for _, d := range in.Deps {
			dependents[dfill[d]] = int32(i)
			dfill[d]++
		}
		// An empty previous step is finished from the start.
		if p := step(in); in.Seq > 0 && stepLeft[p-1] > 0 {
			indeg[i]++
		}
	}

	ready := &minHeap{}
	for i := range n {
		if indeg[i] == 0 {
			ready.push(int32(i))
		}
	}
	out := make([]int32, 0, n)
	for ready.len() > 0 {
		i := ready.pop()
		out = append(out, i)
		for _, r := range dependents[depOff[i]:depOff[i+1]] {
			if indeg[r]--; indeg[r] == 0 {
				ready.push(r)
			}
		}
		p := step(&insts[i])
		if stepLeft[p]--; stepLeft[p] == 0 && !lastOfLane[p] {
			for _, m := range members[stepOff[p+1]:stepOff[p+2]] {
				if indeg[m]--; indeg[m] == 0 {
					ready.push(m)
				}
			}
		}
	}
	if len(out) < n {
		return nil, b.deadlock(insts)
	}

	pos := make([]int, n)
	for k, i := range out {
		pos[i] = k
	}
	sorted := make([]Instance, n)
	for i := range insts {
		in := insts[i]
		in.Order = pos[i]
		for k, d := range in.Deps {
			in.Deps[k] = pos[d]
		}
		slices.Sort(in.Deps)
		sorted[pos[i]] = in
	}
	return sorted, nil
}

// deadlock explains why the dependencies and the groups' steps wait for
// each other, naming a dependency on a later step (of the same group when
// there is one).
func (b *builder) deadlock(insts []Instance) error {
	var wi, wd *Instance
search:
	for i := range insts {
		for _, d := range insts[i].Deps {
			x, y := &insts[i], &insts[d]
			sameGroup := y.Group == x.Group && y.Seq > x.Seq
			if sameGroup || (wi == nil && d > i) {
				wi, wd = x, y
			}
			if sameGroup {
				break search
			}
		}
	}
	if wi == nil { // order only calls deadlock after finding a forward dependency
		return refuse("order", "the dependencies and the groups' steps wait for each other; use ascending order and 1 group")
	}
	ti, td := b.planOf(wi.Task), b.planOf(wd.Task)
	what := fmt.Sprintf("task %s's %s waits for task %s's %s, which runs in a later step (step %d of group %d, against step %d of group %d)",
		wi.Task, ti.cycleText(wi), wd.Task, td.cycleText(wd), wd.Seq+1, wd.Group, wi.Seq+1, wi.Group)
	switch {
	case ti.single || td.single:
		return refuse("single_instance", "%s; a single instance runs in the first step of group 1, so its upstream must be done by then: backfill the single-instance task alone or turn single_instance off", what)
	case b.req.Order == OrderDesc:
		return refuse("order", "%s; dependencies on earlier cycles need %q order", what, OrderAsc)
	case b.nGroups > 1:
		return refuse("groups", "%s; dependencies across dates need 1 group", what)
	default:
		return refuse("dates", "%s; the tasks' time zones put the upstream cycle on a later date: backfill these tasks separately", what)
	}
}

func (b *builder) planOf(id string) *taskPlan {
	p, _ := b.g.Index(id)
	return b.plans[b.byPos[p]]
}

func (tp *taskPlan) cycleText(in *Instance) string {
	f := func(t time.Time) string {
		if tp.sc.dayBased {
			return calendar.DateOf(t.In(tp.sc.loc)).String()
		}
		return t.In(tp.sc.loc).Format("2006-01-02 15:04 MST")
	}
	if tp.single {
		return "single instance " + f(in.BizTime) + " to " + f(in.BizEnd)
	}
	return "cycle " + f(in.BizTime)
}

// assemble fills the plan around the ordered instances.
func (b *builder) assemble(insts []Instance) *Plan {
	root := b.g.At(b.root)
	p := &Plan{
		Name:      b.req.Name,
		Task:      root.ID,
		RunAt:     b.runAt,
		Instances: insts,
		Skipped:   b.skipped,
		Warnings:  b.warnings,
	}
	if p.Name == "" {
		p.Name = fmt.Sprintf("%s_%s_%d", root.Name, b.in.Now.UTC().Format("20060102"), max(b.in.Sequence, 1))
	}
	n := len(b.dates)
	p.Dates = make([]calendar.Date, n)
	for k := range n {
		p.Dates[k] = b.dates[k]
		if b.req.Order == OrderDesc {
			p.Dates[k] = b.dates[n-1-k]
		}
	}
	for g := range b.nGroups {
		p.Groups = append(p.Groups, p.Dates[b.starts[g]:b.starts[g+1]:b.starts[g+1]])
	}
	for _, tp := range b.plans {
		if slices.ContainsFunc(tp.idx, func(x int32) bool { return x >= 0 }) {
			p.Tasks = append(p.Tasks, tp.t.ID)
		}
	}
	return p
}

type minHeap struct{ a []int32 }

func (h *minHeap) len() int { return len(h.a) }

func (h *minHeap) push(x int32) {
	h.a = append(h.a, x)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h.a[p] <= h.a[i] {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *minHeap) pop() int32 {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.a[l] < h.a[m] {
			m = l
		}
		if r < last && h.a[r] < h.a[m] {
			m = r
		}
		if m == i {
			return top
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
}
