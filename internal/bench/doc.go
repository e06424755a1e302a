// Package bench holds tidemark's backfill benchmark: figures, not pass/fail.
//
// BenchmarkBackfill (bench_test.go) starts a throwaway PostgreSQL server,
// loads a table of a million rows and copies it three ways in one run: a
// binary COPY pipe, PostgreSQL's own logical replication initial sync, and
// a tidemark backfill through a live stream. BenchmarkBackfillUnderLoad
// (underload_test.go, loadgen_test.go) measures the lag of live changes
// under 1,000 updates/s through native logical replication and through
// tidemark while it backfills the table being updated. BenchmarkMySQL
// (mysql_test.go) backfills a MariaDB table of a million rows into
// PostgreSQL through a mysql stream against the mariadb client piped into
// psql's COPY. BenchmarkDestinations (dest_test.go) backfills the same
// table into each destination type (postgres, files, NATS JetStream, Kafka
// against kfake) against the postgres destination. They run only with -bench (`make bench`); `go test
// ./internal/bench/` runs nothing heavy.
// See docs/benchmark.md for what is measured and the figures.
package bench
