#!/usr/bin/env bash
# Installs what tidemark's demo and tests need on a Debian machine with Go:
# the PostgreSQL server binaries (the tests start their own throwaway
# servers from them, as the postgres user), the MariaDB server and client
# (the MySQL source's tests start throwaway mariadbd servers the same way,
# as the mysql user), Chromium (the console's
# browser tests drive it headless), nats-server (the NATS destination's tests
# start throwaway servers with JetStream) and a C compiler (the row filter parser,
# pg_query_go, is PostgreSQL's own parser built with cgo).
set -euo pipefail

need_pg() { ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || ! id postgres >/dev/null 2>&1; }
need_mariadb() { ! command -v mariadb-install-db >/dev/null || ! { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ]; } || ! id mysql >/dev/null 2>&1; }
need_chromium() { [ ! -x /usr/bin/chromium ]; }
need_cc() { ! command -v gcc >/dev/null; }
need_nats() { ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; }

packages=()
need_pg && packages+=(postgresql)
need_mariadb && packages+=(mariadb-server mariadb-client)
need_chromium && packages+=(chromium)
need_cc && packages+=(gcc)
need_nats && packages+=(nats-server)
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
