#!/usr/bin/env bash
# tests/bench/h2_counts.sh — repeatable counts behind tests/bench/h2.sh's
# rates, for keel's h2 module alone: what a shared machine's noise does not
# move.
#
#   tests/bench/h2_counts.sh                 # all three
#   KEEL_BUILD=build-rel N=20000 tests/bench/h2_counts.sh instr
#
#   instr     user-space instructions per request (valgrind's callgrind,
#             counters zeroed after a warm-up), for the small response and
#             the 4 KiB file, split into mod_h2, keel + other modules,
#             libc and the rest: h2load -n N -c 1 -m 100
#   syscalls  system calls per request (strace -c -f), same loads
#   idle      RSS growth per idle HTTP/2 connection (h2_idle.py, IDLE
#             connections, each after one request)
#   cpu       server CPU time (utime + stime) per request, keel pinned to
#             CPU 0 and h2load -c 4 -m 100 on CPU 1, ROUNDS rounds; with
#             MODULES="DIR1 DIR2 ..." the module directories take turns
#             in each round (an A/B of two builds of mod_h2 on a machine
#             whose load moves: compare within rounds). Not run by default.
#
# CG_KEEP=DIR keeps the callgrind dumps (h2counts.cg.small, .file) there,
# for callgrind_annotate.
# Settings: KEEL_BUILD [build] N [20000] IDLE [2000] IDLE_WAIT [1: seconds
# between the last answer and the measurement, as h2.sh] PORT [19290].
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/../.." && pwd)
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
[[ $KEEL_BUILD == /* ]] || KEEL_BUILD=$ROOT/$KEEL_BUILD
N=${N:-20000}
IDLE=${IDLE:-2000}
IDLE_WAIT=${IDLE_WAIT:-1}
PORT=${PORT:-19290}
ROUNDS=${ROUNDS:-3}
WHAT=${*:-instr syscalls idle}

TMP=$(mktemp -d /tmp/keel-h2counts.XXXXXX)
SERVER=""
cleanup() {
    [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/www/files"
head -c 4096 /dev/urandom >"$TMP/www/files/4k.bin"
cat >"$TMP/keel.conf" <<EOF
[keel]
listen = 127.0.0.1:$PORT h2
workers = 1
modules = h2 hello static
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
[h2]
idle_timeout = 5m
[static]
mount = /files $TMP/www/files
EOF

declare -A URL=([small]=http://127.0.0.1:$PORT/ [file]=http://127.0.0.1:$PORT/files/4k.bin)

start() { # start [WRAPPER...]
    "$@" "$KEEL_BUILD/keel" -c "${CONF:-$TMP/keel.conf}" >"$TMP/keel.log" 2>&1 &
    SERVER=$!
    local _
    for _ in $(seq 100); do
        curl -sf --http2-prior-knowledge -o /dev/null "${URL[small]}" && return 0
        sleep 0.2
    done
    cat "$TMP/keel.log" >&2
    echo "keel did not start" >&2
    exit 1
}

stop() {
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    SERVER=""
}

load() { # load URL COUNT: requests answered with success
    h2load -n "$2" -c 1 -m 100 "$1" 2>&1 | awk '/^requests:/ {print $8}'
}

instr() {
    local kind ok dumps
    for kind in small file; do
        start valgrind --tool=callgrind --dump-instr=no "--callgrind-out-file=$TMP/cg.$kind"
        load "${URL[$kind]}" 2000 >/dev/null
        callgrind_control -z "$SERVER" >/dev/null
        ok=$(load "${URL[$kind]}" "$N")
        callgrind_control -d "$SERVER" >/dev/null
        stop
        # The dump after zeroing is the one with a part number.
        dumps=("$TMP/cg.$kind".*)
        local f=${dumps[-1]}
        callgrind_annotate --inclusive=no --threshold=100 "$f" 2>/dev/null | awk -v ok="$ok" -v kind="$kind" '
            /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
            / \[.*\]$/ {
                n = $1; gsub(",", "", n)
                if (n + 0 >= 0.99 * total) next # thread entry points: inclusive
                if ($NF ~ /\/libc\.so/) libc += n
                else if ($NF ~ /mod_h2/) h2 += n
                else if ($NF ~ /mod_|\/keel\]/) keel += n
                else if ($NF ~ /libuv/) uv += n
                else other += n
            }
            END {
                printf "instr %s: %d requests, %.0f instr/req (mod_h2 %.0f, keel + other modules %.0f, libc %.0f, libuv %.0f, other %.0f)\n",
                    kind, ok, total / ok, h2 / ok, keel / ok, libc / ok, uv / ok, other / ok
            }'
        [[ -z ${CG_KEEP:-} ]] || cp "$f" "$CG_KEEP/h2counts.cg.$kind"
    done
}

syscalls() {
    local kind ok
    for kind in small file; do
        start
        load "${URL[$kind]}" 2000 >/dev/null
        strace -c -f -p "$SERVER" -o "$TMP/st.$kind" &
        local st=$!
        sleep 1
        ok=$(load "${URL[$kind]}" "$N")
        kill -INT "$st"
        wait "$st" 2>/dev/null || true
        stop
        awk -v ok="$ok" -v kind="$kind" '
            # % time, seconds, usecs/call, calls, [errors,] syscall
            /^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ && $NF != "total" { calls[$NF] = $4; total += $4 }
            END {
                printf "syscalls %s: %d requests, %.3f/req (", kind, ok, total / ok
                sep = ""
                for (c in calls) if (calls[c] / ok >= 0.005) { printf "%s%s %.3f", sep, c, calls[c] / ok; sep = ", " }
                print ")"
            }' "$TMP/st.$kind"
    done
}

idle() {
    start
    local before after ready
    before=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER/status")
    exec 3< <(python3 "$BENCH_DIR/h2_idle.py" "$PORT" "$IDLE" 3)
    read -r -t 60 _ ready <&3 || ready=0
    sleep "$IDLE_WAIT"
    after=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER/status")
    exec 3<&-
    sleep 3
    stop
    echo "idle: $ready connections, RSS +$((after - before)) KiB, $(((after - before) * 1024 / ready)) B each"
}

cpu() {
    local kind round dir n t0 t1 ok
    for kind in small file; do
        n=$((3 * N)) # a few seconds of load each
        [[ $kind == small ]] && n=$((8 * N))
        for round in $(seq "$ROUNDS"); do
            for dir in ${MODULES:-$KEEL_BUILD/modules}; do
                sed "s#^module_path = .*#module_path = $dir#" "$TMP/keel.conf" >"$TMP/cpu.conf"
                CONF=$TMP/cpu.conf start taskset -c 0
                taskset -c 1 h2load -n "$N" -c 4 -m 100 -t 1 "${URL[$kind]}" >/dev/null 2>&1
                t0=$(awk '{print $14 + $15}' "/proc/$SERVER/stat")
                ok=$(taskset -c 1 h2load -n "$n" -c 4 -m 100 -t 1 "${URL[$kind]}" 2>&1 |
                    awk '/^requests:/ {print $8}')
                t1=$(awk '{print $14 + $15}' "/proc/$SERVER/stat")
                stop
                awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$ok" -v k="$kind" -v r="$round" -v d="$dir" \
                    'BEGIN { printf "cpu %s round %d %s: %.2f us/req\n", k, r, d, t * 1e6 / hz / n }'
            done
        done
    done
}

for w in $WHAT; do "$w"; done
