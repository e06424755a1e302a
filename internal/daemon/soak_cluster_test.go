//go:build soak

package daemon

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/cluster"
	"github.com/tidemark/tidemark/internal/store"
)

// TestSoakCluster is the soak's multi-node mode (make soak-cluster, see
// docs/soak.md): three nodes run one stream under a writer and a batch
// backfill of 240 shell instances that each hold a lock on their task and
// date. TIDEMARK_SOAK_KILLS times (default 10), at a random moment, a
// random node is SIGKILLed and restarted, or frozen with SIGSTOP past its
// lease and resumed (restarted if it exited, as a supervisor would). Then
// the stream's backfill has completed and the destination equals the
// source, every instance succeeded, no task and date ran twice at once and
// no concurrency group ran two dates at once.
func TestSoakCluster(t *testing.T) {
	kills := envInt(t, "TIDEMARK_SOAK_KILLS", 10)
	seed := envInt(t, "TIDEMARK_SOAK_SEED", time.Now().UnixNano())
	t.Logf("seed %d (TIDEMARK_SOAK_SEED=%d repeats the choices), %d kills", seed, seed, kills)
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	c := newClusterEnvWith(t, "soak_cluster", fmt.Sprintf(`
resource_groups: [{name: default, concurrency: 4}]
tasks:
  - {name: load, project: p, type: shell, schedule: daily, command: %[1]s}
  - {name: report, project: p, type: shell, schedule: daily, depends_on: [load], command: %[1]s}
`, strconv.Quote(journaledCommand(dir, journal))))
	c.startAll(cluster.StreamLease("crash"))
	writes := startWriter(t, c.src)
	c.initiateVia("b")
	id := submitBatch(t, c.nodes["c"].addr, `{"task": "load", "dates": {"from": "2025-01-01", "to": "2025-04-30"}, "scope": {"mode": "list", "downstream": 1}, "groups": 3}`)
	names := []string{"a", "b", "c"}
	stopped, frozen := 0, 0
	for i := range kills {
		time.Sleep(time.Duration(500+r.IntN(3000)) * time.Millisecond) // a random moment, not a wait for a state
		n := names[r.IntN(len(names))]
		node := c.nodes[n]
		c.revive()
		if r.IntN(2) == 0 {
			node.kill()
			node.start()
			stopped++
			t.Logf("%d: node %s SIGKILLed and restarted", i+1, n)
			continue
		}
		p := node.cmd.Process
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second) // past its lease (3s): others take its work
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		frozen++
		t.Logf("%d: node %s frozen for 4s and resumed", i+1, n)
	}
	c.revive()
	c.finish(writes)
	rec := c.batchEnded(id)
	if rec.State != store.BatchSucceeded || rec.States[store.InstanceSucceeded] != 240 {
		t.Fatalf("batch backfill = %s %v (%s), want 240 succeeded instances", rec.State, rec.States, rec.Error)
	}
	checkGroups(t, c.st, id, journal, 240)
	t.Logf("%d SIGKILLs and %d freezes; the stream's destination equals its source and all 240 instances succeeded", stopped, frozen)
}

// revive restarts the nodes that exited, as a supervisor would: a node
// that lost the batch lease while frozen exits by design.
func (c *clusterEnv) revive() {
	for n, node := range c.nodes {
		select {
		case <-node.done:
			node.start()
			c.t.Logf("node %s had exited; restarted", n)
		default:
		}
	}
}
