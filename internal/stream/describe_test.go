package stream

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source/pg"
)

// TestDescribeAheadInBatches: a start describes its tables in batches
// where the source can; across several batches and workers, every table
// gets its own description or error, as described alone, in its place:
// here 123 tables (three batches, a source transaction each), with a table
// the source lacks and one without a key at a batch's edges.
func TestDescribeAheadInBatches(t *testing.T) {
	t.Parallel()
	var setup strings.Builder
	var ids []change.TableID
	for i := range 123 {
		name := fmt.Sprintf("d%03d", i)
		switch i {
		case describeBatch - 1: // the first batch's last: not there
		case describeBatch: // the second's first: no key
			fmt.Fprintf(&setup, "CREATE TABLE %s (v int);\n", name)
		default:
			fmt.Fprintf(&setup, "CREATE TABLE %s (id int PRIMARY KEY, v%d text);\n", name, i)
		}
		ids = append(ids, pubTable(name))
	}
	e := newEnv(t, envOptions{setup: setup.String()})
	src, err := pg.Open(e.ctx, pg.Config{DSN: e.srcDSN}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	acquired := src.Pool().Stat().AcquireCount()
	ahead := describeAhead(e.ctx, src, ids, nil)
	for i := range ids {
		if _, err := ahead.get(e.ctx, i); e.ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	ahead.wait()
	// A source transaction a batch: three, not one a table.
	if n := src.Pool().Stat().AcquireCount() - acquired; n != 3 {
		t.Errorf("describing %d tables took %d source transactions, want 3", len(ids), n)
	}
	for i, id := range ids {
		got, gotErr := ahead.get(e.ctx, i)
		alone, aloneErr := src.Describe(e.ctx, id, nil)
		if !reflect.DeepEqual(got, alone) || fmt.Sprint(gotErr) != fmt.Sprint(aloneErr) {
			t.Errorf("%s: described ahead %+v, %v; alone %+v, %v", id, got, gotErr, alone, aloneErr)
		}
		if wantErr := i == describeBatch-1 || i == describeBatch; (gotErr != nil) != wantErr {
			t.Errorf("%s: error %v, want one %v", id, gotErr, wantErr)
		}
		if gotErr == nil && (got.ID != id || len(got.Columns) != 2 || got.Columns[1].Name != fmt.Sprintf("v%d", i)) {
			t.Errorf("%s: described as %+v", id, got)
		}
	}
}
