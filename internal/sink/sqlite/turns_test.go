package sqlite

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// Two sinks of one process writing the same file (two streams into one
// SQLite destination) take turns: each waits for at most the other's
// transaction, not until the other has nothing left to write. SQLite's own
// busy handler polls, and a writer that commits and begins again at once
// keeps the lock while the other waits out its busy timeout.
func TestWritersTakeTurns(t *testing.T) {
	t.Parallel()
	// The second sink names the file through a symbolic link to its
	// directory, opened after the first created it.
	real, link := linkedDir(t)
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0},
		Columns: []change.Column{{Name: "id", Type: "bigint", TypeOID: 20, BaseOID: 20}}}
	const each = 150
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	sinks := []*Sink{open(t, filepath.Join(real, "shared.db")), open(t, link+"/./shared.db")}
	for i, s := range sinks {
		defer s.Close()
		if err := s.EnsureTable(t.Context(), tbl); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for n := range each {
				id := change.Text(strconv.Itoa(i*each + n))
				b := &sink.Batch{Stream: "s" + strconv.Itoa(i), Position: change.LSN(n + 1),
					Ops: []sink.Op{{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: change.Row{id}}}}}
				if err := s.Apply(t.Context(), b); err != nil {
					t.Errorf("sink %d, batch %d: %v", i, n, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Once both write, neither commits many times in a row.
	longest, run := 0, 0
	for k := range order {
		if k > 0 && order[k] == order[k-1] {
			run++
		} else {
			run = 1
		}
		if k >= 20 && k < len(order)-20 { // past the start and before one is done
			longest = max(longest, run)
		}
	}
	if longest > 10 {
		t.Errorf("a writer committed %d times in a row while the other waited (order %v)", longest, order)
	}
}

// A file not yet created and the same file once it exists, named through
// a symbolic link to its directory, have one key.
func TestFileKey(t *testing.T) {
	real, link := linkedDir(t)
	before := fileKey(filepath.Join(link, "f.db"))
	if err := os.WriteFile(filepath.Join(real, "f.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(real, "f.db"), link + "/./f.db", filepath.Join(link, "f.db")} {
		if got := fileKey(p); got != before {
			t.Errorf("fileKey(%q) = %q, want %q as before the file existed", p, got, before)
		}
	}
}

// linkedDir makes a directory and a symbolic link to it.
func linkedDir(t *testing.T) (real, link string) {
	t.Helper()
	dir := t.TempDir()
	real, link = filepath.Join(dir, "real"), filepath.Join(dir, "link")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	return real, link
}
