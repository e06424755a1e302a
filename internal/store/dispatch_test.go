package store_test

import (
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// TestBatchDispatch: attempts a leader queues are taken by nodes holding
// their worker lease, each by one node only however many ask at once; a
// node whose lease moved can neither take nor end; a stop takes an
// unclaimed attempt off the queue and flags a claimed one; the leader
// reads ends and lost attempts, and recording an end clears the entry.
func TestBatchDispatch(t *testing.T) {
	ctx := t.Context()
	s := openURL(t, postgresURL(t))
	const n = 60
	claims := queueForTest(t, s, n)
	fences := workerFences(t, s, "a", "b", "c")
	// Each node takes 7, then all three take 7 at a time, at once, until
	// the queue is empty.
	var mu sync.Mutex
	owner := map[int64]string{}
	for _, node := range []string{"a", "b", "c"} {
		got, err := s.ClaimBatchAttempts(ctx, fences[node], 7)
		if err != nil || len(got) != 7 {
			t.Fatalf("%s takes %d, %v; want 7", node, len(got), err)
		}
		for _, a := range got {
			owner[a.InstanceID] = node
		}
	}
	var wg sync.WaitGroup
	for node, f := range fences {
		wg.Go(func() {
			for {
				got, err := s.ClaimBatchAttempts(ctx, f, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, a := range got {
					if prev, dup := owner[a.InstanceID]; dup {
						t.Errorf("instance %d taken by %s and %s", a.InstanceID, prev, node)
					}
					owner[a.InstanceID] = node
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != n {
		t.Fatalf("%d of %d attempts taken", len(owner), n)
	}

	// Node a's lease moves: it can no longer take or end anything.
	var ofA []int64
	for id, node := range owner {
		if node == "a" {
			ofA = append(ofA, id)
		}
	}
	if err := s.ReleaseLease(ctx, "worker:a", "a", fences["a"].Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimBatchAttempts(ctx, fences["a"], 1); !errors.Is(err, store.ErrFenced) {
		t.Errorf("claim after the lease moved: %v, want ErrFenced", err)
	}
	if len(ofA) > 0 {
		_, err := s.EndBatchAttempts(ctx, fences["a"], []store.AttemptEnd{{InstanceID: ofA[0], Attempt: 1, Result: `{}`}})
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("end after the lease moved: %v, want ErrFenced", err)
		}
	}

	// Node b ends its attempts, one of another node's among them.
	var ofB, ofC []int64
	for id, node := range owner {
		switch node {
		case "b":
			ofB = append(ofB, id)
		case "c":
			ofC = append(ofC, id)
		}
	}
	if len(ofB) == 0 || len(ofC) == 0 {
		t.Fatalf("attempts per node: %v", owner)
	}
	ends := []store.AttemptEnd{{InstanceID: ofC[0], Attempt: 1, Result: `{"node":"b"}`}}
	for _, id := range ofB {
		ends = append(ends, store.AttemptEnd{InstanceID: id, Attempt: 1, Result: `{"node":"b"}`})
	}
	refused, err := s.EndBatchAttempts(ctx, fences["b"], ends)
	if err != nil || len(refused) != 1 || refused[0] != ofC[0] {
		t.Errorf("ends of b with one of c's: refused %v, %v; want c's refused", refused, err)
	}

	// Node c is asked to stop one attempt.
	if unclaimed, err := s.StopBatchAttempt(ctx, ofC[0], 1, `{"error":"stopped"}`); err != nil || unclaimed {
		t.Errorf("stop a taken attempt: unclaimed %v, %v", unclaimed, err)
	}
	asked, err := s.StopRequests(ctx, fences["c"])
	if err != nil || len(asked) != 1 || asked[ofC[0]] != 1 {
		t.Errorf("stop requests of c: %v, %v", asked, err)
	}

	out, err := s.ListBatchDispatch(ctx, "worker:", true)
	if err != nil {
		t.Fatal(err)
	}
	ended, lost := 0, 0
	for _, a := range out {
		switch {
		case a.Result != "":
			ended++
		case a.Lost:
			lost++
		}
	}
	if ended != len(ofB) || lost != len(ofA) {
		t.Errorf("leader reads %d ended and %d lost, want %d and %d", ended, lost, len(ofB), len(ofA))
	}

	// Recording the ends clears their entries; a queued attempt stopped
	// before any node took it leaves the queue.
	var done []store.BatchInstance
	for _, in := range claims {
		if owner[in.ID] == "b" {
			in.State = store.InstanceSucceeded
			done = append(done, in)
		}
	}
	again := claims[0]
	again.Attempt = 2
	if owner[again.ID] == "b" {
		again = claims[1]
		again.Attempt = 2
	}
	if err := s.WriteBatchDispatch(ctx, done, []store.QueuedAttempt{{InstanceID: again.ID, Attempt: 2, Spec: `{"type":"noop"}`}}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateBatchInstances(ctx, []store.BatchInstance{again}); err != nil {
		t.Fatal(err)
	}
	if unclaimed, err := s.StopBatchAttempt(ctx, again.ID, 2, `{"error":"stopped before a node took it"}`); err != nil || !unclaimed {
		t.Errorf("stop an attempt no node took: unclaimed %v, %v; want true", unclaimed, err)
	}
	if got, err := s.ClaimBatchAttempts(ctx, fences["c"], 10); err != nil || len(got) != 0 {
		t.Errorf("claim after the stop: %v, %v; want nothing (it ended)", got, err)
	}
	left, err := s.ListBatchDispatch(ctx, "worker:", false)
	if err != nil {
		t.Fatal(err)
	}
	if want := n - len(ofB); len(left) != want {
		t.Errorf("%d queue entries left, want %d", len(left), want)
	}
	// A lost attempt is marked once; an attempt of a node whose lease is
	// live is not lost.
	for _, a := range left {
		switch a.Node {
		case "a":
			if lost, _, err := s.MarkAttemptLost(ctx, a, "worker:a", `{"error":"lost"}`); err != nil || !lost {
				t.Errorf("mark a's attempt lost: %v, %v", lost, err)
			}
			if lost, _, err := s.MarkAttemptLost(ctx, a, "worker:a", `{"error":"lost"}`); err != nil || lost {
				t.Errorf("mark it lost again: %v, %v; want false", lost, err)
			}
		case "c":
			if lost, _, err := s.MarkAttemptLost(ctx, a, "worker:c", `{"error":"lost"}`); err != nil || lost {
				t.Errorf("mark an attempt of a node holding its lease lost: %v, %v; want false", lost, err)
			}
		}
	}
}

// TestBatchClaimsShareTheQueue: attempts queued together spread over the
// nodes that are up (live worker leases; not other leases, nor released
// ones): of 30, each of three nodes with slots for all takes its 10,
// whichever asks first; a node already running its share takes one at a
// time, until attempts have waited long enough to be anyone's; a lone
// node takes what its slots allow.
func TestBatchClaimsShareTheQueue(t *testing.T) {
	ctx := t.Context()
	s := openURL(t, postgresURL(t))
	queueForTest(t, s, 30)
	fences := workerFences(t, s, "a", "b", "c", "gone")
	if err := s.ReleaseLease(ctx, "worker:gone", "gone", fences["gone"].Epoch); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"batch", "stream:x"} {
		if _, ok, err := s.AcquireLease(ctx, other, "a", time.Minute); err != nil || !ok {
			t.Fatalf("lease %s: %v %v", other, ok, err)
		}
	}
	for _, node := range []string{"a", "b", "c"} {
		if got, err := s.ClaimBatchAttempts(ctx, fences[node], 64); err != nil || len(got) != 10 {
			t.Fatalf("%s takes %d of 30 (%v), want its share of 10", node, len(got), err)
		}
	}
	url := postgresURL(t)
	lone := openURL(t, url)
	queueForTest(t, lone, 30)
	f := workerFences(t, lone, "a")["a"]
	if got, err := lone.ClaimBatchAttempts(ctx, f, 12); err != nil || len(got) != 12 {
		t.Fatalf("a lone node takes %d (%v), want 12, its free slots", len(got), err)
	}
	// Three nodes again, a running 12 of 30 queued or running: its share
	// is spent, and it takes one at a time.
	more := workerFences(t, lone, "b", "c")
	if got, err := lone.ClaimBatchAttempts(ctx, f, 64); err != nil || len(got) != 1 {
		t.Fatalf("a takes %d beyond its share (%v), want 1", len(got), err)
	}
	if got, err := lone.ClaimBatchAttempts(ctx, more["b"], 64); err != nil || len(got) != 10 {
		t.Fatalf("b takes %d (%v), want its share of 10", len(got), err)
	}
	// c takes nothing (it died, say): once the 7 left have waited, a
	// takes them all.
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE "batch_dispatch" SET "queued_at" = now() - interval '1 minute' WHERE "node" IS NULL`); err != nil {
		t.Fatal(err)
	}
	if got, err := lone.ClaimBatchAttempts(ctx, f, 64); err != nil || len(got) != 7 {
		t.Fatalf("a takes %d of the 7 that waited (%v), want them all", len(got), err)
	}
}

// queueForTest records a backfill of n instances, claimed and queued for
// the nodes, and returns their records.
func queueForTest(t *testing.T, s *store.Store, n int) []store.BatchInstance {
	t.Helper()
	ctx := t.Context()
	insts, deps := benchPlan(n, 3)
	bf := &store.BatchBackfill{Name: "queue", Task: "task_000", StartedBy: "test", RunAt: time.Now()}
	if err := s.CreateBatchBackfill(ctx, bf, insts, deps); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: bf.ID, Limit: n})
	if err != nil || len(all) != n {
		t.Fatalf("instances: %d, %v", len(all), err)
	}
	var claims []store.BatchInstance
	var queue []store.QueuedAttempt
	for _, in := range all {
		in.State, in.Attempt = store.InstanceRunning, 1
		claims = append(claims, in)
		queue = append(queue, store.QueuedAttempt{InstanceID: in.ID, Attempt: 1, Spec: `{"type":"noop"}`})
	}
	if err := s.WriteBatchDispatch(ctx, claims, queue); err != nil {
		t.Fatal(err)
	}
	return claims
}

// workerFences acquires the worker leases of nodes.
func workerFences(t *testing.T, s *store.Store, nodes ...string) map[string]store.WorkerFence {
	t.Helper()
	fences := map[string]store.WorkerFence{}
	for _, node := range nodes {
		epoch, ok, err := s.AcquireLease(t.Context(), "worker:"+node, node, time.Minute)
		if err != nil || !ok {
			t.Fatalf("lease of %s: %v %v", node, ok, err)
		}
		fences[node] = store.WorkerFence{Lease: "worker:" + node, Node: node, Epoch: epoch}
	}
	return fences
}
