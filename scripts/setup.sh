#!/usr/bin/env bash
# Installs what tidemark's demo and tests need on a Debian machine with Go:
# the PostgreSQL server binaries (the tests start their own throwaway
# servers from them, as the postgres user) and Chromium (the console's
# browser tests drive it headless).
set -euo pipefail

need_pg() { ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || ! id postgres >/dev/null 2>&1; }
need_chromium() { [ ! -x /usr/bin/chromium ]; }

packages=()
need_pg && packages+=(postgresql)
need_chromium && packages+=(chromium)
if [ ${#packages[@]} -gt 0 ]; then
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO="sudo"
	echo "installing ${packages[*]} (apt-get install)" >&2
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${packages[@]}" >/dev/null
fi
if ! command -v go >/dev/null; then
	echo "Go is not on PATH: install Go 1.26 or later (https://go.dev/dl) and retry" >&2
	exit 1
fi
