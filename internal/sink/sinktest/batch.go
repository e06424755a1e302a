package sinktest

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

func checkpoint(t *testing.T, s sink.Sink, stream string) sink.Checkpoint {
	t.Helper()
	cp, err := s.Checkpoint(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func expectCheckpoint(t *testing.T, s sink.Sink, stream string, want sink.Checkpoint) {
	t.Helper()
	got := checkpoint(t, s, stream)
	// No cursors may come back as nil or as an empty map.
	if len(got.Cursors) == 0 && len(want.Cursors) == 0 {
		got.Cursors, want.Cursors = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("checkpoint of %q:\ngot  %+v\nwant %+v", stream, got, want)
	}
}

// testCheckpointResume: the source's resume token is committed with the
// position, replaced with it, and left alone by a batch without a position.
func testCheckpointResume(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	apply := func(b *sink.Batch) {
		t.Helper()
		if err := s.Apply(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	mysql := "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:11-18,8a94f357-aab4-11df-86ab-c80aa9429562:1-3"
	apply(&sink.Batch{Stream: "main", Position: 0x2_0000_0100, Resume: mysql, Ops: []sink.Op{ins(tbl, order("1", "x", nil))}})
	expectCheckpoint(t, s, "main", sink.Checkpoint{Position: 0x2_0000_0100, Resume: mysql})
	// Cursors alone carry no position: the token stays with the position.
	apply(&sink.Batch{Stream: "main", Cursors: map[change.TableID]sink.Cursor{tbl.ID: {BackfillID: 3, After: k("1"), Rows: 1}}})
	expectCheckpoint(t, s, "main", sink.Checkpoint{Position: 0x2_0000_0100, Resume: mysql,
		Cursors: map[change.TableID]sink.Cursor{tbl.ID: {BackfillID: 3, After: k("1"), Rows: 1}}})
	apply(&sink.Batch{Stream: "main", Position: 0x2_0000_0200, Resume: "0-1-12,1-2-7"})
	apply(&sink.Batch{Stream: "other", Position: 9})
	expectCheckpoint(t, s, "main", sink.Checkpoint{Position: 0x2_0000_0200, Resume: "0-1-12,1-2-7",
		Cursors: map[change.TableID]sink.Cursor{tbl.ID: {BackfillID: 3, After: k("1"), Rows: 1}}})
	expectCheckpoint(t, s, "other", sink.Checkpoint{Position: 9})
}

func testCheckpoint(t *testing.T, s sink.Sink) {
	tbl, other := orders(), lines()
	ensure(t, s, tbl, other)
	expectCheckpoint(t, s, "main", sink.Checkpoint{})
	first := map[change.TableID]sink.Cursor{
		tbl.ID:   {BackfillID: 7, After: k("42"), Rows: 42},
		other.ID: {BackfillID: 7, After: k("e\"u\t\\ ✓", "5"), Rows: 3},
	}
	err := s.Apply(t.Context(), &sink.Batch{
		Stream: "main", Position: 0x1_0000_0ABC, Cursors: first,
		Ops: []sink.Op{ins(tbl, order("42", "x", nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	expectCheckpoint(t, s, "main", sink.Checkpoint{Position: 0x1_0000_0ABC, Cursors: first})
	expect(t, s, tbl, order("42", "x", nil))

	// Removing one cursor, finishing another, at an LSN past 2^63.
	err = s.Apply(t.Context(), &sink.Batch{
		Stream: "main", Position: 0xFFFF_FFFF_0000_0001,
		Cursors: map[change.TableID]sink.Cursor{
			tbl.ID:   {},
			other.ID: {BackfillID: 7, After: k("us", "9"), Done: true, Rows: 10},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	expectCheckpoint(t, s, "main", sink.Checkpoint{
		Position: 0xFFFF_FFFF_0000_0001,
		Cursors:  map[change.TableID]sink.Cursor{other.ID: {BackfillID: 7, After: k("us", "9"), Done: true, Rows: 10}},
	})
	// A cursor before its first chunk has no key; streams are separate.
	err = s.Apply(t.Context(), &sink.Batch{
		Stream: "other", Position: 5,
		Cursors: map[change.TableID]sink.Cursor{tbl.ID: {BackfillID: 8}},
	})
	if err != nil {
		t.Fatal(err)
	}
	expectCheckpoint(t, s, "other", sink.Checkpoint{Position: 5, Cursors: map[change.TableID]sink.Cursor{tbl.ID: {BackfillID: 8}}})
	expectCheckpoint(t, s, "main", sink.Checkpoint{
		Position: 0xFFFF_FFFF_0000_0001,
		Cursors:  map[change.TableID]sink.Cursor{other.ID: {BackfillID: 7, After: k("us", "9"), Done: true, Rows: 10}},
	})
	expectCheckpoint(t, s, "never", sink.Checkpoint{})
}

func testApplyTwiceIsOnce(t *testing.T, s sink.Sink) {
	tbl, other := orders(), lines()
	ensure(t, s, tbl, other)
	seedOrders(t, s, tbl, "1", "2", "3", "4")
	apply(t, s, upd(tbl, nil, order("1", "c1", "big")))
	b := &sink.Batch{
		Stream:   "main",
		Position: 100,
		Ops: []sink.Op{
			ins(tbl, order("10", "ten", nil)),
			upd(tbl, k("1"), r("11", "eleven", "11.00", unchanged)),
			del(tbl, k("2")),
			ins(tbl, order("12", "twelve", nil)),
			del(tbl, k("12")),
			{Chunk: chunk(other, nil, nil, r("1", "1", "eu"), r("2", "2", "eu"))},
			upd(tbl, nil, order("3", "three", "3")),
			trunc(other),
			ins(other, r("3", "3", "us")),
		},
		Cursors: map[change.TableID]sink.Cursor{other.ID: {BackfillID: 1, After: k("eu", "2"), Rows: 2}},
	}
	want := func() {
		t.Helper()
		expect(t, s, tbl,
			order("3", "three", "3"), order("4", "c4", "n"), order("10", "ten", nil),
			r("11", "eleven", "11.00", "big"),
		)
		expect(t, s, other, r("3", "3", "us"))
		expectCheckpoint(t, s, "main", sink.Checkpoint{Position: 100, Cursors: b.Cursors})
	}
	for range 2 {
		if err := s.Apply(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		want()
	}
}

func testFailedBatchCommitsNothing(t *testing.T, s sink.Sink) {
	tbl, other := orders(), lines()
	ensure(t, s, tbl, other)
	seedOrders(t, s, tbl, "1")
	good := []sink.Op{
		ins(tbl, order("2", "b", nil)),
		{Chunk: chunk(other, nil, nil, r("1", "1", "eu"))},
		del(tbl, k("1")),
	}
	// A NULL key fails the batch after the chunk was staged.
	bad := append(append([]sink.Op{}, good...), ins(tbl, r(nil, "x", "1.00", nil)))
	cursors := map[change.TableID]sink.Cursor{other.ID: {BackfillID: 1, After: k("eu", "1"), Rows: 1}}
	for range 2 {
		if err := s.Apply(t.Context(), &sink.Batch{Stream: "main", Position: 9, Ops: bad, Cursors: cursors}); err == nil {
			t.Fatal("batch with a NULL key applied")
		}
		expect(t, s, tbl, order("1", "c1", "n"))
		expect(t, s, other)
		expectCheckpoint(t, s, "main", sink.Checkpoint{})
	}
	// The sink stays usable, chunks included.
	if err := s.Apply(t.Context(), &sink.Batch{Stream: "main", Position: 9, Ops: good, Cursors: cursors}); err != nil {
		t.Fatal(err)
	}
	expect(t, s, tbl, order("2", "b", nil))
	expect(t, s, other, r("1", "1", "eu"))
	expectCheckpoint(t, s, "main", sink.Checkpoint{Position: 9, Cursors: cursors})
}

// testManyRows crosses any internal batching limit of the implementations.
func testManyRows(t *testing.T, s sink.Sink) {
	tbl := orders()
	ensure(t, s, tbl)
	const n = 2500
	ops := make([]sink.Op, 0, n)
	for i := range n {
		ops = append(ops, ins(tbl, order(strconv.Itoa(i), "c", nil)))
	}
	apply(t, s, ops...)
	// A chunk over everything: even ids updated, odd ones kept, and 3000
	// rows of which 500 are new.
	rows := make([]change.Row, 0, n+500)
	want := make([]change.Row, 0, n+500)
	for i := range n + 500 {
		row := order(strconv.Itoa(i), "c", nil)
		if i%2 == 0 {
			row = order(strconv.Itoa(i), "even", "x")
		}
		rows = append(rows, row)
		want = append(want, row)
	}
	applyChunk(t, s, chunk(tbl, nil, nil, rows...), 0)
	got := readAll(t, s, tbl)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	expectRows(t, "orders", got, want)
	// And one row-change batch removing most of them again.
	ops = ops[:0]
	for i := 10; i < n+500; i++ {
		ops = append(ops, del(tbl, k(strconv.Itoa(i))))
	}
	apply(t, s, ops...)
	expectRows(t, "orders", readAll(t, s, tbl), want[:10])
}
