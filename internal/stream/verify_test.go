package stream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestVerifyFindsOneChangedValue damages one value of a large table in the
// destination while the stream is live and writes keep flowing: verify
// agrees everywhere else and points at that key's range.
func TestVerifyFindsOneChangedValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 5000}", setup: `
		CREATE TABLE big (id bigint PRIMARY KEY, v int NOT NULL, note text);
		INSERT INTO big SELECT g, g, 'note ' || g FROM generate_series(1, 50000) g;
		CREATE TABLE other (id int PRIMARY KEY); INSERT INTO other SELECT generate_series(1, 100);`})
	t0 := time.Now()
	e.start()
	e.waitLoaded("big")
	e.waitLoaded("other")
	t.Logf("loaded %s", time.Since(t0))
	stop := e.writerOutside(e.ctx)
	defer stop()
	t0 = time.Now()
	checks, err := e.s.Verify(e.ctx, nil, 1000)
	t.Logf("first verify %s", time.Since(t0))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.Match {
			t.Fatalf("verify of an intact destination differs: %+v", c)
		}
	}
	// Both servers sum each range; only ranges the writer touched are
	// read row by row.
	by := comparedBy(checks)
	t.Logf("ranges compared: %v", by)
	if by[ComparedByChecksums] < 25 {
		t.Errorf("ranges compared by the servers' checksums: %v, want most of big's 50 and other's one", by)
	}
	dst, err := pgx.Connect(e.ctx, e.dstDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(e.ctx)
	if _, err := dst.Exec(e.ctx, `UPDATE big SET note = 'damaged' WHERE id = 31337`); err != nil {
		t.Fatal(err)
	}
	checks, err = e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "big"}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	bad := badRanges(checks[0])
	if checks[0].Match || len(bad) != 1 || len(bad[0].DifferingKeys) != 1 || !slices.Equal(bad[0].DifferingKeys[0], []string{"31337"}) {
		t.Fatalf("verify after damaging id 31337: match=%v differing ranges %+v", checks[0].Match, bad)
	}
	if fmt.Sprint(bad[0].Low) != "[31000]" || fmt.Sprint(bad[0].High) != "[32000]" {
		t.Errorf("differing range (%v, %v], want (31000, 32000]", bad[0].Low, bad[0].High)
	}
	if bad[0].ComparedBy != ComparedByRows {
		t.Errorf("the differing range was compared by %s, want rows (its checksums differ)", bad[0].ComparedBy)
	}
	// A backfill repairs it.
	if _, err := e.s.Initiate(e.ctx, []change.TableID{{Schema: "public", Name: "big"}}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("big")
	checks, err = e.s.Verify(e.ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.Match {
			t.Fatalf("verify after the repairing backfill differs: %+v", c)
		}
	}
}

// comparedBy counts the checks' ranges by how they were compared.
func comparedBy(checks []ObjectCheck) map[string]int {
	by := map[string]int{}
	for _, c := range checks {
		for _, r := range c.Ranges {
			by[r.ComparedBy]++
		}
	}
	return by
}

// writerOutside keeps changing rows of big other than the damaged one.
func (e *env) writerOutside(ctx context.Context) func() {
	return e.keepWriting(ctx, func(ctx context.Context, conn *pgx.Conn, i int) {
		id := 1 + (i*7919)%30000
		_, _ = conn.Exec(ctx, "UPDATE big SET v = v + 1 WHERE id = $1", id)
	})
}

// keepWriting calls write with 0, 1, 2, … at most once a millisecond (a
// steady load the stream can follow) until the returned stop is called, on
// a source connection of its own: stopping may end a statement under way,
// and pgx then closes its connection.
func (e *env) keepWriting(ctx context.Context, write func(ctx context.Context, conn *pgx.Conn, i int)) (stop func()) {
	e.t.Helper()
	conn, err := pgx.Connect(ctx, e.srcDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.Background())
		pace := time.NewTicker(time.Millisecond)
		defer pace.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			<-pace.C
			write(ctx, conn, i)
		}
	}()
	return func() { cancel(); <-done }
}

// TestVerifyReadAheadUnderKeyMoves: verify reads a range of the source
// while the applier compares the range before it, and a writer moves keys
// between those ranges (and inserts and deletes) meanwhile. Every range
// still matches, the ranges join end to end over the whole table, and both
// sides count the same rows.
func TestVerifyReadAheadUnderKeyMoves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 1000}", setup: `
		CREATE TABLE big (id bigint PRIMARY KEY, v int NOT NULL, note text);
		INSERT INTO big SELECT g, g, 'note ' || g FROM generate_series(1, 10000) g;`})
	e.start()
	e.waitLoaded("big")
	stop := e.keepWriting(e.ctx, func(ctx context.Context, conn *pgx.Conn, i int) {
		id := 1 + (i*7919)%10000
		switch i % 4 {
		case 0: // a key moves some ranges of 100 up or down
			_, _ = conn.Exec(ctx, "UPDATE big SET id = CASE WHEN id > 5000 THEN id - 4321 ELSE id + 4321 END WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM big b WHERE b.id = CASE WHEN $1 > 5000 THEN $1 - 4321 ELSE $1 + 4321 END)", id)
		case 1:
			_, _ = conn.Exec(ctx, "UPDATE big SET v = v + 1 WHERE id = $1", id)
		case 2:
			_, _ = conn.Exec(ctx, "DELETE FROM big WHERE id = $1", id)
		case 3:
			_, _ = conn.Exec(ctx, "INSERT INTO big VALUES ($1, 0, 'new') ON CONFLICT DO NOTHING", id)
		}
	})
	var checks []ObjectCheck
	var err error
	for range 3 { // several passes, each under the writer
		if checks, err = e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "big"}}, 100); err != nil || !checks[0].Match {
			break
		}
	}
	stop()
	if err != nil {
		t.Fatal(err)
	}
	c := checks[0]
	if !c.Match || c.SourceRows != c.DestRows {
		t.Fatalf("verify under key moves: match=%v, %d source rows, %d destination rows, differing %+v", c.Match, c.SourceRows, c.DestRows, badRanges(c))
	}
	if len(c.Ranges) < 50 || c.Ranges[0].Low != nil || c.Ranges[len(c.Ranges)-1].High != nil {
		t.Fatalf("%d ranges from %v to %v, want at least 50 over the whole table", len(c.Ranges), c.Ranges[0].Low, c.Ranges[len(c.Ranges)-1].High)
	}
	for i := 1; i < len(c.Ranges); i++ {
		if !slices.Equal(c.Ranges[i].Low, c.Ranges[i-1].High) {
			t.Fatalf("range %d starts after %v, the one before ends at %v", i, c.Ranges[i].Low, c.Ranges[i-1].High)
		}
	}
}

// TestCheckRangeDuplicatesDoNotCancel: a side holding a row twice (a
// destination table without its key's constraint can) differs from one
// holding another row twice, though both count three rows and the sums
// of pairs of equal hashes would cancel out under XOR.
func TestCheckRangeDuplicatesDoNotCancel(t *testing.T) {
	row := func(id, v string) change.Row {
		return change.Row{change.Text(id), change.Text(v), change.Null}
	}
	r, x, y := row("1", "r"), row("2", "x"), row("3", "y")
	if c := checkRange(modelTable, nil, nil, []change.Row{x, y, y}, []change.Row{r, r, x}); c.Match {
		t.Fatalf("{x, y, y} and {r, r, x} match: %+v", c)
	}
	if c := checkRange(modelTable, nil, nil, []change.Row{x, y, r}, []change.Row{r, x, y}); !c.Match {
		t.Fatalf("the same rows in another order differ: %+v", c)
	}
}

// TestVerifyChecksumsCatchSubtleDamage damages the destination in ways a
// careless checksum misses, each in a range of its own: two rows' values
// swapped, an empty string turned NULL, a value's case, two columns'
// values swapped. Each damaged range differs and names its keys; the
// intact ranges are settled by the servers' checksums.
func TestVerifyChecksumsCatchSubtleDamage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text, b text);
		INSERT INTO t SELECT g, 'a' || g, CASE WHEN g % 10 = 0 THEN '' ELSE 'b' || g END FROM generate_series(1, 1000) g;`})
	e.start()
	e.waitLoaded("t")
	dst, err := pgx.Connect(e.ctx, e.dstDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(e.ctx)
	if _, err := dst.Exec(e.ctx, `
		UPDATE t SET a = CASE id WHEN 150 THEN 'a151' ELSE 'a150' END WHERE id IN (150, 151);
		UPDATE t SET b = NULL WHERE id = 310;
		UPDATE t SET a = 'A520' WHERE id = 520;
		UPDATE t SET a = b, b = a WHERE id = 777;`); err != nil {
		t.Fatal(err)
	}
	checks, err := e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "t"}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]string{
		"[100]": {{"150"}, {"151"}}, "[300]": {{"310"}}, "[500]": {{"520"}}, "[700]": {{"777"}},
	}
	got := map[string][][]string{}
	for _, r := range checks[0].Ranges {
		switch {
		case !r.Match:
			got[fmt.Sprint(r.Low)] = r.DifferingKeys
			if r.ComparedBy != ComparedByRows {
				t.Errorf("range after %v differs but was compared by %s", r.Low, r.ComparedBy)
			}
		case r.ComparedBy != ComparedByChecksums:
			t.Errorf("intact range after %v compared by %s, want checksums (nothing writes to t)", r.Low, r.ComparedBy)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("differing ranges (by low bound) and keys: %v, want %v", got, want)
	}
}

// TestVerifyRowsWhenDestinationCannotSum: a destination whose sum fails
// (here a function that shadows the hash and raises) is compared row by
// row, and the verify still finds a changed value.
func TestVerifyRowsWhenDestinationCannotSum(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text);
		INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 500) g;`})
	dst, err := pgx.Connect(e.ctx, e.dstDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(e.ctx)
	// Before the stream starts: the sink prepares its sum once.
	if _, err := dst.Exec(e.ctx, `CREATE FUNCTION public.hashtextextended(text, integer) RETURNS bigint
		LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'no sums here'; END$$`); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitLoaded("t")
	if _, err := dst.Exec(e.ctx, `UPDATE t SET a = 'changed' WHERE id = 250`); err != nil {
		t.Fatal(err)
	}
	checks, err := e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "t"}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	bad := badRanges(checks[0])
	if checks[0].Match || len(bad) != 1 || fmt.Sprint(bad[0].DifferingKeys) != "[[250]]" {
		t.Fatalf("verify: match %v, differing %+v; want only key 250", checks[0].Match, bad)
	}
	if by := comparedBy(checks); by[ComparedByChecksums] != 0 {
		t.Errorf("ranges compared: %v, want every one by rows", by)
	}
}
