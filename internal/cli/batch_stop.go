package cli

import (
	"context"
	"net/url"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// stopWait bounds how long stop-instance waits for a running attempt to
// end: a shell task's process group has runner.GracePeriod between SIGTERM
// and SIGKILL, a SQL task's cancel as long.
var stopWait = runner.GracePeriod + 5*time.Second

// stopInstance stops instance id and returns it in the state the stop
// leaves it in. Stopping a running instance only signals its attempt, so
// the answer to the stop still says running: the end is awaited from the
// daemon's events (subscribed before the stop, so that it cannot be
// missed), up to stopWait; past that the instance is shown as "stopping".
func (g *globals) stopInstance(ctx context.Context, id string) (api.BatchInstanceView, error) {
	var in api.BatchInstanceView
	path := "/api/v1/batch/instances/" + url.PathEscape(id)
	es, err := g.client().subscribe(ctx, "")
	if err != nil {
		return in, err
	}
	defer es.Close()
	if err := g.client().do(ctx, "POST", path+"/stop", nil, &in); err != nil {
		return in, err
	}
	if in.State != store.InstanceRunning {
		return in, nil
	}
	awaitInstanceEnd(ctx, es, in.ID)
	if err := g.client().do(ctx, "GET", path, nil, &in); err != nil {
		return in, err
	}
	if in.State == store.InstanceRunning && !g.json {
		in.State = "stopping (its attempt is being ended; `tidemark batch instances` shows when it has)"
	}
	return in, nil
}

// awaitInstanceEnd returns when an event says instance id left the
// running state, the event stream ends, or stopWait has passed.
func awaitInstanceEnd(ctx context.Context, es *eventStream, id int64) {
	timeout := time.NewTimer(stopWait)
	defer timeout.Stop()
	for {
		select {
		case ev, open := <-es.events:
			if !open {
				return
			}
			if ev.Kind == engine.KindInstance && ev.InstanceID == id && ev.State != store.InstanceRunning {
				return
			}
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
