package stream

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink/files"
	"github.com/tidemark/tidemark/internal/store"
)

// TestFilesSchemaChanges: a log or file destination has no table to
// alter, so a table's schema changes go out in its events. Columns added,
// dropped and renamed on the source leave the object streaming (a
// database destination would fail a dropped column's object); the events
// after each change carry the table's new shape, and a backfill then
// re-sends every row in it, so a consumer that applies the chunk marks
// holds the source's rows in their new shape.
func TestFilesSchemaChanges(t *testing.T) {
	e := newEnv(t, envOptions{dest: "files",
		setup: `CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text);
			INSERT INTO items SELECT g, g, 'note ' || g FROM generate_series(1, 50) g;`,
		yaml: "backfill: {mode: manual, chunk_size: 20, verify: false}"})
	dir := e.cfg.Destination.Path
	e.start()
	items := change.TableID{Schema: "public", Name: "items"}
	// The events of a row, oldest first, as the files hold them.
	after := func(id int) []map[string]json.RawMessage {
		var out []map[string]json.RawMessage
		for _, ev := range fileEventsOf(t, dir) {
			var v struct{ After map[string]json.RawMessage }
			if json.Unmarshal(ev, &v) == nil && v.After != nil && string(v.After["id"]) == itoa(id) {
				out = append(out, v.After)
			}
		}
		return out
	}
	last := func(id int) map[string]json.RawMessage {
		evs := after(id)
		if len(evs) == 0 {
			return nil
		}
		return evs[len(evs)-1]
	}

	e.exec(`ALTER TABLE items ADD COLUMN extra text DEFAULT 'x'`)
	e.exec(`INSERT INTO items VALUES (101, 101, 'new', 'y')`)
	e.waitFor("the insert after ADD COLUMN", func() bool { return string(last(101)["extra"]) == `"y"` })

	e.exec(`ALTER TABLE items DROP COLUMN note`)
	e.exec(`UPDATE items SET v = -2 WHERE id = 2`)
	e.waitFor("the update after DROP COLUMN", func() bool { r := last(2); return r != nil && string(r["v"]) == "-2" })
	if r := last(2); r["note"] != nil || string(r["extra"]) != `"x"` {
		t.Errorf("the update after DROP COLUMN carries %v, want extra and no note", keys(r))
	}

	e.exec(`ALTER TABLE items RENAME COLUMN v TO w`)
	e.exec(`UPDATE items SET w = -3 WHERE id = 3`)
	e.waitFor("the update after RENAME COLUMN", func() bool { r := last(3); return r != nil && string(r["w"]) == "-3" })
	if o := e.object("items"); o.Status == StatusFailed {
		t.Fatalf("the object failed on a schema change: %s", o.Reason)
	}

	// A backfill re-sends every row in the new shape.
	if _, err := e.s.Initiate(e.ctx, []change.TableID{items}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("items")
	shape := &change.Table{ID: items, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Tag: change.TagInt64}, {Name: "w", Tag: change.TagInt32}, {Name: "extra", Tag: change.TagText}}}
	r, err := files.ReadTable(dir, e.cfg.Name, shape)
	if err != nil {
		t.Fatal(err)
	}
	rows := r.Rows()
	if len(rows) != 51 {
		t.Fatalf("the files replay to %d rows, the source has 51", len(rows))
	}
	for _, row := range rows {
		if row["note"] != nil || row["v"] != nil || row["w"] == nil || row["extra"] == nil {
			t.Fatalf("a row replays as %v, want the columns id, w, extra", keys(row))
		}
	}
}

// fileEventsOf reads every event of the committed JSONL files under dir,
// in file name order within each directory.
func fileEventsOf(t *testing.T, dir string) [][]byte {
	t.Helper()
	var out [][]byte
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl") || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			out = append(out, line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func keys(m map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(m))
}
