#!/bin/sh
# tests/soak/run.sh [SECONDS] — the soak test (issue 13): keel under mixed
# traffic for SECONDS (default 600), its memory sampled throughout. Not run
# by CI; run it before a release or after touching connection handling.
#
#   tests/soak/run.sh            # 10 minutes
#   tests/soak/run.sh 180        # a 3-minute version
#
# The traffic (tests/soak/soak.py, Python 3 standard library only), from a
# fixed set of clients, paced so that it loads rather than saturates a
# small machine:
#   80% of the clients: short GETs (hello's /hello/NAME and /), a few per
#        keep-alive connection, then a new connection;
#   10%: long-lived WebSocket connections to hello's /ws echo, a ping (a
#        heartbeat) every 2 s and a message every 500 ms, each answered;
#   10%: 1 MiB POSTs to /echo, read back whole.
# keel's RSS is sampled every 5 s. The run fails (exit 1) if any request,
# message or heartbeat fails or is answered wrongly, or if keel's RSS after
# the first fifth (the warm-up: pools, caches, arenas fill) grows by more
# than 10% (and 4 MiB; medians of the second and the last fifth): a leak
# shows as a steady climb. It prints the
# figures: requests and messages per kind, errors, latency percentiles, the
# RSS series.
#
# Environment: KEEL_BIN (default build/keel), KEEL_MODULES (build/modules),
# SOAK_CLIENTS (default 40), SOAK_WORKERS (keel workers, default 2),
# SOAK_GET_RATE (requests per second per GET client, default 25).
set -eu

seconds=${1:-600}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${KEEL_BIN:-$root/build/keel}
mods=${KEEL_MODULES:-$root/build/modules}
[ -x "$bin" ] || { echo "soak: $bin not found (make build)" >&2; exit 2; }
[ -f "$mods/mod_hello.so" ] || { echo "soak: $mods/mod_hello.so not found" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/keel-soak-XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

cat >"$dir/keel.conf" <<CONF
[keel]
module_path = $mods
listen = 127.0.0.1:0 http1
workers = ${SOAK_WORKERS:-2}
modules = http1 deflate websocket hello
log_level = info
crash_report = off
[http1]
max_body = 2m
keepalive_timeout = 30s
CONF
"$bin" -c "$dir/keel.conf" 2>"$dir/keel.log" &
pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) (http1).*/\1/p' "$dir/keel.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "soak: keel did not start:" >&2; cat "$dir/keel.log" >&2; exit 2; }
echo "soak: keel $pid on 127.0.0.1:$port for ${seconds}s"

status=0
python3 "$here/soak.py" --port "$port" --pid "$pid" --seconds "$seconds" \
    --clients "${SOAK_CLIENTS:-40}" --get-rate "${SOAK_GET_RATE:-25}" || status=$?

kill -TERM "$pid"
if ! wait "$pid"; then
    echo "soak: keel did not exit cleanly" >&2
    status=1
fi
pid=
warnings=$(grep -c -E '\[(warn|error)\]' "$dir/keel.log" || true)
echo "soak: keel logged $warnings warnings or errors"
if [ "$warnings" -gt 0 ]; then
    grep -E '\[(warn|error)\]' "$dir/keel.log" | head -n 20
fi
exit $status
