package stream

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// TestFilesVerify: a backfill into a files destination ends with a verify
// by replay that matches, on a table whose types the events carry lossily
// (a time with zone, an unbounded bit string) as well as exactly. A row's
// value changed by rewriting the file that holds it makes verify report
// that key's range, and a repair makes it match again.
func TestFilesVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "files", yaml: "backfill: {mode: automatic, chunk_size: 500}", setup: `
		CREATE TABLE items (id bigint PRIMARY KEY, note text, at timestamptz, tz timetz, bits varbit, n numeric(10,2), iv interval);
		INSERT INTO items SELECT g, 'note ' || g, '2024-02-29 13:45:01.5+05'::timestamptz + g * interval '1 hour',
			'04:05:06.25+05:30', B'101', g / 7.0, g * interval '1 day 3 seconds' FROM generate_series(1, 3000) g;`})
	id := change.TableID{Schema: "public", Name: "items"}
	e.start()
	run := e.waitVerified(e.waitLoaded("items").BackfillID)
	if run.Verify.Status != VerifyMatch || run.Verify.SourceRows != 3000 || run.Verify.DestRows != 3000 {
		t.Fatalf("the backfill's verify: %+v, want a match over 3000 rows", *run.Verify)
	}

	if path := rewriteEvent(t, e.cfg.Destination.Path, `"id":1234,"note":"note 1234"`, `"id":1234,"note":"tampered"`); path == "" {
		t.Fatal("no file holds row 1234")
	}
	e.verifyFindsAndRepairs(id, "1234")
}

// verifyFindsAndRepairs verifies a table whose destination row with key
// (one value) was damaged: exactly one range differs, at that key; a
// repair's run ends with a verify that matches, and so does a verify
// after it.
func (e *env) verifyFindsAndRepairs(id change.TableID, key string) {
	e.t.Helper()
	checks, err := e.s.Verify(e.ctx, []change.TableID{id}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	bad := badRanges(checks[0])
	if checks[0].Match || len(bad) != 1 || len(bad[0].DifferingKeys) != 1 || !slices.Equal(bad[0].DifferingKeys[0], []string{key}) {
		e.t.Fatalf("verify after damaging row %s: %s, differing %+v", key, checks[0].Error, bad)
	}
	e.repairAndMatch(id, checks)
}

// repairAndMatch repairs what a verify of one table found: the repair's
// run ends with a verify that matches, and so does a verify after it.
func (e *env) repairAndMatch(id change.TableID, checks []ObjectCheck) {
	e.t.Helper()
	checks, err := e.s.Repair(e.ctx, checks)
	if err != nil || checks[0].Repair == nil {
		e.t.Fatalf("repair: %v, %+v", err, checks[0])
	}
	e.waitLoadedID(id)
	if run := e.waitVerified(checks[0].Repair.ID); run.Verify.Status != VerifyMatch {
		e.t.Fatalf("the repair's verify: %+v", *run.Verify)
	}
	checks, err = e.s.Verify(e.ctx, []change.TableID{id}, 0)
	if err != nil || !checks[0].Match {
		e.t.Fatalf("verify after the repair: %v %+v", err, checks)
	}
}

// rewriteEvent replaces old by new in the one event file that holds it,
// as someone editing the destination would; it returns the file's path.
func rewriteEvent(t *testing.T, dir, old, new string) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") || found != "" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), old) {
			return err
		}
		found = path
		return os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// badRanges are the ranges of an object's verify that differ.
func badRanges(oc ObjectCheck) []RangeCheck {
	var bad []RangeCheck
	for _, r := range oc.Ranges {
		if !r.Match {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestFilesVerifyDeletedChunk: in a files destination writing Parquet, a
// backfill's verify by replay matches; deleting the files of one chunk
// (found in the table's manifest) makes verify report that chunk's range,
// missing its rows, and a repair writes them again.
func TestFilesVerifyDeletedChunk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "files", destKeys: "format: parquet", yaml: "backfill: {mode: automatic, chunk_size: 500}", setup: `
		CREATE TABLE items (id bigint PRIMARY KEY, note text, tz timetz, at timestamp(3));
		INSERT INTO items SELECT g, 'note ' || g, '04:05:06.25+05:30', '2024-02-29 13:45:01.123' FROM generate_series(1, 2000) g;`})
	id := change.TableID{Schema: "public", Name: "items"}
	e.start()
	if run := e.waitVerified(e.waitLoaded("items").BackfillID); run.Verify.Status != VerifyMatch || run.Verify.DestRows != 2000 {
		t.Fatalf("the backfill's verify: %+v, want a match over 2000 rows", *run.Verify)
	}
	tableDir := filepath.Join(e.cfg.Destination.Path, e.cfg.Name, "public.items")
	b, err := os.ReadFile(filepath.Join(tableDir, "_backfills.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m struct {
			Files []string        `json:"files"`
			High  json.RawMessage `json:"high"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if string(m.High) != `{"id":1500}` {
			continue
		}
		for _, f := range m.Files {
			if !strings.HasSuffix(f, ".parquet") {
				t.Fatalf("chunk file %s is not Parquet", f)
			}
			if err := os.Remove(filepath.Join(tableDir, f)); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	if deleted == 0 {
		t.Fatalf("no chunk up to 1500 in the manifest:\n%s", b)
	}
	checks, err := e.s.Verify(e.ctx, []change.TableID{id}, 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := badRanges(checks[0])
	if checks[0].Match || len(bad) != 1 || fmt.Sprint(bad[0].Low, bad[0].High) != "[1000] [1500]" || bad[0].DestRows != 0 || bad[0].SourceRows != 500 {
		t.Fatalf("verify after deleting the chunk (1000, 1500]: %s, differing %+v", checks[0].Error, bad)
	}
	e.repairAndMatch(id, checks)
}
