package store_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

func clusterNode(name, hash string) store.Node {
	return store.Node{Name: name, Host: "h", PID: os.Getpid(), API: "http://127.0.0.1:1", ConfigHash: hash}
}

// TestClusterMembership: a live node's name is refused to another, as is
// another configuration; an expired node's name may be taken over, and
// the old incarnation's heartbeat is then fenced.
func TestClusterMembership(t *testing.T) {
	ctx := t.Context()
	s := openURL(t, postgresURL(t))
	a, err := s.JoinCluster(ctx, clusterNode("a", "f1"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.JoinCluster(ctx, clusterNode("a", "f1"), time.Second)
	var taken *store.NodeTakenError
	if !errors.As(err, &taken) || !strings.Contains(err.Error(), `node name "a" is in use by a live tidemark node`) {
		t.Errorf("second node a: %v, want a NodeTakenError", err)
	}
	_, err = s.JoinCluster(ctx, clusterNode("b", "f2"), time.Second)
	var mismatch *store.ConfigMismatchError
	if !errors.As(err, &mismatch) || mismatch.Node != "a" || !strings.Contains(err.Error(), "deploy the same file to every node") {
		t.Errorf("node b with another configuration: %v, want a ConfigMismatchError naming a", err)
	}
	time.Sleep(2100 * time.Millisecond) // a lets its record expire
	a2, err := s.JoinCluster(ctx, clusterNode("a", "f2"), time.Second)
	if err != nil {
		t.Fatalf("join under an expired node's name: %v", err)
	}
	if _, err := s.Heartbeat(ctx, "a", a.StartedAt, time.Second); !errors.Is(err, store.ErrFenced) {
		t.Errorf("heartbeat of the replaced incarnation: %v, want ErrFenced", err)
	}
	if _, err := s.Heartbeat(ctx, "a", a2.StartedAt, time.Second); err != nil {
		t.Errorf("heartbeat of the new incarnation: %v", err)
	}
	if err := s.LeaveCluster(ctx, "a", a2.StartedAt); err != nil {
		t.Fatal(err)
	}
	nodes, err := s.ClusterNodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Live {
		t.Errorf("nodes after leaving: %+v, %v; want a, not live", nodes, err)
	}
}

// TestLeases: one holder at a time; the epoch grows with each holder; a
// heartbeat renews what the node holds and leaves out what it lost; the
// batch fence refuses writes once the lease moved.
func TestLeases(t *testing.T) {
	ctx := t.Context()
	s := openURL(t, postgresURL(t))
	ttl := 2 * time.Second
	a, err := s.JoinCluster(ctx, clusterNode("a", "f"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.JoinCluster(ctx, clusterNode("b", "f"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e1, ok, err := s.AcquireLease(ctx, "batch", "a", ttl)
	if err != nil || !ok || e1 != 1 {
		t.Fatalf("a takes batch: epoch %d, %v, %v; want epoch 1", e1, ok, err)
	}
	if _, ok, err := s.AcquireLease(ctx, "batch", "b", ttl); err != nil || ok {
		t.Fatalf("b takes a's live lease: %v, %v; want refused", ok, err)
	}
	held, err := s.Heartbeat(ctx, "a", a.StartedAt, ttl)
	if err != nil || held["batch"] != 1 {
		t.Fatalf("a's heartbeat: %v, %v; want batch at epoch 1", held, err)
	}
	s.FenceBatchWrites("batch", "a", e1)
	write := func() error { return s.PutScheduleCursor(ctx, "p.t", time.Now()) }
	if err := write(); err != nil {
		t.Fatalf("a fenced write while a holds the lease: %v", err)
	}
	// A stream's writes are fenced through their context.
	es, ok, err := s.AcquireLease(ctx, "stream:s", "a", ttl)
	if err != nil || !ok {
		t.Fatalf("a takes stream:s: %v, %v", ok, err)
	}
	sctx := store.WithWriteFence(ctx, "stream:s", "a", es)
	obj := store.Object{Stream: "s", Schema: "public", Table: "t", Status: store.StatusActive}
	if err := s.PutObject(sctx, obj); err != nil {
		t.Fatalf("a stream's fenced write while its node holds the lease: %v", err)
	}
	if err := s.CreateBackfill(sctx, &store.Backfill{Stream: "s", Schema: "public", Table: "t", StartedBy: "test"}); err != nil {
		t.Fatalf("a stream's fenced insert while its node holds the lease: %v", err)
	}
	time.Sleep(ttl + 100*time.Millisecond) // a stops renewing
	e2, ok, err := s.AcquireLease(ctx, "batch", "b", ttl)
	if err != nil || !ok || e2 != 2 {
		t.Fatalf("b takes the expired lease: epoch %d, %v, %v; want epoch 2", e2, ok, err)
	}
	if err := write(); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a's write after b took the lease: %v, want ErrFenced", err)
	}
	if _, ok, err := s.AcquireLease(ctx, "stream:s", "b", ttl); err != nil || !ok {
		t.Fatalf("b takes stream:s: %v, %v", ok, err)
	}
	obj.Status = store.StatusCompleted
	if err := s.PutObject(sctx, obj); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a stream's write after another node took it: %v, want ErrFenced", err)
	}
	if o, err := s.GetObject(ctx, "s", "public", "t"); err != nil || o.Status != store.StatusActive {
		t.Errorf("object after the refused write: %+v %v, want it active still", o, err)
	}
	if err := s.CreateBackfill(sctx, &store.Backfill{Stream: "s", Schema: "public", Table: "t", StartedBy: "test"}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a stream's insert after another node took it: %v, want ErrFenced", err)
	}
	held, err = s.Heartbeat(ctx, "a", a.StartedAt, ttl)
	if err != nil || len(held) != 0 {
		t.Errorf("a's heartbeat after losing the lease: %v, %v; want nothing held", held, err)
	}
	if h, ok, err := s.LeaseHolder(ctx, "batch"); err != nil || !ok || h.Name != "b" {
		t.Errorf("holder = %+v, %v, %v; want b", h, ok, err)
	}
	if err := s.ReleaseLease(ctx, "batch", "b", e2); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.LeaseHolder(ctx, "batch"); ok {
		t.Error("a released lease still has a holder")
	}
	if e3, ok, err := s.AcquireLease(ctx, "batch", "b", ttl); err != nil || !ok || e3 != 3 {
		t.Errorf("b takes the released lease again: epoch %d, %v, %v; want epoch 3", e3, ok, err)
	}
	_ = b
}

// TestClusterNeedsPostgres: a SQLite store refuses cluster operations.
// TestFrozenWriterLetsLeaseGo: a node frozen inside a fenced write holds the
// lease row's share lock; with IdleTransactionLimit the server ends its
// session, so another node takes the lease once it expires instead of
// waiting for the frozen one to wake. Without the limit the takeover
// blocks for as long as the transaction stays open.
func TestFrozenWriterLetsLeaseGo(t *testing.T) {
	ctx := t.Context()
	url := postgresURL(t)
	ttl := 2 * time.Second
	frozen, err := store.Open(ctx, url, store.IdleTransactionLimit(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	other := openURL(t, url)
	epoch, ok, err := frozen.AcquireLease(ctx, "batch", "a", ttl)
	if err != nil || !ok {
		t.Fatalf("a takes batch: %v, %v", ok, err)
	}
	frozen.FenceBatchWrites("batch", "a", epoch)
	end, err := store.HoldFencedTx(ctx, frozen)
	if err != nil {
		t.Fatalf("fenced transaction of the holder: %v", err)
	}
	deadline := time.Now().Add(4 * ttl)
	for {
		tryCtx, cancel := context.WithTimeout(ctx, ttl)
		next, ok, err := other.AcquireLease(tryCtx, "batch", "b", ttl)
		cancel()
		if err == nil && ok {
			if next != epoch+1 {
				t.Errorf("b's epoch %d, want %d", next, epoch+1)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b could not take the lease of a holder frozen in a transaction within %s: %v, %v", 4*ttl, ok, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a lease as a node does
	}
	if err := end(); err == nil {
		t.Error("the frozen holder's transaction was still open after its session should have been ended")
	}
}

func TestClusterNeedsPostgres(t *testing.T) {
	s := openURL(t, sqliteURL(t))
	if _, err := s.JoinCluster(t.Context(), clusterNode("a", "f"), time.Second); !errors.Is(err, store.ErrClusterNeedsPostgres) {
		t.Errorf("join on SQLite: %v, want ErrClusterNeedsPostgres", err)
	}
}
