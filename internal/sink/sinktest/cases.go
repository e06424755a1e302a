package sinktest

import (
	"sort"
	"strconv"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

func testEnsureTableIdempotent(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	apply(t, s, ins(tbl, order("1", "a", "n")))
	// A second EnsureTable, also with another *Table of the same shape, keeps
	// the table and its rows.
	ensure(t, s, tbl, orders())
	expect(t, s, tbl, order("1", "a", "n"))
}

func testInsertUpdateDelete(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	apply(t, s,
		ins(tbl, r("1", "alice", "10.50", "first")),
		ins(tbl, r("2", "bob", "20.00", nil)),
		ins(tbl, r("3", "carol", "30.00", "third")),
	)
	apply(t, s,
		upd(tbl, nil, r("2", "bob", "21.00", "paid")),
		del(tbl, k("3")),
		// An insert of an existing key is an upsert (replays do this).
		ins(tbl, r("1", "alice", "11.50", "again")),
	)
	expect(t, s, tbl,
		r("1", "alice", "11.50", "again"),
		r("2", "bob", "21.00", "paid"),
	)
	// An update that moves the key, with every value present.
	apply(t, s, upd(tbl, k("2"), r("5", "bob", "21.00", "moved")))
	expect(t, s, tbl,
		r("1", "alice", "11.50", "again"),
		r("5", "bob", "21.00", "moved"),
	)
	// Deleting a row that is not there is no error.
	apply(t, s, del(tbl, k("42")))
}

func testTruncate(t *testing.T, s sink.Sink) {
	tbl, other := orders(), lines()
	ensure(t, s, tbl, other)
	apply(t, s, ins(tbl, order("1", "a", nil)), ins(tbl, order("2", "b", nil)), ins(other, r("1", "1", "eu")))
	// Rows inserted after the truncate in the same batch stay.
	apply(t, s, trunc(tbl), ins(tbl, order("3", "c", nil)))
	expect(t, s, tbl, order("3", "c", nil))
	expect(t, s, other, r("1", "1", "eu"))
}

func testUpdateMovingKeyCarriesUnchanged(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	big := "a TOASTed note"
	apply(t, s,
		ins(tbl, order("1", "a", big)),
		ins(tbl, order("7", "g", "seven's own")),
	)
	apply(t, s,
		// 1 -> 2: the note comes from the old-key row.
		upd(tbl, k("1"), r("2", "b", "2.00", unchanged)),
		// 3 -> 4 where 3 does not exist: nothing to carry, NULL.
		upd(tbl, k("3"), r("4", "d", "4.00", unchanged)),
		// 5 -> 7 where 7 exists: 7 keeps its own note.
		ins(tbl, order("5", "e", "five")),
		upd(tbl, k("5"), r("7", "g2", "7.00", unchanged)),
	)
	expect(t, s, tbl,
		r("2", "b", "2.00", big),
		r("4", "d", "4.00", nil),
		r("7", "g2", "7.00", "seven's own"),
	)
}

func testUnchangedKeepsValue(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	apply(t, s, ins(tbl, order("1", "a", "keep me")))
	apply(t, s,
		upd(tbl, nil, r("1", "a2", "3.00", unchanged)),
		// Unchanged on a row the destination lacks: NULL, never an error.
		upd(tbl, nil, r("2", "b", "2.00", unchanged)),
		// The same key as old key counts as no move.
		upd(tbl, k("1"), r("1", "a3", unchanged, unchanged)),
	)
	expect(t, s, tbl,
		r("1", "a3", "3.00", "keep me"),
		r("2", "b", "2.00", nil),
	)
}

func seedOrders(t *testing.T, s sink.Sink, tbl *change.Table, ids ...string) {
	t.Helper()
	ops := make([]sink.Op, len(ids))
	for i, id := range ids {
		ops[i] = ins(tbl, order(id, "c"+id, "n"))
	}
	apply(t, s, ops...)
}

func testChunkReplacesRange(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	seedOrders(t, s, tbl, "1", "2", "3", "4", "5", "7", "8", "9")
	// (3, 8]: 4 is stale, 5 and 8 identical, 6 missing, 7 gone at the source.
	applyChunk(t, s, chunk(tbl, k("3"), k("8"),
		order("4", "changed", "n"),
		order("5", "c5", "n"),
		order("6", "c6", "new"),
		order("8", "c8", "n"),
	), 1)
	expect(t, s, tbl,
		order("1", "c1", "n"), order("2", "c2", "n"), order("3", "c3", "n"),
		order("4", "changed", "n"), order("5", "c5", "n"), order("6", "c6", "new"),
		order("8", "c8", "n"), order("9", "c9", "n"),
	)
	// The same chunk again changes nothing and removes nothing.
	applyChunk(t, s, chunk(tbl, k("3"), k("8"),
		order("4", "changed", "n"), order("5", "c5", "n"), order("6", "c6", "new"), order("8", "c8", "n"),
	), 0)
	// An empty chunk empties its range.
	applyChunk(t, s, chunk(tbl, k("4"), k("6")), 2)
	expect(t, s, tbl,
		order("1", "c1", "n"), order("2", "c2", "n"), order("3", "c3", "n"),
		order("4", "changed", "n"), order("8", "c8", "n"), order("9", "c9", "n"),
	)
	// Consecutive chunks of one table in one batch do not see each other's
	// rows: the second range overlaps the first and lacks 3.
	first := chunk(tbl, nil, k("3"), order("2", "two", "n"), order("3", "c3", "n"))
	second := chunk(tbl, k("2"), nil, order("4", "changed", "n"), order("8", "eight", "n"))
	apply(t, s, sink.Op{Chunk: first}, ins(tbl, order("20", "c20", "n")), sink.Op{Chunk: second})
	if first.Removed != 1 || second.Removed != 3 {
		t.Errorf("removed %d and %d rows, want 1 and 3", first.Removed, second.Removed)
	}
	expect(t, s, tbl, order("2", "two", "n"), order("4", "changed", "n"), order("8", "eight", "n"))
}

func testChunkUnboundedAndPartialRows(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	seedOrders(t, s, tbl, "1", "2", "3", "5", "8", "9")
	applyChunk(t, s, chunk(tbl, nil, k("2"), order("2", "two", "n")), 1)
	applyChunk(t, s, chunk(tbl, k("8"), nil), 1)
	expect(t, s, tbl, order("2", "two", "n"), order("3", "c3", "n"), order("5", "c5", "n"), order("8", "c8", "n"))
	apply(t, s, upd(tbl, nil, order("5", "c5", "keep me")))
	// Whole table, with rows carrying Unchanged values: 5 keeps its note,
	// 10 is new and gets NULL.
	applyChunk(t, s, chunk(tbl, nil, nil,
		order("3", "three", "n"),
		r("5", "five", "5.00", unchanged),
		r("10", "ten", "10.00", unchanged),
	), 2)
	expect(t, s, tbl,
		order("3", "three", "n"),
		r("5", "five", "5.00", "keep me"),
		r("10", "ten", "10.00", nil),
	)
}

// testChunkKeep: a filtered chunk upserts its rows and leaves the range's
// other rows, over a populated range and over an empty one (written
// straight in).
func testChunkKeep(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	seedOrders(t, s, tbl, "1", "2", "3", "4", "5")
	keep := chunk(tbl, k("1"), k("6"), order("3", "three", "n"), order("6", "c6", "n"))
	keep.Keep = true
	applyChunk(t, s, keep, 0)
	expect(t, s, tbl, order("1", "c1", "n"), order("2", "c2", "n"), order("3", "three", "n"),
		order("4", "c4", "n"), order("5", "c5", "n"), order("6", "c6", "n"))
	var many []change.Row
	for i := 10; i < 60; i++ {
		many = append(many, order(strconv.Itoa(i), "m", "n"))
	}
	keep = chunk(tbl, nil, nil, many...)
	keep.Keep = true
	applyChunk(t, s, keep, 0)
	if got := readAll(t, s, tbl); len(got) != 56 {
		t.Fatalf("after a kept whole-table chunk of 50 new rows: %d rows, want 56", len(got))
	}
	keep = chunk(tbl, k("60"), nil, order("70", "c70", "n"), order("71", "c71", "n"))
	keep.Keep = true
	applyChunk(t, s, keep, 0)
	if got := readRange(t, s, tbl, k("60"), nil); len(got) != 2 {
		t.Fatalf("a kept chunk over an empty range: %d rows, want 2", len(got))
	}
}

// testChunkUpdateOnly: a column-subset chunk updates the named columns of
// rows the destination holds and neither inserts nor deletes.
func testChunkUpdateOnly(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	seedOrders(t, s, tbl, "1", "2", "3")
	upd := chunk(tbl, nil, nil,
		r("1", unchanged, unchanged, "filled"),
		r("3", unchanged, unchanged, nil),
		r("4", unchanged, unchanged, "not there"),
	)
	upd.Keep, upd.UpdateOnly = true, true
	applyChunk(t, s, upd, 0)
	if upd.Skipped != 1 {
		t.Errorf("skipped %d rows, want 1 (key 4, not in the table)", upd.Skipped)
	}
	expect(t, s, tbl, order("1", "c1", "filled"), order("2", "c2", "n"), order("3", "c3", nil))
}

func testCompositeKey(t *testing.T, s sink.Sink) {
	tbl := lines()
	ensure(t, s, tbl)
	// Columns are (qty, id, region), the key is (region, id).
	apply(t, s,
		ins(tbl, r("1", "1", "eu")), ins(tbl, r("2", "5", "eu")), ins(tbl, r("3", "1", "us")),
		ins(tbl, r("4", "2", "us")), ins(tbl, r("5", "3", "us")), ins(tbl, r("6", "9", "EU")),
	)
	// ("eu",1) < key <= ("us",2) by row comparison: ("eu",5) and ("us",1) are
	// inside although 5 > 2 and 1 <= 1.
	applyChunk(t, s, chunk(tbl, k("eu", "1"), k("us", "2"),
		r("20", "5", "eu"), r("40", "2", "us"),
	), 1)
	apply(t, s,
		upd(tbl, nil, r("10", "1", "eu")),
		upd(tbl, k("us", "3"), r("50", "4", "us")),
		del(tbl, k("EU", "9")),
		ins(tbl, r("7", "1", "EU")),
	)
	// "EU" sorts before "eu" in the C collation, bytewise.
	expect(t, s, tbl,
		r("7", "1", "EU"), r("10", "1", "eu"), r("20", "5", "eu"), r("40", "2", "us"), r("50", "4", "us"),
	)
	expectRows(t, "range ((eu,1), (us,2)]", readRange(t, s, tbl, k("eu", "1"), k("us", "2")),
		[]change.Row{r("20", "5", "eu"), r("40", "2", "us")})
}

func testReadRangeBounds(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	// Numeric key order, not text order: 10 after 9.
	seedOrders(t, s, tbl, "10", "1", "9", "2")
	ids := func(rows []change.Row) []change.Row {
		out := make([]change.Row, len(rows))
		for i, row := range rows {
			out[i] = row[:1]
		}
		return out
	}
	for _, tc := range []struct {
		low, high change.Key
		want      []change.Row
	}{
		{nil, nil, []change.Row{r("1"), r("2"), r("9"), r("10")}},
		{k("1"), nil, []change.Row{r("2"), r("9"), r("10")}},
		{nil, k("9"), []change.Row{r("1"), r("2"), r("9")}},
		{k("2"), k("10"), []change.Row{r("9"), r("10")}},
		{k("3"), k("4"), nil},
	} {
		expectRows(t, "range ("+tc.low.Encode()+", "+tc.high.Encode()+"]", ids(readRange(t, s, tbl, tc.low, tc.high)), tc.want)
	}
}

// testReadKeys: the rows with the asked keys that the table holds, simple
// and composite keys, and more keys than one query asks for.
func testReadKeys(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	seedOrders(t, s, tbl, "1", "2", "9", "10")
	got, err := capable(t, s).ReadKeys(t.Context(), tbl, []change.Key{k("10"), k("2"), k("77")})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return len(got[i][0].Text) < len(got[j][0].Text) })
	expectRows(t, "keys 10, 2, 77", got, []change.Row{order("2", "c2", "n"), order("10", "c10", "n")})

	ln := lines()
	ensure(t, s, ln)
	var ops []sink.Op
	var keys []change.Key
	for i := range 1500 {
		id := strconv.Itoa(i)
		ops = append(ops, ins(ln, r("1", id, "eu")))
		if i%2 == 0 {
			keys = append(keys, k("eu", id))
		}
	}
	apply(t, s, ops...)
	keys = append(keys, k("us", "4"))
	got, err = capable(t, s).ReadKeys(t.Context(), ln, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 750 {
		t.Fatalf("composite keys: %d rows, want the 750 even ids of eu", len(got))
	}
}
