package postgres

import (
	"strconv"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// TestSumLaterSumsItsSnapshot: a range summed later is summed as the
// destination was committed when SumLater returned, though the sink goes
// on writing the range before the sum is waited for; a range within the
// table and the whole table alike.
func TestSumLaterSumsItsSnapshot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, newDB(t))
	defer s.Close()
	tbl := &change.Table{
		ID: change.TableID{Schema: "public", Name: "sums"},
		Columns: []change.Column{
			{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23},
			{Name: "at", Type: "timestamp with time zone", TypeOID: 1184, BaseOID: 1184},
			{Name: "note", Type: "text", TypeOID: 25, BaseOID: 25},
		},
		Key: []int{0},
	}
	if err := s.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	write := func(note string) {
		t.Helper()
		rows := make([]change.Row, 100)
		for i := range rows {
			at := time.Date(2024, 1, 1, 0, i, 0, 0, time.UTC).Format("2006-01-02 15:04:05Z07")
			rows[i] = change.Row{change.Text(strconv.Itoa(i + 1)), change.Text(at), change.Text(note)}
		}
		if err := s.Apply(ctx, &sink.Batch{Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: rows}}}}); err != nil {
			t.Fatal(err)
		}
	}
	write("before")
	ranges := []struct{ low, high change.Key }{
		{nil, nil},
		{change.Key{change.Text("10")}, change.Key{change.Text("20")}},
	}
	type summed struct {
		rows int
		sum  string
	}
	var before []summed
	var waits []func() (int, string, error)
	for _, rg := range ranges {
		rows, sum, err := s.SumRange(ctx, tbl, rg.low, rg.high)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, summed{rows, sum})
		wait, err := s.SumLater(ctx, tbl, rg.low, rg.high)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, func() (int, string, error) { return wait(ctx) })
	}
	write("after") // every row changes
	for i, rg := range ranges {
		rows, sum, err := s.SumRange(ctx, tbl, rg.low, rg.high)
		if err != nil || sum == before[i].sum {
			t.Fatalf("range %v: the sum after every row changed: %d %s, %v; want another than %s", rg, rows, sum, err, before[i].sum)
		}
		rows, sum, err = waits[i]()
		if err != nil || (summed{rows, sum}) != before[i] {
			t.Errorf("range %v summed later: %d %s, %v; want %d %s, the range as it was when SumLater returned", rg, rows, sum, err, before[i].rows, before[i].sum)
		}
	}
}
