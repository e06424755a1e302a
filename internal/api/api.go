// Package api is tidemark's versioned HTTP JSON API. Every CLI verb is a
// client of it. Errors are JSON objects with a stable code and a message
// that says what to do.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/console"
	"github.com/tidemark/tidemark/internal/lineage"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/metrics"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Server serves the API.
type Server struct {
	streams map[string]*stream.Stream
	names   []string
	batch   *engine.Engine   // nil when no tasks are configured
	lineage *lineage.Watcher // nil when no tasks are configured
	st      *store.Store
	tokens  []config.Token
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics.Registry
	// patterns of the registered routes
	patterns []string
	now      func() time.Time
	hosts    hostPolicy
	timeouts Timeouts
	cluster  Cluster // nil for a daemon of its own
}

// New builds the API over the daemon's streams, batch engine (nil when no
// tasks are configured) and store.
func New(streams []*stream.Stream, batch *engine.Engine, st *store.Store, tokens []config.Token, log *slog.Logger, opts ...Option) *Server {
	s := &Server{streams: map[string]*stream.Stream{}, batch: batch, st: st, tokens: tokens, log: log, mux: http.NewServeMux(), now: time.Now, timeouts: DefaultTimeouts}
	for _, o := range opts {
		o(s)
	}
	if s.metrics == nil {
		s.metrics = metrics.New(log)
	}
	for _, str := range streams {
		s.streams[str.Name()] = str
		s.names = append(s.names, str.Name())
	}
	sort.Strings(s.names)
	s.routes()
	return s
}

func (s *Server) routes() {
	s.route("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.route("GET /readyz", s.readyz)
	s.route("GET /metrics", s.metrics.Handler().ServeHTTP)
	s.route("GET /api/v1/openapi.yaml", s.serveOpenAPI)
	s.handle("GET /api/v1/whoami", viewer, s.whoami)
	s.handle("GET /api/v1/streams", viewer, s.listStreams)
	s.handle("GET /api/v1/streams/{stream}", viewer, s.streamAction(http.StatusOK, nil))
	s.handle("POST /api/v1/streams/{stream}/pause", admin, s.streamAction(http.StatusAccepted, (*stream.Stream).Pause))
	s.handle("POST /api/v1/streams/{stream}/resume", admin, s.streamAction(http.StatusAccepted, (*stream.Stream).Resume))
	s.handle("POST /api/v1/streams/{stream}/reset", admin, s.streamAction(http.StatusAccepted, (*stream.Stream).Reset))
	s.handle("GET /api/v1/streams/{stream}/objects", viewer, s.listObjects)
	// A filter or a column subset needs admin; initiate checks.
	s.handle("POST /api/v1/streams/{stream}/backfills", operator, s.initiate)
	s.handle("POST /api/v1/streams/{stream}/backfills/stop", operator, s.stop)
	// A run's id is unique across streams, as a backfill's is; the routes
	// under a stream are the deprecated aliases of the ones under /runs.
	s.handle("GET /api/v1/streams/{stream}/runs/{id}", viewer, s.getRun)
	s.handle("POST /api/v1/streams/{stream}/runs/{id}/stop", operator, s.stopRun)
	s.handle("POST /api/v1/streams/{stream}/verify", operator, s.verify)
	s.handle("GET /api/v1/streams/{stream}/estimate", viewer, s.estimate)
	s.handle("GET /api/v1/backfills", viewer, s.listBackfills)
	s.handle("GET /api/v1/backfills/{id}", viewer, s.getBackfill)
	s.handle("GET /api/v1/backfills/{id}/changed-dates", viewer, s.changedDates)
	s.handle("PATCH /api/v1/backfills/{id}", operator, s.setRate)
	s.handle("GET /api/v1/runs/{id}", viewer, s.getRun)
	s.handle("POST /api/v1/runs/{id}/stop", operator, s.stopRun)
	s.handle("GET /api/v1/events", viewer, s.events)
	s.handle("GET /api/v1/audit", viewer, s.audit)
	s.batchRoutes()
	s.lineageRoutes()
	s.clusterRoutes()
	// The console is not part of the API (nor of its OpenAPI document): it
	// is static files calling the API like any client.
	s.mux.Handle("GET "+console.Prefix, console.Handler())
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, console.Prefix, http.StatusFound)
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no route %s %s: the routes are in docs/api.md", r.Method, r.URL.Path)})
	})
}

// ServeHTTP implements http.Handler. A path with empty, "." or ".."
// segments (or no path, or "*") gets a JSON 404 here: the mux would answer
// it with an HTML redirect or a bare 400.
//
// Before routing, every request passes checkRequest (Host, Origin, body
// type); a body has timeouts.Body to arrive and a response timeouts.Write
// to be taken; a handler's panic is answered with a 500 and logged.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &guardedWriter{ResponseWriter: rw, write: s.timeouts.Write}
	// A kept-alive connection keeps the previous response's deadline; this
	// response sets its own when it starts.
	_ = http.NewResponseController(rw).SetWriteDeadline(time.Time{})
	defer s.recoverPanic(w, r)
	// The body's deadline comes first: a refused request's body is not
	// read, and the connection is closed rather than drained, so neither
	// can hold it.
	s.limitBody(rw, r)
	if e := s.checkRequest(r); e != nil {
		w.Header().Set("Connection", "close")
		writeError(w, e)
		return
	}
	p := r.URL.EscapedPath()
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(p, "/") || clean != p {
		writeError(w, &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no route %s %s: write the path without empty, . or .. segments; the routes are in docs/api.md", r.Method, r.URL.Path)})
		return
	}
	if s.cluster != nil {
		// Only a caller with a valid token is forwarded (the owner checks
		// its role), so that no one else learns where work runs.
		if _, err := s.authenticate(r); err == nil {
			if h, ok := s.cluster.Forward(r); ok {
				h.ServeHTTP(w, r) // checked here (Host, Origin, body, token); the owner checks the role
				return
			}
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Error is an API error: an HTTP status, a stable code and what to do.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Unknown names what a 404 did not find, with suggestions.
	Unknown []Unknown `json:"unknown,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

type handlerFunc func(w http.ResponseWriter, r *http.Request, who string) error

// route registers an unauthenticated route.
func (s *Server) route(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, s.timed(pattern, h))
}

// Routes returns the patterns of every route ("GET /api/v1/streams"), in
// registration order: the OpenAPI document must describe exactly these.
func (s *Server) Routes() []string { return slices.Clone(s.patterns) }

// The roles a route may need, as handle takes them.
const (
	viewer   = config.RoleViewer
	operator = config.RoleOperator
	admin    = config.RoleAdmin
)

// handle registers a route that needs a token of at least role need (when
// tokens are configured), and renders its errors.
func (s *Server) handle(pattern string, need config.Role, h handlerFunc) {
	s.route(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, err := s.authenticate(r)
		if err == nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			if r.Method != http.MethodGet && r.Method != http.MethodHead && s.st != nil {
				// Who asked for a change is recorded, refused or not.
				rec := &actionRecorder{statusRecorder: statusRecorder{ResponseWriter: w}, body: r.Body}
				r.Body, w = rec, rec
				defer s.recordAction(r, pattern, c.who, rec)
			}
			err = c.require(need, "")
		}
		if err == nil {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
			err = h(w, r, c.who)
		}
		if err != nil {
			var apiErr *Error
			if !errors.As(err, &apiErr) {
				apiErr = classify(err)
			}
			if apiErr.Status >= 500 {
				s.log.Error("api request failed", "path", r.URL.Path, logkey.Err(err))
			}
			writeError(w, apiErr)
		}
	})
}

// caller is who sends a request: who as started_by records it, the token's
// name (empty without tokens) and its role.
type caller struct {
	who  string
	name string
	role config.Role
}

type callerKey struct{}

// callerOf is the caller handle authenticated.
func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// require refuses the caller unless its role allows need; what, if not
// empty, says what needs it.
func (c caller) require(need config.Role, what string) error {
	if c.role.Allows(need) {
		return nil
	}
	if what == "" {
		what = "this request"
	}
	return &Error{Status: http.StatusForbidden, Code: "forbidden",
		Message: fmt.Sprintf("%s needs the %s role; the token %q has the %s role: use a token with the %s role (api.tokens[].role)", what, need, c.name, c.role, need)}
}

// authenticate returns the caller: who is "api:<token name>" (or "cli:…",
// "console:…" for the CLI and the console), or "api"/"cli"/"console" with
// the admin role when no tokens are configured (the daemon then listens on
// loopback only).
func (s *Server) authenticate(r *http.Request) (caller, error) {
	client := "api"
	switch h := r.Header.Get("X-Tidemark-Client"); h {
	case "cli", "console":
		client = h
	}
	if len(s.tokens) == 0 {
		return caller{who: client, role: config.RoleAdmin}, nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok {
		for _, t := range s.tokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(t.Token)) == 1 {
				return caller{who: client + ":" + t.Name, name: t.Name, role: t.Role}, nil
			}
		}
	}
	return caller{}, &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "send a valid API token as `Authorization: Bearer TOKEN` (the CLI reads TIDEMARK_TOKEN)"}
}

// Whoami is the body of GET /api/v1/whoami.
type Whoami struct {
	// Name is the token's, empty when no tokens are configured.
	Name string `json:"name"`
	// Role is the token's, admin when no tokens are configured.
	Role config.Role `json:"role"`
}

// whoami answers the caller's token name and role, so that the console
// offers only what the role may do.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request, _ string) error {
	c := callerOf(r)
	writeJSON(w, http.StatusOK, Whoami{Name: c.name, Role: c.role})
	return nil
}

func classify(err error) *Error {
	var refused *stream.RefusedError
	var invalid *stream.InvalidError
	switch {
	case errors.As(err, &refused):
		return &Error{Status: http.StatusConflict, Code: "refused", Message: refused.Msg}
	case errors.As(err, &invalid):
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: invalid.Msg}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	case errors.Is(err, stream.ErrNotRunning):
		return &Error{Status: http.StatusConflict, Code: "not_running", Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &Error{Status: 499, Code: "canceled", Message: "the request was canceled"}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &Error{Status: http.StatusRequestTimeout, Code: "timeout", Message: "the request body did not arrive in time: send it at once"}
	}
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("request body over %d bytes", maxBody)}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error: see the daemon's log"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, map[string]*Error{"error": e})
}

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, args...)}
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) || errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		return badRequest("invalid JSON body: %v", err)
	}
	return nil
}

func (s *Server) stream(r *http.Request) (*stream.Stream, error) {
	return s.streamNamed(r.PathValue("stream"))
}

func (s *Server) streamNamed(name string) (*stream.Stream, error) {
	str, ok := s.streams[name]
	if !ok {
		return nil, s.unknownStream(name)
	}
	return str, nil
}

// parseObjects reads "schema.table" names; a name without a dot is in public.
func parseObjects(names []string) ([]change.TableID, error) {
	if len(names) == 0 {
		return nil, badRequest("name at least one object, as \"schema.table\"")
	}
	seen := map[change.TableID]bool{}
	var ids []change.TableID
	for _, n := range names {
		p, err := config.ParsePattern(n)
		id, literal := p.Table()
		if err != nil || !literal {
			return nil, badRequest("%q is not an object name: use schema.table (quote names with dots in them)", n)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}
