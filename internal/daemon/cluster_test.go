package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/cluster"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/testutil"
)

// clusterEnv is three daemon processes, nodes a, b and c, running one
// configuration file on one PostgreSQL metadata store, with one stream of
// crashRows rows into a PostgreSQL destination.
type clusterEnv struct {
	t     *testing.T
	ctx   context.Context
	st    *store.Store
	nodes map[string]*crashEnv
	logs  map[string]*testutil.LockedBuffer
	src   string
	dst   string
}

func newClusterEnv(t *testing.T, name string) *clusterEnv {
	ctx := context.Background()
	meta, err := server.CreateDatabase(ctx, name+"_meta")
	if err != nil {
		t.Fatal(err)
	}
	src, _ := crashSource(t, ctx, name+"_src", fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, crashRows))
	dst, err := server.CreateDatabase(ctx, name+"_dst")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tidemark.yaml")
	// One file for every node: each gets its name and address from the
	// environment, as a deployment would.
	err = os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
metadata: "%s"
cluster: {lease: 3s}
streams:
  - name: crash
    source: {type: postgres, dsn: "%s", slot: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.t"]
    backfill: {mode: manual, chunk_size: 1000, rows_per_second: 10000}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`, meta, src, name, dst)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clusterEnv{t: t, ctx: ctx, st: st, nodes: map[string]*crashEnv{}, logs: map[string]*testutil.LockedBuffer{}, src: src, dst: dst}
	for _, n := range []string{"a", "b", "c"} {
		addr := freeAddr(t)
		c.logs[n] = &testutil.LockedBuffer{}
		c.nodes[n] = &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, srcDSN: src, dstDSN: dst, addr: addr,
			env: []string{config.EnvNode + "=" + n, config.EnvListen + "=" + addr}, stderr: io.MultiWriter(os.Stderr, c.logs[n])}
	}
	return c
}

// owner waits until a live node other than not runs the stream, and
// returns it.
func (c *clusterEnv) owner(not string) string {
	c.t.Helper()
	var name string
	deadline := time.Now().Add(time.Minute)
	for {
		h, ok, err := c.st.LeaseHolder(c.ctx, cluster.StreamLease("crash"))
		s, serr := c.st.GetStream(c.ctx, "crash")
		if err == nil && serr == nil && ok && h.Name != not && s.State == store.StateRunning {
			name = h.Name
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no node other than %q runs the stream after a minute", not)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return name
}

func (c *clusterEnv) backfill() store.Backfill {
	recs, err := c.st.ListBackfills(c.ctx, store.BackfillFilter{Stream: "crash"})
	if err != nil || len(recs) == 0 {
		return store.Backfill{}
	}
	return recs[0]
}

func (c *clusterEnv) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startAll starts node a, waits for it to run the stream, then b and c.
func (c *clusterEnv) startAll() {
	c.nodes["a"].start()
	c.owner("")
	for _, n := range []string{"b", "c"} {
		c.nodes[n].start()
		c.nodes[n].waitAPI()
	}
}

// initiateVia starts the backfill through node n's API.
func (c *clusterEnv) initiateVia(n string) {
	c.t.Helper()
	resp, err := http.Post("http://"+c.nodes[n].addr+"/api/v1/streams/crash/backfills", "application/json", strings.NewReader(`{"objects": ["public.t"]}`))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("initiate through node %s: HTTP %d: %s", n, resp.StatusCode, msg)
	}
}

// finish waits for the backfill to complete and the destination to equal
// the source, and checks the rows read.
func (c *clusterEnv) finish(writes func() int) {
	c.t.Helper()
	c.waitFor("backfill completed and loaded", func() bool {
		b := c.backfill()
		return b.Status == store.StatusCompleted && b.LoadedAt != nil
	})
	n := writes()
	b := c.backfill()
	c.t.Logf("%d concurrent writes; the backfill read %d rows for a %d-row table", n, b.RowsRead, crashRows)
	if limit := int64(1.3 * (crashRows + 5000)); b.RowsRead > limit {
		c.t.Errorf("backfill read %d rows, more than 1.3× the table (%d): it restarted instead of resuming", b.RowsRead, limit)
	}
	c.waitFor("destination equal to source", func() bool { return c.nodes["a"].converged() })
}

// TestClusterFailover: three nodes; the backfill is asked of a node that
// does not run the stream (the API forwards it); the owner is SIGKILLed
// mid-backfill while a writer runs; another node runs the stream within
// 10 s, the backfill resumes and completes, and the destination equals the
// source.
func TestClusterFailover(t *testing.T) {
	c := newClusterEnv(t, "cluster_failover")
	c.startAll()
	owner := c.owner("")
	other := "b"
	if owner == "b" {
		other = "c"
	}
	writes := startWriter(t, c.src)
	c.initiateVia(other)
	c.waitFor("30% read", func() bool { return c.backfill().RowsRead >= crashRows*3/10 })
	killed := time.Now()
	c.nodes[owner].kill()
	next := c.owner(owner)
	took := time.Since(killed)
	t.Logf("node %s SIGKILLed; node %s runs the stream %s later", owner, next, took)
	if took > 10*time.Second {
		t.Errorf("the stream ran again %s after its node's SIGKILL, want within 10s", took)
	}
	c.finish(writes)
}

// TestClusterFencing: the owner is frozen with SIGSTOP past its lease;
// another node takes the stream over; the frozen node, resumed, finds its
// lease lost and stops, and nothing it held back reaches the destination:
// the fence there stays at the new owner's epoch and the destination ends
// equal to the source.
func TestClusterFencing(t *testing.T) {
	c := newClusterEnv(t, "cluster_fence")
	c.startAll()
	owner := c.owner("")
	writes := startWriter(t, c.src)
	c.initiateVia(owner)
	c.waitFor("30% read", func() bool { return c.backfill().RowsRead >= crashRows*3/10 })
	frozen := c.nodes[owner].cmd.Process
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := c.owner(owner)
	epoch := c.fenceEpoch()
	c.waitFor("the new owner's epoch on the destination", func() bool {
		epoch = c.fenceEpoch()
		h, _, _ := c.st.LeaseHolder(c.ctx, cluster.StreamLease("crash"))
		leases, _ := c.st.Leases(c.ctx)
		for _, l := range leases {
			if l.Name == cluster.StreamLease("crash") && h.Name == next {
				return l.Epoch == epoch
			}
		}
		return false
	})
	t.Logf("node %s frozen; node %s runs the stream at epoch %d", owner, next, epoch)
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the resumed node to stop its stream", func() bool {
		// Either its heartbeat finds the lease gone, or it finds its last
		// renewal too old to trust (it slept past its deadline).
		log := c.logs[owner].String()
		return strings.Contains(log, "lost a lease: stopping its work") || strings.Contains(log, "stopping all work: cut off from the metadata store")
	})
	c.finish(writes)
	if got := c.fenceEpoch(); got != epoch {
		t.Errorf("fence epoch on the destination = %d after the frozen node resumed, want %d (the new owner's)", got, epoch)
	}
	if h, _, _ := c.st.LeaseHolder(c.ctx, cluster.StreamLease("crash")); h.Name != next {
		t.Errorf("the stream moved to %q after the frozen node resumed, want it to stay on %s", h.Name, next)
	}
}

// fenceEpoch reads the stream's epoch on the destination (0 when none).
func (c *clusterEnv) fenceEpoch() int64 {
	conn, err := pgx.Connect(c.ctx, c.dst)
	if err != nil {
		return 0
	}
	defer conn.Close(c.ctx)
	var e int64
	_ = conn.QueryRow(c.ctx, `SELECT epoch FROM "_tidemark"."fence" WHERE stream = 'crash'`).Scan(&e)
	return e
}
