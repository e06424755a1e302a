#!/usr/bin/env bash
# The whole test suite, integration tests included, with the race detector.
# Tests start their own PostgreSQL servers; none is skipped for lack of one.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# go vet runs beside the tests rather than before them (the suite is near
# its time budget); a vet finding still fails the run. It vets the -race
# build, whose compiled packages the tests build anyway: a plain vet
# compiles every dependency a second time (45 s more wall time after a cold
# cache). The soak test (make soak) is not run here, but it must build.
go vet -race ./... &
vet=$!
go vet -race -tags soak ./internal/daemon &
vetsoak=$!
status=0
# go test starts packages in the order named: the longest first, so that
# internal/stream and internal/daemon (the two longest, of similar length)
# run beside each other and the others fill in after them.
# The timeout catches a hang, not a slow machine: internal/stream takes
# 15 minutes on a quick 2-core VM and passed 25 on a slow one.
go test -race -count=1 -timeout 45m "$@" ./internal/stream ./internal/daemon ./internal/api ./internal/cli ./internal/source/mysql ./... || status=$?
wait "$vet" || status=1
wait "$vetsoak" || status=1
exit "$status"
