package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// sharedNames are the states, modes and resource group a node most often
// has: a node holds the one copy of each rather than the string its row was
// read into, hundreds of thousands of times over in a large backfill.
var sharedNames = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{store.InstanceWaiting, store.InstanceRunning, store.InstanceSucceeded,
		store.InstanceFailed, store.InstanceStopped, store.InstanceDryRun, store.InstanceBlocked,
		store.InstanceModeRun, store.InstanceModeDryRun, store.InstanceModeBlocked, "default"} {
		m[s] = s
	}
	return m
}()

// shared is s, as its one shared copy when it has one.
func shared(s string) string {
	if c, ok := sharedNames[s]; ok {
		return c
	}
	return s
}

// newNode builds the memory of one stored instance (without its links).
func (e *Engine) newNode(in store.BatchInstance, bf *backfill) *node {
	n := new(node)
	e.fillNode(n, &in, bf)
	return n
}

// fillNode makes *n the memory of in (without its links).
func (e *Engine) fillNode(n *node, in *store.BatchInstance, bf *backfill) {
	t, found := e.graph.Task(in.Task)
	if !found {
		// The task left the configuration: keep the instance visible; it
		// fails when its turn comes.
		t = &dag.Task{ID: in.Task, Name: in.Task, Type: "missing"}
	}
	*n = node{
		id: in.ID, bf: bf, task: t,
		bizUS: in.BizTime.UnixMicro(), bizEndUS: in.BizEnd.UnixMicro(), scheduledUS: in.Scheduled.UnixMicro(),
		group: int32(in.Group), seq: int32(in.Seq), order: int32(in.Order),
		mode: shared(in.Mode), rg: shared(in.ResourceGroup),
		state: shared(in.State), reason: in.Reason, attempt: in.Attempt,
		deps: in.Deps,
	}
	// retryBase stays 0: after a restart the retries already used count,
	// even those before a re-run.
	if in.HasRun() {
		a := n.edit()
		a.startedAt, a.outputs = in.StartedAt, in.Outputs
		a.rendered, a.tag, a.errText = in.Rendered, in.SQLTag, in.Error
		if in.NextTry != nil {
			a.nextTry = *in.NextTry
		}
	}
	if in.State == store.InstanceSucceeded {
		n.settle()
	}
	if n.rg == "" {
		n.rg = "default"
	}
	if in.State == store.InstanceRunning {
		n.run = &running{host: in.Host}
		n.run.proc.PID, n.run.proc.PGID, n.run.proc.StartTicks = in.PID, in.PGID, in.ProcStart
	}
}

// plannedInstance is the store's row of a planned instance, as recorded.
func plannedInstance(pi *plan.Instance) store.BatchInstance {
	st := store.InstanceWaiting
	if pi.Mode == plan.ModeBlocked {
		st = store.InstanceBlocked
	}
	mode := pi.Mode
	if mode == "" {
		mode = store.InstanceModeRun
	}
	return store.BatchInstance{Task: pi.Task, BizTime: pi.BizTime.UTC(), BizEnd: pi.BizEnd.UTC(),
		Scheduled: pi.Scheduled.UTC(), Group: pi.Group, Seq: pi.Seq, Order: pi.Order, Mode: mode,
		ResourceGroup: pi.ResourceGroup, State: st, Reason: pi.Reason}
}

// newBackfill is the memory of a backfill without its instances.
func (e *Engine) newBackfill(rec store.BatchBackfill) (*backfill, error) {
	bf := &backfill{rec: rec, groups: map[int32]*group{}, nodes: make([]*node, 0, rec.Instances)}
	if err := json.Unmarshal(rec.Request, &bf.req); err != nil {
		return nil, fmt.Errorf("decode the request of backfill %d: %w", rec.ID, err)
	}
	return bf, nil
}

// addNodes adds to bf nodes of insts, some of its instances: unlinked,
// and not yet known to the engine (finishAdopt), so that a backfill whose
// reading fails half way leaves nothing behind. A large page's nodes are
// built in two halves at once: building them is most of a restart's time
// once the instances are unpacked.
func (e *Engine) addNodes(bf *backfill, insts []store.BatchInstance) {
	start := len(bf.nodes)
	bf.nodes = slices.Grow(bf.nodes, len(insts))[:start+len(insts)]
	slab := make([]node, len(insts)) // one allocation, not one a node
	fill := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			e.fillNode(&slab[i], &insts[i], bf)
			bf.nodes[start+i] = &slab[i]
		}
	}
	if len(insts) < 1024 {
		fill(0, len(insts))
		return
	}
	var half sync.WaitGroup
	mid := len(insts) / 2
	half.Go(func() { fill(0, mid) })
	fill(mid, len(insts))
	half.Wait()
}

// finishAdopt makes bf's nodes, once all are added, the engine's: known,
// linked and grouped.
func (e *Engine) finishAdopt(bf *backfill) {
	for _, n := range bf.nodes {
		e.s.nodes[n.id] = n
	}
	for _, n := range bf.nodes {
		e.link(n, nil)
		g := bf.groups[n.group]
		if g == nil {
			g = &group{left: map[int32]int{}, parked: map[int32][]*node{}}
			bf.groups[n.group] = g
		}
		g.add(n)
	}
	for _, g := range bf.groups {
		for g.left[g.current] <= 0 && g.current < g.last {
			g.current++
		}
	}
	e.s.bfs[bf.rec.ID] = bf
	e.s.adopted[bf.rec.ID] = true
}

// link connects n to its deps. A dep in memory that has not succeeded
// holds n back. A dep not in memory has ended: stateOf says how (nil: it
// succeeded — a backfill's instances are all in memory together, and the
// recurring schedule forgets the instances that succeeded).
func (e *Engine) link(n *node, stateOf func(id int64) string) {
	for _, id := range n.deps {
		d := e.s.nodes[id]
		if d == nil {
			if stateOf != nil && !ok(stateOf(id)) {
				n.pending++ // an upstream that failed or was stopped: never released
			}
			continue
		}
		d.down = append(d.down, n)
		if !ok(d.state) {
			n.pending++
		}
	}
}

// loadOpen brings into memory every backfill that is waiting or running
// and every open instance of the recurring schedule.
func (e *Engine) loadOpen(ctx context.Context) error {
	var backfills []store.BatchBackfill
	for _, st := range []string{store.BatchWaiting, store.BatchRunning} {
		bfs, err := e.st.ListBatchBackfills(ctx, store.BatchBackfillFilter{State: st, Limit: 100000})
		if err != nil {
			return err
		}
		backfills = append(backfills, bfs...)
	}
	total := 0
	for _, rec := range backfills {
		total += rec.Instances
	}
	if len(e.s.nodes) == 0 {
		// Room for them all at once: growing a map of a million entries
		// step by step rehashes it over and over.
		e.s.nodes = make(map[int64]*node, total)
	}
	for _, rec := range backfills {
		if _, err := e.loadBackfill(ctx, rec); err != nil {
			return err
		}
	}
	// The backfills were read whole above: only the schedule's are left.
	open, done, err := e.st.LoadOpenScheduled(ctx)
	if err != nil {
		return err
	}
	var sched []*node
	for _, in := range open {
		n := e.newNode(in, nil)
		e.s.nodes[n.id] = n
		sched = append(sched, n)
	}
	for _, n := range sched {
		e.link(n, func(id int64) string { return done[id] })
	}
	return nil
}

// loadBackfill reads a backfill's nodes and adopts them, in the loop.
func (e *Engine) loadBackfill(ctx context.Context, rec store.BatchBackfill) (*backfill, error) {
	bf, err := e.readBackfill(ctx, rec)
	if err != nil {
		return nil, err
	}
	e.finishAdopt(bf)
	return bf, nil
}

// readBackfill reads a backfill's instances page by page into nodes, not
// yet the engine's (finishAdopt makes them so); it touches no state of
// the loop's, so Submit runs it outside the loop. A backfill recorded
// without its packed instances (before they were kept) has its rows read:
// the next page while the last one becomes nodes (readPages), so the
// store's work and the engine's overlap, and the instances of a large
// backfill are never all held twice. A backfill of two pages or more is
// read in two halves of its ids at once: reading is most of a restart's
// time, and on PostgreSQL each half's reads run on a core of their own
// (SQLite's one connection takes them in turn).
func (e *Engine) readBackfill(ctx context.Context, rec store.BatchBackfill) (*backfill, error) {
	bf, err := e.newBackfill(rec)
	if err != nil {
		return nil, err
	}
	// Its instances as recorded, unpacked, and the rows updated since: no
	// need to read every row (store.ReadBatchBackfillInstances).
	packed, err := e.st.ReadBatchBackfillInstances(ctx, rec.ID, loadPageSize, func(page []store.BatchInstance) error {
		e.addNodes(bf, page)
		return nil
	})
	switch {
	case errors.Is(err, store.ErrPackedDamaged):
		// The rows are the record: read them, from the start.
		e.log.Warn("a batch backfill's packed instances are damaged; its rows are read instead", logkey.BatchBackfill(rec.ID), logkey.Err(err))
		if bf, err = e.newBackfill(rec); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case packed:
		return bf, nil
	}
	parts, err := e.loadParts(ctx, rec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends readPages should this return early (a panic)
	pages := make(chan []store.BatchInstance, len(parts))
	errc := make(chan error, len(parts))
	var readers sync.WaitGroup
	for _, p := range parts {
		readers.Go(func() { errc <- e.readPages(ctx, rec.ID, p, pages) })
	}
	go func() {
		readers.Wait()
		close(pages)
	}()
	for page := range pages {
		e.addNodes(bf, page)
	}
	close(errc)
	for err := range errc {
		if err != nil {
			return nil, err
		}
	}
	if len(parts) > 1 { // the halves' pages came interleaved
		slices.SortFunc(bf.nodes, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	}
	return bf, nil
}

// loadPageSize is how many instances readBackfill reads at a time.
const loadPageSize = 10000

// idPart is a part of a backfill's instances by id: after < id <= through
// (through 0: no bound).
type idPart struct{ after, through int64 }

// loadParts splits a backfill's instances in the parts readBackfill reads
// at once: one, or two halves of its ids for a backfill of two pages or
// more.
func (e *Engine) loadParts(ctx context.Context, rec store.BatchBackfill) ([]idPart, error) {
	if rec.Instances < 2*loadPageSize {
		return []idPart{{}}, nil
	}
	lo, hi, err := e.st.BatchInstanceIDRange(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	mid := lo + (hi-lo)/2
	if mid <= lo {
		return []idPart{{}}, nil
	}
	return []idPart{{through: mid}, {after: mid}}, nil
}

// readPages sends the instances of part of backfill id to pages, a page at
// a time in id order.
func (e *Engine) readPages(ctx context.Context, id int64, part idPart, pages chan<- []store.BatchInstance) error {
	after := part.after
	sparse := true // while the last page was mostly instances that have not run
	for {
		page, err := e.st.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: id, AfterID: after, ThroughID: part.through,
			Limit: loadPageSize, Sparse: sparse})
		if err != nil {
			return fmt.Errorf("read the instances of backfill %d: %w", id, err)
		}
		if len(page) > 0 {
			select {
			case pages <- page:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(page) < loadPageSize {
			return nil
		}
		after = page[len(page)-1].ID
		sparse = 2*countRun(page) < len(page)
	}
}

// countRun counts the instances of page that have run (or were made so):
// those a sparse read reads twice.
func countRun(page []store.BatchInstance) int {
	n := 0
	for i := range page {
		if page[i].HasRun() {
			n++
		}
	}
	return n
}

// startDue starts the waiting backfills whose run time has come and returns
// the earliest run time still ahead (zero when none).
func (e *Engine) startDue(ctx context.Context) (next time.Time) {
	now := e.now()
	for _, bf := range e.s.bfs {
		if bf.rec.State != store.BatchWaiting {
			continue
		}
		if bf.rec.RunAt.After(now) {
			if next.IsZero() || bf.rec.RunAt.Before(next) {
				next = bf.rec.RunAt
			}
			continue
		}
		started := now.UTC()
		if err := e.st.SetBatchBackfillState(ctx, bf.rec.ID, store.BatchRunning, "", &started, nil); err != nil {
			e.log.Error("start backfill", logkey.BatchBackfill(bf.rec.ID), logkey.Err(err))
			continue
		}
		bf.rec.State, bf.rec.StartedAt = store.BatchRunning, &started
		e.publish(Event{Kind: KindBatchBackfill, BackfillID: bf.rec.ID, State: store.BatchRunning})
		for _, n := range bf.nodes {
			e.consider(n)
		}
		e.markHeld(ctx, bf) // what blocked instances hold back
		e.checkDone(ctx, bf)
	}
	return next
}
