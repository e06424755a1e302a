package stream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
)

// stateHistory records every stream state the stream publishes.
type stateHistory struct {
	events <-chan Event
	cancel func()
	seen   []store.StreamState
}

func (e *env) recordStates() *stateHistory {
	ch, cancel := e.s.Subscribe()
	e.t.Cleanup(cancel)
	return &stateHistory{events: ch, cancel: cancel}
}

// waitState drains events until the stream publishes state; it returns the
// states seen on the way.
func (h *stateHistory) waitState(e *env, state string) store.StreamState {
	e.t.Helper()
	for {
		select {
		case ev := <-h.events:
			if ev.State == nil {
				continue
			}
			h.seen = append(h.seen, *ev.State)
			if ev.State.State == state {
				return *ev.State
			}
		case <-e.ctx.Done():
			e.t.Fatal("test ended")
		}
	}
}

// TestStreamLifecycle runs on a server of its own, since it restarts it and
// drops the stream's slot: a restart is transient (retrying, then running),
// a lost slot needs a person (failed, with what to do), and reset recovers.
func TestStreamLifecycle(t *testing.T) {
	t.Parallel()
	own, err := pgserver.Start(context.Background(), pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Stop()
	e := newEnvOn(t, own, envOptions{dest: "sqlite", yaml: "backfill: {mode: automatic}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 500) g;`})
	e.start()
	e.waitLoaded("t")
	if got := e.s.State().State; got != store.StateRunning {
		t.Fatalf("state %q, want running", got)
	}

	// A crash of the source server is transient: retrying, then running.
	h := e.recordStates()
	e.src.Close(e.ctx)
	if err := own.Restart(e.ctx, true); err != nil {
		t.Fatal(err)
	}
	retry := h.waitState(e, store.StateRetrying)
	if retry.Reason == "" {
		t.Error("retrying state without a reason")
	}
	h.waitState(e, store.StateRunning)
	e.reconnect()
	e.exec(`INSERT INTO t VALUES (1001, 'after restart')`)
	e.assertConverged("t")

	// A slot dropped behind tidemark's back needs a person.
	e.dropSlot()
	failed := h.waitState(e, store.StateFailed)
	if !strings.Contains(failed.Reason, "stream reset") {
		t.Fatalf("failed state reason %q does not say how to recover", failed.Reason)
	}
	e.exec(`INSERT INTO t VALUES (1002, 'while failed')`)
	e.s.Reset()
	h.waitState(e, store.StateRunning)
	e.waitFor("reset backfill loaded", func() bool {
		recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, StartedBy: StartedByReset})
		return err == nil && len(recs) == 1 && recs[0].LoadedAt != nil
	})
	e.assertConverged("t")
}

// dropSlot drops the stream's slot behind its back. tidemark reconnects at
// once when its connection is terminated, so terminate and drop are retried
// until the drop wins.
func (e *env) dropSlot() {
	e.t.Helper()
	for attempt := 0; ; attempt++ {
		e.exec(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, e.cfg.Source.Slot)
		_, err := e.src.Exec(e.ctx, `SELECT pg_drop_replication_slot($1)`, e.cfg.Source.Slot)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return
		case attempt < 1000 && errors.As(err, &pgErr) && pgErr.Code == "55006":
			continue // active again: tidemark reconnected first
		default:
			e.t.Fatalf("drop slot: %v", err)
		}
	}
}

// TestDestinationRejectsChange: a column added on the source is added to
// the destination and the stream goes on (docs/schema-changes.md); a
// destination table changed by hand so that it rejects a batch fails the
// stream, with what to do, instead of retrying forever, and nothing is
// confirmed past the rejected batch.
func TestDestinationRejectsChange(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: manual}", setup: `CREATE TABLE t (id int PRIMARY KEY)`})
			e.start()
			h := e.recordStates()
			e.exec(`ALTER TABLE t ADD COLUMN extra text`)
			e.exec(`INSERT INTO t VALUES (1, 'x')`)
			e.schemaWaitColumns("t", "id", "extra")
			e.assertConverged("t")
			if st := e.s.State(); st.State != store.StateRunning {
				t.Fatalf("stream state %+v after a column was added, want running", st)
			}
			e.execInDest(`ALTER TABLE t DROP COLUMN extra`)
			e.exec(`INSERT INTO t VALUES (2, 'y')`)
			failed := h.waitState(e, store.StateFailed)
			if !strings.Contains(failed.Reason, "destination rejected") || !strings.Contains(failed.Reason, "make the destination table match") {
				t.Fatalf("failed reason %q does not say what happened and what to do", failed.Reason)
			}
		})
	}
}
