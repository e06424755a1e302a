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
	// Each rep: the pipes, the load in the slot's snapshot, and the same
	// first start beside the stream (snapshot_max_hold: 0).
	runs := []struct {
		name  string
		times []time.Duration
		time  func(rep int) (time.Duration, error)
	}{
		{name: "binary COPY pipes", time: func(rep int) (time.Duration, error) { return timePipes(ctx, sv, rep) }},
		{name: "tidemark first start, in the slot's snapshot", time: func(rep int) (time.Duration, error) {
			return timeFirstStart(ctx, sv, p, fmt.Sprintf("snap%d", rep), "", b.TempDir())
		}},
		{name: "tidemark first start, beside the stream", time: func(rep int) (time.Duration, error) {
			return timeFirstStart(ctx, sv, p, fmt.Sprintf("windowed%d", rep), ", snapshot_max_hold: 0s", b.TempDir())
		}},
	}
	for rep := 1; rep <= snapReps; rep++ {
		for i := range runs {
			d, err := runs[i].time(rep)
			if err != nil {
				b.Fatal(err)
			}
			logf("rep %d: %s, %.2f s", rep, runs[i].name, d.Seconds())
			runs[i].times = append(runs[i].times, d)
		}
	}
	pipe := median(runs[0].times)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\ninitial load of %d tables, %d rows in all, %d parallel connections (medians of %d; time from the stream's start until every table is loaded)\n", snapTables, p.rows, snapLanes, snapReps)
	fmt.Fprintln(tw, "run\tseconds\trows/s\ttime vs pipes\tall reps (s)\t")
	for _, r := range runs {
		d := median(r.times)
		var all []string
		for _, t := range r.times {
			all = append(all, fmt.Sprintf("%.2f", t.Seconds()))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%.2f×\t%s\t\n", r.name, d.Seconds(), float64(p.rows)/d.Seconds(), d.Seconds()/pipe.Seconds(), strings.Join(all, " "))
	}
	tw.Flush()
	fmt.Println("target: the load in the slot's snapshot within 1.1× the pipes' time")
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

// timeFirstStart times stream name's first start over the eight tables,
// with more keys of its backfill mapping (", key: value"), until every
// one is loaded, and drops its slot.
func timeFirstStart(ctx context.Context, sv servers, p params, name, backfill, dir string) (time.Duration, error) {
	dsn, err := sv.dst.CreateDatabase(ctx, "dst_"+name)
	if err != nil {
		return 0, err
	}
	if err := sv.checkpoint(ctx); err != nil {
		return 0, err
	}
	spec := streamSpec{name: name, srcType: "postgres", srcDSN: sv.src.DSN(srcDB), schema: "eight", mode: "automatic",
		destination: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dsn), backfill: backfill}
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
