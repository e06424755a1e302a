package stream

import (
	"errors"
	"testing"

	"github.com/tidemark/tidemark/internal/sink"
)

// TestDestHealthAcrossConnections: the chunk lane recovering while the
// writer's own connection still fails leaves the stream showing the
// outage; it is running again once both committed.
func TestDestHealthAcrossConnections(t *testing.T) {
	var told []error
	h := newDestHealth(func(err error) { told = append(told, err) })
	var main, lane sink.Sink = &laneSink{}, &laneSink{isLane: true}
	last := func() error { return told[len(told)-1] }

	h.recovered(main) // no outage: nothing to tell
	if len(told) != 0 {
		t.Fatalf("told %v before any outage", told)
	}
	h.failed(main, errors.New("main down"))
	h.failed(lane, errors.New("lane down"))
	h.recovered(lane)
	if last() == nil {
		t.Fatalf("told %v: the stream shows running while its own connection still fails", told)
	}
	h.recovered(main)
	if last() != nil {
		t.Fatalf("told %v: want running once both recovered", told)
	}
	h.failed(lane, errors.New("lane down"))
	h.forget(lane) // closed while failing
	h.failed(main, errors.New("main down"))
	h.recovered(main)
	if last() != nil {
		t.Fatalf("told %v: a closed connection's outage keeps the stream degraded", told)
	}
}
