#!/usr/bin/env bash
# with-mongo.sh CMD [ARGS...]
#
# Runs CMD with MONGO_URL pointing at a MongoDB-compatible server.
#
# If MONGO_URL is already set and non-empty, that server is used and CMD is
# simply executed. Otherwise the bundled test server (FerretDB behind a
# one-command-at-a-time proxy, see README.md) is built, started on a free
# loopback port with a temporary data directory, and stopped again when CMD
# ends, whatever the outcome. The exit code is CMD's.
#
# MONGOTEST_START_TIMEOUT sets how many seconds to wait for the server to
# answer (default 60; the build is not counted).
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

if [[ -n "${MONGO_URL:-}" ]]; then
	exec "$@"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d -t mongotest.XXXXXX)"
server_pid=""

cleanup() {
	if [[ -n "$server_pid" ]]; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap runs.
trap 'exit 130' INT
trap 'exit 143' TERM

echo "with-mongo: building the test server..." >&2
(cd "$here" && go build -buildvcs=false -o "$work/mongotest" .)

mkdir "$work/data"
"$work/mongotest" -listen 127.0.0.1:0 -data-dir "$work/data" -url-file "$work/url" \
	>"$work/server.log" 2>&1 &
server_pid=$!

deadline=$((SECONDS + ${MONGOTEST_START_TIMEOUT:-60}))
until [[ -s "$work/url" ]]; do
	if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS >= deadline)); then
		echo "with-mongo: the test server failed to start; its log follows:" >&2
		cat "$work/server.log" >&2
		exit 1
	fi
	sleep 0.1
done

MONGO_URL="$(<"$work/url")"
export MONGO_URL
# The server's own tests (go test in this directory) leave out a MONGO_URL
# that is this server: it is the code they already run in-process.
MONGOTEST_BUNDLED_URL="$MONGO_URL"
export MONGOTEST_BUNDLED_URL
echo "with-mongo: MONGO_URL=$MONGO_URL" >&2

status=0
"$@" || status=$?
exit "$status"
