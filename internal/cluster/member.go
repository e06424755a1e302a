// Package cluster runs one node of several on a PostgreSQL metadata store
// (docs/cluster.md): it records the node, renews its heartbeat and the
// leases it holds, takes the work (a stream, the batch engine's lead) that
// nobody holds, spreads streams evenly over the live nodes, and stops work
// whose lease it can no longer prove before that lease can expire.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// Work is one thing a single node at a time may do.
type Work struct {
	// Lease names it: "stream:<name>" or "batch".
	Lease string
	// Pin, when set, is the only node that may take it.
	Pin string
	// Balanced work is spread evenly over the live nodes; other work goes
	// to whichever node takes it first and stays there.
	Balanced bool
	// Run does the work until ctx ends, which is when the lease is lost or
	// given up. epoch is the lease's: what Run writes must carry it.
	Run func(ctx context.Context, epoch int64) error
}

// Member is this node's membership.
type Member struct {
	st   *store.Store
	self store.Node
	ttl  time.Duration
	log  *slog.Logger
	work []Work

	mu    sync.Mutex
	terms map[string]*term // by lease
	wg    sync.WaitGroup
	// renewed is when the last heartbeat that renewed the leases was sent.
	renewed time.Time
}

type term struct {
	work   Work
	epoch  int64
	cancel context.CancelFunc
	// stopping: the work was told to stop (lease lost or given back) and
	// has not returned yet.
	stopping bool
}

// Lease names.
const BatchLease = "batch"

// StreamLease is the lease of stream name.
func StreamLease(name string) string { return "stream:" + name }

// Join records this node in the store. It fails when a live node has its
// name or another configuration.
//
// A node restarted at once finds its own record still live: when that
// record is of this host and its process is gone, Join waits for it to
// expire (at most ttl) rather than refuse.
func Join(ctx context.Context, st *store.Store, self store.Node, ttl time.Duration, work []Work, log *slog.Logger) (*Member, error) {
	deadline := time.Now().Add(ttl + time.Second)
	var rec store.Node
	for {
		var err error
		rec, err = st.JoinCluster(ctx, self, ttl)
		var taken *store.NodeTakenError
		if err == nil {
			break
		}
		if !errors.As(err, &taken) || taken.Holder.Host != self.Host || processAlive(taken.Holder.PID) || time.Now().After(deadline) {
			return nil, err
		}
		log.Info("this node's previous process left its record: waiting for it to expire", "node", self.Name, "pid", taken.Holder.PID)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return &Member{st: st, self: rec, ttl: ttl, log: log.With("node", self.Name), work: work, terms: map[string]*term{}}, nil
}

// Name is this node's name.
func (m *Member) Name() string { return m.self.Name }

// Holds reports whether this node runs the work of lease now.
func (m *Member) Holds(lease string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.terms[lease]
	return ok && !t.stopping
}

// hasTerm reports whether work of lease runs or is still stopping here.
func (m *Member) hasTerm(lease string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.terms[lease]
	return ok
}

// tick is how often the heartbeat runs, and margin how long before the
// lease's end on the server a node stops its work when it could not renew:
// its own clock may run slow against the server's, and stopping takes time.
func (m *Member) tick() time.Duration   { return max(m.ttl/4, 250*time.Millisecond) }
func (m *Member) margin() time.Duration { return max(m.ttl/4, 500*time.Millisecond) }

// KillBy is when what this node's work started must have ended, even if
// the node cannot act (frozen): past it the node's leases may expire on
// the server. It is a quarter of the margin after the work is told to
// stop, which leaves a stopping task a little grace and three quarters of
// the margin to spare. Shell tasks' watchdogs enforce it
// (runner.WatchTasks).
func (m *Member) KillBy() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewed.Add(m.ttl - m.margin()*3/4)
}

func (m *Member) setRenewed(sent time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.renewed = sent
}

// Run heartbeats and assigns work until ctx ends, then stops every piece
// of work and leaves the cluster. It returns an error when the node's own
// record was taken over (another process joined under its name after it
// expired): this process must not go on.
func (m *Member) Run(ctx context.Context) error {
	defer m.leave()
	// Leases taken before a renewal that was sent at sent stay ours until
	// sent+ttl on the server's clock at the earliest.
	start := time.Now()
	m.setRenewed(start)
	deadline := start.Add(m.ttl - m.margin())
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		sent := time.Now()
		until := deadline
		if !until.After(sent) {
			// Past the deadline: no work may go on, whatever the
			// heartbeat says; it still gets a tick's time, so that the node
			// comes back when the store does.
			m.dropAll("cut off from the metadata store")
			until = sent.Add(m.tick())
		}
		hctx, cancel := context.WithDeadline(ctx, until)
		held, err := m.st.Heartbeat(hctx, m.self.Name, m.self.StartedAt, m.ttl)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, store.ErrFenced):
			m.dropAll("this node's record was taken over")
			return fmt.Errorf("node %q: %w", m.self.Name, err)
		case err != nil:
			if time.Now().After(deadline) {
				m.dropAll("cut off from the metadata store")
			} else {
				m.log.Warn("heartbeat failed; retrying", logkey.Err(err))
			}
		default:
			deadline = sent.Add(m.ttl - m.margin())
			m.setRenewed(sent)
			m.dropLost(held)
			actx, cancel := context.WithDeadline(ctx, deadline)
			m.assign(actx, deadline)
			cancel()
		}
		// Wake by the deadline at the latest: a heartbeat that fails just
		// before it must not leave work running past it.
		timer.Reset(max(min(m.tick(), time.Until(deadline)), time.Millisecond))
	}
}

// dropLost stops the work whose lease the heartbeat did not renew, and
// gives back a lease the heartbeat renewed that no work of this node runs
// under (an acquisition whose answer was lost, a release that failed):
// nobody could take it otherwise, and its work would run nowhere.
func (m *Member) dropLost(held map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for lease, t := range m.terms {
		if epoch, ok := held[lease]; (!ok || epoch != t.epoch) && !t.stopping {
			m.log.Warn("lost a lease: stopping its work", "lease", lease, "epoch", t.epoch)
			m.stopLocked(t)
		}
	}
	for lease, epoch := range held {
		if t, ok := m.terms[lease]; !ok || t.epoch != epoch {
			go m.release(Work{Lease: lease}, epoch)
		}
	}
}

// dropAll stops every piece of work.
func (m *Member) dropAll(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	running := 0
	for _, t := range m.terms {
		if !t.stopping {
			running++
			m.stopLocked(t)
		}
	}
	if running > 0 {
		m.log.Error("stopping all work: "+why, "leases", running)
	}
}

// stopLocked ends a term without giving its lease back (it is no longer
// ours to give). The term stays until its work has returned, so that the
// work is not started again meanwhile.
func (m *Member) stopLocked(t *term) {
	t.stopping = true
	t.cancel()
}

// assign takes work nobody holds, up to this node's share of the balanced
// work, and gives back one piece of balanced work when it holds more than
// its share (another node then takes it).
func (m *Member) assign(ctx context.Context, deadline time.Time) {
	nodes, err := m.st.ClusterNodes(ctx)
	if err != nil {
		m.log.Warn("list nodes", logkey.Err(err))
		return
	}
	live := 0
	for _, n := range nodes {
		if n.Live {
			live++
		}
	}
	balanced := 0
	for _, w := range m.work {
		if w.Balanced && w.Pin == "" {
			balanced++
		}
	}
	share := (balanced + max(live, 1) - 1) / max(live, 1)
	m.mu.Lock()
	mine := 0
	for _, t := range m.terms {
		if t.work.Balanced && t.work.Pin == "" && !t.stopping {
			mine++
		}
	}
	m.mu.Unlock()
	for _, w := range m.work {
		if time.Now().After(deadline) {
			return
		}
		if m.hasTerm(w.Lease) || (w.Pin != "" && w.Pin != m.self.Name) {
			continue
		}
		spread := w.Balanced && w.Pin == ""
		if spread && mine >= share {
			continue
		}
		epoch, ok, err := m.st.AcquireLease(ctx, w.Lease, m.self.Name, m.ttl)
		if err != nil {
			m.log.Warn("acquire lease", "lease", w.Lease, logkey.Err(err))
			return
		}
		if !ok {
			continue
		}
		if spread {
			mine++
		}
		m.start(ctx, w, epoch)
	}
	if mine > share {
		m.giveBack()
	}
}

// start runs w under a new term.
func (m *Member) start(ctx context.Context, w Work, epoch int64) {
	// The work's writes to the store check the lease is still this
	// node's at epoch (store.WithWriteFence).
	tctx, cancel := context.WithCancel(store.WithWriteFence(context.WithoutCancel(ctx), w.Lease, m.self.Name, epoch))
	t := &term{work: w, epoch: epoch, cancel: cancel}
	m.mu.Lock()
	m.terms[w.Lease] = t
	m.mu.Unlock()
	m.log.Info("took a lease: starting its work", "lease", w.Lease, "epoch", epoch)
	m.wg.Go(func() {
		err := w.Run(tctx, epoch)
		if tctx.Err() == nil {
			// The work ended by itself: give the lease back so that the work
			// starts again (here or elsewhere) rather than stay held idle.
			m.log.Error("work ended by itself; giving its lease back", "lease", w.Lease, logkey.Err(err))
		}
		cancel()
		m.release(w, epoch)
		m.mu.Lock()
		delete(m.terms, w.Lease)
		m.mu.Unlock()
	})
}

// release gives a lease back once its work stopped; one already lost is
// left alone by the store (the epoch no longer matches).
func (m *Member) release(w Work, epoch int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.st.ReleaseLease(ctx, w.Lease, m.self.Name, epoch); err != nil {
		m.log.Warn("give back a lease", "lease", w.Lease, logkey.Err(err))
	}
}

// giveBack stops one piece of balanced work (the last by name) so that it
// moves to a node with less; its lease is released once it stopped.
func (m *Member) giveBack() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var leases []string
	for lease, t := range m.terms {
		if t.work.Balanced && t.work.Pin == "" && !t.stopping {
			leases = append(leases, lease)
		}
	}
	if len(leases) == 0 {
		return
	}
	sort.Strings(leases)
	lease := leases[len(leases)-1]
	m.log.Info("giving a stream to a node with fewer", "lease", lease)
	m.stopLocked(m.terms[lease])
}

// leave stops every piece of work, waits for it, and ends the node's
// record and leases so that other nodes take over at once.
func (m *Member) leave() {
	m.mu.Lock()
	for _, t := range m.terms {
		t.cancel()
	}
	m.mu.Unlock()
	// The leases are the work's until it has stopped (a task's grace
	// period, the interrupted ends it writes): keep renewing them.
	stopped := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(stopped)
	}()
	tick := time.NewTicker(m.tick())
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-stopped:
			waiting = false
		case <-tick.C:
			sent := time.Now()
			hctx, cancel := context.WithTimeout(context.Background(), m.tick())
			_, err := m.st.Heartbeat(hctx, m.self.Name, m.self.StartedAt, m.ttl)
			cancel()
			if err == nil {
				m.setRenewed(sent)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.st.LeaveCluster(ctx, m.self.Name, m.self.StartedAt); err != nil {
		m.log.Warn("leave the cluster", logkey.Err(err))
	}
}

// processAlive reports whether a process of this machine with pid lives.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
