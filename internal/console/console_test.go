package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Paths that cannot name a console file are refused with 400 and a reason,
// never answered 500 nor looked up.
func TestBadPathsAre400(t *testing.T) {
	h := Handler()
	for path, want := range map[string]int{
		"/ui/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd": http.StatusBadRequest,
		"/ui/%c0%ae%c0%ae/":                        http.StatusBadRequest,
		"/ui/%ff":                                  http.StatusBadRequest,
		"/ui/%00":                                  http.StatusBadRequest,
		"/ui/index.html%00.js":                     http.StatusBadRequest,
		"/ui/%1b%5b2J":                             http.StatusBadRequest,
		"/ui/..%5c..%5cwin.ini":                    http.StatusBadRequest,
		"/ui/" + strings.Repeat("a", 1021):         http.StatusBadRequest,
		"/ui/" + strings.Repeat("a", 1020):         http.StatusNotFound,
		"/ui/%2e%2e/etc/passwd":                    http.StatusBadRequest,
		"/ui/a//b":                                 http.StatusBadRequest,
		"/ui/":                                     http.StatusOK,
		"/ui/index.html":                           http.StatusMovedPermanently, // to ./
		"/ui/app.css":                              http.StatusOK,
		"/ui/nothing.js":                           http.StatusNotFound,
	} {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != want {
			t.Errorf("GET %.60s: %d %q, want %d", path, rec.Code, body, want)
		}
		if want == http.StatusBadRequest && !strings.HasPrefix(string(body), "bad console path: ") {
			t.Errorf("GET %.60s: body %q does not say why", path, body)
		}
	}
}
