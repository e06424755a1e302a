#!/usr/bin/env bash
# Installs what tidemark's demo and tests need on a Debian machine with Go:
# the PostgreSQL server binaries (the tests start their own throwaway
# servers from them, as the postgres user).
set -euo pipefail

need_pg() { ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || ! id postgres >/dev/null 2>&1; }

if need_pg; then
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO="sudo"
	echo "installing PostgreSQL server binaries (apt-get install postgresql)" >&2
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
if ! command -v go >/dev/null; then
	echo "Go is not on PATH: install Go 1.26 or later (https://go.dev/dl) and retry" >&2
	exit 1
fi
