package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// EventChannel is the PostgreSQL NOTIFY channel that carries events
// between nodes.
const EventChannel = "tidemark_events"

// wireEvent is an event as it crosses nodes: small, naming what changed;
// the receiving node reads the record itself from the store.
type wireEvent struct {
	Node     string           `json:"n"`
	Stream   string           `json:"s,omitempty"`
	Backfill int64            `json:"b,omitempty"` // a backfill record changed
	State    bool             `json:"st,omitempty"`
	Lag      *stream.LagAlert `json:"l,omitempty"`
	Batch    *engine.Event    `json:"e,omitempty"`
}

// Events carries the events of what this node runs to the other nodes,
// and theirs to this node's subscribers (the API's event stream, `--wait`,
// the console), so that every node sees everything live.
type Events struct {
	m       *Member
	st      *store.Store
	streams map[string]*stream.Stream
	batch   *engine.Engine // nil without tasks
	log     *slog.Logger
	// listening, when set, is called each time the listen is in place.
	listening func()
}

// NewEvents relays the events of streams and batch for member m.
func NewEvents(m *Member, st *store.Store, streams []*stream.Stream, batch *engine.Engine, log *slog.Logger) *Events {
	e := &Events{m: m, st: st, streams: map[string]*stream.Stream{}, batch: batch, log: log}
	for _, s := range streams {
		e.streams[s.Name()] = s
	}
	return e
}

// Run sends and receives until ctx ends.
func (e *Events) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { e.receive(gctx); return nil })
	for _, s := range e.streams {
		ch, cancel := s.Subscribe()
		g.Go(func() error {
			defer cancel()
			e.sendStream(gctx, s.Name(), ch)
			return nil
		})
	}
	if e.batch != nil {
		ch, cancel := e.batch.Subscribe()
		g.Go(func() error {
			defer cancel()
			for {
				select {
				case <-gctx.Done():
					return nil
				case ev := <-ch:
					if !ev.Relayed && e.m.Holds(BatchLease) {
						e.send(gctx, wireEvent{Batch: &ev})
					}
				}
			}
		})
	}
	return g.Wait()
}

// sendStream notifies the other nodes of the events of a stream this node
// runs.
func (e *Events) sendStream(ctx context.Context, name string, ch <-chan stream.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-ch:
			if ev.Relayed || !e.m.Holds(StreamLease(name)) {
				continue
			}
			w := wireEvent{Stream: name, State: ev.State != nil, Lag: ev.Lag}
			if ev.Backfill != nil {
				w.Backfill = ev.Backfill.ID
			}
			e.send(ctx, w)
		}
	}
}

func (e *Events) send(ctx context.Context, w wireEvent) {
	w.Node = e.m.Name()
	data, err := json.Marshal(w)
	if err == nil {
		err = e.st.Notify(ctx, EventChannel, string(data))
	}
	if err != nil && ctx.Err() == nil {
		e.log.Warn("send an event to the other nodes", logkey.Err(err))
	}
}

// receive listens for the other nodes' events, reconnecting after a
// failure, and hands each to this node's subscribers.
func (e *Events) receive(ctx context.Context) {
	for ctx.Err() == nil {
		err := e.st.Listen(ctx, EventChannel, e.listening, func(payload string) { e.relay(ctx, payload) })
		if err != nil && ctx.Err() == nil {
			e.log.Warn("listen for the other nodes' events; retrying", logkey.Err(err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// relay turns one received event into the event a local subscriber gets,
// reading the record it names from the store.
func (e *Events) relay(ctx context.Context, payload string) {
	// The listen loop waits on these reads: a slow store must not hold it.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var w wireEvent
	if err := json.Unmarshal([]byte(payload), &w); err != nil || w.Node == e.m.Name() {
		return // not ours to read, or our own
	}
	if w.Batch != nil {
		if e.batch != nil {
			e.batch.Relay(*w.Batch)
		}
		return
	}
	s := e.streams[w.Stream]
	if s == nil {
		return
	}
	ev := stream.Event{Stream: w.Stream, Lag: w.Lag}
	if w.Backfill != 0 {
		b, err := e.st.GetBackfill(ctx, w.Backfill)
		if err != nil {
			return
		}
		ev.Backfill = &b
	}
	if w.State {
		st, err := e.st.GetStream(ctx, w.Stream)
		if err != nil {
			return
		}
		ev.State = &st
	}
	if ev.Backfill != nil || ev.State != nil || ev.Lag != nil {
		s.Relay(ev)
	}
}
