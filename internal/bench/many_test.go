package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

// Many-tables defaults: 1% of the tables hold manyBigRows rows, the rest
// manySmallRows; a writer updates manyWritten of the small ones; new
// tables appear every manyNewEvery, up to manyNewTables, while the stream
// (discovery_interval manyDiscovery) loads.
const (
	manySmallRows = 1_000
	manyBigRows   = 100_000
	manyWritten   = 50
	manyNewTables = 3
	manyNewEvery  = 4 * time.Second
	manyDiscovery = 10 * time.Second
)

// BenchmarkManyTables prints figures, not pass/fail: a stream of many
// tables (1,000 by default, TIDEMARK_BENCH_MANY_TABLES overrides: 99% of
// 1,000 rows, 1% of 100,000) loaded at its start in automatic mode, under
// a writer on 50 of them and with new tables created during the load,
// beside a stream of the same rows as one table, in one run.
func BenchmarkManyTables(b *testing.B) {
	p, ctx, cancel := begin(b)
	defer cancel()
	n := 1000
	if v := os.Getenv("TIDEMARK_BENCH_MANY_TABLES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 || n > 10_000 {
			b.Fatalf("TIDEMARK_BENCH_MANY_TABLES=%q: want 100 to 10000 tables", v)
		}
	}
	mb := &manyBench{b: b, ctx: ctx, p: p, started: time.Now(), big: max(1, n/100)}
	mb.small = n - mb.big
	defer func() { mb.sv.stop() }()
	if err := mb.run(); err != nil {
		b.Fatal(err)
	}
	mb.print(os.Stdout)
	mb.report()
}

// manyBench is one run of BenchmarkManyTables.
type manyBench struct {
	b          *testing.B
	ctx        context.Context
	p          params
	started    time.Time
	sv         servers
	small, big int

	one    time.Duration // the same rows as one table, loaded
	many   time.Duration // every table there at the start, loaded
	loaded []time.Duration
	// phases of the small tables' backfills: created to started, started
	// to finished (its chunk read, merged and written), finished to loaded
	phases  [3][]time.Duration
	found   []time.Duration // each new table: created until its backfill
	writes  int
	newMade int
}

func (mb *manyBench) logf(format string, args ...any) {
	fmt.Printf("bench %6.1fs  %s\n", time.Since(mb.started).Seconds(), fmt.Sprintf(format, args...))
}

func (mb *manyBench) rows() int64 {
	return int64(mb.small)*manySmallRows + int64(mb.big)*manyBigRows
}

func (mb *manyBench) run() error {
	var err error
	if mb.sv, err = startServers(mb.ctx); err != nil {
		return err
	}
	for _, db := range []string{"dst_one", "dst_many"} {
		if _, err := mb.sv.dst.CreateDatabase(mb.ctx, db); err != nil {
			return fmt.Errorf("create database %s: %w", db, err)
		}
	}
	if err := mb.load(); err != nil {
		return err
	}
	if mb.one, err = mb.runOne(); err != nil {
		return err
	}
	return mb.runMany()
}

// load creates the tables: public's many and single.one with as many rows.
func (mb *manyBench) load() error {
	conn, err := pgx.Connect(mb.ctx, mb.sv.src.DSN(srcDB))
	if err != nil {
		return fmt.Errorf("connect to source: %w", err)
	}
	defer conn.Close(mb.ctx)
	mb.logf("creating %d tables of %d rows and %d of %d, and single.one of %d rows", mb.small, manySmallRows, mb.big, manyBigRows, mb.rows())
	for i := range mb.small + mb.big {
		rows := manySmallRows
		if i >= mb.small {
			rows = manyBigRows
		}
		if err := createFilled(mb.ctx, conn, manyName(i), rows); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(mb.ctx, "CREATE SCHEMA single"); err != nil {
		return err
	}
	if err := createFilled(mb.ctx, conn, "single.one", int(mb.rows())); err != nil {
		return err
	}
	_, err = conn.Exec(mb.ctx, "VACUUM (FREEZE, ANALYZE)")
	return err
}

// manyName is the i-th table of the many.
func manyName(i int) string { return fmt.Sprintf("public.t%05d", i) }

// createFilled creates the benchmark table name (schema.table) with rows rows.
func createFilled(ctx context.Context, conn *pgx.Conn, name string, rows int) error {
	schema, table, _ := strings.Cut(name, ".")
	id := pgx.Identifier{schema, table}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf(tableDDL, id)); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, strings.Replace(fillSQL, "TABLE", id, 1), rows); err != nil {
		return fmt.Errorf("fill %s: %w", name, err)
	}
	return nil
}

// runOne times a stream of single.one from its start until the table is
// loaded.
func (mb *manyBench) runOne() (time.Duration, error) {
	if err := mb.sv.checkpoint(mb.ctx); err != nil {
		return 0, err
	}
	mb.logf("one table of %d rows …", mb.rows())
	spec := streamSpec{name: "one", srcType: "postgres", srcDSN: mb.sv.src.DSN(srcDB), schema: "single", mode: "automatic",
		destination: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, mb.sv.dst.DSN("dst_one"))}
	start := time.Now()
	tm, err := spec.start(mb.ctx, mb.b.TempDir(), mb.p)
	if err != nil {
		return 0, err
	}
	err = waitAllLoaded(mb.ctx, tm, 1, "")
	elapsed := time.Since(start)
	if serr := tm.stop(); err == nil {
		err = serr
	}
	mb.logf("one table: %.1f s", elapsed.Seconds())
	return elapsed, err
}

// runMany times a stream of the many tables from its start until every
// one is loaded, under a writer, creating new tables meanwhile.
func (mb *manyBench) runMany() error {
	if err := mb.sv.checkpoint(mb.ctx); err != nil {
		return err
	}
	mb.logf("%d tables …", mb.small+mb.big)
	spec := streamSpec{name: "many", srcType: "postgres", srcDSN: mb.sv.src.DSN(srcDB), schema: "public", mode: "automatic",
		destination: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, mb.sv.dst.DSN("dst_many"))}
	start := time.Now()
	tm, err := spec.start(mb.ctx, mb.b.TempDir(), mb.p, "include_future_tables: true", "discovery_interval: "+manyDiscovery.String())
	if err != nil {
		return err
	}
	defer func() { _ = tm.stop() }()
	mb.logf("stream running after %.1f s", time.Since(start).Seconds())
	ctx, cancel := context.WithCancel(mb.ctx)
	var wg sync.WaitGroup
	var created map[string]time.Time
	wg.Go(func() { mb.writes = mb.write(ctx) })
	wg.Go(func() { created = mb.createNew(ctx) })
	err = waitAllLoaded(mb.ctx, tm, mb.small+mb.big, "t") // the tables there at the start
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	mb.newMade = len(created)
	if err := waitAllLoaded(mb.ctx, tm, mb.small+mb.big+len(created), ""); err != nil {
		return err
	}
	return mb.collect(tm, start, created)
}

// collect reads the backfills' times: when each small table was loaded,
// when the last table there at the start was, and how long each new
// table waited for its backfill.
func (mb *manyBench) collect(tm *tidemark, start time.Time, created map[string]time.Time) error {
	recs, err := tm.st.ListBackfills(mb.ctx, store.BackfillFilter{Stream: tm.name, Limit: 100_000})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.LoadedAt == nil {
			continue
		}
		at := r.LoadedAt.Sub(start)
		if c, ok := created["public."+r.Table]; ok {
			mb.found = append(mb.found, r.CreatedAt.Sub(c))
			continue
		}
		mb.many = max(mb.many, at)
		if n, err := strconv.Atoi(strings.TrimPrefix(r.Table, "t")); err == nil && n < mb.small && r.StartedAt != nil && r.FinishedAt != nil {
			mb.loaded = append(mb.loaded, at)
			mb.phases[0] = append(mb.phases[0], r.StartedAt.Sub(r.CreatedAt))
			mb.phases[1] = append(mb.phases[1], r.FinishedAt.Sub(*r.StartedAt))
			mb.phases[2] = append(mb.phases[2], r.LoadedAt.Sub(*r.FinishedAt))
		}
	}
	slices.Sort(mb.loaded)
	slices.Sort(mb.found)
	for _, ph := range mb.phases {
		slices.Sort(ph)
	}
	if len(mb.loaded) != mb.small {
		return fmt.Errorf("%d small tables loaded, want %d", len(mb.loaded), mb.small)
	}
	return nil
}

// write updates random rows of the first manyWritten small tables, one
// statement every 5 ms, until ctx ends; it returns the statements run.
func (mb *manyBench) write(ctx context.Context) int {
	conn, err := pgx.Connect(ctx, mb.sv.src.DSN(srcDB))
	if err != nil {
		return 0
	}
	defer conn.Close(context.Background())
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	n := 0
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return n
		case <-pace.C:
		}
		table := pgx.Identifier{"public", strings.TrimPrefix(manyName(i%min(manyWritten, mb.small)), "public.")}.Sanitize()
		if _, err := conn.Exec(ctx, "UPDATE "+table+" SET status = 'written' WHERE id = $1", 1+(i*7919)%manySmallRows); err == nil {
			n++
		}
	}
}

// createNew creates a table of manySmallRows rows every manyNewEvery, up
// to manyNewTables, until ctx ends; it returns when each was created.
func (mb *manyBench) createNew(ctx context.Context) map[string]time.Time {
	out := map[string]time.Time{}
	conn, err := pgx.Connect(ctx, mb.sv.src.DSN(srcDB))
	if err != nil {
		return out
	}
	defer conn.Close(context.Background())
	for i := range manyNewTables {
		select {
		case <-ctx.Done():
			return out
		case <-time.After(manyNewEvery):
		}
		name := fmt.Sprintf("public.new%d", i)
		if err := createFilled(ctx, conn, name, manySmallRows); err != nil {
			return out
		}
		out[name] = time.Now()
	}
	return out
}

// waitAllLoaded waits until n of the stream's objects whose table names
// start with prefix are Completed and Loaded; a failed or stopped one is an
// error.
func waitAllLoaded(ctx context.Context, tm *tidemark, n int, prefix string) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		objs, err := tm.st.ListObjects(ctx, tm.name)
		if err != nil {
			return err
		}
		done := 0
		for _, o := range objs {
			switch {
			case o.Status == store.StatusFailed || o.Status == store.StatusStopped:
				return fmt.Errorf("backfill of %s.%s %s: %s", o.Schema, o.Table, o.Status, o.Reason)
			case o.Status == store.StatusCompleted && o.Loaded && strings.HasPrefix(o.Table, prefix):
				done++
			}
		}
		if done >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d tables loaded: %w", done, n, ctx.Err())
		case <-tick.C:
		}
	}
}
