package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// The attack: a web page posting a batch backfill as text/plain
// (no preflight) from its own origin. Refused, nothing submitted, the task
// did not run; a Host that is not the daemon's is misdirected. The same
// request from the CLI runs the task.
func TestCrossSiteBatchSubmitRefused(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	e := newBatchEnv(t, fmt.Sprintf(`
  - {name: touch, type: shell, schedule: daily, command: "touch %s"}
`, marker))
	req := `{"task": "touch", "dates": {"from": "2025-01-11", "to": "2025-01-11"}}`
	path := "/api/v1/batch/backfills"
	e.fails(http.StatusForbidden, "cross_origin", "POST", path, req, "Content-Type", "text/plain", "Origin", "http://evil.example")
	e.fails(http.StatusForbidden, "cross_origin", "POST", path, req, "Origin", "http://evil.example")
	e.fails(http.StatusForbidden, "cross_origin", "POST", path, req, "Origin", "null")
	e.fails(http.StatusUnsupportedMediaType, "unsupported_media_type", "POST", path, req, "Content-Type", "text/plain")
	e.fails(http.StatusUnsupportedMediaType, "unsupported_media_type", "POST", path, req, "Content-Type", "application/x-www-form-urlencoded")
	e.fails(http.StatusMisdirectedRequest, "misdirected", "POST", path, req, "Host", "attacker.example")
	e.fails(http.StatusMisdirectedRequest, "misdirected", "GET", "/api/v1/tasks", "", "Host", "attacker.example")
	e.fails(http.StatusMisdirectedRequest, "misdirected", "GET", "/healthz", "", "Host", "attacker.example:80")
	var list []store.BatchBackfill
	e.ok(http.StatusOK, &list, "GET", "/api/v1/batch/backfills", "")
	if len(list) != 0 {
		t.Fatalf("refused requests submitted %+v", list)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the task ran: %v", err)
	}

	// The console's own origin, and the CLI (no Origin), are served.
	var sub api.SubmitResponse
	e.ok(http.StatusCreated, &sub, "POST", path, req, "Origin", e.base)
	e.waitFor("the task to run", func() bool { _, err := os.Stat(marker); return err == nil })
}

// Which Host, Origin and Content-Type are served, on an idle server that
// listens on 10.0.0.5 and allows a name and a network.
func TestHostOriginContentType(t *testing.T) {
	t.Parallel()
	srv := idleServer(t, nil, api.WithHosts("10.0.0.5:7420", []string{"tidemark.example.com", "192.168.0.0/16", "fd00::7"}))
	type req struct {
		method, host string
		headers      []string
		body         string
	}
	initiate := `{"objects": ["public.b"], "run_at": "2999-01-01T00:00:00Z"}`
	cases := []struct {
		req
		status int // 0: served (not a refusal of this check)
	}{
		{req{"GET", "127.0.0.1:7420", nil, ""}, 0},
		{req{"GET", "127.1.2.3", nil, ""}, 0},
		{req{"GET", "localhost:7420", nil, ""}, 0},
		{req{"GET", "LOCALHOST.", nil, ""}, 0},
		{req{"GET", "[::1]:7420", nil, ""}, 0},
		{req{"GET", "10.0.0.5:7420", nil, ""}, 0},
		{req{"GET", "tidemark.example.com", nil, ""}, 0},
		{req{"GET", "Tidemark.Example.Com:443", nil, ""}, 0},
		{req{"GET", "192.168.7.9:7420", nil, ""}, 0},
		{req{"GET", "[fd00::7]:7420", nil, ""}, 0},
		{req{"GET", "attacker.example", nil, ""}, 421},
		{req{"GET", "tidemark.example.com.attacker.example", nil, ""}, 421},
		{req{"GET", "10.0.0.6:7420", nil, ""}, 421},
		{req{"GET", "0.0.0.0:7420", nil, ""}, 421},
		{req{"GET", "", nil, ""}, 421},
		{req{"POST", "attacker.example", []string{"Content-Type", "application/json"}, initiate}, 421},
		// Origins of state-changing requests.
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:7420"}, initiate}, 0},
		{req{"POST", "tidemark.example.com", []string{"Content-Type", "application/json", "Origin", "https://tidemark.example.com"}, initiate}, 0},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "https://tidemark.example.com:8443"}, initiate}, 0},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, initiate}, 403},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://localhost:7420"}, initiate}, 403},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:3000"}, initiate}, 403},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://10.0.0.5:7420"}, initiate}, 403},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "null"}, initiate}, 403},
		{req{"POST", "192.168.1.1:7420", []string{"Content-Type", "application/json", "Origin", "http://192.168.1.1:3000"}, initiate}, 403}, // a network admits clients, not pages
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://[fd00::7]:8080"}, initiate}, 0},
		{req{"POST", "127.0.0.1:7420", []string{"Origin", "http://evil.example"}, ""}, 403},
		{req{"PATCH", "127.0.0.1:7420", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, `{"rows_per_second": 1}`}, 403},
		{req{"GET", "127.0.0.1:7420", []string{"Origin", "http://evil.example"}, ""}, 0}, // a read; the Host check guards it
		// Body types.
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json; charset=utf-8"}, initiate}, 0},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "Application/JSON"}, initiate}, 0},
		{req{"POST", "127.0.0.1:7420", nil, initiate}, 415},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "text/plain"}, initiate}, 415},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "multipart/form-data; boundary=x"}, initiate}, 415},
		{req{"POST", "127.0.0.1:7420", []string{"Content-Type", "application/json-seq"}, initiate}, 415},
		{req{"PATCH", "127.0.0.1:7420", []string{"Content-Type", "text/plain"}, `{"rows_per_second": 1}`}, 415},
		{req{"POST", "127.0.0.1:7420", nil, ""}, 0}, // no body, nothing to declare
	}
	for _, c := range cases {
		path := "/api/v1/streams/alpha/objects"
		switch c.method {
		case "POST":
			path = "/api/v1/streams/alpha/backfills"
			if c.body == "" {
				path = "/api/v1/streams/alpha/verify"
			}
		case "PATCH":
			path = "/api/v1/backfills/1"
		}
		r := httptest.NewRequest(c.method, path, strings.NewReader(c.body))
		r.Host = c.host
		for i := 0; i+1 < len(c.headers); i += 2 {
			r.Header.Set(c.headers[i], c.headers[i+1])
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		refused := rec.Code == 403 || rec.Code == 415 || rec.Code == 421
		if c.status == 0 && refused || c.status != 0 && rec.Code != c.status {
			t.Errorf("%s %s Host %q %v: HTTP %d %s, want %s", c.method, path, c.host, c.headers, rec.Code, rec.Body, statusWant(c.status))
		}
	}
}

func statusWant(status int) string {
	if status == 0 {
		return "served"
	}
	return fmt.Sprint(status)
}

// serve serves srv on a loopback port until the test ends.
func serve(t *testing.T, srv *api.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// fast are timeouts short enough for a test.
var fast = api.Timeouts{Header: time.Second, Body: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}

// untilClosed reads conn until it ends, at most bound; it returns what it
// read and when it ended, failing the test when it did not.
func untilClosed(t *testing.T, conn net.Conn, bound time.Duration) (string, time.Time) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(bound)); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(conn)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after %s; read %q", bound, data)
		}
		// A reset also ends the connection.
	}
	return string(data), time.Now()
}

// A client trickling a body, a byte every 100ms (each byte well within any
// per-read timeout), is cut once the body timeout has passed since the
// headers: 408, then the connection closes. A request refused for its
// Host, Origin or body type is answered at once and its connection closed,
// its body unread.
func TestSlowBodyCut(t *testing.T) {
	t.Parallel()
	addr := serve(t, idleServer(t, nil, api.WithTimeouts(fast)))
	for _, c := range []struct{ name, headers, status string }{
		{"accepted", "Host: 127.0.0.1\r\nContent-Type: application/json", "408 "},
		{"foreign host", "Host: attacker.example\r\nContent-Type: application/json", "421 "},
		{"plain text", "Host: 127.0.0.1\r\nContent-Type: text/plain", "415 "},
		{"cross origin", "Host: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: application/json", "403 "},
	} {
		t.Run(c.name, func(t *testing.T) { slowBody(t, addr, c.headers, c.status) })
	}
}

func slowBody(t *testing.T, addr, headers, status string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /api/v1/batch/preview HTTP/1.1\r\n%s\r\nContent-Length: 1000\r\n\r\n{", headers)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			case <-stop:
				return
			}
		}
	}()
	got, end := untilClosed(t, conn, 10*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 "+status) {
		t.Errorf("answer %q, want %s", got, status)
	}
	if status == "408 " && !strings.Contains(got, `"code": "timeout"`) {
		t.Errorf("answer %q, want a 408 timeout", got)
	}
	if d := end.Sub(start); d > 3*time.Second {
		t.Errorf("cut after %s, want about %s", d, fast.Body)
	}
}

// An idle kept-alive connection is closed once the idle timeout passes.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	addr := serve(t, idleServer(t, nil, api.WithTimeouts(fast)))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET /healthz: HTTP %d, close %v, %v", resp.StatusCode, resp.Close, err)
	}
	answered := time.Now()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the idle connection was not closed within 10s: %v", err)
	}
	if d := time.Since(answered); len(rest) != 0 || d > 3*time.Second {
		t.Errorf("closed after %s having sent %q, want about %s and nothing", d, rest, fast.Idle)
	}
}

// A client that stops taking a response is cut once the write timeout has
// passed since the response started: the handler's write fails.
func TestStalledReaderCut(t *testing.T) {
	t.Parallel()
	srv := idleServer(t, nil, api.WithTimeouts(fast))
	wrote := make(chan error, 1)
	srv.HandleForTest("GET /test/big", "viewer", func(w http.ResponseWriter, r *http.Request) error {
		chunk := make([]byte, 64<<10)
		for range 4096 { // 256 MiB, far over any socket buffer
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return nil
			}
		}
		wrote <- nil
		return nil
	})
	addr := serve(t, srv)
	d := net.Dialer{}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fmt.Fprintf(conn, "GET /test/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the handler wrote 256 MiB to a client that read nothing")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cut after %s, want about %s", d, fast.Write)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a client that reads nothing held the handler for 20s")
	}
}

// The event stream outlives the write timeout: an event sent well after it
// passed still arrives.
func TestEventStreamOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	addr := serve(t, idleServer(t, nil, api.WithTimeouts(fast)))
	resp, err := http.Get("http://" + addr + "/api/v1/events?stream=alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: HTTP %d", resp.StatusCode)
	}
	<-time.After(4 * fast.Write) // the time under test, not a synchronisation
	post, err := http.Post("http://"+addr+"/api/v1/streams/alpha/backfills", "application/json",
		strings.NewReader(`{"objects": ["public.a"], "run_at": "2999-01-01T00:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusCreated {
		t.Fatalf("initiate: HTTP %d", post.StatusCode)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				got <- sc.Text()
				return
			}
		}
		got <- "ended: " + fmt.Sprint(sc.Err())
	}()
	select {
	case ev := <-got:
		var b struct{ Backfill store.Backfill }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &b); err != nil || b.Backfill.Table != "a" {
			t.Errorf("event %q, want the backfill of public.a", ev)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no event")
	}
}
