package sqlite

import (
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
	path := filepath.Join(t.TempDir(), "shared.db")
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0},
		Columns: []change.Column{{Name: "id", Type: "bigint", TypeOID: 20, BaseOID: 20}}}
	const each = 150
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	sinks := []*Sink{open(t, path), open(t, filepath.Join(filepath.Dir(path), ".", "shared.db"))}
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
