package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// benchPlan is a backfill plan of n instances over tasks tasks, each
// instance waiting for its task's previous cycle and for the same cycle of
// the previous task: about 2n edges.
func benchPlan(n, tasks int) ([]store.BatchInstance, [][]int) {
	t0 := time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC)
	insts := make([]store.BatchInstance, n)
	deps := make([][]int, n)
	for i := range insts {
		task, cycle := i%tasks, i/tasks
		biz := t0.AddDate(0, 0, cycle)
		insts[i] = store.BatchInstance{
			Task: fmt.Sprintf("task_%03d", task), BizTime: biz, BizEnd: biz, // as the planner: only single instances span
			Scheduled: biz.AddDate(0, 0, 1).Add(2 * time.Hour),
			Group:     cycle, Seq: i, Order: task, Mode: "run", ResourceGroup: "default", State: store.InstanceWaiting,
		}
		if cycle > 0 {
			deps[i] = append(deps[i], i-tasks)
		}
		if task > 0 {
			deps[i] = append(deps[i], i-1)
		}
	}
	return insts, deps
}

func benchStore(b *testing.B) *store.Store {
	b.Helper()
	return benchStoreAt(b, "sqlite://"+b.TempDir()+"/meta.db")
}

func benchStoreAt(b *testing.B, url string) *store.Store {
	b.Helper()
	s, err := store.Open(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkCreateBatchBackfill creates backfills of 10,000 instances (and
// 730,000, the size of 20 years of 100 daily tasks, with -bench=/730000) in
// a SQLite and a PostgreSQL store.
func BenchmarkCreateBatchBackfill(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 730_000} {
			b.Run(fmt.Sprintf("%s/%d", dialect, n), func(b *testing.B) { benchCreateBatchBackfill(b, dialect, n) })
		}
	}
}

// benchURL is the URL of a fresh store of the dialect.
func benchURL(b *testing.B, dialect string) string {
	b.Helper()
	if dialect != "postgres" {
		return "sqlite://" + b.TempDir() + "/meta.db"
	}
	return newPostgresDB(b)
}

func benchCreateBatchBackfill(b *testing.B, dialect string, n int) {
	s := benchStoreAt(b, benchURL(b, dialect))
	// 2,000 tasks, as BenchmarkBatch's DAG: how many index pages a
	// statement touches depends on it (batchInstanceRowsPerInsert).
	insts, deps := benchPlan(n, 2000)
	edges := 0
	for _, d := range deps {
		edges += len(d)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bf := &store.BatchBackfill{Name: fmt.Sprintf("bench-%d", i), Task: "task_000", StartedBy: "cli", RunAt: time.Now()}
		if err := s.CreateBatchBackfill(b.Context(), bf, insts, deps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "instances/s")
	b.ReportMetric(float64(edges)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
}

// BenchmarkUpdateBatchInstances measures the dispatch hot path: batches of
// 200 instance updates (waiting → running with a pid, or running →
// succeeded with outputs).
func BenchmarkUpdateBatchInstances(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	const n, batch = 100_000, 200
	insts, deps := benchPlan(n, 100)
	bf := &store.BatchBackfill{Name: "bench", Task: "task_000", StartedBy: "cli", RunAt: time.Now()}
	if err := s.CreateBatchBackfill(ctx, bf, insts, deps); err != nil {
		b.Fatal(err)
	}
	start := time.Now().UTC()
	pos := 0
	updates := 0
	b.ResetTimer()
	for b.Loop() {
		chunk := make([]store.BatchInstance, 0, batch)
		for range batch {
			c := insts[pos%n]
			pos++
			if c.State == store.InstanceRunning {
				c.State = store.InstanceSucceeded
				fin := start.Add(time.Duration(pos) * time.Millisecond)
				c.FinishedAt = &fin
				c.Outputs = map[string]string{"rows": fmt.Sprint(pos)}
			} else {
				c.State = store.InstanceRunning
				c.Attempt++
				st := start.Add(time.Duration(pos) * time.Millisecond)
				c.StartedAt, c.FinishedAt = &st, nil
				c.PID, c.PGID, c.ProcStart = 4000+pos, 4000+pos, uint64(pos)*7
				c.Rendered = "echo " + c.Task
			}
			insts[(pos-1)%n] = c
			chunk = append(chunk, c)
		}
		if err := s.UpdateBatchInstances(ctx, chunk); err != nil {
			b.Fatal(err)
		}
		updates += batch
	}
	b.ReportMetric(float64(updates)/b.Elapsed().Seconds(), "updates/s")
}

// BenchmarkListBackfillInstances reads a backfill of 730,000 instances
// page by page, as a restarted batch engine does, on both stores.
func BenchmarkListBackfillInstances(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			s := benchStoreAt(b, benchURL(b, dialect))
			const n = 730_000
			insts, deps := benchPlan(n, 100)
			bf := &store.BatchBackfill{Name: "bench", Task: "task_000", StartedBy: "cli", RunAt: time.Now()}
			if err := s.CreateBatchBackfill(b.Context(), bf, insts, deps); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				var after int64
				read := 0
				for {
					page, err := s.ListBatchInstances(b.Context(), store.BatchInstanceFilter{BackfillID: bf.ID, AfterID: after, Limit: 10000})
					if err != nil {
						b.Fatal(err)
					}
					read += len(page)
					if len(page) < 10000 {
						break
					}
					after = page[len(page)-1].ID
				}
				if read != n {
					b.Fatalf("read %d instances, want %d", read, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "instances/s")
		})
	}
}
