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
	if !hasForwardDep(insts) {
		return insts, nil
	}
	sorted, ok := b.dispatchOrder(insts)
	if !ok {
		return nil, b.deadlock(insts)
	}
	return reorder(insts, sorted), nil
}

// hasForwardDep reports whether some instance depends on itself or a later
// one.
func hasForwardDep(insts []Instance) bool {
	for i := range insts {
		if d := insts[i].Deps; len(d) > 0 && d[len(d)-1] >= i {
			return true
		}
	}
	return false
}

// dispatchOrder sorts the instances topologically over their dependencies
// and the groups' steps, always picking the earliest ready instance. It
// reports false when some instances can never become ready.
func (b *builder) dispatchOrder(insts []Instance) ([]int32, bool) {
	n := len(insts)
	steps := b.newStepGate(insts)
	depOff, dependents := dependentsOf(insts)
	indeg := make([]int32, n)
	for i := range insts {
		in := &insts[i]
		indeg[i] = int32(len(in.Deps))
		// An empty previous step is finished from the start.
		if p := b.stepOf(in); in.Seq > 0 && steps.left[p-1] > 0 {
			indeg[i]++
		}
	}
	ready := &minHeap{}
	for i := range n {
		if indeg[i] == 0 {
			ready.push(int32(i))
		}
	}
	release := func(waiting []int32) {
		for _, r := range waiting {
			if indeg[r]--; indeg[r] == 0 {
				ready.push(r)
			}
		}
	}
	out := make([]int32, 0, n)
	for ready.len() > 0 {
		i := ready.pop()
		out = append(out, i)
		release(dependents[depOff[i]:depOff[i+1]])
		release(steps.finish(b.stepOf(&insts[i])))
	}
	return out, len(out) == n
}

// stepOf returns the run position of the instance's date (its step).
func (b *builder) stepOf(in *Instance) int { return b.starts[in.Group-1] + in.Seq }

// stepGate counts, per step, the instances still to finish: the next step
// of a lane starts when its previous one is done.
type stepGate struct {
	off     []int32 // the instances of step p are members[off[p]:off[p+1]]
	members []int32
	left    []int32 // per step, instances not finished yet
	last    []bool  // per step, whether it ends its lane
}

func (b *builder) newStepGate(insts []Instance) *stepGate {
	steps := len(b.dates)
	sg := &stepGate{
		off:     make([]int32, steps+1),
		members: make([]int32, len(insts)),
		left:    make([]int32, steps),
		last:    make([]bool, steps),
	}
	for g := range b.nGroups {
		sg.last[b.starts[g+1]-1] = true
	}
	for i := range insts {
		sg.off[b.stepOf(&insts[i])+1]++
	}
	for p := range steps {
		sg.off[p+1] += sg.off[p]
	}
	fill := slices.Clone(sg.off[:steps])
	for i := range insts {
		p := b.stepOf(&insts[i])
		sg.members[fill[p]] = int32(i)
		fill[p]++
		sg.left[p]++
	}
	return sg
}

// finish records that an instance of step p finished and returns the
// instances of the next step when that was the last one of p.
func (sg *stepGate) finish(p int) []int32 {
	if sg.left[p]--; sg.left[p] > 0 || sg.last[p] {
		return nil
	}
	return sg.members[sg.off[p+1]:sg.off[p+2]]
}

// dependentsOf returns, per instance i, the instances that depend on it:
// dependents[off[i]:off[i+1]].
func dependentsOf(insts []Instance) (off, dependents []int32) {
	n := len(insts)
	off = make([]int32, n+1)
	for i := range insts {
		for _, d := range insts[i].Deps {
			off[d+1]++
		}
	}
	for i := range n {
		off[i+1] += off[i]
	}
	dependents = make([]int32, off[n])
	fill := slices.Clone(off[:n])
	for i := range insts {
		for _, d := range insts[i].Deps {
			dependents[fill[d]] = int32(i)
			fill[d]++
		}
	}
	return off, dependents
}

// reorder puts the instances in the sorted order, renumbering Order and
// Deps.
func reorder(insts []Instance, sorted []int32) []Instance {
	pos := make([]int, len(insts))
	for k, i := range sorted {
		pos[i] = k
	}
	out := make([]Instance, len(insts))
	for i := range insts {
		in := insts[i]
		in.Order = pos[i]
		for k, d := range in.Deps {
			in.Deps[k] = pos[d]
		}
		slices.Sort(in.Deps)
		out[pos[i]] = in
	}
	return out
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
