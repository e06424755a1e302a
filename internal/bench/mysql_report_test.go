package bench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// median is the median rows/s of the runs with the given key (the mean of
// the middle two for an even count), and the largest peak RSS among them.
func (mb *myBench) median(key string) (rowsPerSec float64, peak int64) {
	var rates []float64
	for _, r := range mb.results {
		if r.key == key {
			rates = append(rates, r.rowsPerSec())
			peak = max(peak, r.peak)
		}
	}
	if len(rates) == 0 {
		return 0, 0
	}
	slices.Sort(rates)
	n := len(rates)
	if n%2 == 1 {
		return rates[n/2], peak
	}
	return (rates[n/2-1] + rates[n/2]) / 2, peak
}

// print writes every run and the medians.
func (mb *myBench) print(out io.Writer) {
	fmt.Fprintf(out, "\ntidemark MariaDB → PostgreSQL backfill benchmark, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, MariaDB %s (source) and PostgreSQL (destination) on this machine\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), mb.version)
	fmt.Fprintf(out, "source %s.%s: %d rows, %.1f MB (data_length + index_length); %d repetitions, pipe and tidemark alternately\n",
		myDB, myTable, mb.p.rows, float64(mb.bytes)/1e6, mb.reps)
	peak := "VmHWM of this process, reset before each run"
	if !mb.hwm {
		peak = "largest VmRSS of this process sampled every 50ms (VmHWM could not be reset)"
	}
	fmt.Fprintf(out, "tidemark: backfill.chunk_size %d, other settings default; peak RSS: %s; pipe: the two clients' ru_maxrss added\n\n",
		mb.p.chunkSize, peak)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trows\tseconds\trows/s\tMB/s\tpeak RSS MiB\tCPU s: Go\tclients\tMariaDB\tdst PG\tother\t")
	for _, r := range mb.results {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.1f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.name, r.rows, r.elapsed.Seconds(), r.rowsPerSec(), r.mbPerSec(), float64(r.peak)/(1<<20),
			r.cpu.self.Seconds(), r.cpu.children.Seconds(), r.cpu.src.Seconds(), r.cpu.dst.Seconds(), r.cpu.others().Seconds())
	}
	tw.Flush()
	fmt.Fprintln(out)
	for _, r := range mb.results {
		fmt.Fprintf(out, "%s: %s\n", r.name, r.note)
	}
	pipe, pipePeak := mb.median("mysql-pipe")
	tm, tmPeak := mb.median("mysql-tidemark")
	fmt.Fprintf(out, "\nmedian rows/s: pipe %.0f, tidemark %.0f; tidemark/pipe %.2f× (target ≥ 0.60×)\n", pipe, tm, tm/pipe)
	fmt.Fprintf(out, "largest peak RSS: tidemark %.0f MiB (this process), pipe %.0f MiB (its clients)\n",
		float64(tmPeak)/(1<<20), float64(pipePeak)/(1<<20))
	fmt.Fprintln(out, "\nMB/s is the source table's data_length + index_length over the time. CPU seconds over the same time:")
	fmt.Fprintln(out, "Go is this process (the benchmark and tidemark), clients the pipe's mariadb and psql, MariaDB and")
	fmt.Fprintln(out, "dst PG the servers, other the rest of the machine.")
	warnBusy(out, mb.results)
}

// report hands the medians to the benchmark framework.
func (mb *myBench) report() {
	mb.b.ReportMetric(0, "ns/op") // one whole run: not a per-op time
	pipe, _ := mb.median("mysql-pipe")
	tm, peak := mb.median("mysql-tidemark")
	mb.b.ReportMetric(pipe, "mysql-pipe-rows/s")
	mb.b.ReportMetric(tm, "mysql-tidemark-rows/s")
	mb.b.ReportMetric(tm/pipe, "mysql-tidemark/pipe")
	mb.b.ReportMetric(float64(peak)/(1<<20), "mysql-tidemark-peak-MiB")
}
