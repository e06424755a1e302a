package plan

import (
	"slices"
	"time"
)

// candidates gives every planned task its candidate instances, dropping
// planned tasks without any.
func (b *builder) candidates() {
	single := false
	plans := b.plans[:0]
	for _, tp := range b.plans {
		sc := tp.sc
		if len(sc.biz) == 0 {
			b.byPos[tp.pos] = -1
			continue
		}
		if b.req.SingleInstance && tp.t.SingleInstance && len(sc.biz) > 1 {
			single = true
			last := len(sc.biz) - 1
			tp.single = true
			tp.biz = sc.biz[:1]
			tp.date = sc.date[:1]
			tp.end = []time.Time{sc.end[last]}
			tp.due = []time.Time{sc.due[last]}
			tp.lastBiz, tp.lastDate = sc.biz[last], sc.date[last]
		} else {
			tp.biz, tp.end, tp.due, tp.date, tp.off = sc.biz, sc.end, sc.due, sc.date, sc.off
		}
		tp.idx = make([]int32, len(tp.biz))
		b.byPos[tp.pos] = len(plans)
		plans = append(plans, tp)
	}
	b.plans = plans
	if b.req.SingleInstance && !single && !slices.ContainsFunc(plans, func(tp *taskPlan) bool { return tp.t.SingleInstance }) {
		b.warnings = append(b.warnings, "single_instance: no selected task can run as a single instance; each date runs on its own")
	}
}

// checkSelfDependent refuses concurrency groups and descending order when a
// task depends on its own previous cycle: its dates must run one after
// another, oldest first.
func (b *builder) checkSelfDependent() error {
	for _, tp := range b.plans {
		if !tp.t.SelfDependent || tp.single {
			continue
		}
		if b.nGroups > 1 {
			return refuse("groups", "task %s depends on its own previous cycle (self-dependent), so its dates run one after another: concurrent groups are not supported; use 1 group", tp.t.ID)
		}
		if b.req.Order == OrderDesc {
			return refuse("order", "task %s depends on its own previous cycle (self-dependent): descending order is not supported; use %q", tp.t.ID, OrderAsc)
		}
	}
	return nil
}

// emit creates the kept instances in dispatch order: by step (Seq), then
// date in run order, then task in topological order, then business time in
// run order; idx then holds each candidate's instance index.
func (b *builder) emit() []Instance {
	insts := make([]Instance, 0, b.keptCandidates())
	add := func(tp *taskPlan, k int, group, seq int) {
		tp.idx[k] = int32(len(insts))
		insts = append(insts, b.instance(tp, k, group, seq, len(insts)))
	}
	desc := b.req.Order == OrderDesc
	longest := b.starts[1] - b.starts[0]
	for seq := range longest {
		for g := range b.nGroups {
			p := b.starts[g] + seq
			if p >= b.starts[g+1] {
				continue
			}
			di := p
			if desc {
				di = len(b.dates) - 1 - p
			}
			for _, tp := range b.plans {
				if tp.single {
					// A single instance belongs to the first step of
					// group 1.
					if p == 0 && tp.idx[0] >= 0 {
						add(tp, 0, 1, 0)
					}
					continue
				}
				lo, hi := int(tp.off[di]), int(tp.off[di+1])
				for j := lo; j < hi; j++ {
					k := j
					if desc {
						k = hi - 1 - (j - lo)
					}
					if tp.idx[k] >= 0 {
						add(tp, k, g+1, seq)
					}
				}
			}
		}
	}
	return insts
}

// keptCandidates counts the candidates the history policies keep.
func (b *builder) keptCandidates() int {
	n := 0
	for _, tp := range b.plans {
		for _, x := range tp.idx {
			if x >= 0 {
				n++
			}
		}
	}
	return n
}

// instance is tp's candidate k as the instance at position order.
func (b *builder) instance(tp *taskPlan, k, group, seq, order int) Instance {
	in := Instance{
		Task:          tp.t.ID,
		BizTime:       tp.biz[k],
		BizEnd:        tp.biz[k],
		Date:          b.dates[tp.date[k]],
		Scheduled:     tp.due[k],
		Group:         group,
		Seq:           seq,
		Order:         order,
		Mode:          tp.mode,
		Reason:        tp.reason,
		ResourceGroup: tp.rg,
	}
	if tp.single {
		in.BizEnd = tp.lastBiz
	}
	return in
}

// dependencies fills Deps. A task's instance waits for the instances of
// each planned upstream task that cover the same data:
//
//   - when either task is day-based, the upstream's cycles on the same
//     business date (each task reads dates in its own time zone, so a daily
//     task in Berlin and one in Tokyo match by date);
//   - otherwise the upstream's cycles that start within the instance's
//     period [biz, End(biz));
//
// and, when there are none, the upstream's latest candidate before (the
// upstream is coarser). A candidate left out by the history policies counts
// as done. A self-dependent task waits for its previous kept instance.
func (b *builder) dependencies(insts []Instance) {
	starts := make([]int32, len(insts)+1)
	ends := make([]int32, len(insts))
	flat := make([]int, 0, 2*len(insts))
	for _, tp := range b.plans {
		ups := b.plannedUpstream(tp)
		prev := int32(-1)
		for k, self := range tp.idx {
			if self < 0 {
				continue
			}
			start := len(flat)
			for _, up := range ups {
				lo, hi := sameData(up, tp, k)
				if lo == hi { // none: the upstream's latest candidate before
					if lo > 0 && up.idx[lo-1] >= 0 {
						flat = append(flat, int(up.idx[lo-1]))
					}
					continue
				}
				for _, x := range up.idx[lo:hi] {
					if x >= 0 {
						flat = append(flat, int(x))
					}
				}
			}
			if tp.t.SelfDependent && prev >= 0 {
				flat = append(flat, int(prev))
			}
			prev = self
			slices.Sort(flat[start:])
			starts[self] = int32(start)
			ends[self] = int32(len(flat))
		}
	}
	for i := range insts {
		if s, e := starts[i], ends[i]; e > s {
			insts[i].Deps = flat[s:e:e]
		}
	}
}

// plannedUpstream returns the planned tasks directly upstream of tp.
func (b *builder) plannedUpstream(tp *taskPlan) []*taskPlan {
	var ups []*taskPlan
	for _, u := range b.g.UpstreamAt(tp.pos) {
		if x := b.byPos[u]; x >= 0 {
			ups = append(ups, b.plans[x])
		}
	}
	return ups
}

// sameData returns the range [lo, hi) of up's candidates that cover the
// same data as tp's candidate k, as dependencies describes; lo == hi when
// there are none.
func sameData(up, tp *taskPlan, k int) (lo, hi int) {
	dlo, dhi := tp.date[k], tp.date[k]
	if tp.single {
		dhi = tp.lastDate
	}
	switch {
	case (up.sc.dayBased || tp.sc.dayBased) && up.off != nil:
		return int(up.off[dlo]), int(up.off[dhi+1])
	case up.sc.dayBased || tp.sc.dayBased:
		lo, _ = slices.BinarySearch(up.date, dlo)
		hi, _ = slices.BinarySearch(up.date, dhi+1)
		return lo, hi
	default:
		lo, _ = slices.BinarySearchFunc(up.biz, tp.biz[k], time.Time.Compare)
		hi, _ = slices.BinarySearchFunc(up.biz, tp.end[k], time.Time.Compare)
		return lo, max(lo, hi)
	}
}
