package cli_test

import (
	"database/sql"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// TestBackfillAsOneRun: `backfill initiate --as-one-run` prints the run's
// id and, with --wait, follows the run to its end; `backfill run` shows it
// and `backfill stop-run` stops it, refused once it has ended. Then
// `verify --repair` names the backfill it started.
func TestBackfillAsOneRun(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE a (id int PRIMARY KEY, v text);
		CREATE TABLE b (id int PRIMARY KEY, v text);
		INSERT INTO a SELECT g, 'a ' || g FROM generate_series(1, 20) g;
		INSERT INTO b SELECT g, 'b ' || g FROM generate_series(1, 20) g`)
	d, dest, addr := sqliteDaemon(t, dsn, "{mode: manual, chunk_size: 5, max_concurrent: 1}")
	args := func(a ...string) []string { return append(append([]string{}, addr...), a...) }
	poll(t, d, "stream s running", func() bool {
		r := tidemark(t, args("streams", "--json")...)
		var streams []api.StreamView
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &streams) == nil && len(streams) == 1 && streams[0].State == store.StateRunning
	})

	expect(t, 0, []string{"run 1 of 2 backfill(s)", "backfill 1 of public.a: completed", "backfill 2 of public.b: completed", "run 1: completed"},
		args("backfill", "initiate", "s", "public.a", "public.b", "--as-one-run", "--wait")...)
	expect(t, 0, []string{"run 1 of s: completed, started by cli, 40 rows read", "public.a", "public.b"}, args("backfill", "run", "s", "1")...)
	r := expect(t, 0, nil, args("backfill", "run", "s", "1", "--json")...)
	var v stream.RunView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Status != stream.StatusCompleted || len(v.Backfills) != 2 || v.Backfills[1].RunID != 1 {
		t.Errorf("backfill run --json: %v, %+v", err, v)
	}
	expect(t, 4, []string{"cannot stop run 1: it has ended, completed"}, args("backfill", "stop-run", "s", "1")...)
	// An unknown id is a usage error (issue 16).
	expect(t, 2, []string{"no run 9"}, args("backfill", "run", "s", "9")...)

	// A run at 1 row/s stays pending or active until stopped.
	expect(t, 0, []string{"run 2 of 2 backfill(s)", "backfill 3 of public.a: pending", "backfill 4 of public.b: pending"},
		args("backfill", "initiate", "s", "public.a", "public.b", "--as-one-run", "--rows-per-second", "1")...)
	expect(t, 0, []string{"run 2 of s: stopped", "public.a  stopped", "public.b  stopped"}, args("backfill", "stop-run", "s", "2")...)

	// verify --repair names the backfill it started for the differing range.
	db, err := sql.Open("sqlite", "file:"+dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM "a" WHERE "id" = 7`); err != nil {
		t.Fatal(err)
	}
	r = expect(t, 3, []string{"source and destination differ"}, args("verify", "s", "public.a", "--repair")...)
	if !strings.Contains(r.stdout, "DIFFERS") || !strings.Contains(r.stdout, "repair of public.a: backfill 5") {
		t.Errorf("verify --repair: %s", r)
	}
	poll(t, d, "the repair loaded", func() bool {
		r := tidemark(t, args("backfill", "list", "--stream", "s", "--started-by", "repair", "--json")...)
		var list []store.Backfill
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 1 {
			return false
		}
		return list[0].ID == 5 && list[0].Status == store.StatusCompleted && list[0].LoadedAt != nil
	})
	expect(t, 0, []string{"public.a", "ok"}, args("verify", "s", "public.a", "--repair")...)

	// The words (issue 16): show-run and stop-run take the run's id as
	// set-rate takes a backfill's; "run" is show-run's deprecated name,
	// saying so on stderr; backfill list names each backfill's run.
	expect(t, 0, []string{"run 1 of s: completed, started by cli, 40 rows read", "public.a", "public.b"}, args("backfill", "show-run", "1")...)
	r = expect(t, 0, nil, args("backfill", "show-run", "1", "--json")...)
	var shown api.RunView
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown.ID != 1 || shown.Stream != "s" || len(shown.Backfills) != 2 {
		t.Errorf("backfill show-run --json: %v, %+v", err, shown)
	}
	if r := expect(t, 0, []string{"run 1 of s: completed"}, args("backfill", "run", "s", "1")...); !strings.Contains(r.stderr, `"backfill run" is deprecated: use "tidemark backfill show-run ID"`) {
		t.Errorf("backfill run: %s, want the deprecation on stderr", r)
	}
	expect(t, 0, []string{"run 1 of s: completed"}, args("backfill", "show-run", "s", "1")...)
	expect(t, 2, []string{"no run 9: `tidemark backfill list` names each backfill's run (RUN)"}, args("backfill", "show-run", "9")...)
	expect(t, 2, []string{`run id "x" is not a positive number`}, args("backfill", "show-run", "x")...)
	expect(t, 4, []string{"cannot stop run 2: it has ended, stopped"}, args("backfill", "stop-run", "2")...)
	r = expect(t, 0, []string{"ID  RUN  STREAM  OBJECT"}, args("backfill", "list", "--stream", "s")...)
	for _, line := range []*regexp.Regexp{regexp.MustCompile(`(?m)^1\s+1\s+s\s+public\.a\s`), regexp.MustCompile(`(?m)^4\s+2\s+s\s+public\.b\s`), regexp.MustCompile(`(?m)^5\s+-\s+s\s+public\.a\s`)} {
		if !line.MatchString(r.stdout) {
			t.Errorf("backfill list: no line %s in\n%s", line, r.stdout)
		}
	}
	// --at sends start_at; the backfill's options carry it under both names.
	r = expect(t, 0, nil, args("backfill", "initiate", "s", "public.b", "--at", "2099-01-01T00:00:00Z", "--json")...)
	var later []api.BackfillView
	if err := json.Unmarshal([]byte(r.stdout), &later); err != nil || len(later) != 1 ||
		later[0].Options["start_at"] != "2099-01-01T00:00:00Z" || later[0].Options["run_at"] != "2099-01-01T00:00:00Z" {
		t.Errorf("initiate --at --json: %v, %+v", err, later)
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	expect(t, 0, []string{"run ", "stop-run "}, "backfill", "--help")
	// The flags' own lines, not the command's description.
	expect(t, 0, []string{"make the backfills one run: one id, completed when every backfill is",
		"backfill only the source rows matching the SQL condition",
		"fill only the non-key columns a,b of rows the destination holds"}, "backfill", "initiate", "--help")
	expect(t, 0, []string{"--repair"}, "verify", "--help")
	expect(t, 2, []string{"wrong number of arguments"}, "backfill", "run", "s")
	expect(t, 2, []string{"wrong number of arguments"}, "backfill", "stop-run", "s", "1", "2")
}
