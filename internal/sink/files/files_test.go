package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

var table = &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0}, Columns: []change.Column{
	{Name: "id", Tag: change.TagInt64}, {Name: "v", Tag: change.TagText},
}}

func encoder() *event.Encoder {
	return &event.Encoder{Connector: "postgresql", SchemaField: true, Fields: func(o event.Origin) []event.Field {
		return []event.Field{{Name: "lsn", Value: uint64(o.Position)}}
	}}
}

// formats are the file formats every format-agnostic test runs in.
var formats = []string{FormatJSONL, FormatParquet}

func open(t *testing.T, dir, format string) *Sink {
	t.Helper()
	s, err := OpenFormat(dir, format, minFileBytes)
	if err != nil {
		t.Fatal(err)
	}
	s.UseEncoder(encoder())
	return s
}

func inserts(from, to int) []sink.Op {
	var ops []sink.Op
	for i := from; i < to; i++ {
		ops = append(ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: table,
			Row: change.Row{change.Text(fmt.Sprint(i)), change.Text(strings.Repeat("x", 200))}}})
	}
	return ops
}

// events counts the events in the committed files of the table.
func events(t *testing.T, dir string) (lines, temps int) {
	t.Helper()
	c, err := readCheckpoint(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(d.Name(), ".tmp") {
			temps++
		}
		if seq, ok := seqOf(d.Name()); ok && seq <= c.Seq {
			n, err := countEvents(path)
			lines += n
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines, temps
}

// countEvents counts a data file's events: its lines, or its Parquet rows.
func countEvents(path string) (int, error) {
	if filepath.Ext(path) == ".parquet" {
		n := 0
		err := parquetEvents(path, func([]byte) error { n++; return nil })
		return n, err
	}
	b, err := os.ReadFile(path)
	return strings.Count(string(b), "\n"), err
}

// TestCrashBetweenRenames stops a batch after the second of its files was
// renamed into place, as a SIGKILL there would, then opens the directory
// again and replays the batch split differently: every event is in the
// files exactly once, and a reader before the restart sees only the
// committed batch.
func TestCrashBetweenRenames(t *testing.T) {
	for _, format := range formats {
		t.Run(format, func(t *testing.T) { testCrashBetweenRenames(t, format) })
	}
}

func testCrashBetweenRenames(t *testing.T, format string) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, format)
	if err := s.Apply(ctx, &sink.Batch{Stream: "s", Position: 100, Ops: inserts(0, 100)}); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash")
	s.afterRename = func(renamed, total int) error {
		if total < 3 {
			t.Fatalf("the batch wrote %d files, want several", total)
		}
		if renamed == 2 {
			return crash
		}
		return nil
	}
	// 2,000 rows of ~300 bytes: several 64 KiB files.
	if err := s.Apply(ctx, &sink.Batch{Stream: "s", Position: 200, Ops: inserts(100, 2100)}); !errors.Is(err, crash) {
		t.Fatalf("the batch did not stop at the crash point: %v", err)
	}
	if r, err := ReadTable(dir, "s", table); err != nil || r.Len() != 100 {
		t.Fatalf("before the restart the reader sees %v rows (%v), want the committed 100", r.Len(), err)
	}
	s = open(t, dir, format) // the restart
	c, err := s.Checkpoint(ctx, "s")
	if err != nil || c.Position != 100 {
		t.Fatalf("checkpoint after the crash: %+v %v, want position 100", c, err)
	}
	for _, b := range []*sink.Batch{
		{Stream: "s", Position: 150, Ops: inserts(100, 1100)},
		{Stream: "s", Position: 200, Ops: inserts(1100, 2100)},
	} {
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	lines, temps := events(t, dir)
	if lines != 2100 || temps != 0 {
		t.Errorf("%d events and %d temp files after the replay, want 2100 and 0", lines, temps)
	}
	r, err := ReadTable(dir, "s", table)
	if err != nil || r.Len() != 2100 {
		t.Errorf("the reader holds %d rows (%v), want 2100", r.Len(), err)
	}
}

// TestCheckpointAndManifest: cursors round-trip through the checkpoint, a
// chunk's files are named as backfill files and listed in the manifest,
// and a manifest line of an unfinished batch is dropped at start.
func TestCheckpointAndManifest(t *testing.T) {
	for _, format := range formats {
		t.Run(format, func(t *testing.T) { testCheckpointAndManifest(t, format) })
	}
}

func testCheckpointAndManifest(t *testing.T, format string) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, format)
	chunk := &sink.Chunk{Table: table, High: change.Key{change.Text("9")}, BackfillID: 4,
		Rows: []change.Row{{change.Text("1"), change.Null}, {change.Text("9"), change.Text("b")}}}
	cur := sink.Cursor{BackfillID: 4, After: change.Key{change.Text("9")}, Rows: 2}
	if err := s.Apply(ctx, &sink.Batch{Stream: "s", Position: 7, Resume: "0-1-5", Ops: []sink.Op{{Chunk: chunk}},
		Cursors: map[change.TableID]sink.Cursor{table.ID: cur}}); err != nil {
		t.Fatal(err)
	}
	c, err := open(t, dir, format).Checkpoint(ctx, "s")
	if err != nil || c.Position != 7 || c.Resume != "0-1-5" || c.Cursors[table.ID].After.Encode() != cur.After.Encode() || c.Cursors[table.ID].Rows != 2 {
		t.Fatalf("checkpoint %+v %v", c, err)
	}
	manifest := filepath.Join(dir, "s", "public.t", manifestName)
	b, err := os.ReadFile(manifest)
	if err != nil || !strings.Contains(string(b), `"backfill":4`) || !strings.Contains(string(b), `_backfill-4_001.`+format) || !strings.Contains(string(b), `"high":{"id":9}`) {
		t.Fatalf("manifest %s %v", b, err)
	}
	// A line of batch 2, which never reached the checkpoint.
	if err := appendManifest(manifest, []manifestLine{{Seq: 2, Backfill: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, dir, format).Checkpoint(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(manifest); strings.Count(string(b), "\n") != 1 || strings.Contains(string(b), `"backfill":5`) {
		t.Errorf("manifest after the restart: %s", b)
	}
	r, err := ReadTable(dir, "s", table)
	if err != nil || r.Len() != 2 {
		t.Errorf("reader: %d rows, %v", r.Len(), err)
	}
}

// TestNamesStayInside: schema and table names cannot leave the stream's
// directory or collide.
func TestNamesStayInside(t *testing.T) {
	seen := map[string]change.TableID{}
	for _, id := range []change.TableID{{Schema: "..", Name: ".."}, {Schema: "a/b", Name: "c"}, {Schema: "a", Name: "b/c"},
		{Schema: "a.b", Name: "c"}, {Schema: "a", Name: "b.c"}, {Schema: "x", Name: "%2E"}, {Schema: "x", Name: "."}} {
		d := tableDir("/base/s", id)
		if filepath.Dir(d) != "/base/s" {
			t.Errorf("%v: directory %s leaves the stream's", id, d)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("%v and %v share %s", id, other, d)
		}
		seen[d] = id
	}
}

// TestFilesReadRange: a files destination reads back what it wrote by
// replaying its files, each read adding only the files of batches after
// the last one read (sinktest.ReplayReads).
func TestFilesReadRange(t *testing.T) {
	for _, format := range formats {
		t.Run(format, func(t *testing.T) { testFilesReadRange(t, format) })
	}
}

func testFilesReadRange(t *testing.T, format string) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, format)
	if _, err := s.Checkpoint(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	pos := change.LSN(0)
	sinktest.ReplayReads(t, s, table, func(ops []sink.Op) {
		pos++
		if err := s.Apply(ctx, &sink.Batch{Stream: "s", Position: pos, Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}, func() {
		if err := os.RemoveAll(filepath.Join(dir, "s", "public.t")); err != nil {
			t.Fatal(err)
		}
	})
}
