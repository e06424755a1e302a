package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
)

// TestClusterNodes: two `tidemark run` nodes on one PostgreSQL store.
// `tidemark nodes` on either lists both and the batch lead; a client verb
// about the batch engine answers through the node that does not lead it;
// a third node under a live node's name, or with another configuration,
// refuses to start saying why.
func TestClusterNodes(t *testing.T) {
	t.Parallel()
	srv, _ := shopSource(t, "SELECT 1")
	meta, err := srv.CreateDatabase(t.Context(), "meta")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(node, task string) (cfg, addr string) {
		port := freePort(t)
		cfg = filepath.Join(dir, node+".yaml")
		err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
metadata: %q
api: {listen: "127.0.0.1:%d"}
cluster: {node: %s, lease: 3s}
tasks:
  - {name: %s, project: p, type: noop, schedule: daily}
`, meta, port, node, task)), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, fmt.Sprintf("127.0.0.1:%d", port)
	}
	cfgA, addrA := write("a", "idle")
	cfgB, addrB := write("b", "idle")
	da := startDaemon(t, cfgA, filepath.Join(dir, "a.log"))
	startDaemon(t, cfgB, filepath.Join(dir, "b.log"))
	var view api.ClusterView
	poll(t, da, "both nodes live, one leading the batch engine", func() bool {
		r := tidemark(t, "nodes", "--json", "--addr", addrB)
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &view) != nil {
			return false
		}
		live, lead := 0, false
		for _, n := range view.Nodes {
			if n.Live {
				live++
			}
		}
		for _, l := range view.Leases {
			lead = lead || (l.Name == "batch" && l.Live)
		}
		return live == 2 && lead
	})
	if view.Node != "b" {
		t.Errorf("answering node = %q, want b", view.Node)
	}
	leader, follower := addrA, addrB
	for _, l := range view.Leases {
		if l.Name == "batch" && l.Node == "b" {
			leader, follower = addrB, addrA
		}
	}
	expect(t, 0, []string{"NODE", "a (this)", "b", "batch (epoch 1)", "yes"}, "nodes", "--addr", addrA)
	expect(t, 0, []string{"p.idle"}, "tasks", "--addr", follower) // forwarded to the leader
	expect(t, 0, []string{"p.idle"}, "tasks", "--addr", leader)

	taken, _ := write("a2", "idle")
	data, _ := os.ReadFile(taken)
	if err := os.WriteFile(taken, []byte(strings.Replace(string(data), "node: a2", "node: a", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := tidemark(t, "run", "-c", taken)
	if r.code != 1 || !strings.Contains(r.stderr, `node name "a" is in use by a live tidemark node`) {
		t.Errorf("a second node a: %s, want exit 1 naming the live node", r)
	}
	lone, _ := write("lone", "idle")
	data, _ = os.ReadFile(lone)
	if err := os.WriteFile(lone, []byte(strings.Replace(string(data), "cluster: {node: lone, lease: 3s}\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = tidemark(t, "run", "-c", lone)
	if r.code != 1 || !strings.Contains(r.stderr, "is in use by the cluster nodes a, b") {
		t.Errorf("a daemon without a cluster section beside the nodes: %s, want exit 1 naming them", r)
	}
	other, _ := write("c", "busy")
	r = tidemark(t, "run", "-c", other)
	if r.code != 1 || !strings.Contains(r.stderr, "differs from that of live node") {
		t.Errorf("node c with another configuration: %s, want exit 1 naming a live node", r)
	}
}
