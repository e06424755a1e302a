//go:build soak

package daemon

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"

	_ "modernc.org/sqlite" // driver "sqlite", to read the SQLite destination
)

// The soak test is built only with -tags soak (make soak): it runs for
// minutes. docs/soak.md describes it.
//
//	TIDEMARK_SOAK_KILLS  how many times the daemon is SIGKILLed (default 20)
//	TIDEMARK_SOAK_SEED   the seed of every random choice (default: the clock)
//	TIDEMARK_SOAK_RATE   writer statements per second, all tables (default 400)

// soakTable is one source table of the soak, with what the writer does to
// it and how its rows are compared.
type soakTable struct {
	name  string
	keys  []string // key columns, in key order
	cols  []string // every column, in table order
	rows  int      // rows seeded
	setup string   // DDL and seed, one string
	// order is the ORDER BY of the comparison on PostgreSQL (text keys
	// compared bytewise, as SQLite does).
	order string
	// op picks the writer's next statements (several are run in one
	// transaction).
	op func(r *rand.Rand) []soakStmt
}

type soakStmt struct {
	sql  string
	args []any
}

func stmt(sql string, args ...any) soakStmt { return soakStmt{sql, args} }

// textKeyPrefixes make the text keys' byte order differ from their numbers'
// order, with multi-byte UTF-8 among them.
var textKeyPrefixes = []string{"alpha", "Beta", "gamma", "épée", "ζήτα", "日本", "zulu", "_x"}

func textKey(i int64) string { return fmt.Sprintf("%s/%07d", textKeyPrefixes[i%8], i) }

// bigBody is a value stored out of line (the column's storage is EXTERNAL:
// no compression, so anything over ~2 kB is TOASTed).
func bigBody(r *rand.Rand) string {
	b := make([]byte, 3000+r.IntN(9000))
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return string(b)
}

func soakTables() []soakTable {
	const nBig, nText, nDoc = 50_000, 30_000, 20_000
	return []soakTable{
		{
			name: "soak_big", keys: []string{"id"}, cols: []string{"id", "v", "note", "at"}, rows: nBig, order: "id",
			setup: fmt.Sprintf(`CREATE TABLE soak_big (id bigint PRIMARY KEY, v int NOT NULL, note text, at timestamp);
				INSERT INTO soak_big SELECT g, g %% 1000, 'row ' || g, timestamp '2025-01-01' + g * interval '1 second'
				FROM generate_series(1, %d) g`, nBig),
			op: func(r *rand.Rand) []soakStmt {
				id := 1 + r.Int64N(2*nBig)
				switch x := r.IntN(100); {
				case x < 30:
					return []soakStmt{stmt(`UPDATE soak_big SET v = v + 1, at = localtimestamp WHERE id = $1`, id)}
				case x < 45:
					return []soakStmt{stmt(`INSERT INTO soak_big VALUES ($1, 0, 'ins', localtimestamp) ON CONFLICT (id) DO UPDATE SET v = 0, note = 'upserted'`, id)}
				case x < 60:
					return []soakStmt{stmt(`DELETE FROM soak_big WHERE id = $1`, id)}
				case x < 75: // a key move anywhere in the key space
					return []soakStmt{stmt(`UPDATE soak_big SET id = $2 WHERE id = $1`, id, 1+r.Int64N(2*nBig))}
				case x < 82:
					return []soakStmt{stmt(`UPDATE soak_big SET v = v - 1 WHERE id BETWEEN $1 AND $1 + 30`, id)}
				case x < 86: // many key moves in one statement, to the front of the table
					return []soakStmt{stmt(`UPDATE soak_big SET id = -id WHERE id BETWEEN $1 AND $1 + 10`, id)}
				case x < 90: // and back
					return []soakStmt{stmt(`UPDATE soak_big SET id = -id WHERE id BETWEEN -($1::bigint + 10) AND -$1::bigint`, id)}
				default:
					return []soakStmt{
						stmt(`INSERT INTO soak_big VALUES ($1, 1, 'tx', localtimestamp) ON CONFLICT (id) DO NOTHING`, id),
						stmt(`UPDATE soak_big SET note = 'tx ' || v WHERE id = $1`, 1+r.Int64N(2*nBig)),
						stmt(`DELETE FROM soak_big WHERE id = $1`, 1+r.Int64N(2*nBig)),
					}
				}
			},
		},
		{
			name: "soak_comp", keys: []string{"tenant", "seq"}, cols: []string{"tenant", "seq", "qty", "price", "attrs"}, rows: 200 * 200, order: "tenant, seq",
			setup: `CREATE TABLE soak_comp (tenant int, seq bigint, qty int, price numeric(12,2), attrs jsonb, PRIMARY KEY (tenant, seq));
				INSERT INTO soak_comp SELECT t, s, (t * s) % 100, ((t * s) % 10000) / 100.0, jsonb_build_object('t', t, 's', s)
				FROM generate_series(1, 200) t, generate_series(1, 200) s`,
			op: func(r *rand.Rand) []soakStmt {
				tn, sq := 1+r.IntN(300), 1+r.IntN(250)
				switch x := r.IntN(100); {
				case x < 30:
					return []soakStmt{stmt(`UPDATE soak_comp SET qty = qty + 1, price = price + 0.01 WHERE tenant = $1 AND seq = $2`, tn, sq)}
				case x < 38:
					return []soakStmt{stmt(`UPDATE soak_comp SET attrs = jsonb_set(coalesce(attrs, '{}'), '{n}', to_jsonb($3::int)) WHERE tenant = $1 AND seq = $2`, tn, sq, r.IntN(1000))}
				case x < 53:
					return []soakStmt{stmt(`INSERT INTO soak_comp VALUES ($1, $2, 1, 9.99, '{"new": true}') ON CONFLICT (tenant, seq) DO UPDATE SET qty = 0, attrs = NULL`, tn, sq)}
				case x < 68:
					return []soakStmt{stmt(`DELETE FROM soak_comp WHERE tenant = $1 AND seq = $2`, tn, sq)}
				case x < 85: // a key move, usually to another tenant: far in key order
					return []soakStmt{stmt(`UPDATE soak_comp SET tenant = $3, seq = $4 WHERE tenant = $1 AND seq = $2`, tn, sq, 1+r.IntN(300), 1+r.IntN(250))}
				case x < 88: // one tenant at once: up to 250 rows in one transaction
					return []soakStmt{stmt(`UPDATE soak_comp SET qty = qty + 2 WHERE tenant = $1`, tn)}
				default:
					return []soakStmt{
						stmt(`DELETE FROM soak_comp WHERE tenant = $1 AND seq = $2`, tn, sq),
						stmt(`INSERT INTO soak_comp VALUES ($1, $2, 7, 0.07, '[]') ON CONFLICT (tenant, seq) DO NOTHING`, 1+r.IntN(300), 1+r.IntN(250)),
						stmt(`UPDATE soak_comp SET price = price * 2 WHERE tenant = $1 AND seq = $2`, 1+r.IntN(300), 1+r.IntN(250)),
					}
				}
			},
		},
		{
			name: "soak_text", keys: []string{"code"}, cols: []string{"code", "label", "n"}, rows: nText, order: `code COLLATE "C"`,
			setup: fmt.Sprintf(`CREATE TABLE soak_text (code text PRIMARY KEY, label text, n int);
				INSERT INTO soak_text SELECT (ARRAY['%s'])[1 + g %% 8] || '/' || lpad(g::text, 7, '0'), 'label ' || g, g
				FROM generate_series(1, %d) g`, strings.Join(textKeyPrefixes, "', '"), nText),
			op: func(r *rand.Rand) []soakStmt {
				i := 1 + r.Int64N(2*nText)
				switch x := r.IntN(100); {
				case x < 30:
					return []soakStmt{stmt(`UPDATE soak_text SET n = n + 1, label = 'upd ' || n WHERE code = $1`, textKey(i))}
				case x < 45:
					return []soakStmt{stmt(`INSERT INTO soak_text VALUES ($1, 'ins', 0) ON CONFLICT (code) DO UPDATE SET n = -1`, textKey(i))}
				case x < 60:
					return []soakStmt{stmt(`DELETE FROM soak_text WHERE code = $1`, textKey(i))}
				case x < 80: // a key move: to another prefix, far in byte order
					return []soakStmt{stmt(`UPDATE soak_text SET code = $2 WHERE code = $1`, textKey(i), textKey(1+r.Int64N(2*nText)))}
				case x < 85: // ~12 rows of one prefix
					return []soakStmt{stmt(`UPDATE soak_text SET n = n * 2 WHERE code LIKE $1`, textKey(i)[:len(textKey(i))-2]+"%")}
				default:
					return []soakStmt{
						stmt(`INSERT INTO soak_text VALUES ($1, 'tx', 1) ON CONFLICT (code) DO NOTHING`, textKey(i)),
						stmt(`UPDATE soak_text SET code = $2 WHERE code = $1`, textKey(1+r.Int64N(2*nText)), textKey(1+r.Int64N(2*nText))),
					}
				}
			},
		},
		{
			name: "soak_doc", keys: []string{"id"}, cols: []string{"id", "rev", "title", "body"}, rows: nDoc, order: "id",
			setup: fmt.Sprintf(`CREATE TABLE soak_doc (id bigint PRIMARY KEY, rev int NOT NULL, title text, body text);
				ALTER TABLE soak_doc ALTER COLUMN body SET STORAGE EXTERNAL;
				INSERT INTO soak_doc SELECT g, 0, 'doc ' || g,
					CASE WHEN g %% 4 = 0 THEN repeat(md5(g::text), 100 + g %% 250) WHEN g %% 17 = 0 THEN NULL ELSE 'short ' || g END
				FROM generate_series(1, %d) g`, nDoc),
			op: func(r *rand.Rand) []soakStmt {
				id := 1 + r.Int64N(2*nDoc)
				body := func() any {
					switch r.IntN(10) {
					case 0:
						return nil
					case 1, 2, 3, 4:
						return "small " + strconv.Itoa(r.IntN(1e6))
					}
					return bigBody(r)
				}
				switch x := r.IntN(100); {
				case x < 40: // leaves a TOASTed body unchanged: pgoutput sends no value for it
					return []soakStmt{stmt(`UPDATE soak_doc SET rev = rev + 1 WHERE id = $1`, id)}
				case x < 45:
					return []soakStmt{stmt(`UPDATE soak_doc SET title = 'retitled ' || rev WHERE id BETWEEN $1 AND $1 + 20`, id)}
				case x < 55:
					return []soakStmt{stmt(`UPDATE soak_doc SET body = $2, rev = rev + 1 WHERE id = $1`, id, body())}
				case x < 68:
					return []soakStmt{stmt(`INSERT INTO soak_doc VALUES ($1, 0, 'new', $2) ON CONFLICT (id) DO UPDATE SET rev = 0, body = excluded.body`, id, body())}
				case x < 82:
					return []soakStmt{stmt(`DELETE FROM soak_doc WHERE id = $1`, id)}
				case x < 94:
					// A key move that also rewrites the body. A key move that
					// leaves a TOASTed value unchanged cannot be carried by
					// the stream when the destination lacks the old row (a
					// row not yet backfilled moving behind the cursor): a
					// known limit (docs/backfill.md), not what this checks.
					return []soakStmt{stmt(`UPDATE soak_doc SET id = $2, body = $3 WHERE id = $1`, id, 1+r.Int64N(2*nDoc), body())}
				default:
					return []soakStmt{
						stmt(`UPDATE soak_doc SET rev = rev + 10 WHERE id = $1`, id),
						stmt(`INSERT INTO soak_doc VALUES ($1, 3, 'tx', $2) ON CONFLICT (id) DO NOTHING`, 1+r.Int64N(2*nDoc), body()),
						stmt(`DELETE FROM soak_doc WHERE id = $1`, 1+r.Int64N(2*nDoc)),
					}
				}
			},
		},
	}
}

// rowExpr is one row as text: every column's text form (NULL as \N),
// joined by '|'. cast turns a column into text on one side.
func (tb soakTable) rowExpr(cast func(string) string) string {
	parts := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		parts[i] = `coalesce(` + cast(c) + `, '\N')`
	}
	return strings.Join(parts, ` || '|' || `)
}

func pgText(c string) string     { return c + "::text" }
func sqliteText(c string) string { return "CAST(" + c + " AS TEXT)" }

// The two streams of the soak: the same source into PostgreSQL and SQLite.
const (
	soakPG   = "soakpg"
	soakLite = "soaklite"
)

var soakStreams = []string{soakPG, soakLite}

type soakKillMode string

const (
	killDelay     soakKillMode = "random delay"       // 50 ms to 3 s after the restart
	killMidFill   soakKillMode = "mid-backfill"       // an active backfill read 1 to 8 chunks in this life
	killCompleted soakKillMode = "just completed"     // a backfill became completed (loaded or not) in this life
	killAhead     soakKillMode = "dest ahead of slot" // the destination committed in this life a position the source was not told
)

// soak is the state of one TestSoak run.
type soak struct {
	t        *testing.T
	ctx      context.Context
	c        *crashEnv
	st       *store.Store
	rng      *rand.Rand // kill moments
	pick     *rand.Rand // re-initiated objects
	tables   []soakTable
	chunk    map[string]int // chunk_size per stream
	src      *pgx.Conn
	dst      *pgx.Conn
	lite     *sql.DB
	litePath string
	logs     *childLog
	cleanup  bool

	// The current daemon's life.
	lifeStart   time.Time
	recovered   time.Duration // 0 until /readyz said ready
	reinitiated []string
	busyCheck   time.Time
	final       bool // no more re-initiations
	base        map[int64]store.Backfill

	// Totals.
	recoveries  []time.Duration
	killsDuring map[int64]int // backfill id: kills while it was active
}

func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: not an integer", name, v)
	}
	return n
}

// TestSoak SIGKILLs the daemon TIDEMARK_SOAK_KILLS times at random moments
// while four tables of different shapes are written to and backfilled into
// a PostgreSQL and a SQLite destination, restarting it each time; then it
// checks that every backfill completed and both destinations equal the
// source row for row.
func TestSoak(t *testing.T) {
	began := time.Now()
	ctx := context.Background()
	kills := int(envInt(t, "TIDEMARK_SOAK_KILLS", 20))
	seed := uint64(envInt(t, "TIDEMARK_SOAK_SEED", time.Now().UnixNano()))
	rate := envInt(t, "TIDEMARK_SOAK_RATE", 400)
	t.Logf("soak: seed %d (reproduce the choices with TIDEMARK_SOAK_SEED=%d), %d kills, %d statements/s", seed, seed, kills, rate)

	srcDSN, err := server.CreateDatabase(ctx, "soak_src")
	if err != nil {
		t.Fatal(err)
	}
	dstDSN, err := server.CreateDatabase(ctx, "soak_dst")
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, 0x50a4)), pick: rand.New(rand.NewPCG(seed, 0x91c7)), tables: soakTables(),
		chunk: map[string]int{soakPG: 2000, soakLite: 1000}, logs: &childLog{counts: map[string]int{}},
		killsDuring: map[int64]int{}}
	if s.src, err = pgx.Connect(ctx, srcDSN); err != nil {
		t.Fatal(err)
	}
	defer s.src.Close(ctx)
	if s.dst, err = pgx.Connect(ctx, dstDSN); err != nil {
		t.Fatal(err)
	}
	defer s.dst.Close(ctx)
	var names []string
	for _, tb := range s.tables {
		if _, err := s.src.Exec(ctx, tb.setup); err != nil {
			t.Fatalf("create %s: %v", tb.name, err)
		}
		names = append(names, `"public.`+tb.name+`"`)
	}
	if _, err := s.src.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfgPath, metaPath, litePath := filepath.Join(dir, "tidemark.yaml"), filepath.Join(dir, "meta.db"), filepath.Join(dir, "replica.db")
	addr := freeAddr(t)
	include := "[" + strings.Join(names, ", ") + "]"
	// Both streams read the same source. The PostgreSQL one confirms its
	// position to the source rarely (status_interval), which leaves room to
	// kill between a destination commit and its confirmation. The SQLite
	// one commits small batches: under -race its sink writes a few thousand
	// rows a second, and with the default 10,000-change batches a daemon
	// killed every second or two would commit almost nothing.
	err = os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "%s"}
streams:
  - name: %s
    source: {type: postgres, dsn: "%s", status_interval: 5s}
    destination: {type: postgres, dsn: "%s"}
    include: %s
    backfill: {mode: manual, max_concurrent: 2, chunk_size: %d, rows_per_second: 20000}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
  - name: %s
    source: {type: postgres, dsn: "%s", status_interval: 1s}
    destination: {type: sqlite, path: "%s"}
    include: %s
    backfill: {mode: manual, max_concurrent: 2, chunk_size: %d, rows_per_second: 20000}
    batch: {max_changes: 2000, max_delay: 50ms}
    retry: {initial: 20ms, max: 500ms}
`, metaPath, addr, soakPG, srcDSN, dstDSN, include, s.chunk[soakPG], soakLite, srcDSN, litePath, include, s.chunk[soakLite])), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s.c = &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, srcDSN: srcDSN, dstDSN: dstDSN, addr: addr}
	s.litePath = litePath
	s.start()
	if s.st, err = store.Open(ctx, "sqlite://"+metaPath); err != nil {
		t.Fatal(err)
	}
	defer s.st.Close()
	s.until(time.Now().Add(3*time.Minute), "the first start", func() bool { return s.recovered > 0 })

	stopWriters := s.startWriters(srcDSN, seed, rate)
	for _, name := range soakStreams {
		for _, tb := range s.tables {
			s.initiate(name, tb.name)
		}
	}
	s.base = s.backfills()
	prevDest := s.committed()

	modes := map[soakKillMode]int{}
	during, progressing := 0, 0
	for k := 1; k <= kills; k++ {
		mode, what, met := s.killMoment()
		s.c.kill()
		at := time.Since(s.lifeStart)
		modes[mode]++
		after, dest := s.backfills(), s.committed()
		active, busy, moved := s.progress(after, dest)
		if busy {
			during++
		}
		if moved {
			progressing++
		}
		rec := "not recovered before the kill"
		if s.recovered > 0 {
			rec = "recovered in " + s.recovered.Round(time.Millisecond).String()
		}
		if !met {
			what += " (not seen in time: killed anyway)"
		}
		reinit := ""
		if len(s.reinitiated) > 0 {
			reinit = "; re-initiated " + strings.Join(s.reinitiated, ", ")
		}
		var advanced []string
		for _, name := range soakStreams {
			advanced = append(advanced, fmt.Sprintf("%s +%d kB", name, (dest[name].pos-prevDest[name].pos)/1024))
		}
		t.Logf("kill %d/%d: %s, %s into the life (%s%s); destination positions in this life: %s; active at the kill: %s",
			k, kills, what, at.Round(time.Millisecond), rec, reinit, strings.Join(advanced, ", "), orNone(active))
		s.base, prevDest = after, dest
		s.start()
	}

	s.until(time.Now().Add(3*time.Minute), "recovery after the last kill", func() bool { return s.recovered > 0 })
	s.final = true
	stats := stopWriters()
	convStart := time.Now()
	t.Logf("writer stopped: %s; waiting for every backfill to complete and load", stats)
	if !s.until(time.Now().Add(10*time.Minute), "", s.runsLoaded) {
		t.Errorf("the backfills did not all complete and load within 10 minutes of the writer stopping: %s", strings.Join(s.objectStates(), "; "))
	}
	loadedIn := time.Since(convStart)
	// An object's status and loaded flag follow its latest run: give the
	// daemon a moment to record them, then they must agree.
	var odd []string
	if !s.until(time.Now().Add(30*time.Second), "", func() bool { odd = s.disagreeing(); return len(odd) == 0 }) {
		t.Errorf("objects disagree with their latest backfill run 30 s after every run loaded: %s", strings.Join(odd, "; "))
	}
	var diff, firstDiff string
	rounds := 0
	ok := s.until(time.Now().Add(5*time.Minute), "", func() bool {
		diff = s.compare()
		if rounds++; rounds == 1 {
			firstDiff = diff
		}
		return diff == ""
	})
	convergence := time.Since(convStart)
	if rounds > 1 {
		t.Logf("destinations equal to the source after %d comparisons (the first, after every backfill loaded: %s)", rounds, firstDiff)
	}
	if !ok {
		t.Errorf("the destinations did not converge to the source within 5 minutes of the backfills loading: %s", diff)
		for _, tb := range s.tables {
			s.explain(tb)
		}
	}
	s.c.stop()

	// Every backfill ever initiated: none may fail or stop, none may have
	// committed more than its table (a start over instead of a resume).
	recs, err := s.st.ListBackfills(ctx, store.BackfillFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	var sizeList []string
	for _, tb := range s.tables {
		var n int64
		if err := s.src.QueryRow(ctx, `SELECT count(*) FROM `+tb.name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		sizes[tb.name] = n
		sizeList = append(sizeList, fmt.Sprintf("%s %d", tb.name, n))
	}
	var read, ideal int64
	var unloaded []string
	worst, worstID := 0.0, int64(0)
	slices.Reverse(recs) // oldest first
	for _, b := range recs {
		took := "-"
		if b.StartedAt != nil && b.LoadedAt != nil {
			took = b.LoadedAt.Sub(*b.StartedAt).Round(time.Millisecond).String()
		}
		t.Logf("backfill #%d %s/%s: %s, %d rows read, %d written, %d removed, %d chunks, %d window conflicts, %d retries, %d kills while active, started to loaded %s",
			b.ID, b.Stream, b.Table, b.Status, b.RowsRead, b.RowsWritten, b.RowsRemoved, b.Chunks, b.WindowConflicts, b.Retries, s.killsDuring[b.ID], took)
		read += b.RowsRead
		ideal += sizes[b.Table]
		switch {
		case b.Status == store.StatusFailed || b.Status == store.StatusStopped:
			t.Errorf("backfill %d (%s/%s) is %s: %s", b.ID, b.Stream, b.Table, b.Status, b.Error)
		case b.Status != store.StatusCompleted || b.LoadedAt == nil:
			unloaded = append(unloaded, fmt.Sprintf("#%d %s/%s %s loaded=%t", b.ID, b.Stream, b.Table, b.Status, b.LoadedAt != nil))
		}
		if r := float64(b.RowsRead) / float64(sizes[b.Table]); r > worst {
			worst, worstID = r, b.ID
		}
		// Rows written count committed chunk rows, and a chunk commits
		// with its cursor: a backfill that resumes from its cursor after
		// each kill commits every key range once. (Rows read also count
		// chunks merged but lost to a kill before their commit.)
		if limit := int64(1.1*float64(max(sizes[b.Table], int64(tableRows(s.tables, b.Table))))) + 2*int64(s.chunk[b.Stream]); b.RowsWritten > limit {
			t.Errorf("backfill %d (%s/%s) committed %d rows for a %d-row table over %d kills (limit %d): it started over instead of resuming",
				b.ID, b.Stream, b.Table, b.RowsWritten, sizes[b.Table], s.killsDuring[b.ID], limit)
		}
	}
	if len(unloaded) > 0 {
		// Superseded runs (a newer backfill of the object exists) that were
		// never settled: not wrong data, but worth knowing.
		t.Logf("older backfills not completed and loaded at the end: %s", strings.Join(unloaded, ", "))
	}
	if race := s.logs.races(); race > 0 {
		t.Errorf("the daemon reported %d data race(s) or panics on its stderr", race)
	}
	sort.Slice(s.recoveries, func(i, j int) bool { return s.recoveries[i] < s.recoveries[j] })
	var recMedian, recMax time.Duration
	if n := len(s.recoveries); n > 0 {
		recMedian, recMax = s.recoveries[n/2], s.recoveries[n-1]
	}
	t.Logf("daemon log lines by level and message: %s", s.logs.summary())
	outcome := "converged"
	if !ok {
		outcome = "DID NOT CONVERGE"
	}
	t.Logf("SOAK SUMMARY: seed %d; %d kills (%s), %d during an active backfill (%d with a backfill that progressed in that life); "+
		"%d backfills read %d rows against %d for one pass each over the final tables (%.2f×; worst run #%d %.2f×); tables: %s; "+
		"writer: %s; recovery median %s, max %s; backfills loaded %s and destinations %s %s after the writer stopped; total %s",
		seed, kills, modeList(modes), during, progressing,
		len(recs), read, ideal, float64(read)/float64(max(ideal, 1)), worstID, worst, strings.Join(sizeList, ", "),
		stats, recMedian.Round(time.Millisecond), recMax.Round(time.Millisecond),
		loadedIn.Round(time.Millisecond), outcome, convergence.Round(time.Millisecond), time.Since(began).Round(time.Second))
}

func tableRows(tables []soakTable, name string) int {
	for _, tb := range tables {
		if tb.name == name {
			return tb.rows
		}
	}
	return 0
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func modeList(m map[soakKillMode]int) string {
	var out []string
	for _, k := range []soakKillMode{killDelay, killMidFill, killCompleted, killAhead} {
		if m[k] > 0 {
			out = append(out, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(out, ", ")
}

// start runs a new daemon process, its stderr copied to the test's and
// scanned for races and panics.
func (s *soak) start() {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+s.c.cfgPath)
	cmd.Stderr = io.MultiWriter(os.Stderr, s.logs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.c.cmd, s.c.done = cmd, done
	if !s.cleanup {
		s.cleanup = true
		s.t.Cleanup(func() { s.c.kill() })
	}
	s.lifeStart, s.recovered, s.reinitiated = time.Now(), 0, nil
}

// until polls cond until it holds or the deadline passes. Meanwhile it
// notices the daemon's recovery (its /readyz answers ready) and, until the
// final phase, re-initiates backfills then and whenever none is left. With
// a non-empty what, not meeting the deadline fails the test; the daemon
// exiting by itself always does.
func (s *soak) until(deadline time.Time, what string, cond func() bool) bool {
	s.t.Helper()
	for {
		if s.recovered == 0 && s.ready() {
			s.recovered = time.Since(s.lifeStart)
			s.recoveries = append(s.recoveries, s.recovered)
			if !s.final && s.base != nil {
				s.reinitiate(true)
				s.busyCheck = time.Now()
			}
		} else if s.recovered > 0 && !s.final && s.base != nil && time.Since(s.busyCheck) >= 100*time.Millisecond {
			s.reinitiate(false)
			s.busyCheck = time.Now()
		}
		if cond != nil && cond() {
			return true
		}
		if time.Now().After(deadline) {
			if what != "" {
				s.t.Fatalf("timed out waiting for %s", what)
			}
			return false
		}
		select {
		case <-s.c.done:
			s.t.Fatalf("the daemon exited by itself (%s into its life)", time.Since(s.lifeStart).Round(time.Millisecond))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

var readyClient = &http.Client{Timeout: time.Second}

func (s *soak) ready() bool {
	resp, err := readyClient.Get("http://" + s.c.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// killMoment waits for the moment of the next kill, chosen at random: a
// delay, or an observed state. It says what the moment was and whether the
// state was observed (a state not observed within 30 s is given up on).
func (s *soak) killMoment() (mode soakKillMode, what string, met bool) {
	deadline := s.lifeStart.Add(30 * time.Second)
	switch x := s.rng.IntN(100); {
	case x < 40:
		d := 50*time.Millisecond + time.Duration(s.rng.Int64N(int64(2950*time.Millisecond)))
		s.until(s.lifeStart.Add(d), "", nil)
		return killDelay, fmt.Sprintf("%s: %s", killDelay, d.Round(time.Millisecond)), true
	case x < 75:
		chunks := 1 + s.rng.Int64N(8)
		var hit string
		met = s.until(deadline, "", func() bool {
			for _, b := range s.backfills() {
				if b.Status == store.StatusActive && b.RowsRead-s.base[b.ID].RowsRead >= chunks*int64(s.chunk[b.Stream]) {
					hit = fmt.Sprintf(" (#%d %s/%s at %d rows)", b.ID, b.Stream, b.Table, b.RowsRead)
					return true
				}
			}
			return false
		})
		return killMidFill, fmt.Sprintf("%s: an active backfill read %d chunk(s) in this life%s", killMidFill, chunks, hit), met
	case x < 88:
		var hit string
		met = s.until(deadline, "", func() bool {
			for _, b := range s.backfills() {
				if b.Status == store.StatusCompleted && s.base[b.ID].Status != store.StatusCompleted {
					hit = fmt.Sprintf(" (#%d %s/%s, loaded=%t)", b.ID, b.Stream, b.Table, b.LoadedAt != nil)
					return true
				}
			}
			return false
		})
		return killCompleted, string(killCompleted) + hit, met
	default:
		since := s.destPosition()
		met = s.until(deadline, "", func() bool { return s.recovered > 0 && s.destAhead(since) })
		return killAhead, string(killAhead) + " (stream " + soakPG + ")", met
	}
}

// backfills are every backfill run by id.
func (s *soak) backfills() map[int64]store.Backfill {
	recs, err := s.st.ListBackfills(s.ctx, store.BackfillFilter{Limit: 100000})
	if err != nil {
		s.t.Logf("list backfills: %v", err)
		return nil
	}
	out := make(map[int64]store.Backfill, len(recs))
	for _, b := range recs {
		out[b.ID] = b
	}
	return out
}

// progress describes the backfills active (or completed and not loaded) at
// a kill, and records the kill against them; busy says one was active, and
// moved that one read rows in the life that ended.
func (s *soak) progress(after map[int64]store.Backfill, dest map[string]committed) (active []string, busy, moved bool) {
	ids := make([]int64, 0, len(after))
	for id := range after {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := after[id]
		if b.Status != store.StatusActive && !(b.Status == store.StatusCompleted && b.LoadedAt == nil) {
			continue
		}
		s.killsDuring[id]++
		grew := b.RowsRead - s.base[id].RowsRead
		busy = busy || b.Status == store.StatusActive
		moved = moved || grew > 0
		state := b.Status
		if b.Status == store.StatusCompleted {
			state = "completed, not loaded"
		}
		cursor := "no cursor"
		if n, ok := dest[b.Stream].rows[id]; ok {
			cursor = fmt.Sprintf("cursor at %d rows", n)
		}
		active = append(active, fmt.Sprintf("#%d %s/%s %s: read %d (+%d in this life) of ~%d rows, %s",
			id, b.Stream, b.Table, state, b.RowsRead, grew, tableRows(s.tables, b.Table), cursor))
	}
	return active, busy, moved
}

// reinitiate starts backfills again of some objects whose backfill
// completed and loaded, so that the next kills land during backfills; at least one
// backfill is pending or active afterwards. Once the daemon recovered it
// picks a random part of them; later in the life it acts only when no
// backfill is left.
func (s *soak) reinitiate(recovered bool) {
	var done, busy []store.Object
	for _, name := range soakStreams {
		objs, err := s.st.ListObjects(s.ctx, name)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, o := range objs {
			switch {
			case o.Status == store.StatusCompleted && o.Loaded:
				done = append(done, o)
			case o.Status == store.StatusCompleted:
				// Completed but its last chunk not committed: after a
				// kill the restarted daemon makes such a run active
				// again, to read that chunk again.
				busy = append(busy, o)
			case o.Status == store.StatusPending || o.Status == store.StatusActive:
				busy = append(busy, o)
			}
		}
	}
	if !recovered && len(busy) > 0 {
		return
	}
	s.pick.Shuffle(len(done), func(i, j int) { done[i], done[j] = done[j], done[i] })
	for i, o := range done {
		if (recovered && s.pick.IntN(100) < 35) || (len(busy) == 0 && i == len(done)-1) {
			s.initiate(o.Stream, o.Table)
			s.reinitiated = append(s.reinitiated, o.Stream+"/"+o.Table)
			busy = append(busy, o)
		}
	}
}

// initiate starts a backfill through the API, as a user would.
func (s *soak) initiate(stream, table string) {
	s.t.Helper()
	body := strings.NewReader(`{"objects": ["public.` + table + `"]}`)
	resp, err := http.Post("http://"+s.c.addr+"/api/v1/streams/"+stream+"/backfills", "application/json", body)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		s.t.Errorf("initiate %s/%s: HTTP %d: %s", stream, table, resp.StatusCode, msg)
	}
}

// destPosition is the position the PostgreSQL destination committed.
func (s *soak) destPosition() int64 {
	var dest int64
	if err := s.dst.QueryRow(s.ctx, `SELECT position FROM "_tidemark"."checkpoint" WHERE stream = $1`, soakPG).Scan(&dest); err != nil {
		return 0
	}
	return dest
}

// destAhead says whether the PostgreSQL destination committed a position
// past since and past the one its replication slot confirmed.
func (s *soak) destAhead(since int64) bool {
	dest := s.destPosition()
	if dest <= since {
		return false
	}
	var confirmed string
	if err := s.src.QueryRow(s.ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, "tidemark_"+soakPG).Scan(&confirmed); err != nil {
		return false
	}
	lsn, err := change.ParseLSN(confirmed)
	return err == nil && change.LSN(dest) > lsn
}

// runsLoaded says whether the latest backfill run of every object of both
// streams is completed and loaded.
func (s *soak) runsLoaded() bool {
	runs := s.backfills()
	for _, name := range soakStreams {
		objs, err := s.st.ListObjects(s.ctx, name)
		if err != nil || len(objs) != len(s.tables) {
			return false
		}
		for _, o := range objs {
			b, ok := runs[o.BackfillID]
			if !ok || b.Status != store.StatusCompleted || b.LoadedAt == nil {
				return false
			}
		}
	}
	return true
}

// disagreeing lists the objects whose status or loaded flag differ from
// their latest run's.
func (s *soak) disagreeing() []string {
	runs := s.backfills()
	var out []string
	for _, name := range soakStreams {
		objs, _ := s.st.ListObjects(s.ctx, name)
		for _, o := range objs {
			b := runs[o.BackfillID]
			if o.Status != b.Status || o.Loaded != (b.LoadedAt != nil) {
				out = append(out, fmt.Sprintf("%s/%s is %s with loaded=%t, its backfill #%d is %s with loaded_at %v",
					name, o.Table, o.Status, o.Loaded, o.BackfillID, b.Status, b.LoadedAt))
			}
		}
	}
	return out
}

// objectStates describes every object and its latest run.
func (s *soak) objectStates() []string {
	runs := s.backfills()
	var out []string
	for _, name := range soakStreams {
		objs, _ := s.st.ListObjects(s.ctx, name)
		for _, o := range objs {
			b := runs[o.BackfillID]
			out = append(out, fmt.Sprintf("%s/%s %s loaded=%t (backfill #%d %s, loaded_at %v)", name, o.Table, o.Status, o.Loaded, o.BackfillID, b.Status, b.LoadedAt))
		}
	}
	return out
}

// compare checksums every table on the source and both destinations; it
// returns "" when all are equal, else the first difference.
func (s *soak) compare() string {
	for _, tb := range s.tables {
		want, err := s.pgDigest(s.src, tb)
		if err != nil {
			return "source " + tb.name + ": " + err.Error()
		}
		if got, err := s.pgDigest(s.dst, tb); err != nil || got != want {
			return fmt.Sprintf("%s: PostgreSQL destination %s (%v), source %s", tb.name, got, err, want)
		}
		if got, err := s.sqliteDigest(tb); err != nil || got != want {
			return fmt.Sprintf("%s: SQLite destination %s (%v), source %s", tb.name, got, err, want)
		}
	}
	return ""
}

// pgDigest is count:md5 of the table's rows as text, in key order, joined
// by newlines: an ordered checksum computed by the server.
func (s *soak) pgDigest(conn *pgx.Conn, tb soakTable) (string, error) {
	var n int64
	var sum string
	err := conn.QueryRow(s.ctx, `SELECT count(*), md5(coalesce(string_agg(`+tb.rowExpr(pgText)+`, E'\n' ORDER BY `+tb.order+`), ''))
		FROM public.`+tb.name).Scan(&n, &sum)
	return fmt.Sprintf("%d:%s", n, sum), err
}

// liteDB opens the SQLite destination for reading, once.
func (s *soak) liteDB() (*sql.DB, error) {
	if s.lite == nil {
		db, err := sql.Open("sqlite", s.litePath+"?_busy_timeout=10000")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		s.lite = db
		s.t.Cleanup(func() { db.Close() })
	}
	return s.lite, nil
}

// committed is what a destination committed: its position and, by
// backfill id, the rows its cursor says were loaded.
type committed struct {
	pos  int64
	rows map[int64]int64
}

// committed reads both destinations' checkpoints (at a kill the daemon is
// dead: they are what it left).
func (s *soak) committed() map[string]committed {
	pg := committed{rows: map[int64]int64{}}
	_ = s.dst.QueryRow(s.ctx, `SELECT position FROM "_tidemark"."checkpoint" WHERE stream = $1`, soakPG).Scan(&pg.pos)
	if rows, err := s.dst.Query(s.ctx, `SELECT backfill_id, rows FROM "_tidemark"."cursor" WHERE stream = $1`, soakPG); err == nil {
		for rows.Next() {
			var id, n int64
			if rows.Scan(&id, &n) == nil {
				pg.rows[id] = n
			}
		}
		rows.Close()
	}
	lc := committed{rows: map[int64]int64{}}
	if lite, err := s.liteDB(); err == nil {
		_ = lite.QueryRowContext(s.ctx, `SELECT position FROM "_tidemark_checkpoint" WHERE stream = ?`, soakLite).Scan(&lc.pos)
		if rows, err := lite.QueryContext(s.ctx, `SELECT backfill_id, rows FROM "_tidemark_cursor" WHERE stream = ?`, soakLite); err == nil {
			for rows.Next() {
				var id, n int64
				if rows.Scan(&id, &n) == nil {
					lc.rows[id] = n
				}
			}
			rows.Close()
		}
	}
	return map[string]committed{soakPG: pg, soakLite: lc}
}

// sqliteDigest is the same checksum of the SQLite destination's table: the
// same text rows in the same order, hashed as they are read.
func (s *soak) sqliteDigest(tb soakTable) (string, error) {
	lite, err := s.liteDB()
	if err != nil {
		return "", err
	}
	rows, err := lite.QueryContext(s.ctx, `SELECT `+tb.rowExpr(sqliteText)+` FROM "`+tb.name+`" ORDER BY `+strings.Join(tb.keys, ", "))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	h := md5.New()
	var n int64
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			return "", err
		}
		if n > 0 {
			h.Write([]byte{'\n'})
		}
		io.WriteString(h, row)
		n++
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%s", n, hex.EncodeToString(h.Sum(nil))), nil
}

// scanPairs reads (key, row) text pairs, from PostgreSQL or SQLite.
func scanPairs(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}) (map[string]string, error) {
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// explain logs the rows by which each destination differs from the source.
func (s *soak) explain(tb soakTable) {
	keyExpr := func(cast func(string) string) string {
		parts := make([]string, len(tb.keys))
		for i, k := range tb.keys {
			parts[i] = cast(k)
		}
		return strings.Join(parts, ` || ',' || `)
	}
	readPG := func(conn *pgx.Conn) (map[string]string, error) {
		rows, err := conn.Query(s.ctx, `SELECT `+keyExpr(pgText)+`, `+tb.rowExpr(pgText)+` FROM public.`+tb.name)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return scanPairs(rows)
	}
	readLite := func() (map[string]string, error) {
		lite, err := s.liteDB()
		if err != nil {
			return nil, err
		}
		rows, err := lite.QueryContext(s.ctx, `SELECT `+keyExpr(sqliteText)+`, `+tb.rowExpr(sqliteText)+` FROM "`+tb.name+`"`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return scanPairs(rows)
	}
	src, err := readPG(s.src)
	if err != nil {
		s.t.Logf("%s: read source: %v", tb.name, err)
		return
	}
	for _, side := range []string{"PostgreSQL", "SQLite"} {
		var dst map[string]string
		if side == "PostgreSQL" {
			dst, err = readPG(s.dst)
		} else {
			dst, err = readLite()
		}
		if err != nil {
			s.t.Logf("%s: read %s destination: %v", tb.name, side, err)
			continue
		}
		var diffs []string
		for k, v := range src {
			if d, ok := dst[k]; !ok {
				diffs = append(diffs, "missing "+k+": "+clip(v))
			} else if d != v {
				diffs = append(diffs, "differs "+k+": source "+clip(v)+", destination "+clip(d))
			}
		}
		for k, v := range dst {
			if _, ok := src[k]; !ok {
				diffs = append(diffs, "extra "+k+": "+clip(v))
			}
		}
		if len(diffs) == 0 {
			continue
		}
		sort.Strings(diffs)
		n := len(diffs)
		if n > 20 {
			diffs = diffs[:20]
		}
		s.t.Logf("%s: %s destination differs in %d rows:\n  %s", tb.name, side, n, strings.Join(diffs, "\n  "))
	}
}

func clip(v string) string {
	if len(v) > 120 {
		return fmt.Sprintf("%s…(%d bytes)", v[:120], len(v))
	}
	return v
}

// startWriters changes every table at a steady pace, each from its own
// connection, until the returned function is called; that returns what
// ran.
func (s *soak) startWriters(dsn string, seed uint64, rate int64) func() string {
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		table      string
		ok, failed int
	}
	done := make(chan result, len(s.tables))
	every := time.Duration(int64(time.Second) * int64(len(s.tables)) / max(rate, 1))
	for i, tb := range s.tables {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			s.t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, uint64(i+1)))
		go func() {
			defer conn.Close(context.Background())
			res := result{table: tb.name}
			pace := time.NewTicker(every)
			defer pace.Stop()
			for ctx.Err() == nil {
				select {
				case <-pace.C:
				case <-ctx.Done():
					continue
				}
				if err := runStmts(ctx, conn, tb.op(r)); err != nil {
					res.failed++ // key conflicts of key moves, mostly
				} else {
					res.ok++
				}
			}
			done <- res
		}()
	}
	return func() string {
		cancel()
		var parts []string
		total := 0
		for range s.tables {
			r := <-done
			total += r.ok
			parts = append(parts, fmt.Sprintf("%s %d ok/%d failed", r.table, r.ok, r.failed))
		}
		sort.Strings(parts)
		return fmt.Sprintf("%d statements (%s)", total, strings.Join(parts, ", "))
	}
}

func runStmts(ctx context.Context, conn *pgx.Conn, stmts []soakStmt) error {
	if len(stmts) == 1 {
		_, err := conn.Exec(ctx, stmts[0].sql, stmts[0].args...)
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
			return errors.Join(err, tx.Rollback(context.Background()))
		}
	}
	return tx.Commit(ctx)
}

// childLog scans the daemons' stderr: it counts log lines by level and
// message, and races and panics.
type childLog struct {
	mu      sync.Mutex
	partial []byte
	counts  map[string]int
	bad     int
}

func (l *childLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *childLog) line(s string) {
	if strings.Contains(s, "WARNING: DATA RACE") || strings.HasPrefix(s, "panic:") || strings.HasPrefix(s, "fatal error:") {
		l.bad++
	}
	level, msg := field(s, "level"), field(s, "msg")
	if level != "" {
		l.counts[level+" "+strconv.Quote(msg)]++
	}
}

// field reads key=value or key="quoted value" from a slog text line.
func field(line, key string) string {
	i := strings.Index(line, key+"=")
	if i < 0 || (i > 0 && line[i-1] != ' ') {
		return ""
	}
	rest := line[i+len(key)+1:]
	if strings.HasPrefix(rest, `"`) {
		if v, err := strconv.QuotedPrefix(rest); err == nil {
			u, _ := strconv.Unquote(v)
			return u
		}
	}
	v, _, _ := strings.Cut(rest, " ")
	return v
}

func (l *childLog) races() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bad
}

func (l *childLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.counts))
	for k := range l.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s ×%d", k, l.counts[k]))
	}
	return orNone(out)
}
