package bench

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// quarterRates are the small tables' completion rates (tables/s) in each
// quarter of their completions, the first quarter's from the stream's start.
func (mb *manyBench) quarterRates() [4]float64 {
	var rates [4]float64
	prev := time.Duration(0)
	for q := range 4 {
		lo, hi := q*len(mb.loaded)/4, (q+1)*len(mb.loaded)/4
		if hi == lo {
			continue
		}
		end := mb.loaded[hi-1]
		if span := (end - prev).Seconds(); span > 0 {
			rates[q] = float64(hi-lo) / span
		}
		prev = end
	}
	return rates
}

func (mb *manyBench) print(out io.Writer) {
	n := mb.small + mb.big
	fmt.Fprintf(out, "\ntidemark many-tables benchmark, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s; two PostgreSQL servers on this machine\n", runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Fprintf(out, "stream of %d tables (%d of %d rows, %d of %d), automatic mode, chunk_size %d, verify off; a writer on %d of them (%d updates);\n",
		n, mb.small, manySmallRows, mb.big, manyBigRows, mb.p.chunkSize, min(manyWritten, mb.small), mb.writes)
	fmt.Fprintf(out, "%d new tables created during the load, discovery_interval %s\n\n", mb.newMade, manyDiscovery)
	fmt.Fprintf(out, "load at start, %d tables: %.1f s (%.0f rows/s)\n", n, mb.many.Seconds(), float64(mb.rows())/mb.many.Seconds())
	fmt.Fprintf(out, "load at start, the same %d rows as one table: %.1f s (%.0f rows/s)\n", mb.rows(), mb.one.Seconds(), float64(mb.rows())/mb.one.Seconds())
	fmt.Fprintf(out, "many tables / one table, time: %.2f× (target ≤ 1.5×)\n", mb.many.Seconds()/mb.one.Seconds())
	r := mb.quarterRates()
	fmt.Fprintf(out, "small tables loaded per second, by quarter of their completions: %.1f, %.1f, %.1f, %.1f; last/first %.2f (target ≥ 0.8)\n",
		r[0], r[1], r[2], r[3], r[3]/r[0])
	med := func(ds []time.Duration) float64 { return ds[len(ds)/2].Seconds() * 1000 }
	fmt.Fprintf(out, "a small table's backfill, medians: queued %.0f ms, started to finished %.0f ms, finished to loaded %.0f ms\n",
		med(mb.phases[0]), med(mb.phases[1]), med(mb.phases[2]))
	for i, d := range mb.found {
		fmt.Fprintf(out, "new table %d: backfill started %.1f s after it was created (target ≤ %s)\n", i+1, d.Seconds(), 2*manyDiscovery)
	}
}

func (mb *manyBench) report() {
	mb.b.ReportMetric(0, "ns/op")
	mb.b.ReportMetric(mb.many.Seconds(), "many-load-s")
	mb.b.ReportMetric(mb.one.Seconds(), "one-load-s")
	mb.b.ReportMetric(mb.many.Seconds()/mb.one.Seconds(), "many/one-time")
	r := mb.quarterRates()
	mb.b.ReportMetric(r[3]/r[0], "last/first-quarter-rate")
	if len(mb.found) > 0 {
		mb.b.ReportMetric(mb.found[len(mb.found)-1].Seconds(), "discovery-max-s")
	}
}
