package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// ForwardedHeader marks a request one node forwarded to another; a node
// that receives one for work it does not hold answers 503 rather than
// forward it again (the work moved in between).
const ForwardedHeader = "X-Tidemark-Forwarded-By"

// Router sends each API request about a stream or the batch engine to the
// node that runs it (api.Cluster). The caller's token goes along: every
// node has the same tokens, and the node that serves the request checks
// its role and keeps it in the audit.
type Router struct {
	m       *Member
	st      *store.Store
	streams map[string]bool
	batch   bool // tasks are configured
}

// NewRouter routes for member m over the configured streams, and the batch
// engine when batch is set.
func NewRouter(m *Member, st *store.Store, streams []string, batch bool) *Router {
	r := &Router{m: m, st: st, streams: map[string]bool{}, batch: batch}
	for _, s := range streams {
		r.streams[s] = true
	}
	return r
}

// Node is this node's name.
func (r *Router) Node() string { return r.m.Name() }

// RunsStream reports whether this node runs stream name now.
func (r *Router) RunsStream(name string) bool { return r.m.Holds(StreamLease(name)) }

// Forward implements api.Cluster.
func (r *Router) Forward(req *http.Request) (http.Handler, bool) {
	lease := r.leaseOf(req)
	if lease == "" || r.m.Holds(lease) {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	defer cancel()
	holder, ok, err := r.st.LeaseHolder(ctx, lease)
	switch {
	case err != nil:
		return unavailable(fmt.Sprintf("cannot tell which node runs %s: %v", lease, err), time.Second), true
	case !ok:
		return unavailable(fmt.Sprintf("no node runs %s right now (its node stopped): one takes it within cluster.lease (%s); retry then", lease, r.m.ttl), r.m.ttl), true
	case holder.Name == r.m.Name():
		return nil, false // taken between Holds and the lookup
	case req.Header.Get(ForwardedHeader) != "":
		return unavailable(fmt.Sprintf("%s moved to node %s while the request was forwarded; retry", lease, holder.Name), time.Second), true
	}
	target, err := url.Parse(holder.API)
	if err != nil {
		return unavailable(fmt.Sprintf("node %s recorded an API address that is not a URL (%q)", holder.Name, holder.API), time.Second), true
	}
	self := r.m.Name()
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Checked on this node already; the owner sees a plain client.
			pr.Out.Header.Del("Origin")
			pr.Out.Header.Set(ForwardedHeader, self)
		},
		FlushInterval: -1, // event streams pass through as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			unavailable(fmt.Sprintf("node %s, which runs %s, did not answer: %v", holder.Name, lease, err), time.Second).ServeHTTP(w, req)
		},
	}, true
}

// leaseOf names the lease whose holder serves req; "" serves it anywhere
// (reads of the store, the console, health).
func (r *Router) leaseOf(req *http.Request) string {
	rest, ok := strings.CutPrefix(req.URL.Path, "/api/v1/")
	if !ok {
		return ""
	}
	parts := strings.Split(rest, "/")
	switch parts[0] {
	case "streams":
		if len(parts) >= 2 && r.streams[parts[1]] {
			return StreamLease(parts[1])
		}
	case "batch", "tasks", "lineage":
		if r.batch {
			return BatchLease
		}
	case "backfills", "runs":
		// Changes to one backfill or run go to its stream's node.
		if req.Method != http.MethodGet && len(parts) >= 2 {
			if name := r.streamOf(req.Context(), parts[0], parts[1]); name != "" {
				return StreamLease(name)
			}
		}
	}
	return ""
}

// streamOf is the stream of a backfill or run id; "" when unknown (the
// API then answers it).
func (r *Router) streamOf(ctx context.Context, kind, id string) string {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return ""
	}
	if kind == "backfills" {
		b, err := r.st.GetBackfill(ctx, n)
		if err != nil {
			return ""
		}
		return b.Stream
	}
	run, _, err := r.st.GetRun(ctx, n)
	if err != nil {
		return ""
	}
	return run.Stream
}

// unavailable answers 503 with the API's error shape and a Retry-After.
func unavailable(msg string, after time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(after.Seconds()))))
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]map[string]string{"error": {"code": "moved", "message": msg}}) // the API's error shape
	})
}
