#!/usr/bin/env bash
# tests/bench/web_counts.sh — what static's `try`, the error pages and
# on-the-fly compression cost (docs/web.md): user-space instructions per
# HTTP/1.1 request (callgrind, counters zeroed after a warm-up, wrk -c16
# for SECS seconds), each case its own keel:
#   file          GET /app/4k.html, http1 static, no scope
#   file+try      the same with `try = $uri $uri/ /index.html` in [static]
#   file+scope    the same with a [/app/] scope whose `static.try` is empty
#   file+scopetry the same with the try list in the [/app/] scope
#   spa-route     GET /app/route under that scope: the fallback /index.html
#   404-page      GET /missing with `errors` and `page = 404 /404.html`
#   gzip|br|zstd  GET /4k.html with deflate (compress_files = on) and that
#                 Accept-Encoding
#
#   KEEL_BUILD=build-rel tests/bench/web_counts.sh [CASE...]
#
# Settings: KEEL_BUILD [build] SECS [5] CONNS [16] (1: one request per loop turn,
# the steadiest count). A build without the errors module
# or without `try` (main before issue 25) reports no count for those cases.
# Listens on an ephemeral port of 127.0.0.1; keel is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
[[ $KEEL_BUILD == /* ]] || KEEL_BUILD=$ROOT/$KEEL_BUILD
SECS=${SECS:-5}
CONNS=${CONNS:-16}
TMP=$(mktemp -d /tmp/keel-web.XXXXXX)
SERVER=""
cleanup() {
    [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/www/app"
python3 - "$TMP/www" <<'EOP'
import sys
www = sys.argv[1]
page = "".join("<p>line %d of a page of text</p>\n" % i for i in range(200))[:4096]
open(www + "/app/4k.html", "w").write(page)
open(www + "/index.html", "w").write(page)
open(www + "/404.html", "w").write("<h1>not found</h1>\n")
EOP

count() { # count LABEL MODULES EXTRA_CONFIG PATH [HEADER]
    local port out requests ir hdr=()
    [[ -n ${5:-} ]] && hdr=(-H "$5")
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$TMP/keel.conf" <<EOC
[keel]
listen = 127.0.0.1:$port http1
workers = 1
modules = $2
module_path = $KEEL_BUILD/modules
log_level = warn
[http1]
keepalive_timeout = 5m
max_requests = 0
[static]
mount = / $TMP/www
$3
EOC
    if ! "$KEEL_BUILD/keel" -t -c "$TMP/keel.conf" >/dev/null 2>&1; then
        echo "$1: no count (this build does not take the config)"
        return 0
    fi
    valgrind --tool=callgrind --dump-instr=no "--callgrind-out-file=$TMP/cg.%p" \
        "$KEEL_BUILD/keel" -c "$TMP/keel.conf" 2>"$TMP/keel.log" &
    SERVER=$!
    local _
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && break
        sleep 0.2
    done
    timeout 30 wrk -t1 -c"$CONNS" -d2s "${hdr[@]}" "http://127.0.0.1:$port$4" >/dev/null 2>&1 || true
    callgrind_control -z "$SERVER" >/dev/null 2>&1
    out=$(timeout $((SECS + 30)) wrk -t1 -c"$CONNS" -d"${SECS}s" "${hdr[@]}" \
        "http://127.0.0.1:$port$4" 2>&1) || true
    callgrind_control -d "$SERVER" >/dev/null 2>&1
    kill "$SERVER"
    wait "$SERVER" 2>/dev/null || true
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    ir=$(cat "$TMP"/cg.*.[0-9]* | awk '/^summary:/ {s += $2} END {print s + 0}')
    rm -f "$TMP"/cg.*
    SERVER=""
    echo "$1: $((ir / requests)) instr/req ($requests requests)"
}

TRY='$uri $uri/ /index.html'
CASES=${*:-file file+try file+scope file+scopetry spa-route 404-page gzip br zstd}
for c in $CASES; do
    case $c in
    file) count file "http1 static" "" /app/4k.html ;;
    file+try) count file+try "http1 static" "try = $TRY" /app/4k.html ;;
    file+scope) count file+scope "http1 static" "[/app/]
static.try =" /app/4k.html ;;
    file+scopetry) count file+scopetry "http1 static" "[/app/]
static.try = $TRY" /app/4k.html ;;
    spa-route) count spa-route "http1 static" "[/app/]
static.try = $TRY" /app/route ;;
    404-page) count 404-page "http1 errors static" "[errors]
page = 404 /404.html" /missing ;;
    gzip | br | zstd) count "$c" "http1 deflate static" "[deflate]
compress_files = on" /app/4k.html "Accept-Encoding: $c" ;;
    *) echo "unknown case $c" >&2 ;;
    esac
done
