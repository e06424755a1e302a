package sinktest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/sink"
)

// testChunkReportsChanges: a ChangeReporter notes, for a tracked chunk,
// the tracked column's values in the rows it inserts, deletes or changes,
// old and new, and nothing for rows written identically; BeforeCommit sees
// them before the commit, and its error rolls the batch back.
func testChunkReportsChanges(t *testing.T, s sink.Sink) {
	if _, ok := s.(sink.ChangeReporter); !ok {
		t.Skipf("%T does not report changes", s) // the stream counts every row it writes
	}
	tbl := orders()
	ensure(t, s, tbl)
	applyChunk(t, s, chunk(tbl, nil, nil, order("1", "ann", "d1"), order("2", "bob", "d2"), order("3", "cy", "d3"),
		order("4", "di", "d4"), order("5", "ed", "d5"), order("6", "flo", nil)), 0)

	tracked := func(c *sink.Chunk) *sink.Chunk {
		c.Changed = sink.NewChanges([]string{"note"})
		return c
	}
	var seen []string
	commit := func(c *sink.Chunk) func(context.Context) error {
		return func(context.Context) error {
			seen = slices.Sorted(maps.Keys(c.Changed.Values["note"]))
			return nil
		}
	}
	c := tracked(chunk(tbl, nil, nil,
		order("1", "ann", "d1"),   // identical
		order("2", "bobby", "d2"), // another customer, same date
		order("3", "cy", "d3x"),   // another date: both count
		// 4 is gone: its date counts
		order("5", "ed", "d5"),  // identical
		order("6", "flo", "d6"), // NULL before: only the new value
		order("7", "gus", "d7"), // new
	))
	if err := s.Apply(t.Context(), &sink.Batch{Stream: "test", Ops: []sink.Op{{Chunk: c}}, BeforeCommit: commit(c)}); err != nil {
		t.Fatal(err)
	}
	if want := "d2 d3 d3x d4 d6 d7"; strings.Join(seen, " ") != want {
		t.Errorf("BeforeCommit saw %v, want %s", seen, want)
	}

	// The same rows again change nothing.
	seen = nil
	again := tracked(chunk(tbl, nil, nil, order("1", "ann", "d1"), order("2", "bobby", "d2"), order("3", "cy", "d3x"),
		order("5", "ed", "d5"), order("6", "flo", "d6"), order("7", "gus", "d7")))
	if err := s.Apply(t.Context(), &sink.Batch{Stream: "test", Ops: []sink.Op{{Chunk: again}}, BeforeCommit: commit(again)}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("an identical chunk noted %v", seen)
	}

	// Keep leaves rows it lacks, and UpdateOnly skips rows the destination
	// lacks: neither counts them.
	keep := tracked(chunk(tbl, nil, nil, order("2", "bobby", "d2y")))
	keep.Keep = true
	upd := tracked(chunk(tbl, nil, nil, r("3", unchanged, unchanged, "d3z"), r("8", unchanged, unchanged, "d8")))
	upd.UpdateOnly = true
	apply(t, s, sink.Op{Chunk: keep}, sink.Op{Chunk: upd})
	for _, c := range []struct {
		name string
		ch   *sink.Chunk
		want string
	}{{"keep", keep, "d2 d2y"}, {"update only", upd, "d3x d3z"}} {
		if got := strings.Join(slices.Sorted(maps.Keys(c.ch.Changed.Values["note"])), " "); got != c.want {
			t.Errorf("%s chunk noted %s, want %s", c.name, got, c.want)
		}
	}

	// BeforeCommit's error rolls the batch back.
	before := readAll(t, s, tbl)
	fail := tracked(chunk(tbl, nil, nil, order("9", "hal", "d9")))
	boom := errors.New("metadata store down")
	err := s.Apply(t.Context(), &sink.Batch{Stream: "test", Ops: []sink.Op{{Chunk: fail}}, BeforeCommit: func(context.Context) error { return boom }})
	if !errors.Is(err, boom) || !sink.IsBeforeCommit(err) || errors.Is(err, sink.ErrRejected) {
		t.Fatalf("Apply with a failing BeforeCommit: %v, want it as a BeforeCommitError, not a rejection", err)
	}
	expect(t, s, tbl, before...)
}

// testChangeReportsChanges: for a live change whose Changed is set, a
// ChangeReporter notes the tracked values the destination row had before
// it (read in the batch's transaction, in order with the batch's other
// changes) and has after it.
func testChangeReportsChanges(t *testing.T, s sink.Sink) {
	if _, ok := s.(sink.ChangeReporter); !ok {
		t.Skipf("%T does not report changes", s)
	}
	tbl := orders()
	ensure(t, s, tbl)
	applyChunk(t, s, chunk(tbl, nil, nil, order("1", "ann", "d1"), order("2", "bob", "d2"), order("3", "cy", "d3")), 0)
	tracked := func(op sink.Op) sink.Op {
		op.Changed = sink.NewChanges([]string{"note"})
		return op
	}
	ops := []sink.Op{
		tracked(upd(tbl, nil, order("1", "ann", "d1x"))),
		tracked(upd(tbl, nil, order("1", "ann", "d1y"))), // sees the one before
		tracked(del(tbl, k("2"))),
		tracked(ins(tbl, order("4", "di", "d4"))),
		tracked(upd(tbl, k("3"), order("5", "cy", "d5"))), // a key move
		upd(tbl, nil, order("4", "di", "untracked")),
	}
	var atCommit string
	err := s.Apply(t.Context(), &sink.Batch{Stream: "test", Ops: ops, BeforeCommit: func(context.Context) error {
		atCommit = strings.Join(slices.Sorted(maps.Keys(ops[0].Changed.Values["note"])), " ")
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"d1 d1x", "d1x d1y", "d2", "d4", "d3 d5"} {
		if got := strings.Join(slices.Sorted(maps.Keys(ops[i].Changed.Values["note"])), " "); got != want {
			t.Errorf("op %d noted %q, want %q", i, got, want)
		}
	}
	if atCommit != "d1 d1x" {
		t.Errorf("BeforeCommit saw %q, want the noted values", atCommit)
	}
	expect(t, s, tbl, order("1", "ann", "d1y"), order("4", "di", "untracked"), order("5", "cy", "d5"))
}
