package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/store"
)

// startWorker runs a node's worker on the store at url until the test
// ends.
func startWorker(t *testing.T, url, node string) {
	t.Helper()
	startWorkerSlots(t, url, node, 4)
}

// startWorkerSlots is startWorker with slots attempts at once.
func startWorkerSlots(t *testing.T, url, node string, slots int) {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	w := remote.NewWorker(remote.Options{Store: st, Node: node, Host: "h-" + node, Slots: slots, Logger: slog.New(slog.DiscardHandler), Poll: 50 * time.Millisecond})
	epoch, ok, err := st.AcquireLease(t.Context(), w.Lease(), node, time.Minute)
	if err != nil || !ok {
		t.Fatalf("worker lease: %v %v", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx, epoch) })
	t.Cleanup(func() { cancel(); wg.Wait(); st.Close() })
}

// TestDispatchStopBeforeTaken: with no node to take it, a queued attempt
// stopped ends stopped at once and is never taken afterwards.
func TestDispatchStopBeforeTaken(t *testing.T) {
	url, err := server.CreateDatabase(t.Context(), "dispatch_stop")
	if err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeShell, "echo ran")}, envOpts{storeURL: url, dispatch: true})
	bf := v.submit(rangeReq("p.a", "2025-01-01", "2025-01-01"))
	var id int64
	v.until("the attempt queued", func() bool {
		ins := v.instances(bf.ID)
		if len(ins) == 1 && ins[0].State == store.InstanceRunning {
			id = ins[0].ID
			return true
		}
		return false
	})
	if err := v.e.StopInstance(t.Context(), id, "test"); err != nil {
		t.Fatal(err)
	}
	if got := v.wait(bf.ID); got.State != store.BatchStopped {
		t.Fatalf("backfill %s (%s), want stopped", got.State, got.Error)
	}
	epoch, ok, err := v.st.AcquireLease(t.Context(), remote.WorkerLeasePrefix+"late", "late", time.Minute)
	if err != nil || !ok {
		t.Fatalf("worker lease: %v %v", ok, err)
	}
	f := store.WorkerFence{Lease: remote.WorkerLeasePrefix + "late", Node: "late", Epoch: epoch}
	if got, err := v.st.ClaimBatchAttempts(t.Context(), f, 10); err != nil || len(got) != 0 {
		t.Errorf("a node asking after the stop took %v (%v), want nothing", got, err)
	}
	if ins := v.instances(bf.ID); ins[0].State != store.InstanceStopped || ins[0].Host != "" {
		t.Errorf("instance: %s on host %q, want stopped, never run", ins[0].State, ins[0].Host)
	}
}

// TestDispatchAdoptedByNextLeader: attempts run on a node's worker; the
// leader's engine stops while one runs and another starts on the store:
// it adopts it as running, and each instance succeeds in its first
// attempt, with the host of the node that ran it.
func TestDispatchAdoptedByNextLeader(t *testing.T) {
	url, err := server.CreateDatabase(t.Context(), "dispatch_adopt")
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, url, "w")
	tasks := []dag.Task{task(t, "a", dag.TypeShell, "sleep 1; echo done")}
	first := newEnv(t, tasks, envOpts{storeURL: url, dispatch: true})
	bf := first.submit(rangeReq("p.a", "2025-01-01", "2025-01-03"))
	first.until("an attempt started on the worker", func() bool {
		n := 0
		for _, in := range first.instances(bf.ID) {
			if in.State == store.InstanceRunning && in.PGID != 0 {
				n++
			}
		}
		return n == 1
	})
	first.stop()
	next := newEnv(t, tasks, envOpts{storeURL: url, dispatch: true})
	if got := next.wait(bf.ID); got.State != store.BatchSucceeded {
		t.Fatalf("backfill %s (%s), want succeeded", got.State, got.Error)
	}
	for _, in := range next.instances(bf.ID) {
		if in.Attempt != 1 || in.Host != "h-w" {
			t.Errorf("instance %d: attempt %d on host %q, want attempt 1 on h-w (adopted, not run again)", in.ID, in.Attempt, in.Host)
		}
	}
}

// TestDispatchLostThriceFails: an attempt lost with its node runs again
// without using a retry, but the third lost in a row fails the instance
// (a task that kills every node it runs on must not go round the cluster
// for ever), saying why. An attempt its watchdog ended for want of a
// renewed deadline, reported by a node that woke before it saw its lease
// lost, counts as lost with its node, not as the task's failure.
func TestDispatchLostThriceFails(t *testing.T) {
	for _, lapse := range []bool{false, true} {
		name := map[bool]string{false: "lease lost", true: "watchdog lapsed"}[lapse]
		t.Run(name, func(t *testing.T) { loseThrice(t, lapse) })
	}
}

func loseThrice(t *testing.T, lapse bool) {
	url, err := server.CreateDatabase(t.Context(), fmt.Sprintf("dispatch_lost_%t", lapse))
	if err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, []dag.Task{task(t, "a", dag.TypeShell, "echo never")}, envOpts{storeURL: url, dispatch: true, host: "h"})
	bf := v.submit(rangeReq("p.a", "2025-01-01", "2025-01-01"))
	for lost := 1; lost <= 3; lost++ {
		// A node takes the attempt, records it started on this host, and
		// dies (or its watchdog ends the task, and it says so).
		node := fmt.Sprintf("doomed%d", lost)
		lease := remote.WorkerLeasePrefix + node
		epoch, ok, err := v.st.AcquireLease(t.Context(), lease, node, time.Minute)
		if err != nil || !ok {
			t.Fatalf("worker lease: %v %v", ok, err)
		}
		f := store.WorkerFence{Lease: lease, Node: node, Epoch: epoch}
		var got []store.QueuedAttempt
		v.until(fmt.Sprintf("attempt %d queued", lost), func() bool {
			got, err = v.st.ClaimBatchAttempts(t.Context(), f, 1)
			return err == nil && len(got) == 1
		})
		if got[0].Attempt != lost {
			t.Fatalf("took attempt %d, want %d", got[0].Attempt, lost)
		}
		if err := v.st.StartBatchAttempt(t.Context(), f, got[0].InstanceID, got[0].Attempt, "h", 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if lapse {
			res := fmt.Sprintf(`{"error": "%s: killed by signal 9", "exit_code": -1, "lapsed": true, "node": %q}`, runner.ErrLapsed, node)
			if refused, err := v.st.EndBatchAttempts(t.Context(), f, []store.AttemptEnd{{InstanceID: got[0].InstanceID, Attempt: got[0].Attempt, Result: res}}); err != nil || len(refused) != 0 {
				t.Fatalf("end the attempt: refused %v, %v", refused, err)
			}
			continue
		}
		if err := v.st.ReleaseLease(t.Context(), lease, node, epoch); err != nil {
			t.Fatal(err) // as good as its lease expiring
		}
	}
	if got := v.wait(bf.ID); got.State != store.BatchFailed {
		t.Fatalf("backfill %s (%s), want failed", got.State, got.Error)
	}
	ins := v.instances(bf.ID)
	if len(ins) != 1 || ins[0].State != store.InstanceFailed || ins[0].Attempt != 3 || !strings.Contains(ins[0].Reason, "3 attempts in a row") {
		t.Errorf("instance %+v, want failed after 3 attempts, saying they were lost", ins)
	}
}

// TestDispatchVacuumsTheQueue: every claim and every end leaves a dead row
// version in the queue, and its partial index keeps their entries until
// the table is vacuumed; claims then scan them all (thousands after a few
// thousand no-ops, the time of each claim growing with them), and
// autovacuum comes a minute apart at best. The leader vacuums the queue
// every thousand ends it reads: after 1,111 no-op attempts through a
// node's worker it has, at least once.
func TestDispatchVacuumsTheQueue(t *testing.T) {
	url, err := server.CreateDatabase(t.Context(), "dispatch_vacuum")
	if err != nil {
		t.Fatal(err)
	}
	startWorkerSlots(t, url, "w", 64)
	// A task runs one cycle at a time: 100 tasks below a root, 11 days.
	tasks := []dag.Task{task(t, "r", dag.TypeNoop, "")}
	for i := range 100 {
		tasks = append(tasks, task(t, fmt.Sprintf("c%d", i), dag.TypeNoop, "", "r"))
	}
	v := newEnv(t, tasks, envOpts{storeURL: url, dispatch: true, groups: map[string]int{"default": 64}})
	// As a daemon does: the leader reads ends when a node notifies.
	ctx, cancel := context.WithCancel(context.Background())
	var listening sync.WaitGroup
	listening.Go(func() { _ = v.st.Listen(ctx, store.BatchDispatchChannel, nil, func(string) { v.e.WakeDispatch() }) })
	defer func() { cancel(); listening.Wait() }()
	req := rangeReq("p.r", "2025-01-01", "2025-01-11")
	req.Scope, req.Confirm = plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverDescendants}, true
	bf := v.submit(req)
	if got := v.wait(bf.ID); got.State != store.BatchSucceeded || got.Instances != 1111 {
		t.Fatalf("backfill %s of %d instances (%s), want succeeded, 1,111", got.State, got.Instances, got.Error)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var vacuums int
	if err := db.QueryRowContext(t.Context(), `SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'batch_dispatch'`).Scan(&vacuums); err != nil {
		t.Fatal(err)
	}
	if vacuums == 0 {
		t.Error("the queue was never vacuumed after 1,111 ends")
	}
}
