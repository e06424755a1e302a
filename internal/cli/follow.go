package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
)

// eventStream is an open subscription to the daemon's server-sent events.
type eventStream struct {
	body   io.ReadCloser
	events chan engine.Event
	err    error // why events closed; read after it is closed
}

// subscribe opens /api/v1/events. Subscribing before acting means no event
// of the action is missed.
func (c *client) subscribe(ctx context.Context) (*eventStream, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/events", nil)
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
		return nil, fmt.Errorf("cannot reach tidemark at %s to follow progress: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("follow progress: HTTP %d", resp.StatusCode)
	}
	es := &eventStream{body: resp.Body, events: make(chan engine.Event, 256)}
	go es.read()
	return es, nil
}

// read decodes data lines until the stream ends; events that are not the
// batch engine's (streams' events have no kind) are skipped.
func (es *eventStream) read() {
	defer close(es.events)
	sc := bufio.NewScanner(es.body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev engine.Event
		if json.Unmarshal([]byte(data), &ev) != nil || ev.Kind == "" {
			continue
		}
		es.events <- ev
	}
	es.err = sc.Err()
}

func (es *eventStream) Close() { es.body.Close() }

// followBatch prints a backfill's progress from pushed events until it
// ends, and returns an error unless it succeeded. On a terminal the
// counts are redrawn on one line; otherwise each instance end is a line.
func (g *globals) followBatch(ctx context.Context, es *eventStream, rec store.BatchBackfill) error {
	tty := false
	if f, ok := g.stdout.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	states := map[int64]string{}
	counts := func() string {
		n := map[string]int{}
		for _, st := range states {
			n[st]++
		}
		return fmt.Sprintf("%d/%d ended: %d succeeded, %d dry-run, %d running, %d failed, %d stopped",
			n[store.InstanceSucceeded]+n[store.InstanceDryRun]+n[store.InstanceFailed]+n[store.InstanceStopped], rec.Instances,
			n[store.InstanceSucceeded], n[store.InstanceDryRun], n[store.InstanceRunning], n[store.InstanceFailed], n[store.InstanceStopped])
	}
	// Events are pushed, but a subscriber that falls behind misses some:
	// a slow look at the record makes sure the end is seen.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		var ev engine.Event
		select {
		case e, open := <-es.events:
			if !open {
				if es.err != nil {
					return fmt.Errorf("the event stream ended: %w", es.err)
				}
				return fmt.Errorf("the event stream ended before backfill %d did (did the daemon stop?)", rec.ID)
			}
			ev = e
		case <-tick.C:
			ev = engine.Event{Kind: "check", BackfillID: rec.ID}
		case <-ctx.Done():
			return ctx.Err()
		}
		if ev.BackfillID != rec.ID {
			continue
		}
		if ev.Kind == "instance" {
			states[ev.InstanceID] = ev.State
			switch {
			case tty:
				fmt.Fprintf(g.stdout, "\r\033[Kbackfill %d: %s", rec.ID, counts())
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
		if tty {
			fmt.Fprintln(g.stdout)
		}
		fmt.Fprintf(g.stdout, "backfill %d %s: %s\n", b.ID, b.State, stateCounts(b))
		if b.State != store.BatchSucceeded {
			return fmt.Errorf("backfill %d %s: %s", b.ID, b.State, b.Error)
		}
		return nil
	}
}
