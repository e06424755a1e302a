.PHONY: demo test bench build soak soak-cluster

build:
	go build -o bin/tidemark ./cmd/tidemark

demo:
	./scripts/demo.sh

test:
	./scripts/test.sh

# Figures, not pass/fail: tidemark's backfill against COPY and native
# logical replication on the same table, measured in the same run; the same
# backfill into each destination type (postgres, SQLite beside a plain
# INSERT of the same rows, files, NATS, Kafka against kfake); a first
# start's load of eight tables in its slot's snapshot beside parallel COPY
# pipes; a stream of
# 1,000 tables loaded at its start beside the same rows as one table; the
# batch engine's planning and dispatch of 730,000 instances; the
# console's Objects tab with 1,000 objects in Chromium (the browser harness is
# the API tests', so that benchmark lives in internal/api); no-op dispatch
# through a cluster's queue with one and three nodes against a lone engine;
# a cluster's failover time over 10 SIGKILLs (docs/cluster.md); recording
# the counters of a destination commit across 50 tables, one write a table
# against one for all; a PostgreSQL source's fixed cost a chunk read and a
# range's sum found by its size against one bounded by a chunk's key.
bench:
	./scripts/setup.sh
	go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./internal/bench/
	go test -run '^$$' -bench '^BenchmarkConsoleObjectsDense$$' -benchtime 1x -timeout 10m ./internal/api/
	go test -run '^$$' -bench 'Chunk|RowInserts|CopyBaseline' -benchtime 3s -timeout 10m ./internal/sink/postgres/ ./internal/sink/sqlite/
	go test -run '^$$' -bench '^BenchmarkClusterFailover$$' -benchtime 1x -timeout 10m ./internal/daemon/
	go test -run '^$$' -bench '^BenchmarkAddCounters$$' -benchtime 2s -timeout 10m ./internal/store/
	go test -run '^$$' -bench 'ChunkFixedCost|SumRange' -benchtime 3s -timeout 10m ./internal/source/pg/

# Minutes, not seconds: SIGKILL the daemon TIDEMARK_SOAK_KILLS times (default
# 20) at random moments while four tables are written to and backfilled into
# PostgreSQL and SQLite, then check both converge to the source. The seed is
# printed; TIDEMARK_SOAK_SEED=N repeats its choices (see docs/soak.md).
soak:
	./scripts/setup.sh
	go test -tags soak -race -count=1 -run '^TestSoak$$' -timeout 60m -v ./internal/daemon

# The soak's multi-node mode: three nodes, a stream under a writer and 240
# locked shell instances; TIDEMARK_SOAK_KILLS (default 10) random SIGKILLs
# and SIGSTOPs of random nodes, then convergence (see docs/soak.md).
soak-cluster:
	./scripts/setup.sh
	go test -tags soak -race -count=1 -run '^TestSoakCluster$$' -timeout 60m -v ./internal/daemon
