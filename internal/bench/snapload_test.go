package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// snapTables and snapLanes: the initial-load benchmark's eight tables, and
// the parallel connections both sides get (tidemark's backfill.max_concurrent).
const (
	snapTables = 8
	snapLanes  = 2
	snapReps   = 3
)

// BenchmarkSnapshotLoad prints figures, not pass/fail: a stream's first
// start in automatic mode loading eight tables (TIDEMARK_BENCH_ROWS rows
// in all) in its new slot's exported snapshot, against the same tables
// copied by binary COPY pipes over as many parallel connections, three
// interleaved repetitions with the medians.
func BenchmarkSnapshotLoad(b *testing.B) {
	p, ctx, cancel := begin(b)
	defer cancel()
	sv, err := startServers(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer sv.stop()
	started := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("bench %6.1fs  %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := createSnapTables(ctx, sv, p.rows); err != nil {
		b.Fatal(err)
	}
	var pipes, loads []time.Duration
	for rep := 1; rep <= snapReps; rep++ {
		d, err := timePipes(ctx, sv, rep)
		if err != nil {
			b.Fatal(err)
		}
		logf("rep %d: %d COPY pipes, %.2f s", rep, snapLanes, d.Seconds())
		pipes = append(pipes, d)
		if d, err = timeSnapshotLoad(ctx, sv, p, rep, b.TempDir()); err != nil {
			b.Fatal(err)
		}
		logf("rep %d: tidemark's first start, %.2f s", rep, d.Seconds())
		loads = append(loads, d)
	}
	pipe, load := median(pipes), median(loads)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\ninitial load of %d tables, %d rows in all, %d parallel connections (medians of %d)\n", snapTables, p.rows, snapLanes, snapReps)
	fmt.Fprintln(tw, "run\tseconds\trows/s\ttime vs pipes\t")
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"binary COPY pipes", pipe}, {"tidemark first start (slot's snapshot)", load}} {
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%.2f×\t\n", r.name, r.d.Seconds(), float64(p.rows)/r.d.Seconds(), r.d.Seconds()/pipe.Seconds())
	}
	tw.Flush()
	fmt.Printf("target: tidemark's time ≤ 1.1× the pipes'; all reps: pipes %v, tidemark %v\n", pipes, loads)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// snapName is the i-th table of the initial-load benchmark.
func snapName(i int) string { return fmt.Sprintf("eight.t%d", i) }

func createSnapTables(ctx context.Context, sv servers, rows int64) error {
	conn, err := pgx.Connect(ctx, sv.src.DSN(srcDB))
	if err != nil {
		return fmt.Errorf("connect to source: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA eight"); err != nil {
		return err
	}
	for i := range snapTables {
		if err := createFilled(ctx, conn, snapName(i), int(rows/snapTables)); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, "VACUUM (FREEZE, ANALYZE)")
	return err
}

// timePipes copies the eight tables into a fresh database through
// snapLanes connections at a time, each table one binary COPY pipe.
func timePipes(ctx context.Context, sv servers, rep int) (time.Duration, error) {
	db := fmt.Sprintf("dst_pipes%d", rep)
	dsn, err := sv.dst.CreateDatabase(ctx, db)
	if err != nil {
		return 0, err
	}
	ddl := "CREATE SCHEMA eight;"
	for i := range snapTables {
		schema, table, _ := strings.Cut(snapName(i), ".")
		ddl += fmt.Sprintf(tableDDL, pgx.Identifier{schema, table}.Sanitize()) + ";"
	}
	if err := exec(ctx, dsn, ddl); err != nil {
		return 0, err
	}
	if err := sv.checkpoint(ctx); err != nil {
		return 0, err
	}
	queue := make(chan int, snapTables)
	for i := range snapTables {
		queue <- i
	}
	close(queue)
	var wg sync.WaitGroup
	errs := make(chan error, snapLanes)
	start := time.Now()
	for range snapLanes {
		wg.Go(func() {
			for i := range queue {
				schema, table, _ := strings.Cut(snapName(i), ".")
				if _, _, err := copyPipe(ctx, sv.src.DSN(srcDB)+"&options=-csearch_path%3D"+schema, dsn+"&options=-csearch_path%3D"+schema, table); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	return d, <-errs
}

// timeSnapshotLoad times a stream's first start over the eight tables,
// until every one is loaded, and drops its slot.
func timeSnapshotLoad(ctx context.Context, sv servers, p params, rep int, dir string) (time.Duration, error) {
	db := fmt.Sprintf("dst_snap%d", rep)
	dsn, err := sv.dst.CreateDatabase(ctx, db)
	if err != nil {
		return 0, err
	}
	if err := sv.checkpoint(ctx); err != nil {
		return 0, err
	}
	name := fmt.Sprintf("snap%d", rep)
	spec := streamSpec{name: name, srcType: "postgres", srcDSN: sv.src.DSN(srcDB), schema: "eight", mode: "automatic",
		destination: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dsn)}
	start := time.Now()
	tm, err := spec.start(ctx, dir, p) // backfill.max_concurrent's default is snapLanes
	if err != nil {
		return 0, err
	}
	err = waitAllLoaded(ctx, tm, snapTables, "")
	d := time.Since(start)
	if serr := tm.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	return d, exec(ctx, sv.src.DSN(srcDB), "SELECT pg_drop_replication_slot('tidemark_"+name+"')")
}
