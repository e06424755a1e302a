package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/batch/remote"
	"github.com/tidemark/tidemark/internal/cluster"
	"github.com/tidemark/tidemark/internal/store"
)

// TestClusterBatchAcrossNodes: 300 shell instances (two tasks over 150
// dates in three concurrency groups), each holding a lock on its task and
// date while it runs, are run by the workers of three nodes. The node
// running the most attempts is SIGKILLed twice during the run (and
// restarted), while an attempt of it runs that would outlive its lease:
// its watchdog ends that attempt's processes with the node, while the
// node's worker lease still holds. Every instance succeeds, more than one node ran them, no
// task and date ran twice at once (a second run would find the lock taken
// and fail: the tasks have no retries), and no concurrency group ran two
// dates at once.
func TestClusterBatchAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	cmd := journaledCommand(dir, journal)
	c := newCluster(t, "cluster_batch_nodes", fmt.Sprintf(`
resource_groups: [{name: default, concurrency: 6}]
tasks:
  - {name: load, project: p, type: shell, schedule: daily, command: %[1]s}
  - {name: report, project: p, type: shell, schedule: daily, depends_on: [load], command: %[1]s}
`, strconv.Quote(cmd)))
	c.startAll(cluster.BatchLease)
	id := submitBatch(t, c.nodes["b"].addr, `{"task": "load", "dates": {"from": "2025-01-01", "to": "2025-05-30"}, "scope": {"mode": "list", "downstream": 1}, "groups": 3}`)
	for kill := 1; kill <= 2; kill++ {
		var victim string
		c.waitFor(fmt.Sprintf("100 instances more to succeed and a node to run attempts before kill %d", kill), func() bool {
			rec, err := c.st.GetBatchBackfill(c.ctx, id)
			if err != nil || rec.States[store.InstanceSucceeded] < 100*kill-50 {
				return false
			}
			victim = c.busiestWorker()
			return victim != ""
		})
		slow, sleeper := c.slowAttempt(dir, journal, victim)
		c.nodes[victim].kill()
		// The task's watchdog ends its whole process group as the node
		// dies: while the node's worker lease still holds, so before any
		// other node may run the attempt again.
		c.waitFor("the killed node's task to end", func() bool { return syscall.Kill(sleeper, 0) != nil || zombie(sleeper) })
		if !c.leaseHolds(remote.WorkerLeasePrefix + victim) {
			leases, _ := c.st.Leases(c.ctx)
			t.Errorf("kill %d: node %s's task %d outlived its worker lease: %+v", kill, victim, sleeper, leases)
		}
		if err := os.Remove(slow); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d: node %s SIGKILLed while it ran attempts; its tasks ended with it", kill, victim)
		c.nodes[victim].start()
	}
	rec := c.batchEnded(id)
	if rec.State != store.BatchSucceeded || rec.States[store.InstanceSucceeded] != 300 {
		t.Fatalf("backfill = %s %v (%s), want 300 succeeded instances", rec.State, rec.States, rec.Error)
	}
	checkGroups(t, c.st, id, journal, 300)
}

// slowAttempt makes node victim's next attempt start a child that would
// outlive any lease (journaledCommand), waits for it, and returns the
// marker file to remove and the child's PID.
func (c *clusterEnv) slowAttempt(dir, journal, victim string) (string, int) {
	c.t.Helper()
	before, _ := os.ReadFile(journal)
	slow := filepath.Join(dir, "slow-"+victim)
	if err := os.WriteFile(slow, nil, 0o600); err != nil {
		c.t.Fatal(err)
	}
	var sleeper int
	c.waitFor("an attempt outliving its node's lease", func() bool {
		data, _ := os.ReadFile(journal)
		for _, line := range strings.Split(string(data[len(before):]), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "slow" && f[1] == victim {
				sleeper, _ = strconv.Atoi(f[2])
			}
		}
		return sleeper != 0
	})
	return slow, sleeper
}

// TestClusterFrozenNodeEndsItsTasks: a node frozen (SIGSTOP) while one of
// its shell attempts would outlive its lease has that attempt's processes
// ended by the attempt's watchdog while the node's worker lease still
// holds; resumed, the node finds its leases lost, and the attempt runs
// again (the first run would hold its lock otherwise): every instance
// succeeds.
func TestClusterFrozenNodeEndsItsTasks(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	c := newCluster(t, "cluster_frozen_tasks", fmt.Sprintf(`
resource_groups: [{name: default, concurrency: 3}]
tasks:
  - {name: load, project: p, type: shell, schedule: daily, command: %s}
`, strconv.Quote(journaledCommand(dir, journal))))
	c.startAll(cluster.BatchLease)
	id := submitBatch(t, c.nodes["a"].addr, `{"task": "load", "dates": {"from": "2025-01-01", "to": "2025-05-30"}, "scope": {"mode": "list"}}`)
	var victim string
	c.waitFor("a node other than the leader to run attempts", func() bool {
		leader, _, _ := c.st.LeaseHolder(c.ctx, cluster.BatchLease)
		victim = c.busiestWorker()
		return victim != "" && victim != leader.Name
	})
	slow, sleeper := c.slowAttempt(dir, journal, victim)
	frozen := c.nodes[victim].cmd.Process
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the frozen node's task to end", func() bool { return syscall.Kill(sleeper, 0) != nil || zombie(sleeper) })
	if !c.leaseHolds(remote.WorkerLeasePrefix + victim) {
		t.Errorf("node %s's task outlived its worker lease while the node was frozen", victim)
	}
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	rec := c.batchEnded(id)
	if rec.State != store.BatchSucceeded || rec.States[store.InstanceSucceeded] != 150 {
		t.Fatalf("backfill = %s %v (%s), want 150 succeeded instances", rec.State, rec.States, rec.Error)
	}
	checkGroups(t, c.st, id, journal, 150)
}

// busiestWorker is the node whose worker runs the most attempts now; ""
// when none runs any.
func (c *clusterEnv) busiestWorker() string {
	conn, err := pgx.Connect(c.ctx, c.meta)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(c.ctx)
	var node string
	err = conn.QueryRow(c.ctx, `SELECT "node" FROM "batch_dispatch" WHERE "node" IS NOT NULL AND "result" IS NULL
		GROUP BY "node" ORDER BY count(*) DESC LIMIT 1`).Scan(&node)
	if err == pgx.ErrNoRows {
		return ""
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return node
}

// checkGroups reads the journal: every instance ran to its end, on more
// than one node, and no concurrency group had two dates running at once.
// An attempt killed with its node wrote no end: it is left out.
func checkGroups(t *testing.T, st *store.Store, id int64, journal string, want int) {
	t.Helper()
	insts, err := st.ListBatchInstances(context.Background(), store.BatchInstanceFilter{BackfillID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	group := map[string]int{} // task date → group
	for _, in := range insts {
		group[in.Task+" "+in.BizTime.Format("20060102")] = in.Group
	}
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	ended := map[string]bool{} // run → it wrote its end
	for _, line := range lines {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "end" {
			ended[f[3]] = true
		}
	}
	running := map[int]map[string]int{} // group → date → runs
	nodes := map[string]bool{}
	done := map[string]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 5 || !ended[f[3]] {
			continue
		}
		key := f[1] + " " + f[2]
		g, found := group[key]
		if !found {
			t.Fatalf("journal line %q names no instance of the backfill", line)
		}
		if running[g] == nil {
			running[g] = map[string]int{}
		}
		switch f[0] {
		case "start":
			for d, k := range running[g] {
				if k > 0 && d != f[2] {
					t.Errorf("group %d ran dates %s and %s at once", g, d, f[2])
				}
			}
			running[g][f[2]]++
			nodes[f[4]] = true
		case "end":
			running[g][f[2]]--
			done[key] = true
		}
	}
	if len(done) != want {
		t.Errorf("%d task dates ran to their end, want %d", len(done), want)
	}
	if len(nodes) < 2 {
		t.Errorf("attempts ran on nodes %v, want more than one", nodes)
	}
	t.Logf("attempts ran on nodes %v", nodes)
}

// journaledCommand is a shell task that holds a lock on its task and date
// (a second run at once fails, exit 99) and writes its start (with its
// node) and end to journal; while dir holds slow-<node>, it starts a
// child that would outlive any lease on that node, journaling its PID.
func journaledCommand(dir, journal string) string {
	return fmt.Sprintf(`exec 9>"%[1]s/lock-$TIDEMARK_TASK-$TIDEMARK_BIZDATE"; flock -n 9 || { echo "$TIDEMARK_TASK $TIDEMARK_BIZDATE is locked: an earlier run still lives" >&2; exit 99; }; `+
		`echo "start $TIDEMARK_TASK $TIDEMARK_BIZDATE $TIDEMARK_INSTANCE-$TIDEMARK_ATTEMPT $TIDEMARK_NODE" >> "%[2]s"; `+
		`if [ -e "%[1]s/slow-$TIDEMARK_NODE" ]; then sleep 60 & echo "slow $TIDEMARK_NODE $!" >> "%[2]s"; wait $!; else sleep 0.05; fi; `+
		`echo "end $TIDEMARK_TASK $TIDEMARK_BIZDATE $TIDEMARK_INSTANCE-$TIDEMARK_ATTEMPT $TIDEMARK_NODE" >> "%[2]s"`, dir, journal)
}

// zombie reports whether pid has exited but is not reaped yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// leaseHolds reports whether lease has not expired yet, by the metadata
// server's clock.
func (c *clusterEnv) leaseHolds(lease string) bool {
	c.t.Helper()
	conn, err := pgx.Connect(c.ctx, c.meta)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(c.ctx)
	var holds bool
	if err := conn.QueryRow(c.ctx, `SELECT "expires_at" > now() FROM "leases" WHERE "name" = $1`, lease).Scan(&holds); err != nil {
		c.t.Fatal(err)
	}
	return holds
}

// batchEnded waits until batch backfill id has ended and returns it.
func (c *clusterEnv) batchEnded(id int64) store.BatchBackfill {
	c.t.Helper()
	var rec store.BatchBackfill
	c.waitFor("the batch backfill to end", func() bool {
		var err error
		rec, err = c.st.GetBatchBackfill(c.ctx, id)
		return err == nil && rec.State != store.BatchRunning && rec.State != store.BatchWaiting
	})
	return rec
}
