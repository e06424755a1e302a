package stream

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/testutil"
)

// TestVerifyTrailsTheLoad: a backfill's verify compares each chunk's range
// while the later chunks load. With the run's last chunk held before its
// read, the ten ranges before it are compared already; released, the run
// completes with a verify that matches over its eleven ranges, every one
// settled by the servers' sums (the destination's taken in snapshots off
// the applier).
func TestVerifyTrailsTheLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, chunk_size: 100}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text, ts timestamptz);
		INSERT INTO t SELECT g, 'a' || g, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour'
		FROM generate_series(1, 1050) g;`})
	id := change.TableID{Schema: "public", Name: "t"}
	var compared, registered atomic.Int64
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	hook := chunkHook(func(ctx context.Context, tid change.TableID, stage chunkStage) {
		switch {
		case tid != id:
		case stage == trailVerified:
			compared.Add(1)
		case stage == chunkRegistered && registered.Add(1) == 11:
			close(held)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	})
	var logs testutil.LockedBuffer
	e.startLogged(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	e.s.bf.hook.Store(&hook)
	bf := e.initiateT()
	e.waitClosed("the last chunk to be held", held)
	e.waitFor("the ten ranges before the held chunk compared", func() bool { return compared.Load() == 10 })
	if b, err := e.st.GetBackfill(e.ctx, bf); err != nil || b.Status != StatusActive || b.Verify != nil {
		t.Fatalf("the run while its last chunk is held: %+v, %v; want active, no verify recorded yet", b, err)
	}
	open()
	run := e.waitVerified(bf)
	v := run.Verify
	if run.Status != StatusCompleted || v.Status != VerifyMatch || v.Ranges != 11 || v.SourceRows != 1050 || v.DestRows != 1050 {
		t.Fatalf("the run: %s, verify %+v; want completed, a match over 11 ranges of 1050 rows", run.Status, *v)
	}
	if n := compared.Load(); n != 11 {
		t.Errorf("%d ranges compared as the run loaded, want 11", n)
	}
	e.s.bf.mu.Lock()
	summedLater := e.s.bf.rt.applier.summedLater.Load()
	e.s.bf.mu.Unlock()
	if n := summedLater; n < 10 {
		t.Errorf("%d ranges summed in snapshots off the applier, want at least the 10 compared while the last chunk was held", n)
	}
	// The destination's sums, taken in snapshots off the applier, agreed
	// with the source's: had one failed or differed, the verify would
	// have said it compares rows from then on.
	if strings.Contains(logs.String(), "verify compares rows") {
		t.Errorf("the trailing verify stopped summing:\n%s", logs.String())
	}
}

// TestVerifyTrailFailedIsRedoneWhole: a trailing verify that fails while
// the run loads (here a fault after its third range, as a source that
// could not be read) takes no more ranges, and the run's verify is made
// again, whole, at its end: a match over every range, not an error.
func TestVerifyTrailFailedIsRedoneWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, chunk_size: 100}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text);
		INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 1050) g;`})
	id := change.TableID{Schema: "public", Name: "t"}
	var faulted, after atomic.Int64
	fault := trailFault(func(tid change.TableID, compared int) error {
		switch {
		case tid != id:
		case compared == 3:
			faulted.Add(1)
			return errors.New("injected: the source could not be read")
		case compared > 3:
			after.Add(1)
		}
		return nil
	})
	var logs testutil.LockedBuffer
	e.startLogged(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	e.s.bf.trailFault.Store(&fault)
	bf := e.initiateT()
	run := e.waitVerified(bf)
	v := run.Verify
	if run.Status != StatusCompleted || v.Status != VerifyMatch || v.Ranges != 11 || v.SourceRows != 1050 || v.DestRows != 1050 {
		t.Fatalf("the run: %s, verify %+v; want completed, a match over 11 ranges of 1050 rows", run.Status, *v)
	}
	if faulted.Load() != 1 || after.Load() != 0 {
		t.Errorf("the trail faulted %d times and compared %d ranges after its fault; want once, none", faulted.Load(), after.Load())
	}
	if !strings.Contains(logs.String(), "verifying the whole table again") || !strings.Contains(logs.String(), "injected") {
		t.Errorf("the failed trail was not redone whole, or not said why:\n%s", logs.String())
	}
}

// TestVerifyTrailSumsEachChunkWhole: the trail compares each merged
// chunk's range as one, summed whole by the source without a search for
// its chunk_size-th key, even when it fell behind and takes several chunks
// at once, and when a range grew past chunk_size rows after its chunk
// merged (50 rows inserted into the tenth chunk's keys while the trail is
// held after its first range): eleven ranges, the tenth of 150 rows. With
// the destination's last row of that range changed as well, the range's
// whole sum differs, and it is summed again in ranges of chunk_size rows
// before any is read row by row: the first hundred rows sum equal, the
// rest differ and are compared row by row (twelve ranges, one differing),
// and the sums stay in use (read row by row at once, the first hundred
// rows would have matched where their whole sum differed, which turns
// sums off as misleading).
func TestVerifyTrailSumsEachChunkWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		tamper          bool
		status          string
		ranges, differs int
	}{
		{name: "grown", status: VerifyMatch, ranges: 11},
		{name: "grown and differing", tamper: true, status: VerifyDiffer, ranges: 12, differs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Chunks of chunk_size rows, whatever the writes cost: paced
			// while the inserts flow, the last chunk could be two.
			e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, chunk_size: 100, chunk_write_target: 0}", setup: `
				CREATE TABLE t (id int PRIMARY KEY, a text);
				INSERT INTO t SELECT g * 10, 'a' || g FROM generate_series(1, 1050) g;`})
			id := change.TableID{Schema: "public", Name: "t"}
			var compared, registered atomic.Int64
			trailHeld, loadHeld := make(chan struct{}), make(chan struct{})
			releaseTrail, releaseLoad := make(chan struct{}), make(chan struct{})
			var onceTrail, onceLoad sync.Once
			openTrail := func() { onceTrail.Do(func() { close(releaseTrail) }) }
			openLoad := func() { onceLoad.Do(func() { close(releaseLoad) }) }
			t.Cleanup(openTrail)
			t.Cleanup(openLoad)
			hold := func(ctx context.Context, held, release chan struct{}) {
				close(held)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			hook := chunkHook(func(ctx context.Context, tid change.TableID, stage chunkStage) {
				switch {
				case tid != id:
				case stage == trailVerified && compared.Add(1) == 1:
					hold(ctx, trailHeld, releaseTrail)
				case stage == chunkRegistered && registered.Add(1) == 11:
					hold(ctx, loadHeld, releaseLoad)
				}
			})
			var logs testutil.LockedBuffer
			e.startLogged(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
			e.s.bf.hook.Store(&hook)
			bf := e.initiateT()
			e.waitClosed("the trail and the load to be held", trailHeld, loadHeld)
			destRows := e.destCounter("t")
			e.waitFor("the ten chunks before the held one loaded", func() bool { return destRows() == 1000 })
			e.exec("INSERT INTO t SELECT 9000 + g * 2 - 1, 'b' || g FROM generate_series(1, 50) g")
			e.waitFor("the inserted rows streamed", func() bool { return destRows() == 1050 })
			if tc.tamper {
				e.execInDest("UPDATE t SET a = 'changed' WHERE id = 10000")
			}
			openTrail()
			e.waitFor("the ten ranges before the held chunk compared", func() bool { return compared.Load() >= 10 })
			openLoad()
			run := e.waitVerified(bf)
			v := run.Verify
			if run.Status != StatusCompleted || v.Status != tc.status || v.Ranges != tc.ranges || v.DifferingRanges != tc.differs || v.SourceRows != 1100 || v.DestRows != 1100 {
				t.Fatalf("the run: %s, verify %+v; want completed, %s over %d ranges (%d differing) of 1100 rows", run.Status, *v, tc.status, tc.ranges, tc.differs)
			}
			if strings.Contains(logs.String(), "verify compares rows") {
				t.Errorf("the trailing verify stopped summing:\n%s", logs.String())
			}
		})
	}
}

// TestVerifyTrailResumed: a run resumed after a restart loads from its
// cursor (here after its fifth chunk); its trail compares the rows loaded
// before the restart in ranges of chunk_size rows, as no chunk of the
// resumed run bounds them, then each chunk the resumed run merges: eleven
// ranges of at most 100 rows, where one sum over the first 600 would leave
// six.
func TestVerifyTrailResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: manual, chunk_size: 100, chunk_write_target: 0}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text);
		INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 1050) g;`})
	id := change.TableID{Schema: "public", Name: "t"}
	var registered atomic.Int64
	held := make(chan struct{})
	hook := chunkHook(func(ctx context.Context, tid change.TableID, stage chunkStage) {
		if tid == id && stage == chunkRegistered && registered.Add(1) == 6 {
			close(held)
			<-ctx.Done() // until the stream stops
		}
	})
	e.start()
	e.s.bf.hook.Store(&hook)
	bf := e.initiateT()
	e.waitClosed("the sixth chunk to be held", held)
	destRows := e.destCounter("t")
	e.waitFor("the five chunks before the held one loaded", func() bool { return destRows() == 500 })
	e.stop()
	e.start() // no hook: the run resumes from its cursor
	run := e.waitVerified(bf)
	v := run.Verify
	if run.Status != StatusCompleted || v.Status != VerifyMatch || v.Ranges != 11 || v.SourceRows != 1050 || v.DestRows != 1050 {
		t.Fatalf("the resumed run: %s, verify %+v; want completed, a match over 11 ranges of 1050 rows", run.Status, *v)
	}
}

// destCounter counts the rows of the destination's table on a
// connection of its own.
func (e *env) destCounter(table string) func() int {
	e.t.Helper()
	dst := e.connectDest()
	return func() int {
		var n int
		if err := dst.QueryRow(e.ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		return n
	}
}

// waitClosed waits until every channel in chans is closed (a hook holds
// what), and fails the test after waitTimeout.
func (e *env) waitClosed(what string, chans ...chan struct{}) {
	e.t.Helper()
	for _, c := range chans {
		select {
		case <-c:
		case <-time.After(waitTimeout):
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}
