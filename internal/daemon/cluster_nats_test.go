package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/cluster"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/natsserver"
	"github.com/tidemark/tidemark/internal/sink/nats"
	"github.com/tidemark/tidemark/internal/store"
)

// TestClusterFencingNATS is TestClusterFencing with a NATS JetStream
// destination, which any node may run without a pin: the owner is frozen
// with SIGSTOP mid-backfill under a writer, another node takes the stream
// over, and the frozen node is resumed. Every message after each fence
// message was published in that fence's term (nats.VerifyFences: nothing
// the former owner sent after the takeover got in), and the events replay
// to the source's rows.
func TestClusterFencingNATS(t *testing.T) {
	ctx := context.Background()
	srv, err := natsserver.Start(ctx, natsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	src, _ := crashSource(t, ctx, "cluster_nats_src", fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, fencingRows))
	c := newCluster(t, "cluster_nats", crashStreamYAML(src, "cluster_nats", fmt.Sprintf(`{type: nats, url: "%s"}`, srv.URL())))
	c.src = src
	c.freezeOwnerThroughBackfill(fencingRows)
	d := config.Destination{Type: "nats", URL: srv.URL()}
	c.waitFor("the events to replay to the source's rows", func() bool { return natsConverged(t, ctx, src, d) })
	fences, err := nats.VerifyFences(ctx, d, "crash")
	if err != nil || fences < 2 {
		t.Errorf("VerifyFences: %d fence messages, %v; want 2 or more, each term's messages its own", fences, err)
	}
}

// natsConverged reports whether the stream crash's events on d replay to
// the rows of table t at the source.
func natsConverged(t *testing.T, ctx context.Context, src string, d config.Destination) bool {
	t.Helper()
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0},
		Columns: []change.Column{{Name: "id"}, {Name: "v"}, {Name: "note"}}}
	r, err := nats.ReadTable(ctx, d, "crash", tbl)
	if err != nil {
		t.Logf("read the events: %v", err)
		return false
	}
	got := map[string]string{}
	for _, row := range r.Rows() {
		got[string(row["id"])] = string(row["v"]) + " " + string(row["note"])
	}
	conn, err := pgx.Connect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, v, note FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var v *int64
		var note *string
		if err := rows.Scan(&id, &v, &note); err != nil {
			t.Fatal(err)
		}
		vj, _ := json.Marshal(v)
		nj, _ := json.Marshal(note)
		if got[fmt.Sprint(id)] != string(vj)+" "+string(nj) {
			return false
		}
		n++
	}
	return rows.Err() == nil && n == len(got)
}

// fencingRows is the table of the event destinations' fencing tests:
// fewer rows than the other crash tests, since each replay of the
// destination reads every event under the race detector (tens of seconds
// for crashRows); the backfill still runs while the owner is frozen.
const fencingRows = 20_000

// freezeOwnerThroughBackfill starts every node, initiates the crash
// stream's backfill of a table of rows rows through its owner under a writer (one change each
// 5 ms: an event destination publishes each change on its own, and a
// replay reads them all, under the race detector), freezes the owner
// with SIGSTOP at 30 % read until another node runs the stream, resumes
// it, and waits until it stopped its work and the backfill is completed
// and loaded.
func (c *clusterEnv) freezeOwnerThroughBackfill(rows int) {
	c.t.Helper()
	c.startAll(cluster.StreamLease("crash"))
	owner := c.owner("")
	writes := startWriterOver(c.t, c.src, 5*time.Millisecond, rows)
	c.initiateVia(owner)
	c.waitFor("30% read", func() bool { return c.backfill().RowsRead >= int64(rows*3/10) })
	frozen := c.nodes[owner].cmd.Process
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	if b := c.backfill(); b.Status != store.StatusActive || b.RowsRead >= int64(rows) {
		c.t.Fatalf("the backfill was %s with %d of %d rows read when its owner froze: it must still be running", b.Status, b.RowsRead, rows)
	}
	next := c.owner(owner)
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
	c.waitStopped(owner)
	c.t.Logf("node %s frozen and resumed; node %s runs the stream", owner, next)
	c.waitFor("backfill completed and loaded", func() bool {
		b := c.backfill()
		return b.Status == store.StatusCompleted && b.LoadedAt != nil
	})
	c.t.Logf("%d concurrent writes", writes())
}

// waitStopped waits until a node resumed after a freeze stopped its
// work: either its heartbeat found its lease gone, or it found its last
// renewal too old to trust (it slept past its deadline).
func (c *clusterEnv) waitStopped(node string) {
	c.t.Helper()
	c.waitFor("the resumed node to stop its work", func() bool {
		log := c.logs[node].String()
		return strings.Contains(log, "lost a lease: stopping its work") || strings.Contains(log, "stopping all work: cut off from the metadata store")
	})
}
