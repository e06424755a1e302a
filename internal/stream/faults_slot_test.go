package stream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// invalidateSlot makes the source invalidate the stream's slot, which no
// walsender holds (the stream is paused): with max_slot_wal_keep_size at
// one segment, a checkpoint after a few WAL segment switches removes WAL the
// slot needs. Bounded: each round writes a little WAL, switches segments
// and checkpoints.
func (e *env) invalidateSlot() {
	e.t.Helper()
	e.waitFor("the slot released", func() bool { return e.slotState(e.src).activePID == 0 })
	for round := 0; round < 20; round++ {
		for i := 0; i < 3; i++ {
			e.exec(`SELECT pg_logical_emit_message(false, 'tidemark-fault', 'x')`)
			e.exec(`SELECT pg_switch_wal()`)
		}
		e.exec(`CHECKPOINT`)
		var status *string
		if err := e.src.QueryRow(e.ctx, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Source.Slot).Scan(&status); err != nil {
			e.t.Fatal(err)
		}
		if status != nil && *status == "lost" {
			return
		}
	}
	e.t.Fatal("the slot was not invalidated")
}

// TestFaultSlotLost loses the replication slot behind tidemark's back in
// the middle of a backfill while the table keeps changing, also while the
// stream is failed: the stream fails with what happened and to run
// `tidemark stream reset`, and the reset (a new slot, every object
// backfilled again, the interrupted backfill stopped) brings the
// destination back to the source, rows changed while the slot was missing
// included.
func TestFaultSlotLost(t *testing.T) {
	cases := []struct {
		name string
		dest string
		// settings of a server of the test's own; nil: the shared server
		settings map[string]string
		// lose loses the slot and returns the mark of the stream states from
		// which it shows as failed.
		lose func(e *env, states *stateLog) int
		// what the failed state's reason says happened
		what string
	}{
		{"dropped", "sqlite", nil, func(e *env, states *stateLog) int {
			mark := states.len()
			e.dropSlot()
			return mark
		}, "replication slot"},
		{"invalidated", "postgres", map[string]string{"max_slot_wal_keep_size": "16MB"}, func(e *env, states *stateLog) int {
			mark := states.len()
			e.s.Pause()
			_, mark = states.wait(e, mark, store.StatePaused)
			e.invalidateSlot()
			e.s.Resume()
			return mark
		}, "invalidated"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			faultBegin(t)
			srv := server
			if c.settings != nil {
				srv = faultServer(t, c.settings)
			}
			e := newEnvOn(t, srv, envOptions{dest: c.dest, setup: faultTable(faultRows),
				yaml: fmt.Sprintf("backfill: {mode: manual, chunk_size: %d, rows_per_second: %d}", faultChunk, faultRate)})
			e.start()
			load := e.faultLoad(faultRows, uint64(100+i), faultPace)
			id := e.initiateT()
			e.waitMidBackfill(id)
			e.phase("backfill a third done")
			states := e.stateLog()

			mark := c.lose(e, states)
			failed, next := states.wait(e, mark, store.StateFailed)
			e.phase("failed")
			t.Logf("failed: %q; states: %s", failed.Reason, statesText(states.since(mark)))
			if !strings.Contains(failed.Reason, c.what) || !strings.Contains(failed.Reason, "`tidemark stream reset "+e.cfg.Name+"`") {
				t.Fatalf("failed reason %q does not say what happened (%q) and to run `tidemark stream reset %s`", failed.Reason, c.what, e.cfg.Name)
			}
			// The rows keep changing while the slot is missing; the stream
			// waits for a person meanwhile.
			gap := load.writes.Load()
			e.waitFor("writes while the stream is failed", func() bool { return load.writes.Load() >= gap+200 })
			if st := e.s.State(); st.State != store.StateFailed {
				t.Fatalf("stream state %+v without a reset, want failed", st)
			}
			if !e.slotState(e.src).exists && c.name == "invalidated" {
				t.Fatal("the invalidated slot vanished before the reset")
			}

			duringGap := load.writes.Load() - gap
			e.s.Reset()
			states.wait(e, next, store.StateRunning)
			e.phase("running again after the reset")
			// The object shows the reset's backfill, completed and loaded.
			// The stream is running a moment before the reset initiates it
			// (backfillAll runs once the pipeline is up): until then the
			// object may still show the interrupted backfill's failure.
			tid := change.TableID{Schema: "public", Name: "t"}
			e.waitFor("the reset's backfill of t", func() bool {
				o := e.objectOf(tid)
				return o.BackfillID != id && o.BackfillID != 0
			})
			o := e.waitLoaded("t")
			reset := e.backfillRec(o.BackfillID)
			if reset.StartedBy != StartedByReset {
				t.Fatalf("the object's backfill %+v was not started by the reset", reset)
			}
			if old := e.backfillRec(id); old.Status != StatusStopped {
				t.Errorf("the interrupted backfill is %s, want stopped", old.Status)
			}
			recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, StartedBy: StartedByReset})
			if err != nil || len(recs) != 1 {
				t.Fatalf("reset backfills %+v (%v), want one", recs, err)
			}
			e.phase("reset backfill loaded")
			writes := load.stop()
			e.assertConverged("t")
			e.phase("converged")
			t.Logf("%d writes, %d while failed; reset backfill: rows_read %d, rows_removed %d, window conflicts %d",
				writes, duringGap, reset.RowsRead, reset.RowsRemoved, reset.WindowConflicts)
			if st := e.slotState(e.src); !st.exists || st.activePID == 0 {
				t.Errorf("slot %+v after the reset: want a new one, in use", st)
			}
		})
	}
}
