package api_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// TestConsoleNodes: in a cluster the console's Nodes page lists every node
// with its state and what it runs — the stream, the batch engine and its
// task worker here, linked to their pages — beside a second live node and
// one gone.
func TestConsoleNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{cluster: "n1", setup: `CREATE TABLE t (id int PRIMARY KEY)`,
		tasks: "  - {name: idle, project: p, type: noop, schedule: daily}\n"})
	var view api.ClusterView
	e.ok(200, &view, "GET", "/api/v1/cluster", "")
	if view.Node != "n1" || len(view.Nodes) != 1 {
		t.Fatalf("cluster = %+v, want node n1 alone", view)
	}
	st := e.d.Store()
	hash := view.Nodes[0].ConfigHash
	if _, err := st.JoinCluster(e.ctx, store.Node{Name: "n2", Host: "h2", PID: os.Getpid(), API: "http://127.0.0.1:1", ConfigHash: hash}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.JoinCluster(e.ctx, store.Node{Name: "n3", Host: "h3", PID: os.Getpid(), API: "http://127.0.0.1:2", ConfigHash: hash}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e)
	b.open("#/nodes", `tr[data-node="n3"]`)
	b.waitJS(`!document.querySelector('[data-nav="nodes"]').hidden`)
	b.waitJS(`!!document.querySelector('tr[data-node="n1"][data-live="true"] a[data-lease="stream:` + e.name + `"][href="#/streams/` + e.name + `"]')`)
	b.waitJS(`!!document.querySelector('tr[data-node="n1"] a[data-lease="batch"][href="#/batch"]')`)
	b.waitJS(`document.querySelector('tr[data-node="n1"] a[data-lease="worker:n1"]')?.textContent === "task worker"`)
	b.waitJS(`!!document.querySelector('tr[data-node="n2"][data-live="true"]') && !!document.querySelector('tr[data-node="n3"][data-live="false"] [data-status="gone"]')`)
	if got := textOf(b, `tr[data-node="n1"] td`); got != "n1 (this)" {
		t.Errorf("first cell of n1 = %q, want %q", got, "n1 (this)")
	}
	b.shot("console-nodes")
}

// TestClusterRouteAlone: a daemon without a cluster section answers
// GET /api/v1/cluster with a 404 that says how to run several.
func TestClusterRouteAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: `CREATE TABLE t (id int PRIMARY KEY)`})
	if msg := e.fails(404, "not_found", "GET", "/api/v1/cluster", ""); !strings.Contains(msg, "docs/cluster.md") {
		t.Errorf("message %q does not point to docs/cluster.md", msg)
	}
}
