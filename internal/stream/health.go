package stream

import (
	"sync"

	"github.com/tidemark/tidemark/internal/sink"
)

// destHealth tells the stream of destination outages across the writer's
// connections (its own and the chunk lanes', which fail and recover each
// on its own goroutine): the stream shows the outage while any of them
// fails, and is running again only once none does.
type destHealth struct {
	mu      sync.Mutex
	failing map[sink.Sink]bool
	tell    func(err error) // an outage's error; nil once none is left
}

func newDestHealth(tell func(err error)) *destHealth {
	return &destHealth{failing: map[sink.Sink]bool{}, tell: tell}
}

// failed reports an outage of snk's connection.
func (h *destHealth) failed(snk sink.Sink, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing[snk] = true
	h.tell(err)
}

// recovered reports that snk's connection committed again after an
// outage.
func (h *destHealth) recovered(snk sink.Sink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing[snk] {
		return
	}
	delete(h.failing, snk)
	if len(h.failing) == 0 {
		h.tell(nil)
	}
}

// forget drops a connection that is closed, failing or not.
func (h *destHealth) forget(snk sink.Sink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.failing, snk)
}
