package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/config"
)

// routeRoles is the role each route needs, as docs/security.md lists it;
// "" is a route that never asks for a token.
var routeRoles = map[string]config.Role{
	"GET /healthz":             "",
	"GET /readyz":              "",
	"GET /metrics":             "",
	"GET /api/v1/openapi.yaml": "",
	"GET /api/v1/whoami":       config.RoleViewer,

	"GET /api/v1/streams":                              config.RoleViewer,
	"GET /api/v1/streams/{stream}":                     config.RoleViewer,
	"POST /api/v1/streams/{stream}/pause":              config.RoleAdmin,
	"POST /api/v1/streams/{stream}/resume":             config.RoleAdmin,
	"POST /api/v1/streams/{stream}/reset":              config.RoleAdmin,
	"GET /api/v1/streams/{stream}/objects":             config.RoleViewer,
	"POST /api/v1/streams/{stream}/backfills":          config.RoleOperator, // admin with a filter or columns
	"POST /api/v1/streams/{stream}/backfills/stop":     config.RoleOperator,
	"GET /api/v1/streams/{stream}/runs/{id}":           config.RoleViewer,
	"POST /api/v1/streams/{stream}/runs/{id}/stop":     config.RoleOperator,
	"GET /api/v1/runs/{id}":                            config.RoleViewer,
	"POST /api/v1/runs/{id}/stop":                      config.RoleOperator,
	"POST /api/v1/streams/{stream}/verify":             config.RoleOperator,
	"GET /api/v1/streams/{stream}/estimate":            config.RoleViewer,
	"GET /api/v1/backfills":                            config.RoleViewer,
	"GET /api/v1/backfills/{id}":                       config.RoleViewer,
	"GET /api/v1/backfills/{id}/changed-dates":         config.RoleViewer,
	"GET /api/v1/lineage/proposals":                    config.RoleViewer,
	"GET /api/v1/lineage/proposals/{id}":               config.RoleViewer,
	"POST /api/v1/lineage/proposals/{id}/approve":      config.RoleOperator,
	"POST /api/v1/lineage/proposals/{id}/dismiss":      config.RoleOperator,
	"PATCH /api/v1/backfills/{id}":                     config.RoleOperator,
	"GET /api/v1/events":                               config.RoleViewer,
	"GET /api/v1/audit":                                config.RoleViewer,
	"GET /api/v1/cluster":                              config.RoleViewer,
	"GET /api/v1/tasks":                                config.RoleViewer,
	"GET /api/v1/tasks/{task}":                         config.RoleViewer,
	"POST /api/v1/batch/preview":                       config.RoleOperator,
	"POST /api/v1/batch/backfills":                     config.RoleOperator,
	"GET /api/v1/batch/backfills":                      config.RoleViewer,
	"GET /api/v1/batch/backfills/{id}":                 config.RoleViewer,
	"POST /api/v1/batch/backfills/{id}/stop":           config.RoleOperator,
	"POST /api/v1/batch/backfills/{id}/rerun":          config.RoleOperator,
	"GET /api/v1/batch/backfills/{id}/instances":       config.RoleViewer,
	"GET /api/v1/batch/backfills/{id}/nodes.csv":       config.RoleViewer,
	"GET /api/v1/batch/instances":                      config.RoleViewer,
	"GET /api/v1/batch/instances/{id}":                 config.RoleViewer,
	"GET /api/v1/batch/instances/{id}/log":             config.RoleViewer,
	"POST /api/v1/batch/instances/{id}/stop":           config.RoleOperator,
	"POST /api/v1/batch/instances/{id}/rerun":          config.RoleOperator,
	"POST /api/v1/batch/instances/{id}/mark-succeeded": config.RoleOperator,
}

// roleTokens are a token of each role.
var roleTokens = []config.Token{
	{Name: "v", Token: "tok-viewer", Role: config.RoleViewer},
	{Name: "o", Token: "tok-operator", Role: config.RoleOperator},
	{Name: "a", Token: "tok-admin", Role: config.RoleAdmin},
}

// call sends one request to srv, with a JSON body and a token (none when
// empty); an event stream ends at its first flush.
func call(srv http.Handler, method, path, body, token string) *httptest.ResponseRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: cancel}
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	srv.ServeHTTP(rec, req)
	return rec.ResponseRecorder
}

// Every route the router serves, called with no token and with a token of
// each role: 401 without one (but the open routes), 403 naming the role
// needed below it, neither at or above it.
func TestEveryRouteRole(t *testing.T) {
	t.Parallel()
	srv := idleServer(t, roleTokens)
	for _, pattern := range srv.Routes() {
		need, ok := routeRoles[pattern]
		if !ok {
			t.Errorf("route %s has no role here: add it to routeRoles and to docs/security.md", pattern)
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.NewReplacer("{stream}", "alpha", "{id}", "1", "{task}", "a").Replace(path)
		body := ""
		if method != "GET" {
			body = "{}"
		}
		rec := call(srv, method, path, body, "")
		if need == "" && (rec.Code == 401 || rec.Code == 403) || need != "" && rec.Code != 401 {
			t.Errorf("%s without a token: HTTP %d %s", pattern, rec.Code, rec.Body)
		}
		for _, tok := range roleTokens {
			rec := call(srv, method, path, body, tok.Token)
			switch {
			case need == "" || tok.Role.Allows(need):
				if rec.Code == 401 || rec.Code == 403 {
					t.Errorf("%s as %s: HTTP %d %s, want it served", pattern, tok.Role, rec.Code, rec.Body)
				}
			case rec.Code != 403 || !strings.Contains(rec.Body.String(), `"code": "forbidden"`) ||
				!strings.Contains(rec.Body.String(), fmt.Sprintf("needs the %s role", need)):
				t.Errorf("%s as %s: HTTP %d %s, want 403 naming the %s role", pattern, tok.Role, rec.Code, rec.Body, need)
			}
		}
	}
	for pattern := range routeRoles {
		if !strings.Contains(strings.Join(srv.Routes(), "\n")+"\n", pattern+"\n") {
			t.Errorf("routeRoles lists %s, which the router does not serve", pattern)
		}
	}
}

// A backfill with a filter or a column subset needs admin; without either,
// operator.
func TestScopedBackfillNeedsAdmin(t *testing.T) {
	t.Parallel()
	srv := idleServer(t, roleTokens)
	path := "/api/v1/streams/alpha/backfills"
	for _, body := range []string{
		`{"objects": ["public.a"], "filter": "id > 1", "run_at": "2999-01-01T00:00:00Z"}`,
		`{"objects": ["public.b"], "columns": ["id"], "run_at": "2999-01-01T00:00:00Z"}`,
		`{"objects": ["public.b"], "columns": [], "run_at": "2999-01-01T00:00:00Z"}`,
	} {
		rec := call(srv, "POST", path, body, "tok-operator")
		if rec.Code != 403 || !strings.Contains(rec.Body.String(), "a backfill with a filter or columns needs the admin role") {
			t.Errorf("operator %s: HTTP %d %s, want 403 naming admin", body, rec.Code, rec.Body)
		}
		if rec := call(srv, "POST", path, body, "tok-admin"); rec.Code == 403 || rec.Code == 401 {
			t.Errorf("admin %s: HTTP %d %s", body, rec.Code, rec.Body)
		}
	}
	if rec := call(srv, "POST", "/api/v1/streams/beta/backfills", `{"objects": ["public.a"], "run_at": "2999-01-01T00:00:00Z"}`, "tok-operator"); rec.Code != http.StatusCreated {
		t.Errorf("operator, whole table: HTTP %d %s, want 201", rec.Code, rec.Body)
	}
}

// whoami answers the token's name and role; without tokens, admin.
func TestWhoami(t *testing.T) {
	t.Parallel()
	srv := idleServer(t, roleTokens)
	for _, tok := range roleTokens {
		var got api.Whoami
		rec := call(srv, "GET", "/api/v1/whoami", "", tok.Token)
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got != (api.Whoami{Name: tok.Name, Role: tok.Role}) {
			t.Errorf("whoami as %s: HTTP %d %s", tok.Name, rec.Code, rec.Body)
		}
	}
	open := idleServer(t, nil)
	var got api.Whoami
	rec := call(open, "GET", "/api/v1/whoami", "", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got != (api.Whoami{Role: config.RoleAdmin}) {
		t.Errorf("whoami without tokens: HTTP %d %s, want admin", rec.Code, rec.Body)
	}
	if rec := call(open, "POST", "/api/v1/streams/alpha/pause", "", ""); rec.Code != http.StatusAccepted {
		t.Errorf("pause without tokens: HTTP %d %s, want 202", rec.Code, rec.Body)
	}
}

// syncBuffer is a log destination safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A handler that panics is answered with a 500 JSON error and logged with
// its stack; the daemon keeps serving, on the same connection too. A panic
// after the answer started cuts the connection.
func TestHandlerPanicRecovered(t *testing.T) {
	t.Parallel()
	srv := idleServer(t, nil)
	var log syncBuffer
	srv.SetLogForTest(slog.New(slog.NewTextHandler(&log, nil)))
	srv.HandleForTest("GET /test/panic", config.RoleViewer, func(http.ResponseWriter, *http.Request) error {
		var m map[string]int
		m["boom"]++ // a nil map: a runtime panic, as a bug would make
		return nil
	})
	srv.HandleForTest("GET /test/panic-late", config.RoleViewer, func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"partial": `))
		w.(http.Flusher).Flush()
		panic("late")
	})
	base := "http://" + serve(t, srv)
	client := &http.Client{}
	get := func(path string) (int, string, error) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data), err
	}
	for range 2 {
		status, body, err := get("/test/panic")
		if err != nil || status != 500 || !strings.Contains(body, `"code": "internal"`) {
			t.Fatalf("panicking route: HTTP %d %s %v, want a 500 JSON error", status, body, err)
		}
		if status, _, err := get("/healthz"); err != nil || status != 200 {
			t.Fatalf("after a panic: /healthz HTTP %d %v", status, err)
		}
	}
	logged := log.String()
	if !strings.Contains(logged, "api handler panicked") || !strings.Contains(logged, "assignment to entry in nil map") ||
		!strings.Contains(logged, "goroutine ") || !strings.Contains(logged, "roles_test.go") {
		t.Errorf("log %q lacks the panic and its stack", logged)
	}
	if status, body, err := get("/test/panic-late"); err == nil {
		t.Errorf("a panic mid-answer: HTTP %d %q read whole, want the connection cut", status, body)
	}
	if status, _, err := get("/healthz"); err != nil || status != 200 {
		t.Fatalf("after a late panic: /healthz HTTP %d %v", status, err)
	}
}
