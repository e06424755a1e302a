package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

func init() { sinktest.RegisterMemory() }

// TestOptionsTheDestinationCannotHonour: a stream into a destination with
// the core only (the test-only memory type) backfills whole tables, but a
// filtered or column-subset backfill and a verify, which need a
// destination that replaces key ranges in place or is read back, are a
// 400 naming the destination's type.
func TestOptionsTheDestinationCannotHonour(t *testing.T) {
	e := newEnv(t, envOptions{destination: "{type: memory}", backfill: "{mode: manual}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL);
		INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g;`})
	e.initiate(http.StatusCreated, `{"objects": ["public.t"]}`)
	e.waitLoaded("public.t")
	backfills := "/api/v1/streams/" + e.name + "/backfills"
	for _, c := range []struct{ path, body, want string }{
		{backfills, `{"objects": ["public.t"], "columns": ["v"]}`,
			"a column-subset backfill (columns) needs a destination that can replace key ranges, and a memory destination cannot: leave columns out to backfill whole rows"},
		{backfills, `{"objects": ["public.t"], "filter": "id > 5"}`,
			"a filtered backfill (filter) needs a destination that can replace key ranges, and a memory destination cannot: leave filter out to backfill every row"},
		{"/api/v1/streams/" + e.name + "/verify", `{"objects": ["public.t"]}`,
			"verify needs a destination that can be read back, and a memory destination cannot"},
	} {
		if msg := e.fails(http.StatusBadRequest, "bad_request", "POST", c.path, c.body); !strings.Contains(msg, c.want) {
			t.Errorf("POST %s %s: %q, want it to say %q", c.path, c.body, msg, c.want)
		}
	}
	if n := len(e.backfills("")); n != 1 {
		t.Errorf("%d backfills recorded, want only the whole-table one", n)
	}
}
