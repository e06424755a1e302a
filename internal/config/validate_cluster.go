package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// nodeNameRE is what a node name may be: it appears in logs, URLs and the
// console.
var nodeNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,47}$`)

// Lease bounds: shorter than 2 s would be lost to one slow heartbeat of the
// metadata server; longer than 5 min is an outage no one waits for.
const (
	defaultClusterLease = 6 * time.Second
	minClusterLease     = 2 * time.Second
	maxClusterLease     = 5 * time.Minute
)

// fencedDestinations are the destination types that refuse a commit from a
// stream's former owner (docs/cluster.md): any node may run such a stream.
// The others write to one machine's disk (SQLite, files). Kafka and NATS
// are named, not imported: their packages import this one.
var fencedDestinations = map[string]bool{TypePostgres: true, "kafka": true, "nats": true}

// cluster checks the cluster section and the streams' pins.
func (v *Checker) cluster(c *Config) {
	cl := c.Cluster
	if cl == nil {
		for i, s := range c.Streams {
			if s.Node != "" {
				v.add(fmt.Sprintf("streams[%d].node", i), "pins the stream to node %q, but there is no cluster section: remove it, or add cluster: {node: …} to run several nodes", shown(s.Node))
			}
		}
		return
	}
	switch {
	case cl.Node == "":
		v.add("cluster.node", "missing: name this node (or set %s), e.g. node-a; every node runs the same file with a name of its own", EnvNode)
	case !nodeNameRE.MatchString(cl.Node):
		v.add("cluster.node", "%q is not a valid node name: use 1 to 48 lower-case letters, digits, '-' and '_', starting with a letter", shown(cl.Node))
	}
	if !isPostgresURL(c.Metadata) {
		v.add("cluster", "several nodes need a PostgreSQL metadata store, which they share (metadata: postgres://…); a SQLite store serves one daemon: remove the cluster section to run one")
	}
	if cl.Lease < minClusterLease || cl.Lease > maxClusterLease {
		v.add("cluster.lease", "%s is out of range: use %s to %s (a node's streams move that long after it stops)", cl.Lease, minClusterLease, maxClusterLease)
	}
	if u, err := url.Parse(cl.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		v.add("cluster.advertise", "%q is not the base URL of this node's API: use e.g. http://10.0.0.5:7420", shown(cl.Advertise))
	} else if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); u.Hostname() == "" || (err == nil && ip.IsUnspecified()) {
		v.add("cluster.advertise", "%q names no host other nodes can reach (api.listen listens on every address, which is not one to dial): set cluster.advertise to this node's address, e.g. http://10.0.0.5:7420", shown(cl.Advertise))
	}
	for i, s := range c.Streams {
		p := fmt.Sprintf("streams[%d].node", i)
		switch {
		case s.Node != "" && !nodeNameRE.MatchString(s.Node):
			v.add(p, "%q is not a valid node name: use 1 to 48 lower-case letters, digits, '-' and '_', starting with a letter", shown(s.Node))
		case s.Node == "" && !fencedDestinations[s.Destination.Type]:
			v.add(p, "missing: a %s destination is on one machine's disk, so the stream must stay on the node that has it: pin it with node: <name> (docs/cluster.md)", shown(s.Destination.Type))
		}
	}
}

func isPostgresURL(m string) bool {
	u, err := url.Parse(m)
	return err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql")
}
