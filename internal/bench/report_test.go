package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// findResult returns the result of rs with the given key.
func findResult(rs []result, key string) (result, bool) {
	for _, r := range rs {
		if r.key == key {
			return r, true
		}
	}
	return result{}, false
}

// ratioTo is r's rows/s over that of the result of rs keyed baseline,
// formatted; "-" without one.
func ratioTo(rs []result, r result, baseline string) string {
	base, ok := findResult(rs, baseline)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r.rowsPerSec()/base.rowsPerSec())
}

// print writes the figures table.
func (bn *bench) print(out io.Writer) {
	fmt.Fprintf(out, "\ntidemark backfill benchmark, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, PostgreSQL %s; two servers on this machine: source (db %q), destination (dbs %q, %q, %q)\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), bn.big.version, srcDB, copyDB, nativeDB, tidemarkDB)
	fmt.Fprintf(out, "source public.t: %d rows, %.1f MB (pg_total_relation_size), %.0f bytes/row; public.t_small: %d rows, %.1f MB\n",
		bn.big.rows, float64(bn.big.bytes)/1e6, float64(bn.big.bytes)/float64(bn.big.rows), bn.small.rows, float64(bn.small.bytes)/1e6)
	peak := "VmHWM, reset before each run"
	if !bn.hwm {
		peak = "largest VmRSS sampled every 50ms (VmHWM could not be reset)"
	}
	fmt.Fprintf(out, "tidemark: backfill.chunk_size %d, other settings default; peak RSS: %s\n\n", bn.p.chunkSize, peak)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trows\tseconds\trows/s\tMB/s\tvs COPY\tvs native\tpeak RSS MiB\tCPU s: Go\tsrc PG\tdst PG\tother\t")
	for _, r := range bn.results {
		rss := "-"
		if r.peak > 0 {
			rss = fmt.Sprintf("%.0f", float64(r.peak)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.1f\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.name, r.rows, r.elapsed.Seconds(), r.rowsPerSec(), r.mbPerSec(),
			ratioTo(bn.results, r, "copy"), ratioTo(bn.results, r, "native"), rss, r.cpu.self.Seconds(), r.cpu.src.Seconds(), r.cpu.dst.Seconds(), r.cpu.others().Seconds())
	}
	tw.Flush()
	fmt.Fprintln(out)
	bn.printTargets(out)
	bn.printVerifyShare(out)
	for _, r := range bn.results {
		if r.note != "" {
			fmt.Fprintf(out, "%s: %s\n", r.name, r.note)
		}
		if strings.HasPrefix(r.key, "tidemark") {
			fmt.Fprintf(out, "%s: RSS %.0f MiB at the start, largest VmRSS sampled every 50ms %.0f MiB\n",
				r.name, float64(r.before)/(1<<20), float64(r.sampled)/(1<<20))
		}
	}
	fmt.Fprintln(out, "\nMB/s is the source table's pg_total_relation_size over the time. CPU seconds over the same time:")
	fmt.Fprintln(out, "Go is this process (the benchmark and tidemark), src PG and dst PG every process of each server,")
	fmt.Fprintln(out, "other the rest of the machine: a run with much other CPU competed for the two cores and is slower")
	fmt.Fprintln(out, "than it would be on a quiet machine.")
	warnBusy(out, bn.results)
}

// warnBusy names the runs during which other processes used more than a
// tenth of the machine: their figures are lower than a quiet machine's.
func warnBusy(out io.Writer, results []result) {
	var busy []string
	for _, r := range results {
		capacity := r.elapsed.Seconds() * float64(runtime.NumCPU())
		if share := r.cpu.others().Seconds() / capacity; share > 0.1 {
			busy = append(busy, fmt.Sprintf("%s (%.0f%%)", r.name, 100*share))
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(out, "\nWARNING: other processes used a share of the CPUs during: %s.\n", strings.Join(busy, ", "))
		fmt.Fprintln(out, "Those figures (and ratios built on them) are pessimistic; rerun on a quiet machine.")
	}
}

// report hands the main figures to the benchmark framework.
func (bn *bench) report() {
	bn.b.ReportMetric(0, "ns/op") // one whole run: not a per-op time
	for _, r := range bn.results {
		bn.b.ReportMetric(r.rowsPerSec(), r.key+"-rows/s")
		if strings.HasPrefix(r.key, "tidemark") {
			if c, ok := findResult(bn.results, "copy"); ok {
				bn.b.ReportMetric(r.rowsPerSec()/c.rowsPerSec(), r.key+"/copy")
			}
			if n, ok := findResult(bn.results, "native"); ok {
				bn.b.ReportMetric(r.rowsPerSec()/n.rowsPerSec(), r.key+"/native")
			}
			bn.b.ReportMetric(float64(r.peak)/(1<<20), r.key+"-peak-MiB")
		}
	}
	if share, ok := bn.verifyShare(); ok {
		bn.b.ReportMetric(share, verifiedKey+"-adds")
	}
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// printTargets writes the backfills' rows/s against the COPY pipe's, with
// the targets they are held to.
func (bn *bench) printTargets(out io.Writer) {
	pipe, ok := findResult(bn.results, "copy")
	if !ok {
		return
	}
	for _, t := range []struct {
		key, what string
		target    float64
	}{{"tidemark-empty", "(a) into the empty destination", 0.9}, {"tidemark-populated", "(b) into the destination holding the rows", 1.2}} {
		if r, ok := findResult(bn.results, t.key); ok {
			fmt.Fprintf(out, "%s: %.2f× the COPY pipe's rows/s (target %.1f×)\n", t.what, r.rowsPerSec()/pipe.rowsPerSec(), t.target)
		}
	}
}
