#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
#
# Runs CMD with PG_URL pointing at a PostgreSQL server.
#
# If PG_URL is already set and non-empty, that server is used and CMD is
# simply executed. Otherwise a throwaway cluster is made with initdb in a
# temporary directory, started on a free loopback port (no Unix socket, no
# password, trust for the local user), and stopped and removed again when
# CMD ends, whatever the outcome. When run as root, the cluster runs as
# the user postgres (PGTEST_USER overrides), since PostgreSQL refuses to
# run as root. The exit code is CMD's.
#
# The PostgreSQL binaries (initdb, pg_ctl) are taken from PATH, or else
# from the newest Debian install (postgresql-NN).
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

if [[ -n "${PG_URL:-}" ]]; then
	exec "$@"
fi

bindir=""
if ! command -v initdb >/dev/null || ! command -v pg_ctl >/dev/null; then
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		bindir="$d/"
		break
	done
	if [[ -z "$bindir" ]]; then
		echo "with-postgres: no initdb/pg_ctl on PATH nor a Debian postgresql install; install postgresql-15 or set PG_URL" >&2
		exit 1
	fi
fi

work="$(mktemp -d -t pgtest.XXXXXX)"
as=()
owner="$(id -un)"
if [[ "$(id -u)" = 0 ]]; then
	owner="${PGTEST_USER:-postgres}"
	chown "$owner" "$work"
	as=(runuser -u "$owner" --)
fi
started=""

cleanup() {
	if [[ -n "$started" ]]; then
		"${as[@]}" "${bindir}pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap runs.
trap 'exit 130' INT
trap 'exit 143' TERM

"${as[@]}" "${bindir}initdb" -D "$work/data" -U promlib -A trust --no-sync -E UTF8 >"$work/initdb.log" 2>&1 || {
	echo "with-postgres: initdb failed; its log follows:" >&2
	cat "$work/initdb.log" >&2
	exit 1
}

# A free loopback port: bind to port 0 and read what the kernel gave.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
opts="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories= -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB"
started=1
"${as[@]}" "${bindir}pg_ctl" -D "$work/data" -l "$work/server.log" -o "$opts" -w -t "${PGTEST_START_TIMEOUT:-60}" start >/dev/null || {
	echo "with-postgres: the server failed to start; its log follows:" >&2
	cat "$work/server.log" >&2
	exit 1
}

PG_URL="postgres://promlib@127.0.0.1:$port/postgres?sslmode=disable"
export PG_URL
echo "with-postgres: PG_URL=$PG_URL" >&2

status=0
"$@" || status=$?
exit "$status"
