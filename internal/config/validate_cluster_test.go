package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const clusterBase = `
metadata: "postgres://tidemark@meta/tidemark"
api: {listen: "127.0.0.1:%d"}
%s
streams:
  - name: shop
    source: {dsn: "postgres://db/shop"}
    destination: {type: %s, %s}
    include: [public.*]
%s
`

func clusterYAML(port int, cluster, destType, destWhere, pin string) string {
	return fmt.Sprintf(clusterBase, port, cluster, destType, destWhere, pin)
}

// TestClusterSection: a node's section is read with its defaults, from the
// file or TIDEMARK_NODE; what cannot run as several nodes is refused with
// what to do.
func TestClusterSection(t *testing.T) {
	pg := `dsn: "postgres://db/replica"`
	cfg := mustParse(t, clusterYAML(7420, "cluster: {node: node-a}", "postgres", pg, ""), nil)
	if c := cfg.Cluster; c == nil || c.Node != "node-a" || c.Lease != 6*time.Second || c.Advertise != "http://127.0.0.1:7420" || c.Host == "" {
		t.Errorf("cluster = %+v, want node-a with a 6s lease advertising http://127.0.0.1:7420", c)
	}
	cfg = mustParse(t, clusterYAML(7420, "", "postgres", pg, ""), map[string]string{EnvNode: "node-b"})
	if c := cfg.Cluster; c == nil || c.Node != "node-b" {
		t.Errorf("with %s=node-b: cluster = %+v", EnvNode, c)
	}
	if cfg := mustParse(t, clusterYAML(7420, "", "postgres", pg, ""), nil); cfg.Cluster != nil {
		t.Errorf("without a cluster section or %s: cluster = %+v, want nil", EnvNode, cfg.Cluster)
	}

	for _, tc := range []struct {
		name, yaml string
		want       []Problem
	}{
		{"sqlite store", strings.Replace(clusterYAML(1, "cluster: {node: a}", "postgres", pg, ""), "postgres://tidemark@meta/tidemark", "sqlite://meta.db", 1),
			[]Problem{{"cluster", "several nodes need a PostgreSQL metadata store, which they share (metadata: postgres://…); a SQLite store serves one daemon: remove the cluster section to run one"}}},
		{"no node name", clusterYAML(1, "cluster: {lease: 3s}", "postgres", pg, ""),
			[]Problem{{"cluster.node", "missing: name this node (or set TIDEMARK_NODE), e.g. node-a; every node runs the same file with a name of its own"}}},
		{"bad values", clusterYAML(1, `cluster: {node: "Node A", lease: 1s, advertise: "10.0.0.5:7420"}`, "postgres", pg, ""),
			[]Problem{
				{"cluster.node", `"Node A" is not a valid node name: use 1 to 48 lower-case letters, digits, '-' and '_', starting with a letter`},
				{"cluster.lease", "1s is out of range: use 2s to 5m0s (a node's streams move that long after it stops)"},
				{"cluster.advertise", `"10.0.0.5:7420" is not the base URL of this node's API: use e.g. http://10.0.0.5:7420`},
			}},
		{"advertise an unspecified address", clusterYAML(1, `cluster: {node: a, advertise: "http://0.0.0.0:7420"}`, "postgres", pg, ""),
			[]Problem{{"cluster.advertise", `"http://0.0.0.0:7420" names no host other nodes can reach (api.listen listens on every address, which is not one to dial): set cluster.advertise to this node's address, e.g. http://10.0.0.5:7420`}}},
		{"local destination unpinned", clusterYAML(1, "cluster: {node: a}", "sqlite", "path: replica.db", ""),
			[]Problem{{"streams[0].node", `missing: a sqlite destination is on one machine's disk, so the stream must stay on the node that has it: pin it with node: <name> (docs/cluster.md)`}}},
		{"pin without a cluster", clusterYAML(1, "", "sqlite", "path: replica.db", "    node: a"),
			[]Problem{{"streams[0].node", `pins the stream to node "a", but there is no cluster section: remove it, or add cluster: {node: …} to run several nodes`}}},
		{"bad pin", clusterYAML(1, "cluster: {node: a}", "sqlite", "path: replica.db", "    node: A!"),
			[]Problem{{"streams[0].node", `"A!" is not a valid node name: use 1 to 48 lower-case letters, digits, '-' and '_', starting with a letter`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), nil)
			wantProblems(t, err, tc.want...)
		})
	}
	// A pinned local destination is fine, and Kafka and NATS fence a former
	// owner themselves: any node may run their streams.
	mustParse(t, clusterYAML(1, "cluster: {node: a}", "sqlite", "path: replica.db", "    node: b"), nil)
	mustParse(t, clusterYAML(1, "cluster: {node: a}", "kafka", `brokers: ["127.0.0.1:9092"]`, ""), nil)
	mustParse(t, clusterYAML(1, "cluster: {node: a}", "nats", `url: "nats://127.0.0.1:4222"`, ""), nil)
}

// TestFingerprint: nodes of one cluster compare fingerprints; what differs
// between nodes (cluster section, api.listen) leaves it alone, anything a
// stream or task does changes it.
func TestFingerprint(t *testing.T) {
	pg := `dsn: "postgres://db/replica"`
	fp := func(port int, cluster, dest, pin string) string {
		return mustParse(t, clusterYAML(port, cluster, "postgres", dest, pin), nil).Fingerprint()
	}
	a := fp(7420, "cluster: {node: a}", pg, "")
	if b := fp(7421, "cluster: {node: b, lease: 10s, advertise: 'http://10.0.0.6:7421'}", pg, ""); b != a {
		t.Errorf("fingerprints of two nodes of one file differ: %s, %s", a, b)
	}
	if b := fp(7420, "cluster: {node: a}", `dsn: "postgres://db/other"`, ""); b == a {
		t.Error("another destination left the fingerprint alone")
	}
	if b := fp(7420, "cluster: {node: a}", pg, "    node: a"); b == a {
		t.Error("a pin left the fingerprint alone")
	}
	if a != fp(7420, "cluster: {node: a}", pg, "") {
		t.Error("one file gave two fingerprints")
	}
}
