package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// verbCases are the forms of one client verb: ok reaches the daemon (for
// the daemon-down case); the others, when set, name an unknown stream, an
// unknown object, an unknown id, or what the daemon refuses.
type verbCases struct {
	ok, stream, object, id, refused []string
}

// Every client verb × (unknown stream, unknown object, unknown id, daemon
// down, refused, bad flag), against a real daemon: each exit code means one
// thing, and an unknown name comes with the closest existing one.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE orders (id int PRIMARY KEY); CREATE TABLE customers (id int PRIMARY KEY); CREATE TABLE nobackfill (id int PRIMARY KEY);
		INSERT INTO orders SELECT generate_series(1, 10); INSERT INTO customers SELECT generate_series(1, 10)`)
	d, _, port := daemonWith(t, func(dir string, port int) string {
		return fmt.Sprintf(`
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:%d"}
streams:
  - name: shop
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: {mode: manual}
  - name: down
    source: {dsn: "postgres://nobody@127.0.0.1:%d/none?connect_timeout=1"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    retry: {initial: 50ms, max: 1s}
tasks:
  - {name: extract, project: sales, type: noop, schedule: daily}
`, filepath.Join(dir, "meta.db"), port, dsn, filepath.Join(dir, "shop.db"), freePort(t), filepath.Join(dir, "down.db"))
	})
	addr := []string{"--addr", fmt.Sprintf("127.0.0.1:%d", port)}
	cli := func(args ...string) result { t.Helper(); return tidemark(t, append(args, addr...)...) }
	poll(t, d, "shop's objects", func() bool { return strings.Contains(cli("objects", "shop").stdout, "public.orders") })

	// Something to refuse: a pending backfill of customers (it starts in
	// 2099), a run that has ended, a backfill that has ended.
	if r := cli("backfill", "initiate", "shop", "public.customers", "--at", "2099-01-01T00:00:00Z"); r.code != 0 {
		t.Fatalf("initiate: %s", r)
	}
	var run []store.Backfill
	if r := cli("backfill", "initiate", "shop", "public.orders", "--at", "2099-01-01T00:00:00Z", "--as-one-run", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil || len(run) != 1 {
		t.Fatalf("initiate as one run: %s", r)
	}
	runID, bfID := fmt.Sprint(run[0].RunID), fmt.Sprint(run[0].ID)
	if r := cli("backfill", "stop-run", "shop", runID); r.code != 0 {
		t.Fatalf("stop-run: %s", r)
	}

	verbs := map[string]verbCases{
		"objects": {ok: []string{"objects", "shop"}, stream: []string{"objects", "shpo"}},
		"backfill initiate": {ok: []string{"backfill", "initiate", "shop", "public.orders"},
			stream:  []string{"backfill", "initiate", "shpo", "public.orders"},
			object:  []string{"backfill", "initiate", "shop", "public.ordres"},
			refused: []string{"backfill", "initiate", "shop", "public.customers"}},
		"backfill stop": {ok: []string{"backfill", "stop", "shop", "public.orders"},
			stream:  []string{"backfill", "stop", "shpo", "public.orders"},
			object:  []string{"backfill", "stop", "shop", "public.ordres"},
			refused: []string{"backfill", "stop", "shop", "public.orders"}},
		"backfill estimate": {ok: []string{"backfill", "estimate", "shop"},
			stream: []string{"backfill", "estimate", "shpo"},
			object: []string{"backfill", "estimate", "shop", "public.ordres"}},
		"backfill list": {ok: []string{"backfill", "list"},
			stream: []string{"backfill", "list", "--stream", "shpo"},
			object: []string{"backfill", "list", "--stream", "shop", "--object", "public.ordres"}},
		"backfill set-rate": {ok: []string{"backfill", "set-rate", "1", "10"},
			id:      []string{"backfill", "set-rate", "999", "10"},
			refused: []string{"backfill", "set-rate", bfID, "10"}},
		"backfill run": {ok: []string{"backfill", "run", "shop", "1"},
			stream: []string{"backfill", "run", "shpo", runID},
			id:     []string{"backfill", "run", "shop", "999"}},
		"backfill stop-run": {ok: []string{"backfill", "stop-run", "shop", "1"},
			stream:  []string{"backfill", "stop-run", "shpo", runID},
			id:      []string{"backfill", "stop-run", "shop", "999"},
			refused: []string{"backfill", "stop-run", "shop", runID}},
		"verify": {ok: []string{"verify", "shop"},
			stream: []string{"verify", "shpo"},
			object: []string{"verify", "shop", "public.ordres"}},
		"stream pause":  {ok: []string{"stream", "pause", "shop"}, stream: []string{"stream", "pause", "shpo"}},
		"stream resume": {ok: []string{"stream", "resume", "shop"}, stream: []string{"stream", "resume", "shpo"}},
		"stream reset":  {ok: []string{"stream", "reset", "shop"}, stream: []string{"stream", "reset", "shpo"}},
		"backfill wait": {ok: []string{"backfill", "wait", "shop", "public.orders"},
			stream:  []string{"backfill", "wait", "shpo", "public.orders"},
			object:  []string{"backfill", "wait", "shop", "public.ordres"},
			refused: []string{"backfill", "wait", "shop", "public.nobackfill"}},
		"streams":              {ok: []string{"streams"}},
		"tasks":                {ok: []string{"tasks"}},
		"batch show":           {ok: []string{"batch", "show", "1"}, id: []string{"batch", "show", "999"}},
		"batch instances":      {ok: []string{"batch", "instances", "1"}, id: []string{"batch", "instances", "999"}},
		"batch export":         {ok: []string{"batch", "export", "1"}, id: []string{"batch", "export", "999"}},
		"batch stop":           {ok: []string{"batch", "stop", "1"}, id: []string{"batch", "stop", "999"}},
		"batch rerun":          {ok: []string{"batch", "rerun", "1"}, id: []string{"batch", "rerun", "999"}},
		"batch log":            {ok: []string{"batch", "log", "1"}, id: []string{"batch", "log", "999"}},
		"batch stop-instance":  {ok: []string{"batch", "stop-instance", "1"}, id: []string{"batch", "stop-instance", "999"}},
		"batch mark-succeeded": {ok: []string{"batch", "mark-succeeded", "1"}, id: []string{"batch", "mark-succeeded", "999"}},
		"batch rerun-instance": {ok: []string{"batch", "rerun-instance", "1"}, id: []string{"batch", "rerun-instance", "999"}},
		"batch list":           {ok: []string{"batch", "list"}},
		"batch preview":        {ok: []string{"batch", "preview", "extract", "--from", "2025-01-01"}},
		"audit": {ok: []string{"audit"},
			stream: []string{"audit", "--stream", "shpo"},
			object: []string{"audit", "--stream", "shop", "--object", "public.ordres"}},
	}
	nowhere := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for _, v := range verbs {
		if v.stream != nil {
			expect(t, 2, []string{`no stream "shpo"; did you mean shop?`}, append(v.stream, addr...)...)
		}
		if v.object != nil {
			expect(t, 2, []string{"no object public.ordres in stream shop; did you mean public.orders?"}, append(v.object, addr...)...)
		}
		if v.id != nil {
			expect(t, 2, []string{" 999"}, append(v.id, addr...)...)
		}
		if v.refused != nil {
			// "cannot initiate …", "cannot stop …", "no backfill of … to wait for"
			expect(t, 4, []string{"tidemark: "}, append(v.refused, addr...)...)
		}
		expect(t, 1, []string{"cannot reach tidemark at http://" + nowhere}, append(v.ok, "--addr", nowhere)...)
		expect(t, 2, []string{"--bogus", "--help"}, append(v.ok, "--bogus")...)
	}

	expect(t, 2, []string{"no backfill 999: `tidemark backfill list` lists them"}, append([]string{"backfill", "set-rate", "999", "10"}, addr...)...)
	expect(t, 2, []string{"no run 999: `tidemark backfill list --stream shop` names each backfill's run"}, append([]string{"backfill", "run", "shop", "999"}, addr...)...)

	// A stream that failed says so, rather than that the object is not
	// one of its objects.
	r := expect(t, 1, []string{"stream down is ", "its objects are known once it runs"}, append([]string{"backfill", "initiate", "down", "public.orders"}, addr...)...)
	if strings.Contains(r.stderr, "no object") {
		t.Errorf("initiate on a failed stream: %s", r)
	}
}
