package console

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAssetsCompressedAndRevalidated: a console file is sent gzipped to a
// client that takes gzip and as it is to one that does not, each with an
// entity tag; a request with that tag gets 304 and no body, so a reload
// fetches nothing again while the files are unchanged.
func TestAssetsCompressedAndRevalidated(t *testing.T) {
	h := Handler()
	get := func(path string, headers ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, name := range []string{"app.css", "js/app.js", "index.html"} {
		path := "/ui/" + name
		if name == "index.html" {
			path = "/ui/"
		}
		want, err := fs.ReadFile(Files(), name)
		if err != nil {
			t.Fatal(err)
		}
		zipped := get(path, "Accept-Encoding", "gzip, deflate, br")
		if zipped.Code != http.StatusOK || zipped.Header().Get("Content-Encoding") != "gzip" || zipped.Body.Len() >= len(want) {
			t.Fatalf("%s with gzip: %d, encoding %q, %d bytes of %d", path, zipped.Code, zipped.Header().Get("Content-Encoding"), zipped.Body.Len(), len(want))
		}
		zr, err := gzip.NewReader(zipped.Body)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(zr); !bytes.Equal(got, want) {
			t.Errorf("%s gunzipped differs from the file", path)
		}
		plain := get(path)
		if plain.Header().Get("Content-Encoding") != "" || !bytes.Equal(plain.Body.Bytes(), want) {
			t.Errorf("%s without gzip: encoding %q, body differs", path, plain.Header().Get("Content-Encoding"))
		}
		for _, rec := range []*httptest.ResponseRecorder{zipped, plain} {
			tag := rec.Header().Get("ETag")
			if tag == "" || rec.Header().Get("Content-Security-Policy") == "" {
				t.Fatalf("%s: no ETag or no security headers: %v", path, rec.Header())
			}
			enc := "identity"
			if rec.Header().Get("Content-Encoding") == "gzip" {
				enc = "gzip"
			}
			again := get(path, "Accept-Encoding", enc, "If-None-Match", tag)
			if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
				t.Errorf("%s revalidated with %s: %d with %d bytes, want 304 and none", path, tag, again.Code, again.Body.Len())
			}
		}
		if zipped.Header().Get("ETag") == plain.Header().Get("ETag") {
			t.Errorf("%s: the gzipped and plain bodies share an ETag", path)
		}
	}
	if rec := get("/ui/app.css", "Accept-Encoding", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 got gzip")
	}
}
