package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink/files"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

const filesRows = 6000

// itemsTable is the shape of TestFilesBackfillWhileWriting's table.
var itemsTable = &change.Table{ID: change.TableID{Schema: "public", Name: "items"}, Key: []int{0}, Columns: []change.Column{
	{Name: "id", Tag: change.TagInt64}, {Name: "v", Tag: change.TagInt32}, {Name: "note", Tag: change.TagText},
}}

// TestFilesBackfillWhileWriting streams a table into a files destination
// whose files already hold stale and extra rows (a consumer's view that
// missed changes), backfills it while a writer inserts, updates, deletes
// and moves keys across chunks, and checks that the reference consumer
// replaying the files ends with exactly the source's rows: live events
// and the backfill's "r" events and chunk marks together reset it. It
// runs for JSONL and for Parquet files (over the same seeded JSONL file:
// the reader takes each file's format from its extension).
func TestFilesBackfillWhileWriting(t *testing.T) {
	for _, format := range []string{files.FormatJSONL, files.FormatParquet} {
		t.Run(format, func(t *testing.T) { testFilesBackfillWhileWriting(t, format) })
	}
}

func testFilesBackfillWhileWriting(t *testing.T, format string) {
	e := newEnv(t, envOptions{dest: "files", destKeys: "format: " + format,
		setup: fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text);
			INSERT INTO items SELECT g, g, 'note ' || g FROM generate_series(1, %d) g;`, filesRows),
		yaml: "backfill: {mode: manual, chunk_size: 500, verify: false}"})
	dir := e.cfg.Destination.Path
	typ, err := source.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	enc := typ.Encoder(e.cfg.Name, "", true, "test")
	e.seedFiles(dir, enc)
	e.start()
	stop := e.itemsWriter()
	id := itemsTable.ID
	if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitForWithin(5*time.Minute, "items completed", func() bool {
		o := e.object("items")
		if o.Status == StatusFailed {
			t.Fatalf("backfill failed: %s", o.Reason)
		}
		return o.Status == StatusCompleted
	})
	writes := stop()
	var diff string
	e.waitFor("the files replay to the source's rows", func() bool {
		r, err := files.ReadTable(dir, e.cfg.Name, itemsTable)
		if err != nil {
			t.Fatal(err)
		}
		diff = diffEvents(e.sourceEvents(enc), r.Rows())
		return diff == ""
	}, func() string { return diff })
	written, _ := filepath.Glob(filepath.Join(dir, e.cfg.Name, "public.items", "*", "*", "*", "*", "*."+format))
	if len(written) < 2 { // the seeded file is JSONL
		t.Errorf("%d .%s files, want the stream's files in its format", len(written), format)
	}
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes during the backfill; backfill %+v", writes, recs[0])
	if recs[0].Chunks < filesRows/500 {
		t.Errorf("%d chunks for %d rows with chunk_size 500", recs[0].Chunks, filesRows)
	}
	if n := e.manifestLines(dir); n != int(recs[0].Chunks) {
		t.Errorf("the manifest has %d chunk lines, the backfill wrote %d chunks", n, recs[0].Chunks)
	}
}

// seedFiles writes a file of an earlier batch holding rows the source
// does not have (keys -7 and 9999999) and a stale version of every tenth
// row, as if the files had missed changes.
func (e *env) seedFiles(dir string, enc *event.Encoder) {
	e.t.Helper()
	var lines []string
	for _, c := range staleItems() {
		m, err := enc.Change(c, event.Origin{})
		if err != nil {
			e.t.Fatal(err)
		}
		lines = append(lines, string(m[0].Value))
	}
	d := filepath.Join(dir, e.cfg.Name, "public.items", "2000", "01", "01", "00")
	if err := os.MkdirAll(d, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "000000000000_0000000000000000-0000000000000000_001.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// staleItems are inserts of rows the source does not have (keys -7 and
// 9999999) and of a stale version of every tenth row, as if a consumer
// had missed changes.
func staleItems() []*change.Change {
	var out []*change.Change
	add := func(id, v int, note string) {
		out = append(out, &change.Change{Kind: change.Insert, Table: itemsTable,
			Row: change.Row{change.Text(fmt.Sprint(id)), change.Text(fmt.Sprint(v)), change.Text(note)}})
	}
	add(-7, 0, "extra")
	add(9999999, 0, "extra")
	for id := 10; id <= filesRows; id += 10 {
		add(id, -1, "stale")
	}
	return out
}

// itemsWriter changes items until stopped: updates, inserts, deletes and
// key moves to far keys (across chunks).
func (e *env) itemsWriter() (stop func() int) {
	conn, err := pgx.Connect(e.ctx, e.srcDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	var n int
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 1))
		pace := time.NewTicker(time.Millisecond)
		defer pace.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			<-pace.C
			id := 1 + r.IntN(filesRows)
			var q string
			switch op := r.IntN(10); {
			case op < 4:
				q = fmt.Sprintf("UPDATE items SET v = v + 1 WHERE id = %d", id)
			case op < 6:
				q = fmt.Sprintf("INSERT INTO items VALUES (%d, %d, 'new') ON CONFLICT (id) DO UPDATE SET note = 'reinserted'", filesRows+r.IntN(filesRows), i)
			case op < 8:
				q = fmt.Sprintf("UPDATE items SET id = %d, note = 'moved' WHERE id = %d", 3*filesRows+i, id)
			default:
				q = fmt.Sprintf("DELETE FROM items WHERE id = %d", id)
			}
			if _, err := conn.Exec(ctx, q); err == nil {
				n++
			}
		}
	}()
	return func() int {
		cancel()
		wg.Wait()
		conn.Close(context.Background())
		return n
	}
}

// sourceEvents encodes the source's rows as backfill events' after
// objects, keyed by id.
func (e *env) sourceEvents(enc *event.Encoder) map[string]map[string]json.RawMessage {
	e.t.Helper()
	out := map[string]map[string]json.RawMessage{}
	for _, row := range e.sourceRows(itemsTable) {
		m, err := enc.Row(itemsTable, row, event.Origin{})
		if err != nil {
			e.t.Fatal(err)
		}
		var v struct{ After map[string]json.RawMessage }
		if err := json.Unmarshal(m.Value, &v); err != nil {
			e.t.Fatal(err)
		}
		out[string(v.After["id"])] = v.After
	}
	return out
}

func diffEvents(want map[string]map[string]json.RawMessage, got []map[string]json.RawMessage) string {
	var problems []string
	seen := map[string]bool{}
	for _, g := range got {
		id := string(g["id"])
		seen[id] = true
		w, ok := want[id]
		switch {
		case !ok:
			problems = append(problems, "extra row "+id)
		default:
			for col, v := range w {
				if string(g[col]) != string(v) {
					problems = append(problems, fmt.Sprintf("row %s column %s: %s, want %s", id, col, g[col], v))
				}
			}
		}
	}
	for id := range want {
		if !seen[id] {
			problems = append(problems, "missing row "+id)
		}
	}
	sort.Strings(problems)
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("… %d more", len(problems)-10))
	}
	return strings.Join(problems, "\n")
}

// manifestLines counts the chunk lines of the items table's manifest.
func (e *env) manifestLines(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, e.cfg.Name, "public.items", "_backfills.jsonl"))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
