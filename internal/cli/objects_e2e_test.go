package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/stream"
)

// objectsOf reads a stream's objects through `tidemark objects --json`.
func objectsOf(t *testing.T, addr []string, streamName string) map[string]api.ObjectView {
	t.Helper()
	r := tidemark(t, append(addr, "objects", streamName, "--json")...)
	if r.code != 0 {
		t.Fatalf("objects %s --json: %s", streamName, r)
	}
	var objs []api.ObjectView
	if err := json.Unmarshal([]byte(r.stdout), &objs); err != nil {
		t.Fatalf("objects %s --json: %v in %q", streamName, err, r.stdout)
	}
	out := map[string]api.ObjectView{}
	for _, o := range objs {
		out[o.Object] = o
	}
	return out
}

// objectLine is the line of `tidemark objects` that shows object.
func objectLine(t *testing.T, addr []string, streamName, object string) string {
	t.Helper()
	r := tidemark(t, append(addr, "objects", streamName)...)
	if r.code != 0 {
		t.Fatalf("objects %s: %s", streamName, r)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == object {
			return line
		}
	}
	t.Fatalf("objects %s: no line for %s in %q", streamName, object, r.stdout)
	return ""
}

// A table refused for having no key, then given one on the source, shows
// its columns once a backfill of it is initiated.
func TestObjectFixedAfterNoKeyShowsColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dsn := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY);
		CREATE TABLE nk (id int NOT NULL, v text, w int);
		INSERT INTO nk SELECT g, 'row ' || g, g FROM generate_series(1, 20) g`)
	d, _, addr := sqliteDaemon(t, dsn, "{mode: manual}")
	poll(t, d, "public.nk refused for its key", func() bool {
		r := tidemark(t, append(addr, "objects", "s", "--json")...)
		if r.code != 0 {
			return false
		}
		return strings.Contains(r.stdout, "no usable row key")
	})
	if o := objectsOf(t, addr, "s")["public.nk"]; o.Status != stream.StatusFailed || len(o.Columns) != 0 {
		t.Fatalf("public.nk without a key: %+v", o)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER TABLE nk ADD PRIMARY KEY (id)`); err != nil {
		t.Fatal(err)
	}
	expect(t, 0, []string{"public.nk: pending"}, append(addr, "backfill", "initiate", "s", "public.nk")...)
	poll(t, d, "public.nk completed", func() bool {
		o := objectsOf(t, addr, "s")["public.nk"]
		if o.Status == stream.StatusFailed && !strings.Contains(o.Reason, "no usable row key") {
			t.Fatalf("backfill of public.nk failed: %+v", o)
		}
		return o.Status == stream.StatusCompleted && o.Loaded
	})
	o := objectsOf(t, addr, "s")["public.nk"]
	var names []string
	for _, c := range o.Columns {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "id,v,w" || !o.Columns[0].Key {
		t.Errorf("public.nk's columns after it got a key: %+v", o.Columns)
	}
	if f := strings.Fields(objectLine(t, addr, "s", "public.nk")); len(f) < 7 || f[6] != "3" {
		t.Errorf("objects s shows public.nk as %q, want 3 columns", f)
	}
}

// An object whose latest backfill was stopped after an earlier one loaded
// the whole table names that one in its LOADED cell.
func TestObjectStoppedAfterLoadedSaysWhichLoaded(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 30) g`)
	d, _, addr := sqliteDaemon(t, dsn, "{mode: manual, chunk_size: 5}")
	poll(t, d, "public.t discovered", func() bool {
		r := tidemark(t, append(addr, "objects", "s", "--json")...)
		return r.code == 0 && strings.Contains(r.stdout, "public.t")
	})
	expect(t, 0, []string{"backfill 1 of public.t: pending"}, append(addr, "backfill", "initiate", "s", "public.t")...)
	poll(t, d, "backfill 1 loaded", func() bool {
		o := objectsOf(t, addr, "s")["public.t"]
		if o.Status == stream.StatusFailed {
			t.Fatalf("backfill 1 failed: %+v", o)
		}
		return o.Status == stream.StatusCompleted && o.Loaded
	})
	if f := strings.Fields(objectLine(t, addr, "s", "public.t")); len(f) < 3 || f[2] != "yes" {
		t.Errorf("objects s after backfill 1: %q, want LOADED yes", f)
	}
	// At a row a second, backfill 2 is still under way when it is stopped.
	expect(t, 0, []string{"backfill 2 of public.t"}, append(addr, "backfill", "initiate", "s", "public.t", "--rows-per-second", "1")...)
	expect(t, 0, nil, append(addr, "backfill", "stop", "s", "public.t")...)
	o := objectsOf(t, addr, "s")["public.t"]
	if o.Status != stream.StatusStopped || o.Loaded || o.BackfillID != 2 || o.LoadedBy != 1 {
		t.Errorf("public.t after backfill 2 was stopped: %+v, want stopped, loaded_by 1", o)
	}
	if line := objectLine(t, addr, "s", "public.t"); !strings.Contains(line, "stopped  by backfill 1 ") {
		t.Errorf("objects s after backfill 2 was stopped: %q, want LOADED \"by backfill 1\"", line)
	}
}
