package stream

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// TestRunAsKeepsAPauseAskedWhileItReads: a cluster node starting its term
// of a stream reads the stream's record to learn whether the stream's last
// owner had it paused; a pause asked of this node in the meantime (it
// holds the lease, so requests are forwarded to it) is kept, not
// overwritten by the record read before it.
func TestRunAsKeepsAPauseAskedWhileItReads(t *testing.T) {
	e := newEnv(t, envOptions{dest: "postgres", setup: "CREATE TABLE t (id int PRIMARY KEY)"})
	e.s = New(e.cfg, e.st, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Options{ProbeInterval: 2 * time.Millisecond, SlotCheckInterval: 200 * time.Millisecond})
	if err := e.s.MarkNotStarted(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.s.afterRecordRead = e.s.Pause
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.s.RunAs(ctx, 1) }()
	defer func() { cancel(); <-done }()
	e.waitState(store.StatePaused)
	rec, err := e.st.GetStream(e.ctx, e.cfg.Name)
	if err != nil || rec.State != store.StatePaused {
		t.Fatalf("the stream's record %+v, %v; want it paused", rec, err)
	}
}
