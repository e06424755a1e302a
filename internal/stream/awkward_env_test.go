package stream

import (
	"database/sql"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// Helpers of the awkward-table tests (awkward_*_test.go): the env's own
// helpers name tables of schema public only.

func pubTable(name string) change.TableID { return change.TableID{Schema: "public", Name: name} }

// setPatterns replaces the stream's include, exclude and keys with those of
// a YAML fragment of stream keys, read by the config parser as a user's file
// is: the quoting rules of patterns and key names are part of the test.
func (e *env) setPatterns(fragment string) {
	e.t.Helper()
	cfg, err := config.Parse([]byte(`
streams:
  - name: patterns
    source: {dsn: "postgres://u@localhost/db"}
    destination: {type: sqlite, path: unused.db}
`+indent(fragment)), func(string) (string, bool) { return "", false })
	if err != nil {
		e.t.Fatalf("stream keys %s: %v", fragment, err)
	}
	s := cfg.Streams[0]
	e.cfg.Include, e.cfg.Exclude, e.cfg.Keys = s.Include, s.Exclude, s.Keys
}

// objectOf returns the stream's object of a table.
func (e *env) objectOf(id change.TableID) store.Object {
	e.t.Helper()
	o, err := e.st.GetObject(e.ctx, e.cfg.Name, id.Schema, id.Name)
	if err != nil {
		e.t.Fatalf("object %s: %v", id, err)
	}
	return o
}

// objectIDs lists the stream's objects.
func (e *env) objectIDs() []change.TableID {
	e.t.Helper()
	objs, err := e.st.ListObjects(e.ctx, e.cfg.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]change.TableID, len(objs))
	for i, o := range objs {
		ids[i] = change.TableID{Schema: o.Schema, Name: o.Table}
	}
	return ids
}

// waitLoadedID waits until an object's backfill is completed and loaded.
func (e *env) waitLoadedID(id change.TableID) store.Object {
	e.t.Helper()
	var o store.Object
	e.waitFor(id.String()+" completed and loaded", func() bool {
		o = e.objectOf(id)
		if o.Status == StatusFailed {
			e.t.Fatalf("backfill of %s failed: %s", id, o.Reason)
		}
		return o.Status == StatusCompleted && o.Loaded
	})
	return o
}

// backfill initiates backfills of the tables and waits until every one is
// loaded (initiating resets the object to pending at once).
func (e *env) backfill(ids ...change.TableID) {
	e.t.Helper()
	if _, err := e.s.Initiate(e.ctx, ids, store.StartedByCLI, nil); err != nil {
		e.t.Fatal(err)
	}
	for _, id := range ids {
		e.waitLoadedID(id)
	}
}

// assertConvergedID waits until the destination equals the source for a
// table of any schema.
func (e *env) assertConvergedID(id change.TableID) {
	e.t.Helper()
	t := e.s.lookup(id)
	if t == nil {
		e.t.Fatalf("table %s is not streamed (%s)", id, e.s.whyNotStreamed(id))
	}
	snk := e.openDest()
	var diff string
	e.waitFor("destination equal to source for "+id.String(), throttled(func() bool {
		got, err := snk.ReadRange(e.ctx, t, nil, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		diff = diffRows(t, e.sourceRows(t), got)
		return diff == ""
	}), func() string { return diff })
}

// assertVerified runs verify over the tables and fails on any difference.
func (e *env) assertVerified(ids ...change.TableID) {
	e.t.Helper()
	checks, err := e.s.Verify(e.ctx, ids, 2)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range checks {
		if !c.Match || c.Error != "" || c.SourceRows == 0 {
			e.t.Errorf("verify %s: %+v", c.Object, c)
		}
	}
}

// destTables lists the destination's tables that are not tidemark's own,
// as the destination names them.
func (e *env) destTables() []string {
	e.t.Helper()
	var names []string
	if e.dest == "postgres" {
		conn, err := pgx.Connect(e.ctx, e.dstDSN)
		if err != nil {
			e.t.Fatal(err)
		}
		defer conn.Close(e.ctx)
		rows, err := conn.Query(e.ctx, `SELECT schemaname || '.' || tablename FROM pg_tables
			WHERE schemaname NOT IN ('pg_catalog', 'information_schema', '_tidemark')
			  AND schemaname NOT LIKE 'pg\_temp\_%' ORDER BY 1`)
		if err != nil {
			e.t.Fatal(err)
		}
		if names, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			e.t.Fatal(err)
		}
		return names
	}
	db, err := sql.Open("sqlite", e.cfg.Destination.Path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(e.ctx, `SELECT name FROM sqlite_master
		WHERE type = 'table' AND name NOT LIKE '\_tidemark\_%' ESCAPE '\' ORDER BY 1`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return names
}

// sourceCount counts a source table's rows.
func (e *env) sourceCount(id change.TableID) int {
	e.t.Helper()
	var n int
	if err := e.src.QueryRow(e.ctx, "SELECT count(*) FROM "+pgx.Identifier{id.Schema, id.Name}.Sanitize()).Scan(&n); err != nil {
		e.t.Fatalf("count %s: %v", id, err)
	}
	return n
}

// destCount counts a destination table's rows, read through the sink.
func (e *env) destCount(id change.TableID) int {
	e.t.Helper()
	t := e.s.lookup(id)
	if t == nil {
		e.t.Fatalf("table %s is not streamed", id)
	}
	rows, err := e.openDest().ReadRange(e.ctx, t, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(rows)
}

// waitFailed waits until an object is failed with a reason holding every
// one of wants.
func (e *env) waitFailed(id change.TableID, wants ...string) store.Object {
	e.t.Helper()
	var o store.Object
	e.waitFor(id.String()+" failed", func() bool {
		o = e.objectOf(id)
		if o.Status != StatusFailed {
			return false
		}
		for _, w := range wants {
			if !strings.Contains(o.Reason, w) {
				e.t.Fatalf("%s failed with reason %q, want it to mention %q", id, o.Reason, w)
			}
		}
		return true
	})
	if e.s.lookup(id) != nil {
		e.t.Fatalf("%s is failed but streamed", id)
	}
	return o
}

func hasTable(ids []change.TableID, id change.TableID) bool { return slices.Contains(ids, id) }
