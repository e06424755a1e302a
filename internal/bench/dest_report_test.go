package bench

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"
)

// plain is the timed runs without what the destinations hold.
func (db *destBench) plain() []result {
	rs := make([]result, len(db.results))
	for i, r := range db.results {
		rs[i] = r.result
	}
	return rs
}

// print writes the figures table.
func (db *destBench) print(out io.Writer) {
	fmt.Fprintf(out, "\ntidemark destinations benchmark, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, PostgreSQL %s; source public.t: %d rows, %.1f MB (pg_total_relation_size), %.0f bytes/row\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), db.src.version, db.src.rows, float64(db.src.bytes)/1e6,
		float64(db.src.bytes)/float64(db.src.rows))
	peak := "VmHWM of this process (the stream runs in it), reset before each run"
	if !db.hwm {
		peak = "largest VmRSS of this process sampled every 50ms (VmHWM could not be reset)"
	}
	fmt.Fprintf(out, "tidemark: one stream per destination, running before the clock starts; backfill.chunk_size %d, verify off, other settings default; peak RSS: %s\n",
		db.p.chunkSize, peak)
	fmt.Fprintf(out, "kafka is franz-go's kfake (%d partitions), an in-memory fake in a child process, NOT a Kafka broker\n\n", kafkaPartitions)
	rs := db.plain()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "destination\trows\tseconds\trows/s\tMB/s\tvs postgres\tpeak RSS MiB\theld MB\tCPU s: Go\tsrc PG\tdestination\tother\t")
	for _, r := range db.results {
		held := "-"
		if r.held >= 0 {
			held = fmt.Sprintf("%.1f", float64(r.held)/1e6)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.1f\t%s\t%.0f\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.name, r.rows, r.elapsed.Seconds(), r.rowsPerSec(), r.mbPerSec(), ratioTo(rs, r.result, "dest-postgres"),
			float64(r.peak)/(1<<20), held, r.cpu.self.Seconds(), r.cpu.src.Seconds(), r.cpu.dst.Seconds(), r.cpu.others().Seconds())
	}
	tw.Flush()
	fmt.Fprintln(out)
	for _, p := range destPipes {
		if d, ok := findResult(rs, p.dest); ok {
			fmt.Fprintf(out, "%s: %s the rows/s of %s\n", d.name, ratioTo(rs, d, p.key), p.what)
		}
	}
	fmt.Fprintln(out)
	for _, r := range db.results {
		fmt.Fprintf(out, "%s: %s; held: %s\n", r.name, r.note, r.heldWhat)
	}
	fmt.Fprintln(out, "\nMB/s is the backfill's bytes as tidemark counts them (the row values it read from the source, as")
	fmt.Fprintln(out, "its backfill record holds them; the same for every destination) over the time; held MB is what the")
	fmt.Fprintln(out, "destination holds afterwards. The time runs from Initiate until the object is Completed and")
	fmt.Fprintln(out, "Loaded; no verify runs. CPU seconds over the same time: Go is this process (the benchmark and")
	fmt.Fprintln(out, "tidemark), src PG the source server, destination the process serving the destination (the")
	fmt.Fprintln(out, "destination PostgreSQL for postgres and, idle, for files; nats-server; kfake), other the rest.")
	warnBusy(out, rs)
}

// report hands the main figures to the benchmark framework.
func (db *destBench) report() {
	db.b.ReportMetric(0, "ns/op") // one whole run: not a per-op time
	rs := db.plain()
	base, ok := findResult(rs, "dest-postgres")
	for _, r := range rs {
		db.b.ReportMetric(r.rowsPerSec(), r.key+"-rows/s")
		db.b.ReportMetric(float64(r.peak)/(1<<20), r.key+"-peak-MiB")
		if ok && r.key != base.key {
			db.b.ReportMetric(r.rowsPerSec()/base.rowsPerSec(), r.key+"/postgres")
		}
	}
	for _, p := range destPipes {
		d, ok1 := findResult(rs, p.dest)
		pipe, ok2 := findResult(rs, p.key)
		if ok1 && ok2 {
			db.b.ReportMetric(d.rowsPerSec()/pipe.rowsPerSec(), p.dest+"/"+p.key)
		}
	}
}
