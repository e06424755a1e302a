package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// Cluster is what the API needs of a cluster node (internal/cluster): which
// node runs what, and how to hand it a request.
type Cluster interface {
	// Forward returns the handler that serves r on the node that runs what
	// r is about (a stream, the batch engine); ok false serves r here.
	Forward(r *http.Request) (h http.Handler, ok bool)
	// RunsStream reports whether this node runs stream name now.
	RunsStream(name string) bool
	// Node is this node's name.
	Node() string
}

// WithCluster makes the server one node's API in a cluster: requests about
// what another node runs go to it, and stream views of streams run
// elsewhere come from the store.
func WithCluster(c Cluster) Option { return func(s *Server) { s.cluster = c } }

// ClusterView is GET /api/v1/cluster.
type ClusterView struct {
	// Node is the node that answered.
	Node   string        `json:"node"`
	Nodes  []store.Node  `json:"nodes"`
	Leases []store.Lease `json:"leases"`
}

func (s *Server) clusterRoutes() {
	s.handle("GET /api/v1/cluster", viewer, s.getCluster)
}

// getCluster lists the nodes and leases; a daemon of its own answers 404.
func (s *Server) getCluster(w http.ResponseWriter, r *http.Request, _ string) error {
	if s.cluster == nil {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "this daemon runs alone (no cluster section in its configuration): see docs/cluster.md to run several nodes"}
	}
	nodes, err := s.st.ClusterNodes(r.Context())
	if err != nil {
		return err
	}
	leases, err := s.st.Leases(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ClusterView{Node: s.cluster.Node(), Nodes: nodes, Leases: leases})
	return nil
}

// clusterView fills a stream view with the node that runs the stream and,
// when that is another node, the state it recorded in the store.
func (s *Server) clusterView(v *StreamView) {
	if s.cluster.RunsStream(v.Name) {
		v.Node = s.cluster.Node()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v.RetainedWALBytes = 0 // measured by the node that runs it
	if holder, ok, err := s.st.LeaseHolder(ctx, "stream:"+v.Name); err == nil && ok {
		v.Node = holder.Name
	}
	if st, err := s.st.GetStream(ctx, v.Name); err == nil {
		v.State, v.Reason, v.UpdatedAt = st.State, st.Reason, st.UpdatedAt
	}
	if v.Node == "" {
		v.State, v.Reason = store.StateStarting, "no node runs the stream right now: one takes it within cluster.lease"
	}
}

// CheckAdvertise refuses a cluster.advertise whose host this node's API
// would refuse in a forwarded request's Host (it must be a loopback name,
// the listen host or in api.allowed_hosts).
func CheckAdvertise(listen string, allowed []string, advertise string) error {
	u, err := url.Parse(advertise)
	if err != nil {
		return fmt.Errorf("cluster.advertise %q: %w", advertise, err)
	}
	var s Server
	WithHosts(listen, allowed)(&s)
	if !s.hosts.allows(u.Hostname()) {
		return fmt.Errorf("cluster.advertise %q: this node's API refuses requests for host %q, so other nodes could not forward to it: add %q to api.allowed_hosts (or advertise the listen address)", advertise, u.Hostname(), u.Hostname())
	}
	return nil
}
