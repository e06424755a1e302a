package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkBackfill prints figures, not pass/fail: a binary COPY pipe,
// PostgreSQL's logical replication initial sync and tidemark's backfill
// (into an empty and into a populated destination) of the same table in
// one run, plus tidemark's peak RSS on two table sizes. It runs once
// whatever b.N is: `make bench` passes -benchtime 1x.
func BenchmarkBackfill(b *testing.B) {
	p, ctx, cancel := begin(b)
	defer cancel()
	bn := &bench{b: b, ctx: ctx, p: p, hwm: checkPeakReset(), started: time.Now()}
	var err error
	if bn.sv, err = startServers(ctx); err != nil {
		b.Fatal(err)
	}
	defer bn.sv.stop()
	for _, step := range []func() error{bn.setup, bn.runCopy, bn.runNative, bn.runTidemark} {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	bn.print(os.Stdout)
	bn.report()
}

// bench is one benchmark run's state and results.
type bench struct {
	b       *testing.B
	ctx     context.Context
	p       params
	sv      servers
	hwm     bool // VmHWM can be reset: peaks are VmHWM, else sampled
	started time.Time
	big     sourceInfo // public.t
	small   sourceInfo // public.t_small
	results []result
	// verifyTail is how long run (d)'s verify went on after its rows
	// were loaded.
	verifyTail time.Duration
}

// result is one timed run.
type result struct {
	key     string // metric prefix
	name    string
	rows    int64
	bytes   int64 // the source table's pg_total_relation_size
	elapsed time.Duration
	before  int64 // RSS of this process when the run started, bytes
	peak    int64 // peak RSS of this process, bytes (0: not meaningful)
	sampled int64 // largest VmRSS sampled every 50ms
	cpu     cpuTimes
	note    string
}

func (r result) rowsPerSec() float64 { return float64(r.rows) / r.elapsed.Seconds() }
func (r result) mbPerSec() float64   { return float64(r.bytes) / 1e6 / r.elapsed.Seconds() }

func (bn *bench) logf(format string, args ...any) {
	fmt.Printf("bench %6.1fs  %s\n", time.Since(bn.started).Seconds(), fmt.Sprintf(format, args...))
}

func (bn *bench) setup() error {
	var err error
	bn.logf("loading %d rows into %s.public.t", bn.p.rows, srcDB)
	if bn.big, err = loadSource(bn.ctx, bn.sv.src.DSN(srcDB), "t", bn.p.rows); err != nil {
		return err
	}
	bn.logf("loading %d rows into %s.public.t_small", bn.p.smallRows, srcDB)
	if bn.small, err = loadSource(bn.ctx, bn.sv.src.DSN(srcDB), "t_small", bn.p.smallRows); err != nil {
		return err
	}
	bn.logf("public.t: %d rows, %d bytes, %.0f bytes/row", bn.big.rows, bn.big.bytes, float64(bn.big.bytes)/float64(bn.big.rows))
	return nil
}

// measure runs one timed step after a checkpoint and a reset of the peak
// RSS. run returns the duration it timed itself.
func (bn *bench) measure(r result, run func() (time.Duration, error)) (result, error) {
	if err := bn.sv.checkpoint(bn.ctx); err != nil {
		return r, fmt.Errorf("before %s: %w", r.name, err)
	}
	bn.logf("%s …", r.name)
	r, err := timeRun(r, bn.hwm, func() cpuTimes { return readCPU(bn.sv) }, run)
	if err != nil {
		return r, err
	}
	bn.logf("%s: %.2fs, %.0f rows/s", r.name, r.elapsed.Seconds(), r.rowsPerSec())
	bn.results = append(bn.results, r)
	return r, nil
}

// timeRun runs one timed step and fills r's time, RSS and CPU figures: the
// peak RSS is VmHWM reset before the run if hwm, else the largest VmRSS
// sampled; cpu reads the CPU times. run returns the duration it timed
// itself.
func timeRun(r result, hwm bool, cpu func() cpuTimes, run func() (time.Duration, error)) (result, error) {
	if hwm {
		if err := resetPeak(); err != nil {
			return r, err
		}
	}
	r.before, _ = procStatus("VmRSS")
	sampler := startSampler()
	cpu0 := cpu()
	elapsed, err := run()
	r.cpu = cpu().sub(cpu0)
	r.sampled = sampler.Stop()
	if err != nil {
		return r, fmt.Errorf("%s: %w", r.name, err)
	}
	r.elapsed, r.peak = elapsed, r.sampled
	if hwm {
		if r.peak, err = procStatus("VmHWM"); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (bn *bench) runCopy() error {
	dst := bn.sv.dst.DSN(copyDB)
	if err := exec(bn.ctx, dst, fmt.Sprintf(tableDDL, "t")); err != nil {
		return fmt.Errorf("create copy destination: %w", err)
	}
	r := result{key: "copy", name: "COPY binary pipe (pgx)", rows: bn.big.rows, bytes: bn.big.bytes}
	var streamBytes int64
	_, err := bn.measure(r, func() (time.Duration, error) {
		start := time.Now()
		n, sb, err := copyPipe(bn.ctx, bn.sv.src.DSN(srcDB), dst, "t")
		if err == nil && n != bn.big.rows {
			err = fmt.Errorf("copied %d rows, want %d", n, bn.big.rows)
		}
		streamBytes = sb
		return time.Since(start), err
	})
	if err != nil {
		return err
	}
	bn.results[len(bn.results)-1].note = fmt.Sprintf("binary COPY stream of %.1f MB", float64(streamBytes)/1e6)
	return bn.dropDatabase(copyDB, bn.big.rows)
}

func (bn *bench) runNative() error {
	r := result{key: "native", name: "native logical sync", rows: bn.big.rows, bytes: bn.big.bytes}
	_, err := bn.measure(r, func() (time.Duration, error) { return nativeSync(bn.ctx, bn.sv, "t") })
	if cerr := dropNative(context.WithoutCancel(bn.ctx), bn.sv); cerr != nil && err == nil {
		err = fmt.Errorf("clean up native subscription: %w", cerr)
	}
	if err != nil {
		return err
	}
	bn.results[len(bn.results)-1].peak = 0 // the work is in the server
	return bn.dropDatabase(nativeDB, bn.big.rows)
}

// dropDatabase checks a baseline's row count and drops its database, so
// that it holds no memory or I/O during the next runs.
func (bn *bench) dropDatabase(db string, want int64) error {
	n, err := countRows(bn.ctx, bn.sv.dst.DSN(db), "t")
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%s.public.t holds %d rows, want %d", db, n, want)
	}
	if err := exec(bn.ctx, bn.sv.dst.DSN("postgres"), "DROP DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	return nil
}

func (bn *bench) runTidemark() error {
	dst := bn.sv.dst.DSN(tidemarkDB)
	tm, err := startTidemark(bn.ctx, bn.sv.src.DSN(srcDB), dst, bn.b.TempDir(), bn.p)
	if err != nil {
		return err
	}
	runs := []struct {
		key, name, table string
		src              sourceInfo
		before           []string // run on the destination first (untimed)
	}{
		{"tidemark-empty", "tidemark (a) empty destination", "t", bn.big, nil},
		// A populated destination as it would be in steady state: vacuumed
		// and analyzed (autovacuum is off on this server).
		{"tidemark-populated", "tidemark (b) populated destination", "t", bn.big, []string{"VACUUM (ANALYZE) t"}},
		{"tidemark-small", "tidemark (c) t_small, empty destination", "t_small", bn.small, nil},
	}
	for _, run := range runs {
		if err := exec(bn.ctx, dst, run.before...); err != nil {
			_ = tm.stop()
			return fmt.Errorf("prepare %s: %w", run.name, err)
		}
		if err := bn.runBackfill(tm, run.key, run.name, run.table, run.src); err != nil {
			_ = tm.stop()
			return err
		}
	}
	if err := bn.runVerify(tm); err != nil {
		_ = tm.stop()
		return err
	}
	if err := tm.stop(); err != nil {
		return fmt.Errorf("stop the stream: %w", err)
	}
	return bn.runVerified(dst)
}

func (bn *bench) runBackfill(tm *tidemark, key, name, table string, src sourceInfo) error {
	r := result{key: key, name: name, rows: src.rows, bytes: src.bytes}
	var note string
	_, err := bn.measure(r, func() (time.Duration, error) {
		d, rec, err := tm.backfill(bn.ctx, table)
		note = fmt.Sprintf("%d chunks, %d rows written, %d removed, %d retries, %d window conflicts",
			rec.Chunks, rec.RowsWritten, rec.RowsRemoved, rec.Retries, rec.WindowConflicts)
		return d, err
	})
	if err != nil {
		return err
	}
	bn.results[len(bn.results)-1].note = note
	n, err := countRows(bn.ctx, bn.sv.dst.DSN(tidemarkDB), table)
	if err != nil {
		return err
	}
	if n != src.rows {
		return fmt.Errorf("%s: destination holds %d rows, want %d", name, n, src.rows)
	}
	return nil
}
