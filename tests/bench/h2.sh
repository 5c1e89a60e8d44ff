#!/usr/bin/env bash
# tests/bench/h2.sh — HTTP/2: keel's h2 module against nginx (http2 on), h2o
# and Node.js's http2, side by side in one run, on loopback, cleartext with
# prior knowledge (h2c). A benchmark, not a test: never part of ctest.
# Runnable alone; the conventions are run.sh's.
#
#   tests/bench/h2.sh                        full run (10 s per measurement)
#   DURATION=4 WARMUP=1 ROUNDS=3 tests/bench/h2.sh
#   SERVERS="keel h2o" TESTS=small tests/bench/h2.sh
#
# Each server gets one worker / thread / process, pinned to SERVER_CPU
# (default 0); h2load runs on CLIENT_CPU (default 1). For every server, in
# turns:
#   small  h2load -c CONNS -m 100: GET / answering "Hello, World!" (keel:
#          hello's /, nginx: return 200, h2o: a 13-byte file, node: stream.end)
#   file   the same with a 4 KiB file (keel: static, nginx: root, h2o:
#          file.dir, node: respondWithFile)
#   idle   RSS growth for IDLE idle HTTP/2 connections, each after one
#          request answered (tests/bench/h2_idle.py): bytes per connection
# and reports requests per second, and requests per second of server CPU time
# (utime + stime from /proc/PID/stat over the run): on a 2-core machine the
# client is often the bottleneck, and CPU time tells apart servers that the
# client cannot. The medians of ROUNDS rounds, then keel's ratio to each peer.
#
# Environment (defaults in brackets):
#   DURATION [10] WARMUP [2] ROUNDS [1] CONNS [4] STREAMS [100] IDLE [2000]
#   SERVERS ["keel nginx h2o node"]  TESTS ["small file idle"]
#   SERVER_CPU [0] CLIENT_CPU [1] BASE_PORT [19280] (keel; nginx +1, h2o +2, node +3)
#   KEEL_BUILD [<repo>/build]   where keel and modules/ are; built (Release) if missing
#   NO_INSTALL=1                do not apt-get missing packages
# Packages (installed with apt-get when missing): nghttp2-client (h2load)
# nginx-light h2o nodejs python3 curl.
# Everything listens on 127.0.0.1 only; every load is bounded in time; every
# server this script started is killed when it exits (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-100}
IDLE=${IDLE:-2000}
IDLE_HOLD=${IDLE_HOLD:-3}
SERVERS=${SERVERS:-"keel nginx h2o node"}
TESTS=${TESTS:-"small file idle"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-19280}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}

log() { printf '%s\n' "$*" >&2; }
die() {
    log "h2 bench: $*"
    exit 1
}
has() { [[ " $SERVERS " == *" $1 "* ]]; }
wants() { [[ " $TESTS " == *" $1 "* ]]; }

install_missing() {
    local pkgs=()
    command -v h2load >/dev/null || pkgs+=(nghttp2-client)
    command -v taskset >/dev/null || pkgs+=(util-linux)
    command -v curl >/dev/null || pkgs+=(curl)
    command -v python3 >/dev/null || pkgs+=(python3)
    if has nginx; then command -v nginx >/dev/null || pkgs+=(nginx-light); fi
    if has h2o; then command -v h2o >/dev/null || pkgs+=(h2o); fi
    if has node; then command -v node >/dev/null || pkgs+=(nodejs); fi
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

TMP=$(mktemp -d /tmp/keel-h2-bench.XXXXXX)
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

rss_kib() {
    local total=0 p kb
    for p in $(server_pids "$1"); do
        kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        total=$((total + ${kb:-0}))
    done
    echo "$total"
}

port_of() {
    case $1 in
    keel) echo "$BASE_PORT" ;;
    nginx) echo $((BASE_PORT + 1)) ;;
    h2o) echo $((BASE_PORT + 2)) ;;
    node) echo $((BASE_PORT + 3)) ;;
    esac
}

WWW=$TMP/www
make_files() {
    mkdir -p "$WWW/files"
    # nginx's workers run as nobody: the private temporary directory must be
    # readable to them.
    chmod 755 "$TMP" "$WWW" "$WWW/files"
    head -c 4096 /dev/urandom >"$WWW/files/4k.bin"
    printf 'Hello, World!' >"$WWW/index.txt"
}

start_keel() {
    local port=$1 bin="$KEEL_BUILD/keel"
    if [[ ! -x "$bin" || ! -e "$KEEL_BUILD/modules/mod_h2.so" ]]; then
        log "h2 bench: building keel in $KEEL_BUILD (Release)"
        cmake -S "$ROOT" -B "$KEEL_BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=OFF >&2
        cmake --build "$KEEL_BUILD" >&2
    fi
    [[ -e "$KEEL_BUILD/modules/mod_h2.so" ]] || die "no mod_h2 in $KEEL_BUILD (libnghttp2-dev?)"
    cat >"$TMP/keel.conf" <<EOF
[keel]
listen = 127.0.0.1:$port h2
workers = 1
modules = h2 hello static
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
[h2]
idle_timeout = 5m
[static]
mount = /files $WWW/files
EOF
    taskset -c "$SERVER_CPU" "$bin" -c "$TMP/keel.conf" >"$TMP/keel.log" 2>&1 &
    PID[keel]=$!
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
    http2_max_requests 100000000;
    http2_max_concurrent_streams 128;
    sendfile on;
    open_file_cache max=1000 inactive=60s;
    default_type application/octet-stream;
    client_body_temp_path $TMP/nginx/body;
    server {
        listen 127.0.0.1:$port http2 backlog=4096;
        location = / { default_type text/plain; return 200 "Hello, World!"; }
        location /files/ { root $WWW; }
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
http2-idle-timeout: 300
error-log: $TMP/h2o/error.log
pid-file: $TMP/h2o/h2o.pid
hosts:
  default:
    paths:
      "/":
        file.file: $WWW/index.txt
      "/files":
        file.dir: $WWW/files
EOF
    taskset -c "$SERVER_CPU" h2o -c "$TMP/h2o/h2o.conf" >"$TMP/h2o.log" 2>&1 &
    PID[h2o]=$!
}

start_node() {
    local port=$1
    taskset -c "$SERVER_CPU" node "$HERE/node_h2.js" "$port" "$WWW/files" >"$TMP/node.log" 2>&1 &
    PID[node]=$!
}

check_server() {
    local name=$1 port=$2 i body=""
    for ((i = 0; i < 100; i++)); do
        body=$(curl -s --http2-prior-knowledge --max-time 1 "http://127.0.0.1:$port/" 2>/dev/null || true)
        [[ "$body" == "Hello, World!" ]] && break
        kill -0 "${PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    if [[ "$body" != "Hello, World!" ]]; then
        log "h2 bench: $name does not answer GET / over h2c on port $port:"
        tail -n 20 "$TMP/$name.log" "$TMP/$name"/*.log "$TMP/$name"/logs/*.log 2>/dev/null >&2 || true
        return 1
    fi
    curl -s --http2-prior-knowledge --max-time 5 "http://127.0.0.1:$port/files/4k.bin" |
        cmp -s - "$WWW/files/4k.bin" || {
        log "h2 bench: $name serves a different /files/4k.bin"
        return 1
    }
}

declare -A VAL=() CPU=()

median() {
    tr ' ' '\n' <<<"$1" | { grep . || true; } | sort -g | awk -v fmt="$2" '{v[NR] = $1} END {
        if (NR == 0) print "-";
        else printf fmt "\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_h2load NAME TEST SECONDS RECORD
run_h2load() {
    local name=$1 test=$2 secs=$3 record=$4 port path
    port=$(port_of "$name")
    if [[ $test == small ]]; then path=/; else path=/files/4k.bin; fi
    local t0 t1 out
    t0=$(cpu_ticks "${PID[$name]}")
    out=$(timeout $((secs + 30)) taskset -c "$CLIENT_CPU" h2load -t1 -c"$CONNS" -m"$STREAMS" \
        -D"$secs" "http://127.0.0.1:$port$path" 2>&1) || true
    t1=$(cpu_ticks "${PID[$name]}")
    ((record)) || return 0
    local ok total
    read -r total ok < <(awk '/^requests:/ {print $2, $8}' <<<"$out")
    if [[ -z "${ok:-}" || "$ok" -eq 0 ]]; then
        log "h2 bench: h2load failed against $name ($test):"
        log "$out"
        return 0
    fi
    local bad
    bad=$(awk '/^status codes:/ {print $5 + $7 + $9}' <<<"$out")
    [[ -n "$bad" && "$bad" -ne 0 ]] && log "h2 bench: $name $test: $bad non-2xx responses"
    local ticks=$((t1 - t0)) val cpu
    val=$(awk -v r="$ok" -v d="$secs" 'BEGIN{printf "%.0f", r / d}')
    cpu=$(awk -v r="$ok" -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN{ if (t > 0) printf "%.0f", r / (t / hz); else print 0 }')
    log "h2 bench: $name $test: $val req/s, $cpu req/CPU-s, server CPU $((ticks * 100 / CLK_TCK / secs))%"
    VAL[$name,$test]+=" $val"
    CPU[$name,$test]+=" $cpu"
}

run_idle() {
    local name=$1 port before after ready
    port=$(port_of "$name")
    before=$(rss_kib "${PID[$name]}")
    exec 3< <(taskset -c "$CLIENT_CPU" python3 "$HERE/h2_idle.py" "$port" "$IDLE" "$IDLE_HOLD")
    read -r -t 60 _ ready <&3 || ready=0
    sleep 1
    after=$(rss_kib "${PID[$name]}")
    exec 3<&-
    sleep "$IDLE_HOLD"
    if [[ "${ready:-0}" -lt 1 ]]; then
        log "h2 bench: $name: no idle connection was answered"
        return 0
    fi
    local per=$(((after - before) * 1024 / ready))
    log "h2 bench: $name idle: $ready connections, RSS +$((after - before)) KiB, $per bytes each"
    VAL[$name,idle]+=" $per"
}

main() {
    install_missing
    make_files
    ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    local name
    for name in $SERVERS; do
        "start_$name" "$(port_of "$name")"
        check_server "$name" "$(port_of "$name")" || die "$name did not start"
    done
    local round test
    for ((round = 1; round <= ROUNDS; round++)); do
        for test in small file; do
            wants "$test" || continue
            for name in $SERVERS; do
                ((WARMUP > 0)) && run_h2load "$name" "$test" "$WARMUP" 0
                run_h2load "$name" "$test" "$DURATION" 1
            done
        done
    done
    if wants idle; then
        for name in $SERVERS; do run_idle "$name"; done
    fi
    printf '\n%s\n' "h2load -t1 -c$CONNS -m$STREAMS -D$DURATION, h2c (prior knowledge), one server core; idle: $IDLE connections"
    printf '\n| server | small req/s | small req/CPU-s | 4 KiB file req/s | 4 KiB file req/CPU-s | bytes per idle conn |\n|---|---|---|---|---|---|\n'
    declare -A M=()
    for name in $SERVERS; do
        for test in small file; do
            M[$name,$test,v]=$(median "${VAL[$name,$test]:-}" "%.0f")
            M[$name,$test,c]=$(median "${CPU[$name,$test]:-}" "%.0f")
        done
        M[$name,idle,v]=$(median "${VAL[$name,idle]:-}" "%.0f")
        printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "${M[$name,small,v]}" "${M[$name,small,c]}" \
            "${M[$name,file,v]}" "${M[$name,file,c]}" "${M[$name,idle,v]}"
    done
    if has keel; then
        printf '\n| keel ÷ peer | small req/s | small req/CPU-s | file req/s | file req/CPU-s | idle memory (peer ÷ keel) |\n|---|---|---|---|---|---|\n'
        for name in $SERVERS; do
            [[ $name == keel ]] && continue
            local row="| $name" k
            for k in small,v small,c file,v file,c; do
                row+=" | $(awk -v a="${M[keel,$k]}" -v b="${M[$name,$k]}" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.2f×", a / b; else print "-" }')"
            done
            row+=" | $(awk -v a="${M[keel,idle,v]}" -v b="${M[$name,idle,v]}" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.2f×", b / a; else print "-" }')"
            printf '%s |\n' "$row"
        done
    fi
}

main
