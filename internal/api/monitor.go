package api

import (
	"net/http"
	"time"

	"github.com/tidemark/tidemark/internal/metrics"
	"github.com/tidemark/tidemark/internal/store"
)

// Option configures a Server.
type Option func(*Server)

// WithMetrics serves reg on /metrics and records every request's duration
// in it. Without it the server keeps a registry of its own.
func WithMetrics(reg *metrics.Registry) Option {
	return func(s *Server) { s.metrics = reg }
}

// timed records how long each request of a route took, under the route's
// pattern (never the request's path) and the status it answered.
func (s *Server) timed(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h(rec, r)
		s.metrics.ObserveHTTP(pattern, rec.code(), time.Since(start))
	}
}

// statusRecorder remembers the status a handler answered. It flushes, so
// that event streams still work through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

func (r *statusRecorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK // the handler wrote nothing
	}
	return r.status
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	Status  string   `json:"status"` // "ready" or "not_ready"
	Reasons []string `json:"reasons,omitempty"`
}

// readyz answers 200 when the daemon does what it is configured to do:
// every stream is running (or paused by request) and the batch engine, if
// any, has recovered and dispatches. That the API answers at all says it
// listens. Otherwise 503, naming each stream that is not and its state.
// It asks for no token, so it never says why: a stream's reason may quote
// row values (GET /api/v1/streams/{stream} gives it, with a token).
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var reasons []string
	for _, n := range s.names {
		str := s.streams[n]
		st := str.State()
		if st.State == store.StateRunning || st.State == store.StatePaused && str.Paused() {
			continue
		}
		reasons = append(reasons, "stream "+n+": "+st.State)
	}
	if s.batch != nil {
		select {
		case <-s.batch.Ready():
		default:
			reasons = append(reasons, "batch engine: recovering the instances a previous run left")
		}
	}
	if len(reasons) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, Readiness{Status: "not_ready", Reasons: reasons})
		return
	}
	writeJSON(w, http.StatusOK, Readiness{Status: "ready"})
}
