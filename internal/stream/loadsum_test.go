package stream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// sumsSetup is a table of 1,050 rows with even keys (2 … 2100), so that a
// destination row of an odd key is one the source never had; chunks of
// 100 rows cover 200 keys each.
const sumsSetup = `
	CREATE TABLE t (id int PRIMARY KEY, a text, n numeric(12,2), ts timestamptz, j jsonb);
	INSERT INTO t SELECT 2 * g, 'a' || g, g / 7.0, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute',
	       jsonb_build_object('g', g)
	FROM generate_series(1, 1050) g;`

// loadedForSums starts a stream into PostgreSQL (chunks of 100 rows, no
// verify) over sumsSetup's table, and backfills it.
func loadedForSums(t *testing.T) (*env, change.TableID) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", setup: sumsSetup, yaml: "backfill: {mode: manual, chunk_size: 100, verify: false}"})
	e.start()
	id := change.TableID{Schema: "public", Name: "t"}
	e.backfill(id)
	return e, id
}

// loadSumsCounts are the applier's counts of summed backfill chunks.
func (e *env) loadSumsCounts() (equal, differed int64) {
	e.s.bf.mu.Lock()
	defer e.s.bf.mu.Unlock()
	a := e.s.bf.rt.applier
	return a.loadedBySums.Load(), a.loadSumsDiffered.Load()
}

// latestBackfill is the stream's newest backfill record.
func (e *env) latestBackfill() store.Backfill {
	e.t.Helper()
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
	if err != nil || len(recs) == 0 {
		e.t.Fatalf("list backfills: %v (%d)", err, len(recs))
	}
	return recs[0]
}

// TestRebackfillSkipsEqualRanges: a backfill into an empty destination
// sums nothing; a second one over the loaded destination settles its
// equal ranges by the servers' sums and writes nothing there, while the
// ranges the destination got wrong (a changed value, a missing row, a row
// the source never had) are found by their sums, read and written: the
// destination equals the source again, the extra row removed.
func TestRebackfillSkipsEqualRanges(t *testing.T) {
	e, id := loadedForSums(t)
	if equal, differed := e.loadSumsCounts(); equal != 0 || differed != 0 {
		t.Fatalf("a backfill into an empty destination summed %d equal and %d differing ranges; want none", equal, differed)
	}
	// Wrong in the sixth range (1002 … 1200) and the tenth (1802 … 2000);
	// the five before the sixth are the source's.
	e.execInDest(`UPDATE t SET a = 'stale' WHERE id = 1100`,
		`DELETE FROM t WHERE id = 1900`,
		`INSERT INTO t (id, a) VALUES (1901, 'never in the source')`)
	e.backfill(id)
	e.assertConverged("t")
	// The first range is written row by row and found identical; from
	// the third at the latest ranges are summed, each equal one doubling
	// the next (one chunk, two, four: that one holds the sixth).
	equal, differed := e.loadSumsCounts()
	if equal < 2 || differed < 1 {
		t.Errorf("the second backfill settled %d ranges by equal sums and found %d differing; want at least 2 before the sixth and 1", equal, differed)
	}
	b := e.latestBackfill()
	if b.RowsRead != 1050 || b.RowsRemoved != 1 || b.Chunks >= 11 {
		t.Errorf("the second backfill: %d rows read, %d removed, %d chunks; want 1050, 1 (the extra row), fewer than 11", b.RowsRead, b.RowsRemoved, b.Chunks)
	}
}

// TestRebackfillSumsUnderWrites: while a writer changes rows of the
// upper half of the table, a second backfill settles the lower half's
// ranges by their sums and reads every range a live change touched
// again row by row: the destination equals the source.
func TestRebackfillSumsUnderWrites(t *testing.T) {
	e, id := loadedForSums(t)
	var writes int
	stop := e.keepWriting(e.ctx, func(ctx context.Context, conn *pgx.Conn, i int) {
		k := 1200 + 2*(i*37%450) // 1200 … 2098, even
		var q string
		switch i % 4 {
		case 0:
			q = fmt.Sprintf("DELETE FROM t WHERE id = %d", k)
		case 1:
			q = fmt.Sprintf("INSERT INTO t (id, a) VALUES (%d, 'new') ON CONFLICT (id) DO UPDATE SET a = 'again'", k)
		default:
			q = fmt.Sprintf("UPDATE t SET a = a || '+', n = n + 1 WHERE id = %d", k)
		}
		if _, err := conn.Exec(ctx, q); err == nil {
			writes++
		}
	})
	e.backfill(id)
	stop()
	e.assertConverged("t")
	if equal, _ := e.loadSumsCounts(); equal < 2 {
		t.Errorf("%d ranges settled by their sums under %d writes to the upper half; want at least 2 of the lower half", equal, writes)
	}
}

// TestLoadSumsGiveUp: a run stops summing once its one-chunk ranges
// differ from their sums more than twice, and an eighth as often as
// ranges match; a range of several chunks that differs only brings the
// next sum back to one chunk, as does one live changes touched.
func TestLoadSumsGiveUp(t *testing.T) {
	var s loadSums
	if !s.try(true, false) || s.try(false, false) || s.try(true, true) {
		t.Fatal("try: want sums only after an equal range, and not for a range read again row by row")
	}
	s.result(false, false, false) // live changes touched it: not the sums' fault
	for range 2 {
		s.result(false, true, false)
	}
	if !s.try(true, false) {
		t.Fatal("stopped summing after two differing ranges")
	}
	for range 16 {
		s.result(true, false, false)
	}
	if got := s.rows(100); got != 100*maxSumScale {
		t.Fatalf("after 16 equal ranges a sum covers %d rows, want %d", got, 100*maxSumScale)
	}
	if got := s.rowsAfterMatch(100); got != 100*maxSumScale {
		t.Fatalf("a sum read ahead covers %d rows, want at most %d", got, 100*maxSumScale)
	}
	s.result(false, true, true) // of several chunks: not counted
	if got := s.rows(100); got != 100 {
		t.Fatalf("after a range that differed a sum covers %d rows, want one chunk's 100", got)
	}
	if got := s.rowsAfterMatch(100); got != 200 {
		t.Fatalf("the sum read ahead of a one-chunk sum covers %d rows, want 200", got)
	}
	s.result(false, true, false)
	s.result(false, true, false)
	if !s.try(true, false) {
		t.Fatal("stopped summing after 4 differing ranges of one chunk, with 16 equal")
	}
	s.result(false, true, false)
	if s.try(true, false) {
		t.Fatal("still summing after 5 differing ranges of one chunk, with 16 equal")
	}
}

// TestAheadSumTakenWhereTheRunGoesOn: a chunk summed ahead is taken only
// when the run goes on where it starts, it summed without fault and its
// rows are not asked for; otherwise it is abandoned (its window closed),
// and a statement timeout is handed on for the run to read less.
func TestAheadSumTakenWhereTheRunGoesOn(t *testing.T) {
	a := newTestApplier(t)
	rt := &runtime{applier: a}
	abandoned := make(chan *pendingChunk, 1)
	go func() {
		for {
			select {
			case req := <-a.requests:
				if req.abandon != nil {
					abandoned <- req.abandon
				}
			case <-a.done:
				return
			}
		}
	}()
	key := func(n int) change.Key { return change.Key{change.Text(fmt.Sprint(n))} }
	ahead := func(low int, sum bool, err error) *aheadSum {
		pc := &pendingChunk{low: key(low)}
		if sum {
			pc.read.Sum = &source.RangeSum{Rows: 7, Sum: "1"}
		}
		s := &aheadSum{pc: pc, limit: 100, done: make(chan struct{}), err: err}
		close(s.done)
		return s
	}
	timeout := &source.StatementTimeoutError{Err: errors.New("canceling statement due to statement timeout"), Timeout: time.Second}
	cases := []struct {
		name    string
		s       *aheadSum
		after   int
		byRows  bool
		taken   bool
		wantErr bool
	}{
		{"where the run goes on", ahead(5, true, nil), 5, false, true, false},
		{"elsewhere (the chunk before is read again)", ahead(5, true, nil), 3, false, false, false},
		{"its rows asked for", ahead(5, true, nil), 5, true, false, false},
		{"a failed sum", ahead(5, false, errors.New("connection reset")), 5, false, false, false},
		{"a sum past the statement timeout", ahead(5, false, timeout), 5, false, false, true},
		{"a timeout elsewhere", ahead(5, false, timeout), 3, false, false, false},
	}
	for _, c := range cases {
		pc, n, err := c.s.take(rt, key(c.after), c.byRows)
		if (pc != nil) != c.taken || (err != nil) != c.wantErr {
			t.Errorf("%s: taken %v, error %v; want taken %v, an error %v", c.name, pc != nil, err, c.taken, c.wantErr)
		}
		if c.taken {
			if n != 100 {
				t.Errorf("%s: taken for %d rows, want 100", c.name, n)
			}
			continue
		}
		select {
		case got := <-abandoned:
			if got != c.s.pc {
				t.Errorf("%s: abandoned another chunk", c.name)
			}
		case <-time.After(waitTimeout):
			t.Errorf("%s: not taken and not abandoned", c.name)
		}
	}
	if pc, _, err := (*aheadSum)(nil).take(rt, key(1), false); pc != nil || err != nil {
		t.Error("no chunk summed ahead: want nothing taken")
	}
}

// TestResetSumsFromTheFirstChunk: the backfill of a reset (the slot was
// lost) sums from its first chunk, the destination having held the rows
// until then: with nothing changed, its 1,050 rows are settled by four
// sums of one, two, four and eight chunks' worth, none read.
func TestResetSumsFromTheFirstChunk(t *testing.T) {
	e, _ := loadedForSums(t)
	states := e.stateLog()
	mark := states.len()
	e.dropSlot()
	_, next := states.wait(e, mark, store.StateFailed)
	e.s.Reset()
	states.wait(e, next, store.StateRunning)
	var b store.Backfill
	// Completed, not only loaded: the commit's record may mark the run
	// loaded a moment before its last chunk's rows are counted.
	e.waitFor("the reset's backfill loaded and completed", func() bool {
		recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, StartedBy: StartedByReset})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 {
			b = recs[0]
		}
		return b.LoadedAt != nil && b.Status == StatusCompleted
	})
	e.assertConverged("t")
	equal, differed := e.loadSumsCounts()
	// Quiet, the four sums cover 100, 200, 400 and the last 350 rows;
	// summing from the third chunk on (not from the first) takes six.
	if b.StartedBy != StartedByReset || b.RowsRead != 1050 || b.Chunks > 4 || equal < 1 || differed != 0 {
		t.Errorf("the reset's backfill %+v: %d chunks, %d rows read; %d ranges summed equal, %d differing; want started by reset, at most 4 chunks, 1050 rows, summed, none differing",
			b, b.Chunks, b.RowsRead, equal, differed)
	}
}
