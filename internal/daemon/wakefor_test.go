package daemon

import (
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// TestWakeFor: a queued attempt wakes the worker alone, an end the leader
// alone; a stop, and anything else, both.
func TestWakeFor(t *testing.T) {
	for payload, want := range map[string][2]bool{
		store.NotifyQueued: {true, false},
		store.NotifyEnded:  {false, true},
		store.NotifyStop:   {true, true},
		"":                 {true, true},
	} {
		var got [2]bool
		wakeFor(payload, func() { got[0] = true }, func() { got[1] = true })
		if got != want {
			t.Errorf("%q wakes worker %v, leader %v; want %v, %v", payload, got[0], got[1], want[0], want[1])
		}
	}
}
