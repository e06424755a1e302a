package stream

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/testutil"
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
	// Both servers sum each range; ranges the writer touched (and those
	// after them until one is read without a live change) are read row by
	// row: how many depends on timing, so only some sums are asked for.
	// (TestVerifyChecksumsCatchSubtleDamage wants all of a quiet table's.)
	by := comparedBy(checks)
	t.Logf("ranges compared: %v", by)
	if by[ComparedByChecksums] == 0 {
		t.Errorf("ranges compared: %v, want some by the servers' checksums", by)
	}
	dst := e.connectDest()
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
// steady load the stream can follow) until the returned stop is called or
// writerLimit calls are made, on
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
		for i := 0; ctx.Err() == nil && i < writerLimit; i++ {
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
// values swapped, a timestamp a microsecond off, a uuid and an integer
// (both hashed by value, not text) changed, the integer to one whose two
// halves fold to the source's 860000 (hashint8extended alone hashes them
// alike), another to the one whose folded value and high half are the
// source's 250000 and 0 swapped (an XOR of the two halves' hashes is
// symmetric). Each damaged range differs and names its keys; the intact
// ranges are settled by the servers' checksums.
func TestVerifyChecksumsCatchSubtleDamage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text, b text, ts timestamptz, n bigint, u uuid);
		INSERT INTO t SELECT g, 'a' || g, CASE WHEN g % 10 = 0 THEN '' ELSE 'b' || g END,
			timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute', g * 1000, md5(g::text)::uuid
		FROM generate_series(1, 1000) g;`})
	e.start()
	e.waitLoaded("t")
	dst := e.connectDest()
	if _, err := dst.Exec(e.ctx, `
		UPDATE t SET a = CASE id WHEN 150 THEN 'a151' ELSE 'a150' END WHERE id IN (150, 151);
		UPDATE t SET b = NULL WHERE id = 310;
		UPDATE t SET a = 'A520' WHERE id = 520;
		UPDATE t SET a = b, b = a WHERE id = 777;
		UPDATE t SET ts = ts + interval '1 microsecond' WHERE id = 640;
		UPDATE t SET n = 4295827297 WHERE id = 860;
		UPDATE t SET n = 1073741824250000 WHERE id = 250;
		UPDATE t SET u = md5('x')::uuid WHERE id = 920;`); err != nil {
		t.Fatal(err)
	}
	checks, err := e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "t"}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]string{
		"[100]": {{"150"}, {"151"}}, "[300]": {{"310"}}, "[500]": {{"520"}}, "[600]": {{"640"}}, "[700]": {{"777"}},
		"[800]": {{"860"}}, "[900]": {{"920"}}, "[200]": {{"250"}},
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
// (its role may not run the hash function) is compared row by row, and the
// verify still finds a changed value.
func TestVerifyRowsWhenDestinationCannotSum(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text);
		INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 500) g;`})
	dst := e.connectDest()
	// The stream writes as a role that owns the destination database but
	// may not run pg_catalog.hashtextextended there.
	e.cfg.Destination.DSN = roleWithoutHash(t, e, dst, e.dstDSN, "")
	e.start()
	e.waitLoaded("t")
	verifyByRowsFinds250(t, e, dst)
}

// TestVerifyChecksumsAcrossTypes: on a quiet table of many types (an enum,
// a composite the destination holds as text, character(n) with its blanks,
// integers and a uuid hashed by value, timestamps with an infinite one, a
// domain over timestamptz, NULLs) both servers' sums agree, so every range is settled by
// them; and the sums tell apart what the row comparison tells apart: a
// character value whose blanks the destination's wider column adds, and a
// composite of NULL fields against NULL.
func TestVerifyChecksumsAcrossTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 50}", setup: `
		CREATE TYPE mood AS ENUM ('ok', 'sad');
		CREATE TYPE pair AS (a int, b text);
		CREATE DOMAIN happened AS timestamptz;
		CREATE TABLE t (id int PRIMARY KEY, b bool, c char(5), n numeric(10,3), f float8, arr int[], j json, jb jsonb,
			ts timestamptz, by bytea, m mood, p pair, iv interval, s smallint, l bigint, lt timestamp, u uuid, h happened);
		INSERT INTO t SELECT g, g % 2 = 0, CASE WHEN g % 7 = 0 THEN NULL ELSE left('ab', 1 + g % 2) END, g / 7.0, g / 3.0,
			ARRAY[g, NULL], json_build_object('k', g, 's', ' x '), jsonb_build_object('k', g),
			timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute', int4send(g),
			CASE WHEN g % 3 = 0 THEN 'sad'::mood END, CASE WHEN g % 5 = 0 THEN ROW(NULL, NULL)::pair ELSE ROW(g, 'x')::pair END,
			g * interval '90 minutes', CASE WHEN g % 4 <> 0 THEN g - 150 END, g * 10000000000,
			CASE WHEN g % 6 <> 0 THEN timestamp '2024-06-01' + g * interval '1 second' ELSE 'infinity' END,
			CASE WHEN g % 8 <> 0 THEN md5(g::text)::uuid END, now() - g * interval '1 day'
		FROM generate_series(1, 300) g;`})
	e.start()
	e.waitLoaded("t")
	id := []change.TableID{{Schema: "public", Name: "t"}}
	checks, err := e.s.Verify(e.ctx, id, 50)
	if err != nil {
		t.Fatal(err)
	}
	if by := comparedBy(checks); !checks[0].Match || by[ComparedByRows] != 0 {
		t.Fatalf("verify of an intact table: match %v, ranges compared %v; want all by checksums", checks[0].Match, by)
	}
	dst := e.connectDest()
	if _, err := dst.Exec(e.ctx, `ALTER TABLE t ALTER COLUMN c TYPE char(6);
		UPDATE t SET p = NULL WHERE id = 105;`); err != nil {
		t.Fatal(err)
	}
	checks, err = e.s.Verify(e.ctx, id, 50)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range badRanges(checks[0]) {
		keys = append(keys, fmt.Sprint(r.DifferingKeys))
	}
	// Every row with a c value differs (one more blank); 105, whose c is
	// NULL, only by its composite, and it is among the first ten keys in
	// text order of rows 101–150.
	if len(keys) != 6 || !strings.Contains(keys[2], "[105]") {
		t.Fatalf("differing ranges' keys after widening c and nulling a composite: %v", keys)
	}
}

// TestVerifyStopsSummingWhereSumsMislead: a destination database in
// another encoding hashes other bytes for the same text, so every range's
// sums differ though its rows match; after the first such range the verify
// stops summing (and says so) rather than read every range twice.
func TestVerifyStopsSummingWhereSumsMislead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100, verify: false}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text);
		INSERT INTO t SELECT g, 'café ' || g FROM generate_series(1, 1000) g;`})
	admin := e.connectDest()
	latin := admin.Config().Database + "_latin1"
	if _, err := admin.Exec(e.ctx, `CREATE DATABASE `+pgx.Identifier{latin}.Sanitize()+
		` ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`); err != nil {
		t.Fatal(err)
	}
	e.cfg.Destination.DSN = strings.Replace(e.dstDSN, "/"+admin.Config().Database+"?", "/"+latin+"?", 1)
	var logs testutil.LockedBuffer
	e.startLogged(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	e.waitLoaded("t")
	latinConn, err := pgx.Connect(e.ctx, e.cfg.Destination.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer latinConn.Close(e.ctx)
	// The sink writes UTF-8 into it: 'café 1' is six bytes in LATIN1 (seven,
	// "cafÃ© 1", were its bytes taken as LATIN1 characters).
	var n int
	if err := latinConn.QueryRow(e.ctx, `SELECT octet_length(a) FROM t WHERE id = 1`).Scan(&n); err != nil || n != 6 {
		t.Fatalf("'café 1' in the LATIN1 destination: %d bytes, err %v; want 6", n, err)
	}
	checks, err := e.s.Verify(e.ctx, []change.TableID{{Schema: "public", Name: "t"}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if by := comparedBy(checks); !checks[0].Match || by[ComparedByChecksums] != 0 {
		t.Fatalf("verify into a LATIN1 database: match %v, ranges compared %v; want a match, by rows", checks[0].Match, by)
	}
	if n := strings.Count(logs.String(), "verify compares rows from here on"); n != 1 {
		t.Fatalf("%d warnings that the verify stopped summing, want 1; log:\n%s", n, logs.String())
	}
}

// TestVerifyRowsWhenSourceCannotSum: a source whose role may not run the
// hash function is read row by row, and the verify still finds a changed
// value.
func TestVerifyRowsWhenSourceCannotSum(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: "backfill: {mode: automatic, chunk_size: 100, verify: false}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, a text);
		INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 500) g;`})
	// The stream reads (and replicates) as a role that owns the source
	// database and t but may not run pg_catalog.hashtextextended there.
	e.cfg.Source.DSN = roleWithoutHash(t, e, e.src, e.srcDSN, "REPLICATION", "ALTER TABLE t OWNER TO %s")
	e.start()
	e.waitLoaded("t")
	dst := e.connectDest()
	verifyByRowsFinds250(t, e, dst)
}

// roleWithoutHash makes a role (with attrs) that owns conn's database, and
// that the statements extra (%s its name) give more, but may not run
// pg_catalog.hashtextextended there; it returns dsn logging in as it. The
// role goes after the stream has stopped.
func roleWithoutHash(t *testing.T, e *env, conn *pgx.Conn, dsn, attrs string, extra ...string) string {
	t.Helper()
	role := "nosum_" + conn.Config().Database
	db := pgx.Identifier{conn.Config().Database}.Sanitize()
	sql := `CREATE ROLE ` + role + ` LOGIN ` + attrs + `; ALTER DATABASE ` + db + ` OWNER TO ` + role + `;
		REVOKE EXECUTE ON FUNCTION pg_catalog.hashtextextended(text, bigint) FROM PUBLIC`
	for _, x := range extra {
		sql += "; " + fmt.Sprintf(x, role)
	}
	if _, err := conn.Exec(e.ctx, sql); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // registered before the stream's stop: runs after it
		ctx := context.Background()
		if c, err := pgx.Connect(ctx, dsn); err == nil { // conn may be closed by now
			_, _ = c.Exec(ctx, `ALTER DATABASE `+db+` OWNER TO postgres; REASSIGN OWNED BY `+role+` TO postgres; DROP OWNED BY `+role+`; DROP ROLE `+role)
			c.Close(ctx)
		}
	})
	return strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
}

// verifyByRowsFinds250 changes row 250 of t in the destination and checks
// that a verify, every range compared row by row, finds it alone.
func verifyByRowsFinds250(t *testing.T, e *env, dst *pgx.Conn) {
	t.Helper()
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
