// Package bench holds tidemark's backfill benchmark: figures, not pass/fail.
//
// BenchmarkBackfill (bench_test.go) starts a throwaway PostgreSQL server,
// loads a table of a million rows and copies it three ways in one run: a
// binary COPY pipe, PostgreSQL's own logical replication initial sync, and
// a tidemark backfill through a live stream. It runs only with -bench (`make
// bench`); `go test ./internal/bench/` runs nothing heavy. See
// docs/benchmark.md for what is measured and the figures.
package bench
