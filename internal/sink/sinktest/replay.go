package sinktest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// ReplayReads checks a destination read back by replay (sink.ReplayReader)
// on a table keyed by an integer id with one text column v: write applies
// ops as one batch, wipe removes everything written so far from the
// destination behind the sink's back. Ranges come back in key order (10
// after 9); a read after wipe still holds what earlier reads replayed and
// adds only what was written since; EndReads drops the replay, so the
// next read replays from the start.
func ReplayReads(t *testing.T, r sink.ReplayReader, tb *change.Table, write func(ops []sink.Op), wipe func()) {
	t.Helper()
	ctx := context.Background()
	k := func(id int) change.Key { return change.Key{change.Text(fmt.Sprint(id))} }
	insert := func(id int, v string) sink.Op {
		return sink.Op{Change: &change.Change{Kind: change.Insert, Table: tb, Row: change.Row{change.Text(fmt.Sprint(id)), change.Text(v)}}}
	}
	var ops []sink.Op
	for id := 1; id <= 40; id++ {
		ops = append(ops, insert(id, "a"))
	}
	write(ops)
	check := func(what string, rows []change.Row, err error, want string) {
		t.Helper()
		var got []string
		for _, row := range rows {
			got = append(got, row[0].Text+"="+row[1].Text)
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Fatalf("%s: %q %v, want %q", what, strings.Join(got, " "), err, want)
		}
	}
	rows, err := r.ReadRange(ctx, tb, k(8), k(11))
	check("(8, 11]", rows, err, "9=a 10=a 11=a")
	wipe()
	write([]sink.Op{{Change: &change.Change{Kind: change.Delete, Table: tb, OldKey: k(40)}}, insert(100, "b")})
	rows, err = r.ReadRange(ctx, tb, k(38), nil)
	check("(38, ∞) after the wipe and the next batch", rows, err, "39=a 100=b")
	rows, err = r.ReadKeys(ctx, tb, []change.Key{k(3), k(40)})
	check("keys 3 and 40", rows, err, "3=a")
	r.EndReads(tb.ID)
	rows, err = r.ReadRange(ctx, tb, nil, nil)
	check("everything after EndReads", rows, err, "100=b")
}
