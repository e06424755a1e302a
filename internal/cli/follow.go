package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
)

// event is one pushed event: the batch engine's (Kind set) or a stream's
// backfill record (Backfill set). Stream state and lag events are not
// passed on.
type event struct {
	engine.Event
	Backfill *store.Backfill
}

// eventStream is an open subscription to the daemon's server-sent events.
type eventStream struct {
	body   io.ReadCloser
	events chan event
	err    error // why events closed; read after it is closed
	done   chan struct{}
	close  sync.Once
}

// subscribe opens /api/v1/events, of one stream if stream is not empty
// (then without the batch engine's events). Subscribing before acting
// means no event of the action is missed.
func (c *client) subscribe(ctx context.Context, stream string) (*eventStream, error) {
	path := "/api/v1/events"
	if stream != "" {
		path += "?stream=" + url.QueryEscape(stream)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Tidemark-Client", "cli")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable("GET", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return nil, responseError("GET", path, resp.StatusCode, data)
	}
	es := &eventStream{body: resp.Body, events: make(chan event, 256), done: make(chan struct{})}
	go es.read()
	return es, nil
}

// read decodes data lines until the stream ends or is closed.
func (es *eventStream) read() {
	defer close(es.events)
	sc := bufio.NewScanner(es.body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		// The batch engine's events have a kind; streams' have a backfill
		// record or a state (an object, unlike the engine's state).
		var probe struct {
			Kind     string          `json:"kind"`
			Backfill *store.Backfill `json:"backfill"`
		}
		if json.Unmarshal([]byte(data), &probe) != nil {
			continue
		}
		var ev event
		switch {
		case probe.Kind != "":
			if json.Unmarshal([]byte(data), &ev.Event) != nil {
				continue
			}
		case probe.Backfill != nil:
			ev.Backfill = probe.Backfill
		default:
			continue
		}
		select {
		case es.events <- ev:
		case <-es.done:
			return
		}
	}
	es.err = sc.Err()
}

func (es *eventStream) Close() {
	es.close.Do(func() {
		close(es.done)
		es.body.Close()
	})
}

// streamEnded is the error of an event stream that closed while something
// was still followed.
func (es *eventStream) streamEnded(what string) error {
	if es.err != nil {
		return fmt.Errorf("the event stream ended: %w", es.err)
	}
	return fmt.Errorf("the event stream ended before %s did (did the daemon stop?)", what)
}

// terminal reports whether stdout is a terminal that can redraw lines, and
// its width (0 when unknown).
func (g *globals) terminal() (bool, int) {
	f, ok := g.stdout.(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) || os.Getenv("TERM") == "dumb" {
		return false, 0
	}
	return true, termWidth(f.Fd())
}

// progress is a renderer on stdout for the terminal, if it is one.
func (g *globals) progress() *progress {
	tty, width := g.terminal()
	p := newProgress(g.stdout, tty)
	p.width = width
	return p
}

// jsonLine writes v as one line of JSON.
func (g *globals) jsonLine(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.stdout, "%s\n", data)
	return err
}

// followBackfills follows streams' backfill runs from pushed events until
// each has ended: completed and loaded (its last chunk committed in the
// destination), stopped or failed. It shows a line per run — redrawn on a
// terminal, printed on changes otherwise — or, with --json, the record as
// one JSON line at each change. It returns an error naming the runs that
// did not complete.
func (g *globals) followBackfills(ctx context.Context, es *eventStream, recs []store.Backfill) error {
	type run struct {
		rec   store.Backfill
		heard time.Time // the last event or read of the record
		sent  string    // --json: the record as last printed
	}
	var order []int64
	runs := map[int64]*run{}
	now := time.Now()
	for _, b := range recs {
		if runs[b.ID] == nil {
			order = append(order, b.ID)
		}
		runs[b.ID] = &run{rec: b, heard: now}
	}
	var pr *progress
	if !g.json {
		pr = g.progress()
	}
	show := func(final bool) error {
		if g.json {
			for _, id := range order {
				r := runs[id]
				data, err := json.Marshal(r.rec)
				if err != nil {
					return err
				}
				if string(data) != r.sent {
					r.sent = string(data)
					if _, err := fmt.Fprintf(g.stdout, "%s\n", data); err != nil {
						return err
					}
				}
			}
			return nil
		}
		items := make([]progressItem, len(order))
		for i, id := range order {
			items[i] = backfillItem(runs[id].rec)
		}
		if final {
			pr.final(items)
		} else {
			pr.update(items)
		}
		return nil
	}
	apply := func(b store.Backfill) {
		r := runs[b.ID]
		if r == nil {
			return
		}
		r.heard = time.Now()
		if !backfillEnded(r.rec) && !staler(b, r.rec) {
			r.rec = b
		}
	}
	open := func() int {
		n := 0
		for _, r := range runs {
			if !backfillEnded(r.rec) {
				n++
			}
		}
		return n
	}
	if err := show(false); err != nil {
		return err
	}
	// Events are pushed, but the daemon drops those a subscriber is too
	// slow for: a run not heard of for 2 seconds is read again.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for open() > 0 {
		select {
		case ev, ok := <-es.events:
			if !ok {
				return es.streamEnded(fmt.Sprintf("the %d backfill(s) followed", open()))
			}
			if ev.Backfill != nil {
				apply(*ev.Backfill)
			}
		case <-tick.C:
			for _, id := range order {
				r := runs[id]
				if backfillEnded(r.rec) || time.Since(r.heard) < 2*time.Second {
					continue
				}
				var b store.Backfill
				if err := g.client().do(ctx, "GET", fmt.Sprintf("/api/v1/backfills/%d", id), nil, &b); err != nil {
					return err
				}
				apply(b)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := show(false); err != nil {
			return err
		}
	}
	if err := show(true); err != nil {
		return err
	}
	var bad []string
	for _, id := range order {
		b := runs[id].rec
		if b.Status != store.StatusCompleted {
			msg := fmt.Sprintf("backfill %d of %s.%s %s", b.ID, b.Schema, b.Table, b.Status)
			if b.Error != "" {
				msg += ": " + b.Error
			}
			bad = append(bad, msg)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

// backfillEnded reports whether a run is over for --wait: stopped, failed,
// or completed and loaded.
func backfillEnded(b store.Backfill) bool {
	switch b.Status {
	case store.StatusStopped, store.StatusFailed:
		return true
	case store.StatusCompleted:
		return b.LoadedAt != nil
	}
	return false
}

// staler reports whether record b is older than cur: a read of the record
// can overtake events still in the subscription's buffer.
func staler(b, cur store.Backfill) bool {
	rank := func(b store.Backfill) int {
		switch {
		case b.Status == store.StatusPending:
			return 0
		case b.Status == store.StatusActive:
			return 1
		case backfillEnded(b):
			return 3
		}
		return 2 // completed, not loaded yet
	}
	if rb, rc := rank(b), rank(cur); rb != rc {
		return rb < rc
	}
	return b.RowsRead < cur.RowsRead || b.RowsWritten < cur.RowsWritten || b.Chunks < cur.Chunks
}

// backfillItem is a run's progress line. The API has no row estimate of
// a table, so there is no total: rows, chunks, rate and status.
func backfillItem(b store.Backfill) progressItem {
	status := b.Status
	if b.Status == store.StatusCompleted && b.LoadedAt == nil {
		status = "completed, loading"
	}
	if b.Error != "" {
		status += ": " + b.Error
	}
	return progressItem{
		Key:    fmt.Sprint(b.ID),
		Label:  fmt.Sprintf("backfill %d of %s.%s", b.ID, b.Schema, b.Table),
		Done:   b.RowsWritten,
		Unit:   "rows written",
		Rate:   "rows",
		Detail: []string{thousands(b.RowsRead) + " read", thousands(b.Chunks) + " chunks"},
		Status: status,
		Ended:  backfillEnded(b),
	}
}

// followBatch follows a batch backfill from pushed events until it ends,
// and returns an error unless it succeeded. On a terminal each concurrency
// group has a bar (instances ended of the group's, running and failed
// counts, rate, ETA); otherwise each instance end is a line; with --json
// each event of the backfill is a JSON line.
func (g *globals) followBatch(ctx context.Context, es *eventStream, rec store.BatchBackfill) error {
	tty := false
	var pr *progress
	if !g.json {
		pr = g.progress()
		tty = pr.tty
	}
	states := map[int64]string{}
	groups := map[int64]int{}
	sizes := map[int]int64{}
	if tty {
		ins, err := g.batchInstances(ctx, rec.ID)
		if err != nil {
			return err
		}
		for _, in := range ins {
			groups[in.ID] = in.Group
			sizes[in.Group]++
			states[in.ID] = in.State
		}
		// Instances ending take longer than rows: rates over a minute.
		pr.window = time.Minute
		pr.update(groupItems(states, groups, sizes))
	}
	lastFinal := "" // --json: the final backfill state printed
	// Events are pushed, but a subscriber that falls behind misses some:
	// a slow look at the record makes sure the end is seen.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		var ev engine.Event
		select {
		case e, open := <-es.events:
			if !open {
				return es.streamEnded(fmt.Sprintf("backfill %d", rec.ID))
			}
			ev = e.Event
		case <-tick.C:
			if tty {
				pr.update(groupItems(states, groups, sizes))
			}
			if time.Since(lastCheck) < 2*time.Second {
				continue
			}
			lastCheck = time.Now()
			ev = engine.Event{Kind: "check", BackfillID: rec.ID}
		case <-ctx.Done():
			return ctx.Err()
		}
		if ev.BackfillID != rec.ID {
			continue
		}
		if g.json && ev.Kind != "check" {
			if err := g.jsonLine(ev); err != nil {
				return err
			}
			if ev.Kind == "backfill" {
				lastFinal = ev.State
			}
		}
		if ev.Kind == "instance" {
			states[ev.InstanceID] = ev.State
			switch {
			case tty:
				pr.update(groupItems(states, groups, sizes))
			case g.json:
			case ev.State != store.InstanceRunning && ev.State != store.InstanceWaiting:
				fmt.Fprintf(g.stdout, "%s instance %d %s: %s\n", ev.Time.Local().Format(time.TimeOnly), ev.InstanceID, ev.Task, ev.State)
			}
			continue
		}
		if ev.State == store.BatchWaiting || ev.State == store.BatchRunning {
			continue
		}
		var b store.BatchBackfill
		if err := g.client().do(ctx, "GET", fmt.Sprintf("/api/v1/batch/backfills/%d", rec.ID), nil, &b); err != nil {
			return err
		}
		if b.State == store.BatchWaiting || b.State == store.BatchRunning {
			continue
		}
		switch {
		case g.json:
			if lastFinal != b.State { // its event was missed
				end := time.Now().UTC()
				if b.FinishedAt != nil {
					end = *b.FinishedAt
				}
				if err := g.jsonLine(engine.Event{Kind: "backfill", BackfillID: b.ID, State: b.State, Time: end}); err != nil {
					return err
				}
			}
		case tty:
			// The bars end exact even if events were missed.
			if ins, err := g.batchInstances(ctx, rec.ID); err == nil {
				for _, in := range ins {
					states[in.ID] = in.State
				}
			}
			pr.final(groupItems(states, groups, sizes))
			fallthrough
		default:
			fmt.Fprintf(g.stdout, "backfill %d %s: %s\n", b.ID, b.State, stateCounts(b))
		}
		if b.State != store.BatchSucceeded {
			return fmt.Errorf("backfill %d %s: %s", b.ID, b.State, b.Error)
		}
		return nil
	}
}

// batchInstances lists every instance of a batch backfill, a page of 1000
// at a time.
func (g *globals) batchInstances(ctx context.Context, id int64) ([]store.BatchInstance, error) {
	const page = 1000
	var all []store.BatchInstance
	after := int64(0)
	for {
		var ins []store.BatchInstance
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
	type counts struct{ ended, running, failed, blocked int64 }
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
		case store.InstanceSucceeded, store.InstanceDryRun, store.InstanceStopped:
			c.ended++
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
		switch {
		case c.ended == sizes[grp]:
			status = "done"
		case c.running > 0:
			status = store.InstanceRunning
		case c.blocked > 0 && c.ended+c.blocked == sizes[grp]:
			status = store.InstanceBlocked
		}
		detail := []string{fmt.Sprintf("%d running", c.running), fmt.Sprintf("%d failed", c.failed)}
		if c.blocked > 0 {
			detail = append(detail, fmt.Sprintf("%d blocked", c.blocked))
		}
		items = append(items, progressItem{
			Key: fmt.Sprint(grp), Label: fmt.Sprintf("group %d", grp),
			Done: c.ended, Total: sizes[grp], Unit: "ended", Rate: "instances",
			Detail: detail, Status: status, Ended: c.ended == sizes[grp],
		})
	}
	return items
}
