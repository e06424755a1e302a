package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
)

// followBatch follows a batch backfill from pushed events until it ends,
// and returns an error unless it succeeded. On a terminal each concurrency
// group has a bar (instances ended of the group's, running and failed
// counts, rate, ETA); otherwise each instance end is a line; with --json
// each event of the backfill is a JSON line.
func (g *globals) followBatch(ctx context.Context, es *eventStream, rec api.BatchBackfillView) error {
	f, err := g.newBatchFollower(ctx, rec.ID)
	if err != nil {
		return err
	}
	f.state = rec.State
	if batchEnded(rec.State) { // attached after the end
		return f.finish(ctx, rec)
	}
	// Events are pushed, but a subscriber that falls behind misses some:
	// a slow look at the record makes sure the end is seen.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	f.lastCheck = time.Now()
	for {
		var ev engine.Event
		select {
		case e, open := <-es.events:
			if !open {
				return es.streamEnded(fmt.Sprintf("batch backfill %d", rec.ID))
			}
			ev = e.Event
		case <-tick.C:
			check, due := f.tick()
			if !due {
				continue
			}
			ev = check
		case <-ctx.Done():
			return ctx.Err()
		}
		if done, err := f.handle(ctx, ev); done || err != nil {
			return err
		}
	}
}

// batchFollower is the state of followBatch.
type batchFollower struct {
	g     *globals
	id    int64     // the backfill followed
	state string    // its state, as the last event or read said
	pr    *progress // nil with --json
	tty   bool      // pr draws bars
	// The bars' figures: instances' states and groups by id, and the
	// groups' sizes, as listed at the start.
	states    map[int64]string
	groups    map[int64]int
	sizes     map[int]int64
	lastFinal string    // --json: the final backfill state printed
	lastCheck time.Time // the last check event made up by tick
}

// newBatchFollower starts following backfill id: on a terminal, it lists
// the instances and draws the first bars.
func (g *globals) newBatchFollower(ctx context.Context, id int64) (*batchFollower, error) {
	f := &batchFollower{g: g, id: id, states: map[int64]string{}, groups: map[int64]int{}, sizes: map[int]int64{}}
	if g.json {
		return f, nil
	}
	f.pr = g.progress()
	f.tty = f.pr.tty
	if !f.tty {
		return f, nil
	}
	ins, err := g.batchInstances(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, in := range ins {
		f.groups[in.ID] = in.Group
		f.sizes[in.Group]++
		f.states[in.ID] = in.State
	}
	// Instances ending take longer than rows: rates over a minute.
	f.pr.window = time.Minute
	f.pr.update(f.bars())
	return f, nil
}

// bars are the progress lines: the backfill's, whose status is its state
// (up to the end state), then its concurrency groups'.
func (f *batchFollower) bars() []progressItem {
	groups := groupItems(f.states, f.groups, f.sizes)
	head := progressItem{Key: "backfill", Label: fmt.Sprintf("batch backfill %d", f.id), Unit: "ended", Rate: "instances",
		Status: f.state, Ended: batchEnded(f.state)}
	for _, it := range groups {
		head.Done += it.Done
		head.Total += it.Total
	}
	return append([]progressItem{head}, groups...)
}

// batchEnded reports whether a batch backfill state is an end state.
func batchEnded(state string) bool {
	return state != store.BatchWaiting && state != store.BatchRunning
}

// tick redraws the bars and, at most every 2 seconds, makes up a check
// event, which has the record read.
func (f *batchFollower) tick() (check engine.Event, due bool) {
	if f.tty {
		f.pr.update(f.bars())
	}
	if time.Since(f.lastCheck) < 2*time.Second {
		return engine.Event{}, false
	}
	f.lastCheck = time.Now()
	return engine.Event{Kind: "check", BackfillID: f.id}, true
}

// handle takes one event, of the backfill followed or another. done
// reports that following is over, with err its outcome: an error unless
// the backfill succeeded.
func (f *batchFollower) handle(ctx context.Context, ev engine.Event) (done bool, err error) {
	if ev.BackfillID != f.id {
		return false, nil
	}
	if f.g.json && ev.Kind != "check" {
		if err := f.g.jsonLine(api.BatchEvent(ev)); err != nil {
			return true, err
		}
		if ev.Kind == engine.KindBatchBackfill {
			f.lastFinal = ev.State
		}
	}
	if ev.Kind == engine.KindInstance {
		f.instanceChanged(ev)
		return false, nil
	}
	if ev.Kind == engine.KindBatchBackfill {
		f.state = ev.State
		if f.tty {
			f.pr.update(f.bars())
		}
	}
	if !batchEnded(ev.State) {
		return false, nil
	}
	var b api.BatchBackfillView
	if err := f.g.client().do(ctx, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", f.id), nil, &b); err != nil {
		return true, err
	}
	if !batchEnded(b.State) {
		return false, nil
	}
	return true, f.finish(ctx, b)
}

// instanceChanged takes an instance's new state: the bars are redrawn on a
// terminal; otherwise, without --json (which printed the event), an
// instance that ended is a line.
func (f *batchFollower) instanceChanged(ev engine.Event) {
	f.states[ev.InstanceID] = ev.State
	switch {
	case f.tty:
		f.pr.update(f.bars())
	case f.g.json:
	case ev.State != store.InstanceRunning && ev.State != store.InstanceWaiting:
		fmt.Fprintf(f.g.stdout, "%s instance %d %s: %s\n", ev.Time.Local().Format(time.TimeOnly), ev.InstanceID, ev.Task, ev.State)
	}
}

// finish shows how backfill b ended and returns an error unless it
// succeeded.
func (f *batchFollower) finish(ctx context.Context, b api.BatchBackfillView) error {
	f.state = b.State
	switch {
	case f.g.json:
		if f.lastFinal != b.State { // its event was missed
			end := time.Now().UTC()
			if b.FinishedAt != nil {
				end = *b.FinishedAt
			}
			if err := f.g.jsonLine(api.BatchEvent(engine.Event{Kind: engine.KindBatchBackfill, BackfillID: b.ID, State: b.State, Time: end})); err != nil {
				return err
			}
		}
	case f.tty:
		// The bars end exact even if events were missed.
		if ins, err := f.g.batchInstances(ctx, f.id); err == nil {
			for _, in := range ins {
				f.states[in.ID] = in.State
			}
		}
		f.pr.final(f.bars())
		fallthrough
	default:
		fmt.Fprintf(f.g.stdout, "batch backfill %d %s: %s\n", b.ID, b.State, stateCounts(b))
	}
	if b.State != store.BatchSucceeded {
		return fmt.Errorf("batch backfill %d %s: %s", b.ID, b.State, b.Error)
	}
	return nil
}

// batchInstances lists every instance of a batch backfill, a page of 1000
// at a time.
func (g *globals) batchInstances(ctx context.Context, id int64) ([]api.BatchInstanceView, error) {
	const page = 1000
	var all []api.BatchInstanceView
	after := int64(0)
	for {
		var ins []api.BatchInstanceView
		path := fmt.Sprintf("/api/v1/batch/backfills/%d/instances?limit=%d&after=%d", id, page, after)
		if err := g.client().do(ctx, "GET", path, nil, &ins); err != nil {
			return nil, err
		}
		all = append(all, ins...)
		if len(ins) < page {
			return all, nil
		}
		after = ins[len(ins)-1].ID
	}
}

// groupItems are the progress lines of a batch backfill's concurrency
// groups: instances ended of the group's, with running and failed counts.
func groupItems(states map[int64]string, groups map[int64]int, sizes map[int]int64) []progressItem {
	type counts struct{ ended, running, failed, stopped, blocked int64 }
	by := map[int]*counts{}
	for g := range sizes {
		by[g] = &counts{}
	}
	for id, st := range states {
		c := by[groups[id]]
		if c == nil {
			continue // an instance not listed at the start
		}
		switch st {
		case store.InstanceSucceeded, store.InstanceDryRun:
			c.ended++
		case store.InstanceStopped:
			c.ended++
			c.stopped++
		case store.InstanceFailed:
			c.ended++
			c.failed++
		case store.InstanceRunning:
			c.running++
		case store.InstanceBlocked:
			c.blocked++
		}
	}
	keys := make([]int, 0, len(by))
	for g := range by {
		keys = append(keys, g)
	}
	slices.Sort(keys)
	items := make([]progressItem, 0, len(keys))
	for _, grp := range keys {
		c := by[grp]
		status := store.InstanceWaiting
		// A failed or stopped instance halts the later dates of its group:
		// with nothing running, what is left waits for someone to act.
		halted := c.failed+c.stopped > 0 && c.running == 0 && c.ended < sizes[grp]
		switch {
		case c.ended == sizes[grp]:
			status = "done"
		case c.running > 0:
			status = store.InstanceRunning
		case c.blocked > 0 && c.ended+c.blocked == sizes[grp]:
			status = store.InstanceBlocked
		case halted:
			status = fmt.Sprintf("halted: %d held", sizes[grp]-c.ended-c.blocked)
		}
		detail := []string{fmt.Sprintf("%d running", c.running), fmt.Sprintf("%d failed", c.failed)}
		if c.blocked > 0 {
			detail = append(detail, fmt.Sprintf("%d blocked", c.blocked))
		}
		items = append(items, progressItem{
			Key: fmt.Sprint(grp), Label: fmt.Sprintf("group %d", grp),
			Done: c.ended, Total: sizes[grp], Unit: "ended", Rate: "instances",
			Detail: detail, Status: status, Ended: c.ended == sizes[grp] || halted,
		})
	}
	return items
}
