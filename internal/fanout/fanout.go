// Package fanout hands one publisher's events to any number of subscribers:
// a stream's backfill and state changes, the batch engine's instance and
// backfill changes, and the API's server-sent events that merge them.
//
// The policy for a slow subscriber: Publish never blocks. Each subscription
// has its own buffer; an event that does not fit is dropped for that
// subscriber alone and counted (Dropped). Events are hints to look again,
// not a log: a subscriber that must not miss a state reads the state after
// an event, or on a timer besides. The publisher (a stream's lifecycle, the
// engine's loop) is never held up by a reader.
package fanout

import (
	"context"
	"sync"
	"sync/atomic"
)

// Hub delivers published events to its subscribers. The zero value has no
// subscribers and is ready to use; a Hub must not be copied after first use.
// Every method is safe for concurrent use.
type Hub[E any] struct {
	mu      sync.Mutex
	subs    map[chan E]struct{}
	dropped atomic.Int64
}

// Subscribe returns a channel that receives events published from now on,
// buffering up to buffer of them (at least one), and a function that ends
// the subscription. Ending it closes the channel, so a reader ranging over
// it stops; it may be called more than once and from any goroutine.
func (h *Hub[E]) Subscribe(buffer int) (<-chan E, func()) {
	ch := make(chan E, max(buffer, 1))
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan E]struct{}{}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			// Under the lock: Publish never sends on a closed channel.
			h.mu.Lock()
			delete(h.subs, ch)
			close(ch)
			h.mu.Unlock()
		})
	}
}

// Publish hands ev to every subscriber whose buffer has room and drops it
// for the others. It never blocks on a subscriber.
func (h *Hub[E]) Publish(ev E) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
			h.dropped.Add(1)
		}
	}
}

// Subscribers is the number of subscriptions not yet ended.
func (h *Hub[E]) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Dropped is the number of deliveries skipped because a subscriber's buffer
// was full, over the hub's life.
func (h *Hub[E]) Dropped() int64 { return h.dropped.Load() }

// Forward copies events from in to out, waiting for room in out, until ctx
// ends or in is closed. It merges subscriptions of several hubs, of
// different event types, into one reader's channel.
func Forward[E any](ctx context.Context, in <-chan E, out chan<- any) {
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
