package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
)

// BenchmarkBackfillUnderLoad prints figures, not pass/fail: the lag of live
// changes while a pgbench-like load updates the table (1,000 updates/s by
// default), through PostgreSQL's own logical replication and through
// tidemark, with tidemark also backfilling that table meanwhile; and the
// backfill's rows/s under that load beside a quiet backfill of the same
// table in the same run. See docs/benchmark.md.
func BenchmarkBackfillUnderLoad(b *testing.B) {
	pgserver.ScrubEnv()
	p, err := readLoadParams(testing.Short())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	ul := &underLoad{b: b, ctx: ctx, p: p, started: time.Now()}
	ul.sv, err = startServers(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer ul.sv.stop()
	for _, step := range []func() error{ul.setup, ul.runNative, ul.runTidemark} {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	ul.print(os.Stdout)
	ul.report()
}

// loadParams are BenchmarkBackfillUnderLoad's sizes.
type loadParams struct {
	params
	load       loadSpec
	duration   time.Duration // how long the load runs at least
	batchDelay string        // tidemark's batch.max_delay, "" for the default
	// destRTT, when set, puts tidemark's destination that much further
	// away: its connections go through a delayProxy.
	destRTT time.Duration
}

// readLoadParams reads the environment overrides (docs/benchmark.md); with
// -short the table has 250,000 rows unless TIDEMARK_BENCH_ROWS says more.
func readLoadParams(short bool) (loadParams, error) {
	base, err := readParams()
	if err != nil {
		return loadParams{}, err
	}
	if short && os.Getenv("TIDEMARK_BENCH_ROWS") == "" {
		base.rows = 250_000
	}
	p := loadParams{params: base, duration: 20 * time.Second,
		load: loadSpec{rate: 1000, conns: 4, sampleEvery: 5, pollEvery: 5 * time.Millisecond, keys: base.rows}}
	num := func(env string, lo, hi float64, set func(float64)) error {
		s := os.Getenv(env)
		if s == "" {
			return nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < lo || v > hi {
			return fmt.Errorf("%s=%q: want a number from %g to %g", env, s, lo, hi)
		}
		set(v)
		return nil
	}
	for _, e := range []error{
		num("TIDEMARK_BENCH_LOAD_RATE", 1, 20000, func(v float64) { p.load.rate = v }),
		num("TIDEMARK_BENCH_LOAD_SECONDS", 1, 3600, func(v float64) { p.duration = time.Duration(v * float64(time.Second)) }),
		num("TIDEMARK_BENCH_POLL_MS", 0.5, 1000, func(v float64) { p.load.pollEvery = time.Duration(v * float64(time.Millisecond)) }),
	} {
		if e != nil {
			return p, e
		}
	}
	if s := os.Getenv("TIDEMARK_BENCH_BATCH_DELAY"); s != "" {
		if d, err := time.ParseDuration(s); err != nil || d <= 0 {
			return p, fmt.Errorf("TIDEMARK_BENCH_BATCH_DELAY=%q: want a duration such as 20ms", s)
		}
		p.batchDelay = s
	}
	if s := os.Getenv("TIDEMARK_BENCH_DEST_RTT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > time.Second {
			return p, fmt.Errorf("TIDEMARK_BENCH_DEST_RTT=%q: want a duration up to 1s such as 5ms", s)
		}
		p.destRTT = d
	}
	return p, nil
}

// underLoad is one run's state and results.
type underLoad struct {
	b       *testing.B
	ctx     context.Context
	p       loadParams
	sv      servers
	started time.Time
	src     sourceInfo
	lags    []lagRun
	fills   []fillRun
	checks  []string // destination-equals-source checks, one line each
}

// lagRun is the lag of live changes over one stretch of load.
type lagRun struct {
	key, name string
	l         *load
	window    time.Duration // the stretch the probes were committed in
	s         lagStats
	cpu       cpuTimes
}

// fillRun is one timed copy of the whole table.
type fillRun struct {
	key, name string
	rows      int64
	elapsed   time.Duration
	note      string
	cpu       cpuTimes
}

func (f fillRun) rowsPerSec() float64 { return float64(f.rows) / f.elapsed.Seconds() }

func (ul *underLoad) logf(format string, args ...any) {
	fmt.Printf("bench %6.1fs  %s\n", time.Since(ul.started).Seconds(), fmt.Sprintf(format, args...))
}

func (ul *underLoad) setup() error {
	ul.logf("loading %d rows into %s.public.t", ul.p.rows, srcDB)
	var err error
	if ul.src, err = loadSource(ul.ctx, ul.sv.src.DSN(srcDB), "t", ul.p.rows); err != nil {
		return err
	}
	ul.p.load.keys = ul.src.rows
	return nil
}

// sleep waits d or until the run's context ends.
func (ul *underLoad) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ul.ctx.Done():
		return ul.ctx.Err()
	}
}

// runNative measures native logical replication: the initial sync (no
// load, for reference), then the lag of live changes under the load once
// the subscription is streaming.
func (ul *underLoad) runNative() error {
	if err := ul.sv.checkpoint(ul.ctx); err != nil {
		return err
	}
	ul.logf("native logical replication: initial sync …")
	cpu0 := readCPU(ul.sv)
	d, err := nativeSync(ul.ctx, ul.sv, "t")
	cpu := readCPU(ul.sv).sub(cpu0)
	if err == nil {
		ul.fills = append(ul.fills, fillRun{key: "native-sync", name: "native logical sync, no load", rows: ul.src.rows, elapsed: d, cpu: cpu})
		ul.logf("native initial sync: %.2fs", d.Seconds())
		err = ul.lagPhase("native", "native logical replication", nativeDB, nil)
	}
	if err == nil {
		err = ul.check("native", nativeDB)
	}
	if cerr := dropNative(context.WithoutCancel(ul.ctx), ul.sv); cerr != nil && err == nil {
		err = fmt.Errorf("clean up native subscription: %w", cerr)
	}
	if err != nil {
		return err
	}
	return exec(ul.ctx, ul.sv.dst.DSN("postgres"), "DROP DATABASE "+pgx.Identifier{nativeDB}.Sanitize())
}

// lagPhase runs the load for the configured duration into db and records
// the lag of its probes.
func (ul *underLoad) lagPhase(key, name, db string, own func() time.Duration) error {
	if err := ul.sv.checkpoint(ul.ctx); err != nil {
		return err
	}
	ul.logf("%s: %.0f updates/s for %s …", name, ul.p.load.rate, ul.p.duration)
	l, err := startLoad(ul.ctx, ul.p.load, ul.sv.src.DSN(srcDB), ul.sv.dst.DSN(db), own)
	if err != nil {
		return err
	}
	cpu0 := readCPU(ul.sv)
	err = ul.sleep(ul.p.duration)
	cpu := readCPU(ul.sv).sub(cpu0)
	if serr := l.stop(2 * time.Minute); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := ul.trace(l, key, ""); err != nil {
		return err
	}
	r := lagRun{key: key, name: name, l: l, window: l.elapsed(), s: l.stats(l.started, l.stopped), cpu: cpu}
	ul.lags = append(ul.lags, r)
	ul.logf("%s: %.0f updates/s, lag p50 %s p99 %s", name, l.rate(), ms(r.s.p50), ms(r.s.p99))
	return nil
}

// runTidemark runs one stream through its normal path: a quiet backfill
// of t into the empty destination; the lag of live changes with no
// backfill running; then, with the destination emptied, a backfill of t
// while the load runs, and the lag meanwhile.
func (ul *underLoad) runTidemark() error {
	var extra []string
	if ul.p.batchDelay != "" {
		extra = append(extra, "batch: {max_delay: "+ul.p.batchDelay+"}")
	}
	dst := ul.sv.dst.DSN(tidemarkDB)
	streamDst := dst // the stream's; the load polls the destination directly
	if ul.p.destRTT > 0 {
		proxy, err := startDelayProxy(fmt.Sprintf("127.0.0.1:%d", ul.sv.dst.Port), ul.p.destRTT)
		if err != nil {
			return err
		}
		defer proxy.Close()
		streamDst = fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", proxy.Addr(), tidemarkDB)
	}
	tm, err := startTidemark(ul.ctx, ul.sv.src.DSN(srcDB), streamDst, ul.b.TempDir(), ul.p.params, extra...)
	if err != nil {
		return err
	}
	err = ul.tidemarkSteps(tm, dst)
	if serr := tm.stop(); err == nil && serr != nil {
		err = fmt.Errorf("stop the stream: %w", serr)
	}
	return err
}

func (ul *underLoad) tidemarkSteps(tm *tidemark, dst string) error {
	// (1) A quiet backfill, the reference for the one under load.
	if err := ul.sv.checkpoint(ul.ctx); err != nil {
		return err
	}
	ul.logf("tidemark: quiet backfill …")
	staged0 := ul.stagedRows(dst)
	cpu0 := readCPU(ul.sv)
	d, rec, err := tm.backfill(ul.ctx, "t")
	if err != nil {
		return err
	}
	ul.fills = append(ul.fills, fillRun{key: "tidemark-quiet", name: "tidemark backfill, no load", rows: ul.src.rows,
		elapsed: d, cpu: readCPU(ul.sv).sub(cpu0)})
	ul.fills[len(ul.fills)-1].note = fillNote(rec, ul.stagedRows(dst)-staged0)
	ul.logf("tidemark quiet backfill: %.2fs", d.Seconds())
	if n, err := countRows(ul.ctx, dst, "t"); err != nil || n != ul.src.rows {
		return fmt.Errorf("after the quiet backfill the destination holds %d rows, want %d (%v)", n, ul.src.rows, err)
	}

	// (2) Streaming alone: the lag tidemark adds with no backfill running.
	if err := ul.lagPhase("tidemark-stream", "tidemark, no backfill", tidemarkDB, tm.s.Lag); err != nil {
		return err
	}

	// (3) The destination emptied (the stream is idle: no load runs),
	// then the load, and after a second of it a backfill of t into the
	// empty table. The load runs for the whole backfill and at least the
	// configured duration.
	if err := exec(ul.ctx, dst, "TRUNCATE t", "VACUUM t"); err != nil {
		return fmt.Errorf("empty the destination: %w", err)
	}
	if err := ul.sv.checkpoint(ul.ctx); err != nil {
		return err
	}
	staged0 = ul.stagedRows(dst)
	ul.logf("tidemark: backfill under %.0f updates/s …", ul.p.load.rate)
	l, err := startLoad(ul.ctx, ul.p.load, ul.sv.src.DSN(srcDB), dst, tm.s.Lag)
	if err != nil {
		return err
	}
	err = ul.sleep(time.Second)
	var from, to time.Time
	var fill fillRun
	var cpuTo cpuTimes
	if err == nil {
		cpu0 = readCPU(ul.sv)
		from = time.Now()
		d, rec, err = tm.backfill(ul.ctx, "t")
		to = time.Now()
		cpuTo = readCPU(ul.sv)
		fill = fillRun{key: "tidemark-load", name: fmt.Sprintf("tidemark backfill, %.0f updates/s", ul.p.load.rate),
			rows: ul.src.rows, elapsed: d, cpu: cpuTo.sub(cpu0)}
	}
	if err == nil {
		err = ul.sleep(ul.p.duration - time.Since(l.started))
	}
	cpuEnd := readCPU(ul.sv)
	if serr := l.stop(2 * time.Minute); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("backfill under load: %w", err)
	}
	fill.note = fillNote(rec, ul.stagedRows(dst)-staged0)
	ul.fills = append(ul.fills, fill)
	ul.logf("tidemark backfill under load: %.2fs (%.0f updates/s)", d.Seconds(), l.rate())
	if err := ul.trace(l, "tidemark-backfill", fmt.Sprintf("(the backfill ran from %.0f to %.0f ms)",
		float64(from.Sub(l.started))/1e6, float64(to.Sub(l.started))/1e6)); err != nil {
		return err
	}
	ul.lags = append(ul.lags, lagRun{key: "tidemark-backfill", name: "tidemark, during the backfill", l: l,
		window: to.Sub(from), s: l.stats(from, to), cpu: fill.cpu})
	if after := l.stopped.Sub(to); after >= 2*time.Second {
		ul.lags = append(ul.lags, lagRun{key: "tidemark-after", name: "tidemark, after the backfill", l: l,
			window: after, s: l.stats(to, l.stopped), cpu: cpuEnd.sub(cpuTo)})
	}
	return ul.check("tidemark", tidemarkDB)
}

// trace writes a load's polls and probes to $TIDEMARK_BENCH_LAG_TRACE.<key>
// when that variable is set.
func (ul *underLoad) trace(l *load, key, note string) error {
	prefix := os.Getenv("TIDEMARK_BENCH_LAG_TRACE")
	if prefix == "" {
		return nil
	}
	path := prefix + "." + key
	if err := l.writeTrace(path); err != nil {
		return err
	}
	ul.logf("polls and probes written to %s %s", path, note)
	return nil
}

func fillNote(rec store.Backfill, staged int64) string {
	how := fmt.Sprintf("%d through the sink's staging table", staged)
	if staged < 0 {
		how = "staging table unknown"
	}
	return fmt.Sprintf("%d chunks, %d rows written (%s), %d retries, %d window conflicts",
		rec.Chunks, rec.RowsWritten, how, rec.Retries, rec.WindowConflicts)
}

// stagedRows is how many rows the postgres sink has put into its staging
// tables (the set-based path for chunks whose range already holds rows;
// an empty range is COPYed straight into the table), from the statistics
// of the destination's temporary tables. A backend publishes its
// statistics within about a second of a commit: this waits 1.5 s first.
// -1 when unknown.
func (ul *underLoad) stagedRows(dsn string) int64 {
	if ul.sleep(1500*time.Millisecond) != nil {
		return -1
	}
	conn, err := pgx.Connect(ul.ctx, dsn)
	if err != nil {
		return -1
	}
	defer conn.Close(ul.ctx)
	var n int64
	err = conn.QueryRow(ul.ctx, `SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_stat_all_tables WHERE relname LIKE '\_tidemark\_chunk\_%'`).Scan(&n)
	if err != nil {
		return -1
	}
	return n
}

// check waits (up to a minute) until the destination table equals the
// source's: row count and a hash of every row's values.
func (ul *underLoad) check(name, db string) error {
	const q = `SELECT count(*), coalesce(sum(hashtext(concat_ws('|', id, customer_id, status, amount, note, payload, created_at, updated_at))::bigint), 0) FROM t`
	sum := func(dsn string) (string, error) {
		conn, err := pgx.Connect(ul.ctx, dsn)
		if err != nil {
			return "", err
		}
		defer conn.Close(ul.ctx)
		var n, h int64
		if err := conn.QueryRow(ul.ctx, q).Scan(&n, &h); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d rows, hash %d", n, h), nil
	}
	deadline := time.Now().Add(time.Minute)
	for {
		want, err := sum(ul.sv.src.DSN(srcDB))
		if err != nil {
			return fmt.Errorf("check %s: %w", name, err)
		}
		got, err := sum(ul.sv.dst.DSN(db))
		if err != nil {
			return fmt.Errorf("check %s: %w", name, err)
		}
		if got == want {
			ul.checks = append(ul.checks, fmt.Sprintf("%s: the destination equals the source after the load (%s)", name, got))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the destination differs from the source a minute after the load: %s, source %s", name, got, want)
		}
		if err := ul.sleep(time.Second); err != nil {
			return err
		}
	}
}

func (ul *underLoad) findLag(key string) (lagRun, bool) {
	for _, r := range ul.lags {
		if r.key == key {
			return r, true
		}
	}
	return lagRun{}, false
}

func (ul *underLoad) findFill(key string) (fillRun, bool) {
	for _, r := range ul.fills {
		if r.key == key {
			return r, true
		}
	}
	return fillRun{}, false
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func (ul *underLoad) print(out io.Writer) {
	spec := ul.p.load
	fmt.Fprintf(out, "\ntidemark under write load, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, PostgreSQL %s; two servers on this machine: source (db %q), destination (dbs %q, %q)\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), ul.src.version, srcDB, nativeDB, tidemarkDB)
	fmt.Fprintf(out, "source public.t: %d rows, %.1f MB\n", ul.src.rows, float64(ul.src.bytes)/1e6)
	if ul.p.destRTT > 0 {
		fmt.Fprintf(out, "tidemark's destination %s away (TIDEMARK_BENCH_DEST_RTT: through a delaying proxy; native's is not)\n", ul.p.destRTT)
	}
	fmt.Fprintf(out, "load: %.0f updates/s on a fixed schedule over %d connections, random keys: %s\n", spec.rate, spec.conns, updateSQL)
	fmt.Fprintf(out, "lag: 1 update in %d is a probe, from its commit (the UPDATE returned) until a poll of the destination every %s shows it\n",
		spec.sampleEvery, spec.pollEvery)
	delay := "200ms (default)"
	if ul.p.batchDelay != "" {
		delay = ul.p.batchDelay
	}
	write := "20ms (default)"
	if ul.p.chunkWrite != "" {
		write = ul.p.chunkWrite
	}
	fmt.Fprintf(out, "tidemark: backfill.chunk_size %d, backfill.chunk_write_target %s, batch.max_delay %s, other settings default\n\n",
		ul.p.chunkSize, write, delay)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lag of live changes, ms\tseconds\tupdates/s\tprobes\tp50\tp90\tp99\tmax\tmissed first\tresolution\tCPU s: Go\tsrc PG\tdst PG\tother\t")
	for _, r := range ul.lags {
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%d\t%s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\t%s\t%s\t%s\t\n",
			r.name, r.window.Seconds(), r.l.rate(), r.s.probes-r.s.unseen, ms(r.s.p50), ms(r.s.p90), ms(r.s.p99), ms(r.s.max),
			100*float64(r.s.missed)/float64(max(r.s.probes-r.s.unseen, 1)), ms(r.s.resolution),
			cpuCell(r.cpu.self), cpuCell(r.cpu.src), cpuCell(r.cpu.dst), cpuCell(r.cpu.others()))
	}
	tw.Flush()
	for _, r := range ul.lags {
		if r.s.unseen > 0 {
			fmt.Fprintf(out, "%s: %d probes never seen on the destination\n", r.name, r.s.unseen)
		}
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "copy of public.t\trows\tseconds\trows/s\tvs no load\tCPU s: Go\tsrc PG\tdst PG\tother\t")
	quiet, hasQuiet := ul.findFill("tidemark-quiet")
	for _, f := range ul.fills {
		vs := "-"
		if hasQuiet && strings.HasPrefix(f.key, "tidemark") {
			vs = fmt.Sprintf("%.2f×", f.rowsPerSec()/quiet.rowsPerSec())
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", f.name, f.rows, f.elapsed.Seconds(), f.rowsPerSec(), vs,
			f.cpu.self.Seconds(), f.cpu.src.Seconds(), f.cpu.dst.Seconds(), f.cpu.others().Seconds())
	}
	tw.Flush()
	for _, f := range ul.fills {
		if f.note != "" {
			fmt.Fprintf(out, "%s: %s\n", f.name, f.note)
		}
	}
	fmt.Fprintln(out)
	for _, r := range ul.lags {
		if p99, mx, ok := r.l.ownStats(); ok && strings.HasPrefix(r.key, "tidemark") && r.key != "tidemark-after" {
			fmt.Fprintf(out, "tidemark's own Stream.Lag, sampled every 10ms over the whole load of %q: p99 %s ms, max %s ms\n", r.name, ms(p99), ms(mx))
		}
	}
	for _, r := range ul.lags {
		fmt.Fprintf(out, "%s: %d polls, %.1f ms each on average, largest gap between two %s ms, longest sweep %s ms; largest schedule slip of an update %s ms\n",
			r.name, r.l.polls, float64(r.l.pollTime)/float64(time.Millisecond)/float64(max(r.l.polls, 1)), ms(r.l.pollGapMx),
			ms(r.l.longestSweep()), ms(time.Duration(r.l.maxLate.Load())))
		if r.key == "tidemark-backfill" {
			break // the same load as the row after it
		}
	}
	for _, c := range ul.checks {
		fmt.Fprintln(out, c)
	}
	fmt.Fprintln(out, "\nlag: from the commit to the end of the first poll that showed the change (an upper bound). missed first:")
	fmt.Fprintln(out, "the probes a poll missed before one saw them (the rest were visible at their first poll). resolution: the")
	fmt.Fprintln(out, "mean time from the start of a poll to the end of the next, over the polls that saw something. A poll asks")
	fmt.Fprintf(out, "for the oldest %d outstanding probes; after a poll that saw all it asked for, the next goes at once for up\n", pollKeys)
	fmt.Fprintf(out, "to %d (a sweep: one destination commit can show many probes).\n", sweepKeys)
	ul.printTarget(out)
	ul.warnBusy(out)
}

// cpuCell is a CPU figure; "-" for none measured.
func cpuCell(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}

// printTarget compares tidemark's lag during the backfill with the issue's
// target: p99 no worse than twice native's and under 1 s.
func (ul *underLoad) printTarget(out io.Writer) {
	nat, ok1 := ul.findLag("native")
	tm, ok2 := ul.findLag("tidemark-backfill")
	if !ok1 || !ok2 {
		return
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	twice := tm.s.p99 <= 2*nat.s.p99
	second := tm.s.p99 < time.Second
	fmt.Fprintf(out, "\ntarget: tidemark's p99 lag during the backfill %s ms, %.1f× native's %s ms\n", ms(tm.s.p99), ratio(tm.s.p99, nat.s.p99), ms(nat.s.p99))
	fmt.Fprintf(out, "  p99 ≤ 2× native (%s ms): %s; p99 < 1 s: %s; overall %s\n", ms(2*nat.s.p99), verdict(twice), verdict(second), verdict(twice && second))
	if st, ok := ul.findLag("tidemark-stream"); ok {
		fmt.Fprintf(out, "  (tidemark with no backfill: p99 %s ms, %.1f× native's)\n", ms(st.s.p99), ratio(st.s.p99, nat.s.p99))
	}
	q, ok3 := ul.findFill("tidemark-quiet")
	l, ok4 := ul.findFill("tidemark-load")
	if ok3 && ok4 {
		fmt.Fprintf(out, "backfill rows/s under load %.0f, %.2f× the quiet backfill's %.0f\n", l.rowsPerSec(), l.rowsPerSec()/q.rowsPerSec(), q.rowsPerSec())
	}
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// warnBusy names the stretches during which other processes used more
// than a tenth of the machine.
func (ul *underLoad) warnBusy(out io.Writer) {
	var busy []string
	check := func(name string, c cpuTimes, d time.Duration) {
		if d <= 0 || c.machine == 0 {
			return
		}
		if share := c.others().Seconds() / (d.Seconds() * float64(runtime.NumCPU())); share > 0.1 {
			busy = append(busy, fmt.Sprintf("%s (%.0f%%)", name, 100*share))
		}
	}
	for _, f := range ul.fills {
		check(f.name, f.cpu, f.elapsed)
	}
	for _, r := range ul.lags {
		if r.key != "tidemark-backfill" { // the backfill's row covers it
			check(r.name, r.cpu, r.window)
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(out, "\nWARNING: other processes used a share of the CPUs during: %s.\n", strings.Join(busy, ", "))
		fmt.Fprintln(out, "Those figures are pessimistic; rerun on a quiet machine.")
	}
}

// report hands the main figures to the benchmark framework.
func (ul *underLoad) report() {
	ul.b.ReportMetric(0, "ns/op")
	for _, r := range ul.lags {
		ul.b.ReportMetric(float64(r.s.p50)/1e6, r.key+"-p50-ms")
		ul.b.ReportMetric(float64(r.s.p99)/1e6, r.key+"-p99-ms")
	}
	if nat, ok := ul.findLag("native"); ok && nat.s.p99 > 0 {
		if tm, ok := ul.findLag("tidemark-backfill"); ok {
			ul.b.ReportMetric(ratio(tm.s.p99, nat.s.p99), "p99-tidemark/native")
		}
	}
	for _, f := range ul.fills {
		ul.b.ReportMetric(f.rowsPerSec(), f.key+"-rows/s")
	}
}
