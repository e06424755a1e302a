package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/logkey"
)

// takeOverWait bounds the wait for a terminated session to let go of the
// slot.
const takeOverWait = 10 * time.Second

// takeOverSlot ends the session that still holds the stream's slot: a
// node that lost the stream (killed, frozen or cut off) may keep its
// replication connection until wal_sender_timeout, and the slot serves one
// session at a time. It needs pg_signal_backend or the slot owner's role
// (`tidemark doctor` checks).
func (s *Source) takeOverSlot(ctx context.Context) error {
	deadline := time.Now().Add(takeOverWait)
	for {
		var pid *int32
		err := s.pool.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, s.cfg.Slot).Scan(&pid)
		if err != nil || pid == nil {
			return nil // no slot yet (EnsureLog reports), or free
		}
		var ended bool
		if err := s.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, *pid).Scan(&ended); err != nil {
			// Another role's session: replication then fails while the slot
			// is held, and the stream retries until the server ends it.
			s.log.Warn("cannot end the session still holding the replication slot", logkey.Slot(s.cfg.Slot), "pid", *pid, logkey.Err(err))
			return nil
		}
		s.log.Warn("ended the former owner's replication session", logkey.Slot(s.cfg.Slot), "pid", *pid)
		if time.Now().After(deadline) {
			return fmt.Errorf("replication slot %q is still held by pid %d after %s", s.cfg.Slot, *pid, takeOverWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
