#!/usr/bin/env bash
# tests/bench/static.sh — the static module against nginx and h2o serving
# the same files, side by side in one run, on loopback. A benchmark, not a
# test: never part of ctest. Runnable alone; the conventions are run.sh's.
#
#   tests/bench/static.sh                       full run (10 s per measurement)
#   DURATION=4 WARMUP=1 ROUNDS=3 tests/bench/static.sh
#   SERVERS="keel nginx" TESTS=small tests/bench/static.sh
#
# Each server gets one worker / thread, pinned to SERVER_CPU (default 0);
# wrk runs on CLIENT_CPU (default 1). For every server, in turns:
#   small  wrk -t1 -c64 GET /4k.bin   (4 KiB, keep-alive)  → requests per server CPU-second
#   large  wrk -t1 -c16 GET /1m.bin   (1 MiB, keep-alive)  → MB/s (and MB per server CPU-second)
# nginx runs with sendfile on and open_file_cache on, keel with sendfile
# (plain TCP, the core's default for keel_response_send_file), h2o with its
# defaults (it keeps open files cached too). The medians of ROUNDS rounds
# are reported, with keel's ratio to each peer.
#
# Environment (defaults in brackets):
#   DURATION [10] WARMUP [2] ROUNDS [1] CONNS [64] CONNS_LARGE [16]
#   SERVERS ["keel nginx h2o"]  TESTS ["small large"]
#                               (keel_nocache: keel with cache_valid = 0, to measure the cache)
#   SERVER_CPU [0] CLIENT_CPU [1] BASE_PORT [19180] (keel; nginx +1, h2o +2, keel_nocache +3)
#   KEEL_BUILD [<repo>/build]   where keel and modules/ are; built (Release) if missing
#   KEEL_STATIC_OPTS [""]       extra words for keel's mount line
#   NO_INSTALL=1                do not apt-get missing packages
# Everything listens on 127.0.0.1 only; every load is bounded in time; every
# server this script started is killed when it exits (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-64}
CONNS_LARGE=${CONNS_LARGE:-16}
SERVERS=${SERVERS:-"keel nginx h2o"}
TESTS=${TESTS:-"small large"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-19180}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
KEEL_STATIC_OPTS=${KEEL_STATIC_OPTS:-}

log() { printf '%s\n' "$*" >&2; }
die() {
    log "static bench: $*"
    exit 1
}
has() { [[ " $SERVERS " == *" $1 "* ]]; }

install_missing() {
    local pkgs=()
    command -v wrk >/dev/null || pkgs+=(wrk)
    command -v taskset >/dev/null || pkgs+=(util-linux)
    command -v curl >/dev/null || pkgs+=(curl)
    if has nginx; then command -v nginx >/dev/null || pkgs+=(nginx-light); fi
    if has h2o; then command -v h2o >/dev/null || pkgs+=(h2o); fi
    ((${#pkgs[@]})) || return 0
    [[ -n "${NO_INSTALL:-}" ]] && die "missing packages: ${pkgs[*]} (NO_INSTALL is set)"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    local policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod +x "$policy"
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
        "${pkgs[@]}" >&2 || rc=$?
    [[ -n "$policy" ]] && "${sudo[@]}" rm -f "$policy"
    ((rc == 0)) || die "apt-get install ${pkgs[*]} failed"
}

TMP=$(mktemp -d /tmp/keel-static-bench.XXXXXX)
declare -A PID=()

cleanup() {
    local p
    for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PID[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

server_pids() {
    echo "$1"
    pgrep -P "$1" 2>/dev/null || true
}

CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() {
    local total=0 p stat rest
    for p in $(server_pids "$1"); do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        rest=${stat##*) }
        read -r -a f <<<"$rest"
        total=$((total + f[11] + f[12]))
    done
    echo "$total"
}

port_of() {
    case $1 in
    keel) echo "$BASE_PORT" ;;
    nginx) echo $((BASE_PORT + 1)) ;;
    h2o) echo $((BASE_PORT + 2)) ;;
    keel_nocache) echo $((BASE_PORT + 3)) ;;
    esac
}

WWW=$TMP/www
make_files() {
    mkdir -p "$WWW"
    # nginx's workers run as nobody: the private temporary directory must be
    # readable to them.
    chmod 755 "$TMP" "$WWW"
    head -c 4096 /dev/urandom >"$WWW/4k.bin"
    head -c 1048576 /dev/urandom >"$WWW/1m.bin"
}

start_keel() {
    local port=$1 bin="$KEEL_BUILD/keel" name=${2:-keel} cache=${3:-1s}
    if [[ ! -x "$bin" || ! -e "$KEEL_BUILD/modules/mod_static.so" ]]; then
        log "static bench: building keel in $KEEL_BUILD (Release)"
        cmake -S "$ROOT" -B "$KEEL_BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=OFF >&2
        cmake --build "$KEEL_BUILD" >&2
    fi
    cat >"$TMP/$name.conf" <<EOF
[keel]
listen = 127.0.0.1:$port http1
workers = 1
modules = http1 static
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
[http1]
keepalive_timeout = 5m
max_requests = 0
[static]
mount = / $WWW $KEEL_STATIC_OPTS
cache_valid = $cache
EOF
    taskset -c "$SERVER_CPU" "$bin" -c "$TMP/$name.conf" >"$TMP/$name.log" 2>&1 &
    PID[$name]=$!
}

# keel without its open-file cache: open + fstat + close on every request.
start_keel_nocache() {
    start_keel "$1" keel_nocache 0
}

start_nginx() {
    local port=$1
    mkdir -p "$TMP/nginx/logs"
    cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 30000; }
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    default_type application/octet-stream;
    client_body_temp_path $TMP/nginx/body;
    server {
        listen 127.0.0.1:$port backlog=4096;
        root $WWW;
    }
}
EOF
    taskset -c "$SERVER_CPU" nginx -p "$TMP/nginx" -e "$TMP/nginx/logs/error.log" \
        -c "$TMP/nginx/nginx.conf" >"$TMP/nginx.log" 2>&1 &
    PID[nginx]=$!
}

start_h2o() {
    local port=$1
    mkdir -p "$TMP/h2o"
    local user=""
    [[ $(id -u) -eq 0 ]] && user="user: root"
    cat >"$TMP/h2o/h2o.conf" <<EOF
$user
listen:
  host: 127.0.0.1
  port: $port
num-threads: 1
max-connections: 30000
http1-request-timeout: 300
error-log: $TMP/h2o/error.log
pid-file: $TMP/h2o/h2o.pid
hosts:
  default:
    paths:
      "/":
        file.dir: $WWW
EOF
    taskset -c "$SERVER_CPU" h2o -c "$TMP/h2o/h2o.conf" >"$TMP/h2o.log" 2>&1 &
    PID[h2o]=$!
}

check_server() {
    local name=$1 port=$2 i n
    for ((i = 0; i < 100; i++)); do
        n=$(curl -s --max-time 1 "http://127.0.0.1:$port/4k.bin" 2>/dev/null | wc -c || true)
        [[ "$n" -eq 4096 ]] && break
        kill -0 "${PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    if [[ "$n" -ne 4096 ]]; then
        log "static bench: $name does not serve /4k.bin on port $port:"
        tail -n 20 "$TMP/$name.log" "$TMP/$name"/*.log "$TMP/$name"/logs/*.log 2>/dev/null >&2 || true
        return 1
    fi
    n=$(curl -s --max-time 5 "http://127.0.0.1:$port/1m.bin" | cmp - "$WWW/1m.bin" && echo same || true)
    [[ "$n" == same ]] || {
        log "static bench: $name serves a different /1m.bin"
        return 1
    }
}

declare -A VAL_L=() CPU_L=()

median() {
    tr ' ' '\n' <<<"$1" | { grep . || true; } | sort -g | awk -v fmt="$2" '{v[NR] = $1} END {
        if (NR == 0) print "-";
        else printf fmt "\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_wrk NAME TEST SECONDS RECORD
run_wrk() {
    local name=$1 test=$2 secs=$3 record=$4 port path conns bytes
    port=$(port_of "$name")
    if [[ $test == small ]]; then path=/4k.bin conns=$CONNS bytes=4096; else path=/1m.bin conns=$CONNS_LARGE bytes=1048576; fi
    local t0 t1 out
    t0=$(cpu_ticks "${PID[$name]}")
    out=$(timeout $((secs + 30)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"${secs}s" \
        --timeout 5s "http://127.0.0.1:$port$path" 2>&1) || true
    t1=$(cpu_ticks "${PID[$name]}")
    ((record)) || return 0
    local requests duration bad
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    duration=$(awk '/requests in/ {sub(/s,?$/, "", $4); print $4}' <<<"$out")
    bad=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    if [[ -z "$requests" || -z "$duration" ]]; then
        log "static bench: wrk failed against $name ($test):"
        log "$out"
        return 0
    fi
    [[ -n "$bad" && "$bad" -ne 0 ]] && log "static bench: $name $test: $bad non-2xx responses"
    local ticks=$((t1 - t0)) val cpu
    if [[ $test == small ]]; then
        val=$(awk -v r="$requests" -v d="$duration" 'BEGIN{printf "%.0f", r / d}')
        cpu=$(awk -v r="$requests" -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN{ if (t > 0) printf "%.0f", r / (t / hz); else print 0 }')
        log "static bench: $name small: $val req/s, $cpu req/CPU-s, server CPU $((ticks * 100 / CLK_TCK / secs))%"
    else
        val=$(awk -v r="$requests" -v d="$duration" -v b="$bytes" 'BEGIN{printf "%.0f", r * b / d / 1e6}')
        cpu=$(awk -v r="$requests" -v b="$bytes" -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN{ if (t > 0) printf "%.0f", r * b / 1e6 / (t / hz); else print 0 }')
        log "static bench: $name large: $val MB/s, $cpu MB/CPU-s, server CPU $((ticks * 100 / CLK_TCK / secs))%"
    fi
    VAL_L[$name,$test]+=" $val"
    CPU_L[$name,$test]+=" $cpu"
}

main() {
    install_missing
    make_files
    local name
    for name in $SERVERS; do
        "start_$name" "$(port_of "$name")"
        check_server "$name" "$(port_of "$name")" || die "$name did not start"
    done
    local round test
    for ((round = 1; round <= ROUNDS; round++)); do
        for test in $TESTS; do
            for name in $SERVERS; do
                ((WARMUP > 0)) && run_wrk "$name" "$test" "$WARMUP" 0
                run_wrk "$name" "$test" "$DURATION" 1
            done
        done
    done
    printf '\n| server | 4 KiB req/s | 4 KiB req/CPU-s | 1 MiB MB/s | 1 MiB MB/CPU-s |\n|---|---|---|---|---|\n'
    declare -A M=()
    for name in $SERVERS; do
        for test in small large; do
            M[$name,$test,v]=$(median "${VAL_L[$name,$test]:-}" "%.0f")
            M[$name,$test,c]=$(median "${CPU_L[$name,$test]:-}" "%.0f")
        done
        printf '| %s | %s | %s | %s | %s |\n' "$name" "${M[$name,small,v]}" "${M[$name,small,c]}" \
            "${M[$name,large,v]}" "${M[$name,large,c]}"
    done
    if has keel; then
        printf '\n| keel ÷ peer | 4 KiB req/s | 4 KiB req/CPU-s | 1 MiB MB/s | 1 MiB MB/CPU-s |\n|---|---|---|---|---|\n'
        for name in $SERVERS; do
            [[ $name == keel ]] && continue
            local row="| $name"
            local k
            for k in small,v small,c large,v large,c; do
                row+=" | $(awk -v a="${M[keel,$k]}" -v b="${M[$name,$k]}" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.2f×", a / b; else print "-" }')"
            done
            printf '%s |\n' "$row"
        done
    fi
}

main
