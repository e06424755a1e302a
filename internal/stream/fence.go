package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// RunAs runs the stream as a cluster node's term of its lease at epoch
// (docs/cluster.md): the destination is fenced at epoch before the
// checkpoint is read, so a former owner's late commits are refused, and
// what the store says of the stream's backfills is read afresh, since
// another node may have changed it since this node last ran the stream.
func (s *Stream) RunAs(ctx context.Context, epoch int64) error {
	s.epoch.Store(epoch)
	term := context.WithoutCancel(ctx)
	s.bf.term.Store(&term)
	s.bf.forget()
	// A pause follows the stream from node to node: the record says
	// whether its last owner had it paused, unless a pause or resume
	// reached this node (it holds the lease now) since its last term.
	defer func() {
		s.mu.Lock()
		s.pauseAsksSeen = s.pauseAsks
		s.mu.Unlock()
	}()
	rec, err := s.st.GetStream(ctx, s.cfg.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read the stream's record: %w", err)
	}
	if s.afterRecordRead != nil {
		s.afterRecordRead()
	}
	s.mu.Lock()
	if s.pauseAsks == s.pauseAsksSeen {
		s.paused = err == nil && rec.State == store.StatePaused
	}
	s.mu.Unlock()
	return s.Run(ctx)
}

// fence fences snk at epoch; nothing to do outside a cluster, nor for a
// stream pinned to one node whose destination cannot be fenced.
func (s *Stream) fence(ctx context.Context, snk sink.Sink, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	f, ok := snk.(sink.Fencer)
	if !ok && s.cfg.Node != "" {
		return nil // pinned: only its one node ever runs it
	}
	if !ok {
		return &source.PermanentError{Err: fmt.Errorf("destination type %s cannot refuse a former owner's writes", s.cfg.Destination.Type),
			Hint: "pin the stream to one node (streams[].node) and restart the nodes"}
	}
	err := f.Fence(ctx, s.cfg.Name, epoch)
	switch {
	case errors.Is(err, sink.ErrCannotFence) && s.cfg.Node != "":
		s.log.Info("the destination cannot be fenced; the stream is pinned to this node, so it runs without", logkey.Err(err))
		return nil
	case errors.Is(err, sink.ErrCannotFence):
		return &source.PermanentError{Err: err, Hint: "pin the stream to one node (streams[].node), or give it a destination of its own, and restart the nodes"}
	}
	return err
}
