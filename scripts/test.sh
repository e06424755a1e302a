#!/usr/bin/env bash
# The whole test suite, integration tests included, with the race detector.
# Tests start their own PostgreSQL servers; none is skipped for lack of one.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
go vet ./...
go vet -tags soak ./internal/daemon # the soak test (make soak) is not run here, but it must build
# go test starts packages in the order named: the longest first, so that
# internal/stream (about 10 minutes) runs beside the others, not after them.
exec go test -race -count=1 -timeout 25m "$@" ./internal/stream ./internal/api ./internal/cli ./internal/source/mysql ./internal/daemon ./...
