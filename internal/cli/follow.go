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
	"strings"
	"sync"

	"github.com/mattn/go-isatty"

	"github.com/tidemark/tidemark/internal/api"
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
		case probe.Kind == api.DeprecatedBatchBackfillKind:
			continue // the same change again, for API v1 clients
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
	f, ok := g.rawOut().(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) || os.Getenv("TERM") == "dumb" {
		return false, 0
	}
	return true, termWidth(f.Fd())
}

// progress is a renderer on stdout for the terminal, if it is one.
func (g *globals) progress() *progress {
	tty, width := g.terminal()
	p := newProgress(g.rawOut(), tty)
	p.width = width
	return p
}

// jsonLine writes v as one line of JSON.
func (g *globals) jsonLine(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.rawOut(), "%s\n", data)
	return err
}
