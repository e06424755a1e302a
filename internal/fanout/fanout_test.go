package fanout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// drain reads what ch holds now without waiting for more.
func drain[E any](ch <-chan E) []E {
	var out []E
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestPublishReachesEverySubscriberInOrder(t *testing.T) {
	t.Parallel()
	var h Hub[int]
	h.Publish(0) // nobody listens: nothing kept, nothing dropped
	a, endA := h.Subscribe(8)
	defer endA()
	b, endB := h.Subscribe(8)
	defer endB()
	for i := 1; i <= 3; i++ {
		h.Publish(i)
	}
	for name, ch := range map[string]<-chan int{"a": a, "b": b} {
		if got := drain(ch); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("subscriber %s got %v, want [1 2 3]", name, got)
		}
	}
	if d := h.Dropped(); d != 0 {
		t.Errorf("dropped %d with room in every buffer", d)
	}
}

// A slow subscriber misses what does not fit its buffer; the others get
// everything and Publish does not wait.
func TestSlowSubscriberMissesEventsAlone(t *testing.T) {
	t.Parallel()
	var h Hub[int]
	slow, endSlow := h.Subscribe(2)
	defer endSlow()
	fast, endFast := h.Subscribe(16)
	defer endFast()
	for i := 1; i <= 5; i++ {
		h.Publish(i) // would deadlock the test if it waited for slow
	}
	if got := drain(slow); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("slow subscriber got %v, want the first two", got)
	}
	if got := drain(fast); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Errorf("fast subscriber got %v, want all five", got)
	}
	if d := h.Dropped(); d != 3 {
		t.Errorf("dropped %d, want 3", d)
	}
	// Once it has read, the slow subscriber receives again.
	h.Publish(6)
	if got := drain(slow); !slices.Equal(got, []int{6}) {
		t.Errorf("slow subscriber after reading got %v, want [6]", got)
	}
}

func TestUnsubscribeClosesOnceAndStopsDelivery(t *testing.T) {
	t.Parallel()
	var h Hub[string]
	ch, end := h.Subscribe(0) // a buffer of at least one
	h.Publish("kept")
	end()
	end() // a second end is harmless
	h.Publish("after")
	if got := drain(ch); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("got %v, want what was buffered before the end", got)
	}
	if _, ok := <-ch; ok {
		t.Error("the channel is open after the subscription ended")
	}
	if n := h.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after the only one ended", n)
	}
}

// Publishers, subscribers joining and leaving, and readers all at once
// (run with -race): no send on a closed channel, each subscriber sees each
// publisher's events in order, and one that keeps up sees all of them.
func TestConcurrentPublishSubscribeUnsubscribe(t *testing.T) {
	t.Parallel()
	type ev struct{ pub, seq int }
	const publishers, perPublisher, churners = 4, 2000, 8
	var h Hub[ev]
	// The complete subscriber's buffer holds everything, so it drops nothing.
	all, endAll := h.Subscribe(publishers * perPublisher)
	inOrder := func(got []ev) error {
		last := make([]int, publishers)
		for _, e := range got {
			if e.seq <= last[e.pub] {
				return fmt.Errorf("publisher %d: %d after %d", e.pub, e.seq, last[e.pub])
			}
			last[e.pub] = e.seq
		}
		return nil
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Go(func() {
			<-start
			for i := 1; i <= perPublisher; i++ {
				h.Publish(ev{p, i})
			}
		})
	}
	published := make(chan struct{})
	errs := make(chan error, churners*10)
	for range churners {
		wg.Go(func() {
			<-start
			for range 10 {
				ch, end := h.Subscribe(4)
				var got []ev
				first := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for e := range ch { // ends when end closes ch
						if got = append(got, e); len(got) == 1 {
							close(first)
						}
					}
				}()
				// Leave after an event, or at once when publishing is over.
				select {
				case <-first:
				case <-published:
				}
				end()
				<-done
				errs <- inOrder(got)
			}
		})
	}
	close(start)
	pubs.Wait()
	close(published)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	endAll()
	got := drain(all)
	if len(got) != publishers*perPublisher {
		t.Errorf("the subscriber with room for all got %d of %d", len(got), publishers*perPublisher)
	}
	if err := inOrder(got); err != nil {
		t.Error(err)
	}
	if n := h.Subscribers(); n != 0 {
		t.Errorf("%d subscribers left", n)
	}
}

func TestForwardMergesUntilClosedOrCancelled(t *testing.T) {
	t.Parallel()
	var nums Hub[int]
	var words Hub[string]
	merged := make(chan any, 4)
	n, endN := nums.Subscribe(4)
	w, endW := words.Subscribe(4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { Forward(ctx, n, merged) })
	wg.Go(func() { Forward(ctx, w, merged) })
	nums.Publish(1)
	words.Publish("one")
	got := map[any]bool{<-merged: true, <-merged: true}
	if !got[1] || !got["one"] {
		t.Errorf("merged %v, want 1 and \"one\"", got)
	}
	// A closed subscription ends its Forward.
	endN()
	// A cancelled context ends a Forward, waiting for room in out or for
	// an event.
	for range cap(merged) + 1 {
		words.Publish("fill")
	}
	cancel()
	wg.Wait()
	endW()
}

func ExampleHub() {
	var h Hub[string]
	events, end := h.Subscribe(1)
	defer end()
	h.Publish("backfill 1 completed")
	h.Publish("backfill 2 completed") // the buffer is full: dropped for this subscriber
	fmt.Println(<-events, "| dropped:", h.Dropped())
	// Output: backfill 1 completed | dropped: 1
}
