package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/config"
)

// BenchmarkDestinations prints figures, not pass/fail: the same PostgreSQL
// table backfilled through a stream into each destination type (postgres,
// files as JSONL, NATS JetStream, Kafka against kfake) in one run, each
// against the postgres destination's rows/s. It runs once whatever b.N
// is: `make bench` passes -benchtime 1x.
func BenchmarkDestinations(b *testing.B) {
	p, ctx, cancel := begin(b)
	defer cancel()
	db := &destBench{b: b, ctx: ctx, p: p, hwm: checkPeakReset(), started: time.Now()}
	defer func() { db.sv.stop() }() // what runAll started, if anything
	if err := db.runAll(); err != nil {
		b.Fatal(err)
	}
	db.print(os.Stdout)
	db.report()
}

// destKinds are the destination types measured, postgres first: the
// others are compared with it.
var destKinds = []string{"postgres", "sqlite", "files", "nats", "kafka"}

// destNames name the kinds in the table.
var destNames = map[string]string{"postgres": "postgres", "sqlite": "sqlite", "files": "files (JSONL)", "files_parquet": "files (Parquet)",
	"nats": "NATS JetStream", "kafka": "Kafka (kfake)"}

// destinationKinds are destKinds, and files_parquet once the files
// destination writes Parquet; TIDEMARK_BENCH_DESTS (a comma-separated
// list) keeps only those it names.
func destinationKinds() ([]string, error) {
	kinds := destKinds
	if parquetWritten() {
		kinds = append(slices.Clone(destKinds), "files_parquet")
	}
	only := os.Getenv("TIDEMARK_BENCH_DESTS")
	if only == "" {
		return kinds, nil
	}
	var out []string
	for _, k := range strings.Split(only, ",") {
		if k = strings.TrimSpace(k); !slices.Contains(kinds, k) {
			return nil, fmt.Errorf("TIDEMARK_BENCH_DESTS=%q: %q is not one of %s", only, k, strings.Join(kinds, ", "))
		}
		out = append(out, k)
	}
	return out, nil
}

// parquetWritten tells whether the files destination takes format:
// parquet; the benchmark measures it too once it does.
func parquetWritten() bool {
	_, err := config.Parse([]byte(`
streams:
  - name: p
    source: {type: postgres, dsn: "postgres://u@127.0.0.1/d"}
    destination: {type: files, path: /nonexistent, format: parquet}
    include: ["public.*"]
`), func(string) (string, bool) { return "", false })
	return err == nil
}

// destBench is one run of BenchmarkDestinations.
type destBench struct {
	b       *testing.B
	ctx     context.Context
	p       params
	hwm     bool // VmHWM can be reset: peaks are VmHWM, else sampled
	started time.Time
	sv      servers
	src     sourceInfo // public.t
	results []destResult
	sqlite  string // the SQLite destination's file, once backfilled
}

// destResult is one destination's timed backfill.
type destResult struct {
	result
	held     int64  // bytes the destination holds afterwards (-1: not measured)
	heldWhat string // how held was measured
}

func (db *destBench) logf(format string, args ...any) {
	fmt.Printf("bench %6.1fs  %s\n", time.Since(db.started).Seconds(), fmt.Sprintf(format, args...))
}

// runAll starts the two servers, loads public.t and backfills it into
// each destination kind in turn.
func (db *destBench) runAll() error {
	kinds, err := destinationKinds()
	if err != nil {
		return err
	}
	if db.sv, err = startServers(db.ctx); err != nil {
		return err
	}
	db.logf("loading %d rows into %s.public.t", db.p.rows, srcDB)
	if db.src, err = loadSource(db.ctx, db.sv.src.DSN(srcDB), "t", db.p.rows); err != nil {
		return err
	}
	for _, kind := range kinds {
		if err := db.run(kind); err != nil {
			return err
		}
	}
	if db.sqlite != "" {
		if err := db.runSQLiteInsert(); err != nil {
			return err
		}
	}
	if slices.Contains(kinds, "files_parquet") {
		if err := db.runParquetWrite(); err != nil {
			return err
		}
	}
	return db.runEventPipes(kinds)
}

// run backfills public.t into a fresh destination of the given kind
// through a stream of its own (its own slot), started and running before
// the clock starts, and timed from Initiate until the object is Completed
// and Loaded.
func (db *destBench) run(kind string) error {
	dest, err := openDestination(db.ctx, kind, db.sv, db.b.TempDir())
	if err != nil {
		return fmt.Errorf("destination %s: %w", kind, err)
	}
	defer dest.stop()
	if kind == "sqlite" {
		db.sqlite = dest.path
	}
	spec := streamSpec{name: "bench_" + kind, srcType: "postgres", srcDSN: db.sv.src.DSN(srcDB), schema: "public",
		destination: dest.yaml}
	tm, err := spec.start(db.ctx, db.b.TempDir(), db.p)
	if err != nil {
		return fmt.Errorf("destination %s: %w", kind, err)
	}
	r, err := db.measure(tm, kind, dest.pid)
	if serr := tm.stop(); err == nil && serr != nil {
		err = fmt.Errorf("stop the stream into %s: %w", kind, serr)
	}
	if err != nil {
		return err
	}
	held, what, err := dest.held(db.ctx, spec.name)
	if err != nil {
		return fmt.Errorf("measure destination %s: %w", kind, err)
	}
	db.results = append(db.results, destResult{result: r, held: held, heldWhat: what})
	return nil
}

// measure times one backfill of public.t after a checkpoint of both
// servers; pid is the process serving the destination, for its CPU time.
func (db *destBench) measure(tm *tidemark, kind string, pid int) (result, error) {
	if err := db.sv.checkpoint(db.ctx); err != nil {
		return result{}, fmt.Errorf("before %s: %w", kind, err)
	}
	r := result{key: "dest-" + kind, name: destNames[kind], rows: db.src.rows}
	db.logf("%s …", r.name)
	var bytes int64
	var note string
	r, err := timeRun(r, db.hwm, func() cpuTimes { return readCPUOf(db.sv.src.PID(), pid) }, func() (time.Duration, error) {
		d, rec, err := tm.backfill(db.ctx, "t")
		if err == nil && rec.RowsRead != db.src.rows {
			err = fmt.Errorf("the backfill read %d rows, want %d", rec.RowsRead, db.src.rows)
		}
		bytes = rec.Bytes
		note = fmt.Sprintf("%d chunks, %d rows read (%.1f MB of values), %d written, %d retries, %d window conflicts",
			rec.Chunks, rec.RowsRead, float64(rec.Bytes)/1e6, rec.RowsWritten, rec.Retries, rec.WindowConflicts)
		return d, err
	})
	if err != nil {
		return r, err
	}
	r.bytes, r.note = bytes, note
	db.logf("%s: %.2fs, %.0f rows/s", r.name, r.elapsed.Seconds(), r.rowsPerSec())
	return r, nil
}
