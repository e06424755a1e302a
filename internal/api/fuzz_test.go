package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// idleServer is an API over two streams that never run (their source is
// unreachable and Run is never called), with objects recorded as a first
// start in manual mode would, so initiate and stop reach the store.
func idleServer(f *testing.F) *api.Server {
	f.Helper()
	ctx := context.Background()
	dir := f.TempDir()
	cfg, err := config.Parse(fmt.Appendf(nil, `
streams:
  - name: alpha
    source: {dsn: "postgres://nobody@127.0.0.1:1/none"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: {mode: manual}
  - name: beta
    source: {dsn: "postgres://nobody@127.0.0.1:1/none"}
    destination: {type: sqlite, path: "%s"}
    include: ["*.*"]
`, filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")), nil)
	if err != nil {
		f.Fatal(err)
	}
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	var streams []*stream.Stream
	for _, sc := range cfg.Streams {
		s := stream.New(sc, st, log, stream.Options{})
		if err := s.MarkNotStarted(ctx); err != nil {
			f.Fatal(err)
		}
		streams = append(streams, s)
		for _, obj := range [][2]string{{"public", "a"}, {"public", "b"}, {"my.schema", "T x"}} {
			o := store.Object{Stream: sc.Name, Schema: obj[0], Table: obj[1], Reason: stream.ReasonManual,
				Columns: []store.ColumnInfo{{Name: "id", Type: "integer", Key: true}}}
			if err := st.PutObject(ctx, o); err != nil {
				f.Fatal(err)
			}
		}
	}
	return api.New(streams, nil, st, nil, log)
}

// flushRecorder ends the request once the handler flushes, so that the
// event stream returns after its headers.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushed func()
}

func (r *flushRecorder) Flush() {
	r.ResponseRecorder.Flush()
	r.flushed()
}

func FuzzAPIRequests(f *testing.F) {
	srv := idleServer(f)
	objects := func(names ...string) string {
		b, _ := json.Marshal(api.ObjectsRequest{Objects: names})
		return string(b)
	}
	for _, seed := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/api/v1/streams", ""},
		{"GET", "/api/v1/streams/alpha", ""},
		{"GET", "/api/v1/streams/nope", ""},
		{"GET", "/api/v1/streams/alpha/objects", ""},
		{"GET", "/api/v1/streams/beta/objects?x=1", ""},
		{"POST", "/api/v1/streams/alpha/backfills", objects("public.a", "b")},
		{"POST", "/api/v1/streams/beta/backfills", objects(`"my.schema"."T x"`)},
		{"POST", "/api/v1/streams/alpha/backfills", objects("public.*")},
		{"POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.a"], "x": 1}`},
		{"POST", "/api/v1/streams/alpha/backfills", `{"objects": [`},
		{"POST", "/api/v1/streams/alpha/backfills", `null`},
		{"POST", "/api/v1/streams/alpha/backfills/stop", objects("public.a")},
		{"POST", "/api/v1/streams/alpha/backfills/stop", objects("public.b", "public.nope")},
		{"POST", "/api/v1/streams/alpha/verify", ""},
		{"POST", "/api/v1/streams/alpha/verify", `{"objects": ["public.a"], "chunk_size": 10}`},
		{"POST", "/api/v1/streams/alpha/verify", `{"chunk_size": -5}`},
		{"POST", "/api/v1/streams/alpha/pause", ""},
		{"POST", "/api/v1/streams/alpha/resume", ""},
		{"POST", "/api/v1/streams/beta/reset", ""},
		{"GET", "/api/v1/backfills", ""},
		{"GET", "/api/v1/backfills?stream=alpha&object=public.a&status=pending&started_by=api&limit=5", ""},
		{"GET", "/api/v1/backfills?since=2026-01-02T15:04:05Z&until=2027-01-02T15:04:05%2B02:00", ""},
		{"GET", "/api/v1/backfills?limit=-1&object=%22", ""},
		{"GET", "/api/v1/backfills/1", ""},
		{"GET", "/api/v1/backfills/999999", ""},
		{"GET", "/api/v1/backfills/x", ""},
		{"GET", "/api/v1/events", ""},
		{"GET", "/api/v1/events?stream=beta", ""},
		{"GET", "/api/v1/events?stream=nope", ""},
		{"CONNECT", "tidemark:443", ""},
		{"GET", "http://tidemark/api/v1/streams", ""},
		{"HEAD", "/api/v1/streams", ""},
		{"OPTIONS", "*", ""},
		{"DELETE", "/api/v1/streams/alpha", ""},
		{"PUT", "/api/v1/streams/alpha/backfills", objects("public.a")},
		{"GET", "/api/v1/streams/%61lpha/objects", ""},
		{"GET", "/api/v1//streams", ""},
		{"POST", "/api/v1/streams/alpha/./backfills", objects("public.a")},
		{"GET", "/api/v1/streams/../v1/streams", ""},
		{"GET", "/", ""},
		{"GET", "//", ""},
		{"GET", "/api/v1/streams/", ""},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		// The request as the HTTP server would read it from the wire; what
		// it would reject never reaches the API.
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: tidemark\r\nContent-Length: %d\r\n\r\n", method, path, len(body))
		req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(strings.NewReader(raw), bytes.NewReader(body))))
		if err != nil {
			return // not a request the server would accept from the wire
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: cancel}
		srv.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code >= 500 {
			t.Fatalf("%s %q %q: HTTP %d %s", method, path, body, rec.Code, rec.Body)
		}
		ct := rec.Header().Get("Content-Type")
		if ct == "text/event-stream" && rec.Code == http.StatusOK {
			return
		}
		if ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q %q: HTTP %d with %q body %q, want JSON", method, path, body, rec.Code, ct, rec.Body)
		}
	})
}
