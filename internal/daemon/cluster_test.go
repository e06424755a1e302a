package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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
	t     testing.TB
	ctx   context.Context
	st    *store.Store
	nodes map[string]*crashEnv
	logs  map[string]*testutil.LockedBuffer
	src   string
	dst   string
	meta  string // the metadata store's DSN
}

// newClusterEnv is three nodes of one stream of crashRows rows.
func newClusterEnv(t testing.TB, name string) *clusterEnv {
	return newClusterEnvWith(t, name, "")
}

// newClusterEnvWith is newClusterEnv with more configuration (tasks).
func newClusterEnvWith(t testing.TB, name, more string) *clusterEnv {
	ctx := context.Background()
	src, _ := crashSource(t, ctx, name+"_src", fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, crashRows))
	dst, err := server.CreateDatabase(ctx, name+"_dst")
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, name, crashStreamYAML(src, name, fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dst))+more)
	c.src, c.dst = src, dst
	for _, n := range c.nodes {
		n.srcDSN, n.dstDSN = src, dst
	}
	return c
}

// crashStreamYAML is the streams section of one stream, crash, of table t
// at src through slot into destination (a YAML flow mapping).
func crashStreamYAML(src, slot, destination string) string {
	return fmt.Sprintf(`
streams:
  - name: crash
    source: {type: postgres, dsn: "%s", slot: "%s"}
    destination: %s
    include: ["public.t"]
    backfill: {mode: manual, chunk_size: 1000, rows_per_second: 10000}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`, src, slot, destination)
}

// newCluster is three nodes, a, b and c, of one configuration file (body
// after the metadata and cluster sections) on a metadata database of
// their own, not started yet.
func newCluster(t testing.TB, name, body string) *clusterEnv {
	ctx := context.Background()
	meta, err := server.CreateDatabase(ctx, name+"_meta")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "tidemark.yaml")
	// One file for every node: each gets its name and address from the
	// environment, as a deployment would.
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("metadata: %q\ncluster: {lease: 3s}\n%s", meta, body)), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clusterEnv{t: t, ctx: ctx, st: st, meta: meta, nodes: map[string]*crashEnv{}, logs: map[string]*testutil.LockedBuffer{}}
	for _, n := range []string{"a", "b", "c"} {
		addr := freeAddr(t)
		c.logs[n] = &testutil.LockedBuffer{}
		c.nodes[n] = &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, addr: addr,
			env: []string{config.EnvNode + "=" + n, config.EnvListen + "=" + addr}, stderr: io.MultiWriter(os.Stderr, c.logs[n])}
	}
	return c
}

// owner waits until a live node other than not runs the stream, and
// returns it.
func (c *clusterEnv) owner(not string) string {
	c.t.Helper()
	return c.ownerIn(store.StateRunning, not)
}

// ownerIn waits until a live node other than not runs the stream in state
// (running, paused), and returns it.
func (c *clusterEnv) ownerIn(state, not string) string {
	c.t.Helper()
	return c.holder(cluster.StreamLease("crash"), not, func() bool {
		// In state as recorded since the lease was taken: the record of
		// a killed owner says so too.
		s, err := c.st.GetStream(c.ctx, "crash")
		leases, lerr := c.st.Leases(c.ctx)
		if err != nil || lerr != nil || s.State != state {
			return false
		}
		for _, l := range leases {
			if l.Name == cluster.StreamLease("crash") {
				return !s.UpdatedAt.Before(l.AcquiredAt)
			}
		}
		return false
	})
}

// holder waits until a live node other than not holds lease and ready
// holds, and returns it.
func (c *clusterEnv) holder(lease, not string, ready func() bool) string {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h, ok, err := c.st.LeaseHolder(c.ctx, lease)
		if err == nil && ok && h.Name != not && ready() {
			return h.Name
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no node other than %q holds %s after a minute", not, lease)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// startAll starts node a, waits for it to hold lease, then starts b and c.
func (c *clusterEnv) startAll(lease string) {
	c.nodes["a"].start()
	c.holder(lease, "", func() bool { return true })
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
	c.startAll(cluster.StreamLease("crash"))
	owner := c.owner("")
	other := "b"
	if owner == "b" {
		other = "c"
	}
	completed := map[string]func() bool{}
	for n := range c.nodes {
		completed[n] = c.watchCompleted(n)
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
	// The node that ran the stream to the end sent its events; the third
	// node relayed them from the metadata store's notifications.
	for n, seen := range completed {
		if n != owner {
			c.waitFor("node "+n+"'s event stream to tell the backfill completed", seen)
		}
	}
	// Restarted at once under its name, a killed node waits for its old
	// record to expire rather than refuse to start.
	c.nodes[next].kill()
	c.nodes[next].start()
	c.nodes[next].waitAPI()
}

// TestClusterPauseFollowsTheStream: a stream paused through a node that
// does not run it (forwarded) stays paused when its node is SIGKILLed and
// another takes it over; resumed, it streams again from the new node.
func TestClusterPauseFollowsTheStream(t *testing.T) {
	c := newClusterEnv(t, "cluster_pause")
	c.startAll(cluster.StreamLease("crash"))
	owner := c.owner("")
	other := "b"
	if owner == "b" {
		other = "c"
	}
	c.postVia(other, "/api/v1/streams/crash/pause")
	c.ownerIn(store.StatePaused, "")
	c.nodes[owner].kill()
	next := c.ownerIn(store.StatePaused, owner)
	t.Logf("node %s SIGKILLed; node %s took the stream over, paused", owner, next)
	c.postVia(other, "/api/v1/streams/crash/resume")
	c.owner(owner)
	conn, err := pgx.Connect(c.ctx, c.src)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(c.ctx)
	if _, err := conn.Exec(c.ctx, `INSERT INTO t VALUES (-1, -1, 'after the resume')`); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the row written after the resume in the destination", func() bool {
		dst, err := pgx.Connect(c.ctx, c.dst)
		if err != nil {
			return false
		}
		defer dst.Close(c.ctx)
		var note string
		return dst.QueryRow(c.ctx, `SELECT note FROM public.t WHERE id = -1`).Scan(&note) == nil && note == "after the resume"
	})
}

// postVia posts to path on node n's API, wanting 202 Accepted.
func (c *clusterEnv) postVia(n, path string) {
	c.t.Helper()
	resp, err := http.Post("http://"+c.nodes[n].addr+path, "application/json", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("POST %s through node %s: HTTP %d: %s", path, n, resp.StatusCode, msg)
	}
}

// watchCompleted follows node n's event stream of the stream crash; the
// returned func reports whether it told of a completed backfill.
func (c *clusterEnv) watchCompleted(n string) func() bool {
	c.t.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.nodes[n].addr+"/api/v1/events?stream=crash", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("events of node %s: %v", n, err)
	}
	var seen atomic.Bool
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Backfill *struct {
					Status string `json:"status"`
				} `json:"backfill"`
			}
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Backfill != nil && ev.Backfill.Status == store.StatusCompleted {
				seen.Store(true)
			}
		}
	}()
	return seen.Load
}

// TestClusterFencing: the owner is frozen with SIGSTOP past its lease;
// another node takes the stream over; the frozen node, resumed, finds its
// lease lost and stops, and nothing it held back reaches the destination:
// the fence there stays at the new owner's epoch and the destination ends
// equal to the source.
func TestClusterFencing(t *testing.T) {
	c := newClusterEnv(t, "cluster_fence")
	c.startAll(cluster.StreamLease("crash"))
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
	c.waitStopped(owner)
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

// TestClusterBatchFailover: three nodes run shell tasks that each hold a
// lock on their date; the backfill is submitted through a node that does
// not lead the batch engine (forwarded); the leader is SIGKILLed twice
// while tasks run. Each time another node leads within 10 s, ends the
// killed leader's process groups (same host) and runs them again; every
// instance succeeds and no date ran twice at once (a second run would find
// the lock taken and fail).
func TestClusterBatchFailover(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	c := newCluster(t, "cluster_batch", fmt.Sprintf(`
resource_groups: [{name: default, concurrency: 3}]
tasks:
  - {name: load, project: p, type: shell, schedule: daily, command: %s}
  - {name: report, project: p, type: shell, schedule: daily, depends_on: [load], command: "echo report ${bizdate}"}
`, strconv.Quote(lockedShellCommand(dir, journal))))
	c.startAll(cluster.BatchLease)
	always := func() bool { return true }
	leader := c.holder(cluster.BatchLease, "", always)
	via := "b"
	if leader == via {
		via = "c"
	}
	c.nodes[via].waitAPI()
	id := submitBatch(t, c.nodes[via].addr, `{"task": "load", "dates": {"from": "2025-01-01", "to": "2025-01-30"}, "scope": {"mode": "list", "downstream": 1}, "groups": 3}`)
	for kill := 1; kill <= 2; kill++ {
		var groups []int
		c.waitFor(fmt.Sprintf("shell tasks running before kill %d", kill), func() bool {
			groups = runningGroups(t, c.st, id)
			rec, err := c.st.GetBatchBackfill(c.ctx, id)
			return err == nil && len(groups) > 0 && rec.States[store.InstanceSucceeded] >= 15*(kill-1)
		})
		killed := time.Now()
		c.nodes[leader].kill()
		next := c.holder(cluster.BatchLease, leader, always)
		if took := time.Since(killed); took > 10*time.Second {
			t.Errorf("kill %d: node %s led the batch engine %s after node %s's SIGKILL, want within 10s", kill, next, took, leader)
		}
		c.waitFor("the killed leader's process groups to be ended", func() bool {
			for _, g := range groups {
				if syscall.Kill(-g, 0) == nil {
					return false
				}
			}
			return true
		})
		t.Logf("kill %d: node %s SIGKILLed with %d instance(s) running; node %s leads", kill, leader, len(groups), next)
		c.nodes[leader].start() // back as a follower
		leader = next
	}
	rec := c.batchEnded(id)
	if rec.State != store.BatchSucceeded || rec.States[store.InstanceSucceeded] != 60 {
		t.Fatalf("backfill = %s %v (%s), want 60 succeeded instances", rec.State, rec.States, rec.Error)
	}
	checkJournal(t, journal, 30)
}

// TestClusterSpread: three streams while a writer changes all their
// tables. One node runs all three; a second node joins and takes one, a
// third joins and each runs one; the third stops (SIGTERM) and its stream
// moves to another node. The destination ends equal to the source.
func TestClusterSpread(t *testing.T) {
	ctx := context.Background()
	var setup strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&setup, `CREATE TABLE t%[1]d (id bigint PRIMARY KEY, v int);
			INSERT INTO t%[1]d SELECT g, g FROM generate_series(1, 5000) g;`, i)
	}
	src, _ := crashSource(t, ctx, "cluster_spread_src", setup.String())
	dst, err := server.CreateDatabase(ctx, "cluster_spread_dst")
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	body.WriteString("streams:\n")
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&body, `  - name: s%[1]d
    source: {type: postgres, dsn: "%[2]s", slot: "spread_s%[1]d"}
    destination: {type: postgres, dsn: "%[3]s"}
    include: ["public.t%[1]d"]
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`, i, src, dst)
	}
	c := newCluster(t, "cluster_spread", body.String())
	conn, err := pgx.Connect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	writes := paceWriter(time.Millisecond, func(i int) string {
		return fmt.Sprintf("UPDATE t%d SET v = v + 1 WHERE id = %d", i%3+1, (i*7919)%5000+1)
	}, func(ctx context.Context, q string) error {
		_, err := conn.Exec(ctx, q)
		return err
	}, func() { conn.Close(context.Background()) })

	c.spreadIs("node a runs all three", map[string]int{"a": 3})
	c.nodes["b"].start()
	c.spreadIs("node b takes one", map[string]int{"a": 2, "b": 1})
	c.nodes["c"].start()
	c.spreadIs("one stream each", map[string]int{"a": 1, "b": 1, "c": 1})
	c.nodes["c"].stop()
	c.waitFor("node c's stream on another node", func() bool {
		n := c.spread()
		return n["c"] == 0 && n["a"]+n["b"] == 3 && c.allRunning(3)
	})
	t.Logf("%d writes; streams per node at the end: %v", writes(), c.spread())
	for i := 1; i <= 3; i++ {
		q := fmt.Sprintf(`SELECT count(*) || ':' || sum(hashtext(id || ':' || v)) FROM public.t%d`, i)
		c.waitFor(fmt.Sprintf("t%d equal on both sides", i), func() bool {
			a, b := scalarOf(ctx, src, q), scalarOf(ctx, dst, q)
			return a != "" && a == b
		})
	}
}

// spreadIs starts node a if it is not running and waits until the live
// stream leases are spread as want, every stream running.
func (c *clusterEnv) spreadIs(what string, want map[string]int) {
	c.t.Helper()
	if c.nodes["a"].cmd == nil {
		c.nodes["a"].start()
	}
	total := 0
	for _, n := range want {
		total += n
	}
	c.waitFor(what, func() bool {
		got := c.spread()
		for node, n := range want {
			if got[node] != n {
				return false
			}
		}
		return c.allRunning(total)
	})
}

// spread counts the live stream leases of each node.
func (c *clusterEnv) spread() map[string]int {
	leases, err := c.st.Leases(c.ctx)
	if err != nil {
		return nil
	}
	n := map[string]int{}
	for _, l := range leases {
		if l.Live && strings.HasPrefix(l.Name, "stream:") {
			n[l.Node]++
		}
	}
	return n
}

// allRunning reports whether the n streams run.
func (c *clusterEnv) allRunning(n int) bool {
	streams, err := c.st.ListStreams(c.ctx)
	if err != nil {
		return false
	}
	running := 0
	for _, s := range streams {
		if s.State == store.StateRunning {
			running++
		}
	}
	return running == n
}

// scalarOf is the text of one value a query returns, "" on any error.
func scalarOf(ctx context.Context, dsn, q string) string {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var s string
	if conn.QueryRow(ctx, q).Scan(&s) != nil {
		return ""
	}
	return s
}

// TestClusterCutOff: the node running the stream loses the metadata store
// (its sessions terminated, its role refused new ones) while its process
// lives: it stops the stream before its lease can expire, another node
// takes over, and the backfill completes with the destination equal to the
// source.
func TestClusterCutOff(t *testing.T) {
	ctx := context.Background()
	c := newClusterEnv(t, "cluster_cutoff")
	// Node a reaches the store as a role of its own, to be cut off alone.
	metaA, err := server.AddPasswordRole(ctx, "cutoffa", "secret1", "secret1", "cluster_cutoff_meta")
	if err != nil {
		t.Fatal(err)
	}
	c.nodes["a"].env = append(c.nodes["a"].env, config.EnvMetadata+"="+metaA)
	c.startAll(cluster.StreamLease("crash"))
	if owner := c.owner(""); owner != "a" {
		t.Fatalf("node %s runs the stream, want a (started first)", owner)
	}
	writes := startWriter(t, c.src)
	c.initiateVia("b")
	c.waitFor("30% read", func() bool { return c.backfill().RowsRead >= crashRows*3/10 })
	admin, err := pgx.Connect(ctx, server.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `ALTER ROLE cutoffa NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), `ALTER ROLE cutoffa LOGIN`) })
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'cutoffa'`); err != nil {
		t.Fatal(err)
	}
	next := c.owner("a")
	c.waitFor("node a to stop its work", func() bool {
		return strings.Contains(c.logs["a"].String(), "stopping all work: cut off from the metadata store")
	})
	select {
	case <-c.nodes["a"].done:
		t.Fatal("node a exited; it should live on, cut off")
	default:
	}
	// It stopped before another node could take the stream: the log's
	// time of the stop against the new lease's start (one machine, one
	// clock).
	var stopped time.Time
	for _, line := range strings.Split(c.logs["a"].String(), "\n") {
		if strings.Contains(line, "stopping all work: cut off") {
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			stopped, _ = time.Parse(time.RFC3339Nano, ts)
			break
		}
	}
	leases, err := c.st.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.Name == cluster.StreamLease("crash") && (stopped.IsZero() || !stopped.Before(l.AcquiredAt)) {
			t.Errorf("node a stopped its work at %v, not before node %s took the stream at %v", stopped, l.Node, l.AcquiredAt)
		}
	}
	t.Logf("node a cut off; node %s runs the stream", next)
	c.finish(writes)
}
