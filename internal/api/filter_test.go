package api_test

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestFilterAttacksRefused: a filter is a condition on the table's columns,
// not SQL. Each attack — killing backends, sleeping, taking locks, changing
// the session's settings, reading another table, writing files with large
// objects, subqueries, system columns — is a 400 naming the refused part,
// records nothing and changes nothing on the source: the stream's
// walsender lives, no large object or advisory lock exists, and the next
// plain backfill writes dates as ISO dates.
func TestFilterAttacksRefused(t *testing.T) {
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL, d date NOT NULL);
		INSERT INTO t VALUES (1, 'one', '2025-01-03');
		CREATE TABLE other (id int PRIMARY KEY, v text NOT NULL, d date NOT NULL);
		INSERT INTO other VALUES (666, 'secret', '2025-01-04');`})
	path := "/api/v1/streams/" + e.name + "/backfills"
	walsenders := func() (objects, locks, senders int) {
		t.Helper()
		if err := e.src.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM pg_largeobject_metadata),
			(SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			 WHERE l.locktype = 'advisory' AND d.datname = current_database()),
			(SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active)`, "tidemark_"+e.name).Scan(&objects, &locks, &senders); err != nil {
			t.Fatal(err)
		}
		return objects, locks, senders
	}
	// The stream's walsender runs before the attacks, so that its being
	// alive after them means something.
	e.waitFor("the stream's walsender", func() bool { _, _, n := walsenders(); return n == 1 })
	began := time.Now()
	for _, c := range []struct{ filter, want string }{
		{"pg_terminate_backend(pg_backend_pid() - 1) IS NOT NULL", "function pg_terminate_backend is not allowed; allowed functions: abs,"},
		{"pg_sleep(60) IS NULL", "function pg_sleep is not allowed"},
		{"pg_advisory_lock(4242) IS NOT NULL", "function pg_advisory_lock is not allowed"},
		{"set_config('DateStyle', 'SQL, DMY', false) IS NOT NULL", "function set_config is not allowed"},
		{"false) UNION ALL SELECT id, v, d FROM other WHERE (true", `syntax error at or near ")"`},
		{"false UNION ALL SELECT id, v, d FROM other", "set operations (UNION, INTERSECT, EXCEPT) are not allowed"},
		{"lo_export(lo_from_bytea(0, 'x'), '/tmp/tidemark-pwned') = 1", "function lo_export is not allowed"},
		{"lo_from_bytea(0, 'x') > 0", "function lo_from_bytea is not allowed"},
		{"id IN (SELECT id FROM other)", "subqueries are not allowed"},
		{"EXISTS (SELECT 1 FROM other)", "subqueries are not allowed"},
		{"ctid = '(0,1)'", "system column ctid is not allowed"},
		{"other.v = 'secret'", "column other.v: qualified names are not allowed"},
		{"secret = 'x'", `column "secret" does not exist in public.t: its columns are id, v, d`},
		{"id = 1; SELECT pg_sleep(60)", "more than one statement"},
		{"now() > d", "function now is not allowed"},
	} {
		body, _ := json.Marshal(map[string]any{"objects": []string{"public.t"}, "filter": c.filter})
		if msg := e.fails(400, "bad_request", "POST", path, string(body)); !strings.Contains(msg, c.want) {
			t.Errorf("filter %s: %q, want it to say %q", c.filter, msg, c.want)
		}
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("the refusals took %s: something ran", took)
	}
	if r := e.do("GET", "/api/v1/backfills?stream="+e.name, ""); strings.TrimSpace(string(r.body)) != "[]" {
		t.Fatalf("refused initiates recorded backfills: %s", r.body)
	}
	if objects, locks, senders := walsenders(); objects != 0 || locks != 0 || senders != 1 {
		t.Fatalf("after the refused filters: %d large objects, %d advisory locks, %d active walsenders (want 0, 0, 1)", objects, locks, senders)
	}

	plain := e.initiateOne(`{"objects": ["public.t"]}`)
	e.waitBackfill(plain.ID, "plain backfill", loadedRun)
	db, err := sql.Open("sqlite", "file:"+e.dest+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var d string
	if err := db.QueryRowContext(e.ctx, `SELECT count(*), min("d") FROM "t"`).Scan(&n, &d); err != nil {
		t.Fatal(err)
	}
	if n != 1 || d != "2025-01-03" {
		t.Fatalf("destination after a plain backfill: %d rows, date %q; want 1 row dated 2025-01-03", n, d)
	}
}
