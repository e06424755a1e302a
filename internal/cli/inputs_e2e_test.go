package cli_test

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Names from the daemon reach the terminal without their escape sequences:
// a source table and a batch backfill named with an OSC (window title) and
// a CSI (clear screen) sequence, listed by every command that prints them.
// The audit trail as CSV neutralises a backfill name that is a formula.
func TestHostileNamesThroughTheCLI(t *testing.T) {
	t.Parallel()
	const evil = "evil\x1b]0;pwned\x07\x1b[2J"
	_, dsn := shopSource(t, `CREATE TABLE "`+evil+`" (id int PRIMARY KEY); INSERT INTO "`+evil+`" VALUES (1)`)
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
metadata: "sqlite://%s"
api: {listen: "127.0.0.1:%d"}
streams:
  - name: s
    source: {dsn: "%s", status_interval: 1s}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    batch: {max_delay: 20ms}
    retry: {initial: 50ms, max: 1s}
tasks:
  - {name: extract, type: noop, schedule: daily}
`, filepath.Join(dir, "meta.db"), port, dsn, filepath.Join(dir, "dest.db")), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg, filepath.Join(dir, "daemon.log"))
	addr := []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", port)}
	cli := func(args ...string) result { t.Helper(); return tidemark(t, append(addr, args...)...) }
	poll(t, d, "the evil table's backfill to complete", func() bool {
		return strings.Contains(cli("backfill", "list").stdout, "completed")
	})
	const formula = `=HYPERLINK("http://evil.example","x")`
	for _, name := range []string{formula, evil} {
		if r := cli("batch", "backfill", "extract", "--from", "2025-01-01", "--name", name, "--wait"); r.code != 0 {
			t.Fatalf("batch backfill %q: %s", name, r)
		}
	}

	for _, args := range [][]string{{"objects", "s"}, {"backfill", "list"}, {"audit"}, {"batch", "list"}, {"batch", "show", "2"}, {"verify", "s"}} {
		r := cli(args...)
		if r.code != 0 {
			t.Errorf("tidemark %s: %s", strings.Join(args, " "), r)
			continue
		}
		if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") {
			t.Errorf("tidemark %s printed an escape sequence: %q", strings.Join(args, " "), r.stdout)
		}
		if !strings.Contains(r.stdout, "evil") {
			t.Errorf("tidemark %s does not show the name: %q", strings.Join(args, " "), r.stdout)
		}
	}
	// JSON is data: the name comes back exactly, its controls escaped.
	if r := cli("objects", "s", "--json"); !strings.Contains(r.stdout, `evil\u001b]0;pwned\u0007\u001b[2J`) {
		t.Errorf("objects --json: %s", r)
	}

	r := cli("audit", "--format", "csv", "--kind", "batch")
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if r.code != 0 || err != nil || len(rows) != 3 {
		t.Fatalf("audit --format csv: %v in %s", err, r)
	}
	name := slices.Index(rows[0], "name")
	if got := rows[2][name]; got != "'"+formula {
		t.Errorf("audit --format csv: name %q, want %q", got, "'"+formula)
	}
	if got := rows[1][name]; got != evil {
		t.Errorf("audit --format csv: name %q, want it as stored, %q", got, evil)
	}
}

// A rate flag outside its range is bad usage, refused before any request
// (NaN and infinities would not even encode as JSON); --addr points nowhere.
func TestRateFlagBounds(t *testing.T) {
	t.Parallel()
	addr := []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	for _, rate := range []string{"1e-12", "0.5", "-1", "1000000001", "NaN", "Inf", "-Inf"} {
		expect(t, 2, []string{"--rows-per-second", "use 0 (the stream's limit) or a rate from 1 to 1000000000"},
			append(addr, "backfill", "initiate", "s", "public.t", "--rows-per-second", rate)...)
		expect(t, 2, []string{"ROWS_PER_SECOND", "use 0 (the stream's limit) or a rate from 1 to 1000000000"},
			append(addr, "backfill", "set-rate", "--", "1", rate)...)
	}
	// In range, the request is sent: the daemon is not there.
	expect(t, 1, []string{"127.0.0.1"}, append(addr, "backfill", "initiate", "s", "public.t", "--rows-per-second", "1000000000")...)
	for _, n := range []string{"-3", "1000001"} {
		expect(t, 2, []string{"--attempt " + n + ": use an attempt number from 1 to 1000000"}, append(addr, "batch", "log", "7", "--attempt", n)...)
	}
	expect(t, 1, []string{"127.0.0.1"}, append(addr, "batch", "log", "7", "--attempt", "1000000")...)
}

// --weekdays and --month-days read names as schedules do (one parser, in
// calendar): full names and any case are weekdays; a word that merely
// starts like one is not.
func TestCycleFlagNames(t *testing.T) {
	t.Parallel()
	addr := []string{"--addr", fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	preview := func(flags ...string) []string {
		return append(append(addr, "batch", "preview", "extract", "--from", "2025-01-01", "--to", "2025-01-31"), flags...)
	}
	for _, bad := range []string{"monkey", "thurs", "mo"} {
		expect(t, 2, []string{"--weekdays: \"" + bad + "\" is not a weekday"}, preview("--weekdays", "mon,"+bad)...)
	}
	for _, bad := range []string{"0", "32", "lastday", "+5"} {
		expect(t, 2, []string{"--month-days: \"" + bad + "\" is not a day of the month"}, preview("--month-days", bad)...)
	}
	// Names schedules accept pass the flag's check and reach the daemon,
	// which is not there.
	expect(t, 1, []string{"127.0.0.1"}, preview("--weekdays", "Monday, THU,sunday")...)
	expect(t, 1, []string{"127.0.0.1"}, preview("--month-days", "1, 15,Last")...)
}
