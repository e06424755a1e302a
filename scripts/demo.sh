#!/usr/bin/env bash
# The main job end to end: a throwaway PostgreSQL source with sample tables,
# streamed into a SQLite file while a writer runs, backfilled, verified.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec go run ./cmd/tidemark demo "$@"
