package engine

import (
	"container/heap"
	"context"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// node is one open (or recently finished) instance in memory.
type node struct {
	id   int64
	bf   *backfill // nil for the recurring schedule
	task *dag.Task
	// The business time, the last cycle's for a single instance covering
	// several (else the same), and when the schedule would run it, in Unix
	// microseconds (the store's precision; read them with biz, bizEnd and
	// scheduled): a time.Time takes 24 bytes.
	bizUS, bizEndUS, scheduledUS int64
	// int32s, packed with the flags below: a large backfill's nodes are
	// most of the engine's memory (docs/benchmark.md, "Batch benchmark").
	group, seq, order int32
	// pending counts deps that have not succeeded or dry-run.
	pending int32
	// gen tells the node's live queue entry from stale ones: entries carry
	// the gen they were made at, and taking a node off its queues (a stop)
	// moves it on.
	gen    uint32
	queued bool // in a queue, the timer heap or waiting for a busy cycle

	mode string
	rg   string

	state   string
	reason  string
	attempt int
	// more is what the node knows of its attempts beyond their count (nil
	// until there is something: most instances of a large backfill have
	// not run yet); read it with seen, write it with edit.
	more *attemptInfo

	deps []int64
	down []*node
	run  *running
}

// attemptInfo is a node's record of its attempts beyond their count.
type attemptInfo struct {
	retryBase int // attempts before the last re-run; retries count from here
	// lostRuns counts the attempts in a row lost with their node: past
	// maxLostRuns the instance fails (the task may be what kills nodes).
	lostRuns  int
	nextTry   time.Time
	startedAt *time.Time
	// The latest attempt's rendered code, run tag, error and outputs, kept
	// across later transitions (the store rewrites every column).
	rendered, tag, errText string
	outputs                map[string]string
}

// noAttempts is what seen returns for a node without attemptInfo.
var noAttempts attemptInfo

// seen is n's attemptInfo to read: never to be written through.
func (n *node) seen() *attemptInfo {
	if n.more == nil {
		return &noAttempts
	}
	return n.more
}

// edit is n's attemptInfo to write, made if n has none.
func (n *node) edit() *attemptInfo {
	if n.more == nil {
		n.more = &attemptInfo{}
	}
	return n.more
}

// settle forgets, once n has succeeded, what it knew of its attempts
// beyond their outputs (which the templates of what waits for it read).
// Nothing writes a succeeded instance's row again (only failed, stopped
// and blocked instances are re-run, and only unfinished ones are stopped
// or held; record says so), so its rendered code, run tag and start time
// are needed no more, and for a large backfill they were most of what
// dispatch added to the engine's memory (docs/benchmark.md, "Batch
// benchmark").
func (n *node) settle() {
	switch a := n.more; {
	case a == nil:
	case len(a.outputs) == 0:
		n.more = nil
	default:
		*a = attemptInfo{outputs: a.outputs}
	}
}

// rerun has n's retries count afresh from its attempts so far, as a re-run
// by hand asks.
func (n *node) rerun() {
	if n.more == nil && n.attempt == 0 {
		return // nothing to count from
	}
	a := n.edit()
	a.retryBase, a.lostRuns, a.nextTry = n.attempt, 0, time.Time{}
}

// clearNextTry forgets n's retry time, making no attemptInfo for it.
func (n *node) clearNextTry() {
	if n.more != nil {
		n.more.nextTry = time.Time{}
	}
}

// running is what the loop knows of a started attempt.
type running struct {
	cancel     context.CancelFunc
	proc       runner.Proc
	host       string // where proc runs (Options.Host)
	stopReason string // set when someone stopped it
	// remote: a node of the cluster runs it (Options.Dispatch);
	// delivered: its end was taken in from the queue.
	remote, delivered bool
	lostAt, lostSeen  time.Time // when its node was first, and last, seen to have lost it
	lostMarked        bool      // marked lost in the queue; its leftovers are ended next
}

// biz, bizEnd and scheduled are n's times (see node) as UTC times.
func (n *node) biz() time.Time       { return time.UnixMicro(n.bizUS).UTC() }
func (n *node) bizEnd() time.Time    { return time.UnixMicro(n.bizEndUS).UTC() }
func (n *node) scheduled() time.Time { return time.UnixMicro(n.scheduledUS).UTC() }

// endUS is the business time of the last cycle n covers: its own, except
// for a single instance covering several cycles.
func (n *node) endUS() int64 { return max(n.bizUS, n.bizEndUS) }

// end is endUS as a time.
func (n *node) end() time.Time { return time.UnixMicro(n.endUS()).UTC() }

// overlaps reports whether n and m run some cycle of one task in common:
// at most one run of a cycle at a time, whether it runs alone or inside a
// single instance's range.
func (n *node) overlaps(m *node) bool {
	return n.task.ID == m.task.ID && n.bizUS <= m.endUS() && m.bizUS <= n.endUS()
}

func ok(state string) bool {
	return state == store.InstanceSucceeded || state == store.InstanceDryRun
}

// backfill is an open backfill in memory.
type backfill struct {
	rec    store.BatchBackfill
	req    plan.Request
	nodes  []*node
	groups map[int32]*group
	// running and queued count nodes started or on their way to start;
	// when both are zero nothing more can happen without outside help.
	running int
	queued  int
	stopped bool
}

// group is a concurrency group's gate: the dates of a group run one after
// the other.
type group struct {
	current int32         // the seq allowed to run
	last    int32         // the group's last seq
	left    map[int32]int // seq → instances not yet succeeded or dry-run
	parked  map[int32][]*node
}

func (g *group) add(n *node) {
	if n.seq > g.last {
		g.last = n.seq
	}
	if !ok(n.state) {
		g.left[n.seq]++
	}
}

// state is the loop's memory.
type state struct {
	nodes map[int64]*node
	bfs   map[int64]*backfill
	// queues hold ready nodes per resource group; dry holds ready dry-run
	// nodes, which need no slot.
	queues map[string]*nodeHeap
	dry    []entry
	free   map[string]int
	timed  timerHeap
	// holding are, by task ID, the nodes whose attempt holds the task's
	// cycles (from biz to end); busyWait are the nodes waiting, by the
	// holder they wait for, for those cycles to be free.
	holding  map[string][]*node
	busyWait map[*node][]entry
	// ends of attempts that finished inside the loop (no-op tasks)
	localEnds []ending
	// adopted are the backfills ever taken into memory (finishAdopt): one
	// that Submit recorded may have been read by the start-up, or by a
	// command naming it, before Submit hands it over, and must not be
	// adopted twice (nor again once it ended and left memory).
	adopted map[int64]bool
}

func newState(groups map[string]int) *state {
	s := &state{
		nodes:    map[int64]*node{},
		bfs:      map[int64]*backfill{},
		queues:   map[string]*nodeHeap{},
		free:     map[string]int{},
		holding:  map[string][]*node{},
		busyWait: map[*node][]entry{},
		adopted:  map[int64]bool{},
	}
	for name, n := range groups {
		s.free[name] = n
		s.queues[name] = &nodeHeap{}
	}
	return s
}

// entry is a node in a queue as it was when queued.
type entry struct {
	n   *node
	gen uint32
}

// live reports whether the entry is the node's current place in a queue.
func (e entry) live() bool { return e.n.queued && e.gen == e.n.gen }

// nodeHeap orders ready nodes: the recurring schedule before backfills (by
// scheduled time), then backfills oldest first in plan order.
type nodeHeap []entry

func (h nodeHeap) Len() int { return len(h) }
func (h nodeHeap) Less(i, j int) bool {
	a, b := h[i].n, h[j].n
	if (a.bf == nil) != (b.bf == nil) {
		return a.bf == nil
	}
	if a.bf == nil {
		if a.scheduledUS != b.scheduledUS {
			return a.scheduledUS < b.scheduledUS
		}
		return a.id < b.id
	}
	if a.bf != b.bf {
		return a.bf.rec.ID < b.bf.rec.ID
	}
	if a.order != b.order {
		return a.order < b.order
	}
	return a.id < b.id
}
func (h nodeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)   { *h = append(*h, x.(entry)) }
func (h *nodeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = entry{}
	*h = old[:len(old)-1]
	return e
}

// timerHeap holds nodes that wait for a time (retry backoff, scheduled
// time, the backfill's run time).
type timed struct {
	at time.Time
	e  entry
}

type timerHeap []timed

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timed)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// consider queues n if it can run now, parks it behind its group's gate,
// or sets a timer; it does nothing when n still waits for a dependency.
func (e *Engine) consider(n *node) {
	s := e.s
	if n.state != store.InstanceWaiting || n.pending > 0 || n.queued || n.run != nil {
		return
	}
	if bf := n.bf; bf != nil {
		if bf.stopped || bf.rec.State != store.BatchRunning {
			return
		}
		g := bf.groups[n.group]
		if n.seq > g.current {
			g.parked[n.seq] = append(g.parked[n.seq], n)
			return
		}
	}
	wake := n.seen().nextTry
	if (n.bf == nil || n.bf.req.WaitScheduled) && n.scheduled().After(wake) {
		wake = n.scheduled()
	}
	en := n.enqueue()
	if wake.After(e.now()) {
		heap.Push(&s.timed, timed{wake, en})
		return
	}
	if n.mode == plan.ModeDryRun {
		s.dry = append(s.dry, en)
		return
	}
	q := s.queues[n.rg]
	if q == nil { // a resource group removed from the config since
		q = s.queues["default"]
		n.rg = "default"
	}
	heap.Push(q, en)
}

// enqueue marks n queued and returns its live entry.
func (n *node) enqueue() entry {
	n.queued = true
	if n.bf != nil {
		n.bf.queued++
	}
	return entry{n, n.gen}
}

// unqueue undoes the queued mark of a node taken off a queue.
func (n *node) unqueue() {
	if !n.queued {
		return // stopped while queued: already uncounted
	}
	n.queued = false
	n.gen++ // whatever entries remain are stale
	if n.bf != nil {
		n.bf.queued--
	}
}

// wakeTimers re-considers the nodes whose time has come and returns when
// the next one is due (zero when none).
func (e *Engine) wakeTimers() time.Time {
	s := e.s
	now := e.now()
	for s.timed.Len() > 0 {
		t := s.timed[0]
		if t.at.After(now) {
			return t.at
		}
		heap.Pop(&s.timed)
		if !t.e.live() {
			continue
		}
		t.e.n.unqueue()
		e.consider(t.e.n)
	}
	return time.Time{}
}

// released lets go what waited for n, which succeeded or dry-ran.
func (e *Engine) released(n *node) {
	for _, d := range n.down {
		d.pending--
		e.consider(d)
	}
	if bf := n.bf; bf != nil {
		g := bf.groups[n.group]
		g.left[n.seq]--
		for g.left[g.current] <= 0 && g.current < g.last {
			g.current++
			parked := g.parked[g.current]
			delete(g.parked, g.current)
			for _, p := range parked {
				e.consider(p)
			}
		}
	}
}
