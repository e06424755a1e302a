package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/config"
)

// What every request passes before routing, with or without tokens: a Host
// the daemon answers to (a page rebinding a name of its own to the daemon's
// address sends that name), for a state-changing request an Origin that is
// the daemon's own (a page of another site sends its own), and a JSON body
// declared as such (the only body a cross-site form or no-preflight fetch
// cannot send).

// WithHosts names the listen address and api.allowed_hosts: a request's Host
// must be a loopback name, the listen host or an allowed host. Without it
// only loopback names are answered.
func WithHosts(listen string, allowed []string) Option {
	return func(s *Server) {
		if host, _, err := net.SplitHostPort(listen); err == nil {
			if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
				s.hosts.listen = normalHost(host)
			}
		}
		for _, a := range allowed {
			if p, err := netip.ParsePrefix(a); err == nil {
				s.hosts.nets = append(s.hosts.nets, p.Masked())
			} else {
				s.hosts.names = append(s.hosts.names, normalHost(a))
			}
		}
	}
}

// hostPolicy is the listen host, and the names and networks of
// api.allowed_hosts.
type hostPolicy struct {
	listen string
	names  []string
	nets   []netip.Prefix
}

// normalHost is host (without port) in lower case, without IPv6 brackets
// or a final dot, an IP address in its canonical form.
func normalHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().String()
	}
	return host
}

// allows reports whether a Host header's host may be answered.
func (p hostPolicy) allows(host string) bool {
	host = normalHost(host)
	return host != "" && (config.LoopbackHost(host) || host == p.listen || p.listed(host))
}

// named reports whether host (normalised) is in api.allowed_hosts by its
// name or single address. A network there admits clients, not web pages:
// any page served from any host of it would otherwise be an origin that
// may change state.
func (p hostPolicy) named(host string) bool {
	if slices.Contains(p.names, host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	for _, n := range p.nets {
		if err == nil && n.IsSingleIP() && n.Contains(ip) {
			return true
		}
	}
	return false
}

// listed reports whether host (normalised) is in api.allowed_hosts.
func (p hostPolicy) listed(host string) bool {
	for _, n := range p.names {
		if n == host {
			return true
		}
	}
	ip, err := netip.ParseAddr(host)
	for _, n := range p.nets {
		if err == nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// hostOf is the host of a Host header or an origin's host, without port.
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// stateChanging are the methods a browser page of another site may send
// without asking first (POST), or that change state once asked.
var stateChanging = map[string]bool{http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true}

// checkRequest refuses a request whose Host, Origin or body type is not
// one the daemon accepts.
func (s *Server) checkRequest(r *http.Request) *Error {
	if !s.hosts.allows(hostOf(r.Host)) {
		return &Error{Status: http.StatusMisdirectedRequest, Code: "misdirected",
			Message: fmt.Sprintf("this daemon does not answer to the host %q: call it by a loopback address or a host listed in api.allowed_hosts", r.Host)}
	}
	if !stateChanging[r.Method] {
		return nil
	}
	if origins := r.Header.Values("Origin"); len(origins) > 0 && (len(origins) > 1 || !s.ownOrigin(origins[0], r.Host)) {
		return &Error{Status: http.StatusForbidden, Code: "cross_origin",
			Message: fmt.Sprintf("refused a %s from the web page of origin %q: only the daemon's own pages (its console) and hosts in api.allowed_hosts may change state from a browser", r.Method, strings.Join(origins, ", "))}
	}
	if r.ContentLength != 0 {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: "send the body as JSON with the header Content-Type: application/json"}
		}
	}
	return nil
}

// ownOrigin reports whether origin is the daemon's own: the scheme and host
// the request came to, or a host of api.allowed_hosts (a proxy in front of
// the daemon may rewrite Host but not Origin).
func (s *Server) ownOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	return strings.EqualFold(u.Host, host) || s.hosts.named(normalHost(u.Hostname()))
}

// Timeouts bound how long a client may take over each part of an exchange;
// docs/api.md lists the defaults.
type Timeouts struct {
	// Header bounds sending a request's headers.
	Header time.Duration
	// Body bounds sending a request's body, from the end of its headers.
	Body time.Duration
	// Write bounds taking a response, from its first byte; on the event
	// stream, taking each event.
	Write time.Duration
	// Idle bounds the wait for the next request on a kept-alive connection.
	Idle time.Duration
}

// DefaultTimeouts are the daemon's timeouts.
var DefaultTimeouts = Timeouts{Header: 10 * time.Second, Body: 30 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second}

// WithTimeouts replaces DefaultTimeouts.
func WithTimeouts(t Timeouts) Option { return func(s *Server) { s.timeouts = t } }

// HTTPServer is an http.Server serving s with its header and idle
// timeouts; s itself bounds bodies and writes per request, so that
// neither cuts a long verify or the event stream.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, ReadHeaderTimeout: s.timeouts.Header, IdleTimeout: s.timeouts.Idle,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
}

// limitBody gives the client timeouts.Body to send r's body. The deadline
// goes once the body is read: the server's background read of the
// connection would otherwise cancel the request when it passes.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 || s.timeouts.Body <= 0 {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.timeouts.Body)) != nil {
		return // not a connection (a test's recorder)
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// guardedWriter sets the write deadline when the response starts, and
// remembers that it did (a panic after it cannot answer 500).
type guardedWriter struct {
	http.ResponseWriter
	write   time.Duration
	started bool
}

func (g *guardedWriter) start() {
	if !g.started {
		g.started = true
		if g.write > 0 {
			_ = http.NewResponseController(g.ResponseWriter).SetWriteDeadline(time.Now().Add(g.write))
		}
	}
}

func (g *guardedWriter) WriteHeader(code int) {
	g.start()
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	g.start()
	return g.ResponseWriter.Write(p)
}

func (g *guardedWriter) Flush() {
	g.start()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (g *guardedWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// recoverPanic answers a handler's panic with a 500 and logs it with its
// stack; the daemon keeps serving. http.ErrAbortHandler is net/http's own.
func (s *Server) recoverPanic(w *guardedWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.Error("api handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if !w.started {
		writeError(w, &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error: see the daemon's log"})
		return
	}
	panic(http.ErrAbortHandler) // the response is cut: the client must not take it as whole
}
