.PHONY: demo test bench build

build:
	go build -o bin/tidemark ./cmd/tidemark

demo:
	./scripts/demo.sh

test:
	./scripts/test.sh

# Figures, not pass/fail: tidemark's backfill against COPY and native
# logical replication on the same table, measured in the same run; and the
# batch engine's planning and dispatch of 730,000 instances.
bench:
	./scripts/setup.sh
	go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./internal/bench/
