package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/doctor"
)

func TestDoctor(t *testing.T) {
	t.Parallel()
	srv, _ := shopSource(t, "CREATE TABLE orders (id int PRIMARY KEY, v text)")

	// The throwaway server trusts local connections: any password works,
	// and none may show.
	const password = "Hunter2Secret"
	source := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/shop?sslmode=disable", password, srv.Port)
	unreachable := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/shop", password, freePort(t))
	dir := t.TempDir()
	write := func(name, streams string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, fmt.Appendf(nil, "metadata: \"sqlite://%s\"\nstreams:\n%s", filepath.Join(dir, "meta.db"), streams), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.yaml", fmt.Sprintf(`
  - name: shop
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
`, source, filepath.Join(dir, "dest.db")))
	bad := write("bad.yaml", fmt.Sprintf(`
  - name: shop
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
  - name: gone
    source: {dsn: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.*"]
`, source, filepath.Join(dir, "missing", "dest.db"), unreachable, unreachable))

	noPassword := func(r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Errorf("the password shows: %s", r)
		}
	}

	r := expect(t, 0, []string{"OK    stream shop: wal_level", "stream shop: slot", "does not exist yet", "0 FAIL"}, "doctor", "-c", good)
	noPassword(r)
	walSenders := func(r result) string {
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.Contains(line, "stream shop: wal senders") {
				return line
			}
		}
		return ""
	}
	// A first start in automatic mode exports its load's snapshot on a
	// WAL sender of its own; with backfill.snapshot_max_hold 0 it does not.
	if line := walSenders(r); !strings.Contains(line, "the stream needs 2 more") {
		t.Errorf("doctor's wal senders: %q, want the stream needing 2", line)
	}
	streamWith := func(name, backfill string) string {
		return write(name, fmt.Sprintf(`
  - name: shop
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: %s
`, source, filepath.Join(dir, "dest.db"), backfill))
	}
	r = expect(t, 0, []string{"0 FAIL"}, "doctor", "-c", streamWith("nohold.yaml", "{snapshot_max_hold: 0s}"))
	if line := walSenders(r); !strings.Contains(line, "the stream needs 1 more") {
		t.Errorf("doctor's wal senders with snapshot_max_hold 0: %q, want the stream needing 1", line)
	}
	expect(t, 2, []string{"streams[0].backfill.snapshot_max_hold: -1s is out of range: use 0 (never load in the slot's snapshot) or a duration above 0, e.g. 1h"},
		"doctor", "-c", streamWith("badhold.yaml", "{snapshot_max_hold: -1s}"))
	expect(t, 2, []string{"streams[0].backfill.snapshot_max_hold: 8760h0m0s is out of range: use 0 to 168h"},
		"doctor", "-c", streamWith("longhold.yaml", "{snapshot_max_hold: 8760h}"))
	if _, err := os.Stat(filepath.Join(dir, "meta.db")); err == nil {
		t.Error("doctor created the metadata store")
	}

	r = tidemark(t, "doctor", "-c", good, "--json")
	var checks []doctor.Check
	if err := json.Unmarshal([]byte(r.stdout), &checks); r.code != 0 || err != nil || len(checks) == 0 {
		t.Fatalf("doctor --json: %s (%v)", r, err)
	}
	for _, c := range checks {
		if c.Status == doctor.Fail {
			t.Errorf("doctor --json: %+v failed", c)
		}
	}

	r = expect(t, 1, []string{"checks failed"}, "doctor", "-c", bad)
	noPassword(r)
	for _, want := range []string{
		"FAIL  stream shop: destination", "fix: mkdir -p " + filepath.Join(dir, "missing"),
		"FAIL  stream gone: source", "connection refused", "fix: check the host and port in streams[1].source.dsn",
		"FAIL  stream gone: destination", " FAIL\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor with failures: want %q in\n%s", want, r.stdout)
		}
	}
	r = tidemark(t, "doctor", "-c", bad, "--json")
	noPassword(r)
	checks = nil
	if err := json.Unmarshal([]byte(r.stdout), &checks); r.code != 1 || err != nil || doctor.Failed(checks) != 3 {
		t.Errorf("doctor --json with failures: %s (%v), want exit 1 and 3 failed checks", r, err)
	}

	expect(t, 2, []string{filepath.Join(dir, "none.yaml")}, "doctor", "-c", filepath.Join(dir, "none.yaml"))
	expect(t, 2, []string{"wrong number of arguments"}, "doctor", "extra")
}
