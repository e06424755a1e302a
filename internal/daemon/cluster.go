package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/cluster"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// join records this daemon as a node of the cluster (docs/cluster.md) with
// its work: every stream, balanced over the nodes unless pinned, and the
// batch engine's lead.
func (d *Daemon) join(ctx context.Context) error {
	c := d.cfg.Cluster
	hold, err := d.st.JoinStore(ctx)
	if err != nil {
		return err
	}
	d.hold = hold
	var work []cluster.Work
	for _, s := range d.streams {
		work = append(work, cluster.Work{Lease: cluster.StreamLease(s.Name()), Pin: s.Config().Node, Balanced: true, Run: s.RunAs})
	}
	d.batchEnded = make(chan error, 1)
	if d.batch != nil {
		d.worker = d.newWorker()
		work = append(work, cluster.Work{Lease: cluster.BatchLease, Run: d.leadBatch},
			cluster.Work{Lease: d.worker.Lease(), Pin: c.Node, Run: d.worker.Run})
	}
	self := store.Node{Name: c.Node, Host: c.Host, PID: os.Getpid(), API: c.Advertise, ConfigHash: d.cfg.Fingerprint()}
	m, err := cluster.Join(ctx, d.st, self, c.Lease, work, d.log)
	if err != nil {
		return errors.Join(err, hold.Release())
	}
	d.member = m
	if d.worker != nil {
		// A shell task ends before its node's leases can expire, even
		// when the node is killed or frozen: before another node may run
		// the attempt again.
		if !runner.WatchTasks(m.KillBy) {
			d.log.Warn("shell tasks run without a watchdog: a killed node's tasks may outlive it (this executable cannot be one)")
		}
	}
	return nil
}

// leadBatch runs the batch engine while this node holds the batch lease,
// its every write fenced by the lease's epoch. An engine runs once: when
// the lease is lost while the daemon goes on, batchLost stops the daemon,
// and a restart joins afresh (under a supervisor such as systemd).
func (d *Daemon) leadBatch(ctx context.Context, epoch int64) error {
	if d.batchLed.Swap(true) {
		return errors.New("this node led the batch engine once already: a restart leads it again")
	}
	d.st.FenceBatchWrites(cluster.BatchLease, d.cfg.Cluster.Node, epoch)
	err := d.runBatch(ctx)
	d.batchEnded <- err
	return err
}

// batchLost ends the daemon when its batch engine stopped before the
// daemon did.
func (d *Daemon) batchLost(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.batchEnded:
		if ctx.Err() != nil {
			return nil
		}
		return errors.Join(fmt.Errorf("node %s lost the batch engine's lease: stopping, so that a restart joins the cluster afresh (its tasks were ended)", d.cfg.Cluster.Node), err)
	}
}

// holdStore keeps this node's hold on the store (store.JoinStore), taking
// it again when its session ends (the store restarted, the node was cut
// off): while any node holds it, a daemon without a cluster section cannot
// start on the store. If one did meanwhile, this node stops.
func (d *Daemon) holdStore(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.hold.Lost():
		}
		d.log.Warn("lost this node's hold on the metadata store; taking it again", logkey.Err(d.hold.Err()))
		for {
			hold, err := d.st.JoinStore(ctx)
			if err == nil {
				d.hold = hold
				break
			}
			if errors.Is(err, store.ErrHeldAlone) {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// newWorker makes this node's worker: it runs the attempts the batch
// leader queues (docs/cluster.md), as many at once as all resource
// groups together allow, so that one node can run everything.
func (d *Daemon) newWorker() *remote.Worker {
	slots, hasDefault := 0, false
	for _, g := range d.cfg.ResourceGroups {
		slots += g.Concurrency
		hasDefault = hasDefault || g.Name == config.DefaultResourceGroup
	}
	if !hasDefault {
		slots += engine.DefaultConcurrency
	}
	return remote.NewWorker(remote.Options{
		Store: d.st, Node: d.cfg.Cluster.Node, Host: d.cfg.Cluster.Host, Slots: slots,
		Connections: connections(d.cfg), LookupEnv: os.LookupEnv,
		LogLimit: d.cfg.Batch.LogLimitBytes, Logger: d.log,
	})
}

// listenDispatch wakes this node's worker and batch engine when attempts
// are queued, asked to stop or ended, reconnecting after a failure.
func (d *Daemon) listenDispatch(ctx context.Context) error {
	for ctx.Err() == nil {
		err := d.st.Listen(ctx, store.BatchDispatchChannel, func() { d.wakeDispatch() }, func(payload string) {
			wakeFor(payload, d.worker.Wake, d.batch.WakeDispatch)
		})
		if err != nil && ctx.Err() == nil {
			d.log.Warn("listen for queued attempts; retrying", logkey.Err(err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

func (d *Daemon) wakeDispatch() {
	d.worker.Wake()
	d.batch.WakeDispatch()
}

// wakeFor wakes whoever a notification concerns, the node's worker or
// its batch leader: a worker woken by every end another node writes (its
// own too) takes nothing, in a transaction of its own each time. What it
// does not know wakes both.
func wakeFor(payload string, worker, leader func()) {
	switch payload {
	case store.NotifyQueued:
		worker()
	case store.NotifyEnded:
		leader()
	default:
		worker()
		leader()
	}
}
