#!/usr/bin/env bash
# tests/bench/proxy.sh — keel's proxy module against nginx's proxy_pass, in
# one run, on loopback. A benchmark, not a test: never part of ctest.
#
#   tests/bench/proxy.sh                       full run (10 s per measurement)
#   DURATION=3 WARMUP=1 tests/bench/proxy.sh   quick run
#
# One upstream, nginx (worker_processes 1), serves "Hello, World!" at / and
# a 1 MiB file at /1m. Two proxies in front of it, in turn, each with one
# worker pinned to SERVER_CPU and keep-alive connections to the upstream:
#   keel   http1 + proxy: upstream = up 127.0.0.1:UP, pass = / up
#          (X-Forwarded-*, Forwarded and Via added, as by default)
#   nginx  proxy_pass http://up; upstream up { keepalive 64; }
#          proxy_http_version 1.1; Connection ""; X-Forwarded-For/-Proto
#          and Host set as a typical deployment does
# wrk (and the upstream) run on CLIENT_CPU. For each proxy and test:
#   small  wrk -t1 -c$CONNS GET /      (keep-alive)
#   1m     wrk -t1 -c$CONNS_1M GET /1m
# It reports requests/s, p99 latency and requests per second of the
# proxy's CPU time (utime + stime from /proc/PID/stat over the run: the
# proxy's own cost, which wrk and the upstream sharing a core cannot
# blur), then keel's ratio to nginx on that last number.
#
# Environment (defaults in brackets):
#   DURATION [10] seconds per measurement   WARMUP [2] seconds of warm-up
#   CONNS [64] wrk connections (small)      CONNS_1M [16] (1m)
#   ROUNDS [1] measurements per proxy and test, in turns; the median is reported
#   SERVER_CPU [0] CLIENT_CPU [1]           BASE_PORT [19180] (upstream; proxies +1, +2)
#   KEEL_BUILD [<repo>/build]               built (Release) if missing
#   NO_INSTALL=1  do not apt-get missing packages (wrk, nginx-light)
# Everything listens on 127.0.0.1 only; every load is bounded in time;
# every process this script started is killed when it exits (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# Shared helpers, when the bench library exists (tests/bench/lib.sh).
# shellcheck disable=SC1091
[[ -f "$HERE/lib.sh" ]] && source "$HERE/lib.sh"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-64}
CONNS_1M=${CONNS_1M:-16}
ROUNDS=${ROUNDS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-19180}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}

log() { printf '%s\n' "$*" >&2; }
die() {
    log "bench: $*"
    exit 1
}

if [[ -z "${NO_INSTALL:-}" ]]; then
    pkgs=()
    command -v wrk >/dev/null || pkgs+=(wrk)
    command -v nginx >/dev/null || pkgs+=(nginx-light)
    if [[ ${#pkgs[@]} -gt 0 ]]; then
        log "bench: installing ${pkgs[*]}"
        apt-get install -y "${pkgs[@]}" >&2 || die "could not install ${pkgs[*]}"
    fi
fi
command -v wrk >/dev/null || die "wrk is missing"
command -v nginx >/dev/null || die "nginx is missing"

TMP=$(mktemp -d /tmp/keel-bench-proxy.XXXXXX)
chmod 755 "$TMP" # nginx's worker drops privileges when started as root
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

UP_PORT=$BASE_PORT
KEEL_PORT=$((BASE_PORT + 1))
NGINX_PORT=$((BASE_PORT + 2))
CLK_TCK=$(getconf CLK_TCK)

server_pids() {
    echo "$1"
    pgrep -P "$1" 2>/dev/null || true
}

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

wait_port() {
    local _
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    die "nothing answers on port $1"
}

# ---- the upstream --------------------------------------------------------------------

mkdir -p "$TMP/up/www" "$TMP/up/logs" "$TMP/px/logs"
head -c 1048576 /dev/urandom >"$TMP/up/www/1m"
cat >"$TMP/up/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/up/nginx.pid;
error_log $TMP/up/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    sendfile on;
    server {
        listen 127.0.0.1:$UP_PORT backlog=4096;
        root $TMP/up/www;
        location = / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
    }
}
EOF
taskset -c "$CLIENT_CPU" nginx -p "$TMP/up" -e "$TMP/up/logs/error.log" -c "$TMP/up/nginx.conf" \
    >"$TMP/up.log" 2>&1 &
PID[up]=$!
wait_port "$UP_PORT"

# ---- the proxies ---------------------------------------------------------------------

start_keel() {
    local bin="$KEEL_BUILD/keel"
    if [[ ! -x "$bin" || ! -e "$KEEL_BUILD/modules/mod_proxy.so" ]]; then
        log "bench: building keel in $KEEL_BUILD (Release)"
        cmake -S "$ROOT" -B "$KEEL_BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=OFF >&2
        cmake --build "$KEEL_BUILD" >&2
    fi
    cat >"$TMP/keel.conf" <<EOF
[keel]
listen = 127.0.0.1:$KEEL_PORT http1
workers = 1
modules = http1 proxy
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
[http1]
keepalive_timeout = 5m
max_requests = 0
[proxy]
upstream = up 127.0.0.1:$UP_PORT
pass = / up
keepalive = 64
EOF
    taskset -c "$SERVER_CPU" "$bin" -c "$TMP/keel.conf" >"$TMP/keel.log" 2>&1 &
    PID[keel]=$!
    wait_port "$KEEL_PORT"
}

start_nginx() {
    cat >"$TMP/px/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/px/nginx.pid;
error_log $TMP/px/logs/error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 30000; }
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    proxy_temp_path $TMP/px/temp;
    client_body_temp_path $TMP/px/body;
    upstream up {
        server 127.0.0.1:$UP_PORT;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
        }
    }
}
EOF
    taskset -c "$SERVER_CPU" nginx -p "$TMP/px" -e "$TMP/px/logs/error.log" \
        -c "$TMP/px/nginx.conf" >"$TMP/px.log" 2>&1 &
    PID[nginx]=$!
    wait_port "$NGINX_PORT"
    sleep 0.5 # the worker starts after the master answers
}

# ---- measuring -----------------------------------------------------------------------

# measure NAME PORT PATH CONNS -> "rps p99 rps_per_cpu_s"
measure() {
    local name=$1 port=$2 path=$3 conns=$4 pid=${PID[$1]}
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"${WARMUP}s" "http://127.0.0.1:$port$path" \
        >/dev/null 2>&1 || true
    local t0 t1 out
    t0=$(cpu_ticks "$pid")
    out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"${DURATION}s" --latency \
        "http://127.0.0.1:$port$path" 2>&1) || die "wrk failed against $name: $out"
    t1=$(cpu_ticks "$pid")
    local rps reqs p99 errors
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    errors=$(grep -E "Non-2xx|Socket errors" <<<"$out" || true)
    [[ -n "$errors" ]] && log "bench: $name $path: $errors"
    local ticks=$((t1 - t0))
    [[ $ticks -gt 0 ]] || ticks=1
    local per_cpu
    per_cpu=$(awk -v r="$reqs" -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN {printf "%.0f", r / (t / hz)}')
    echo "$rps $p99 $per_cpu"
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A RES=()
start_keel
start_nginx
for test in small 1m; do
    path=/
    conns=$CONNS
    if [[ $test == 1m ]]; then
        path=/1m
        conns=$CONNS_1M
    fi
    for name in keel nginx; do
        port=$KEEL_PORT
        [[ $name == nginx ]] && port=$NGINX_PORT
        # every proxy answers the same bytes
        curl -s -o "$TMP/check" "http://127.0.0.1:$port$path" || die "$name does not answer $path"
    done
    for r in $(seq 1 "$ROUNDS"); do
        for name in keel nginx; do
            port=$KEEL_PORT
            [[ $name == nginx ]] && port=$NGINX_PORT
            log "bench: $name $test (round $r)"
            RES[$name,$test,$r]=$(measure "$name" "$port" "$path" "$conns")
        done
    done
done

printf '\n%-6s %-6s %12s %10s %16s\n' proxy test "req/s" "p99" "req/CPU-s"
for test in small 1m; do
    for name in keel nginx; do
        rps=$(for r in $(seq 1 "$ROUNDS"); do awk '{print $1}' <<<"${RES[$name,$test,$r]}"; done | median)
        p99=$(awk '{print $2}' <<<"${RES[$name,$test,1]}") # round 1's
        cpu=$(for r in $(seq 1 "$ROUNDS"); do awk '{print $3}' <<<"${RES[$name,$test,$r]}"; done | median)
        RES[$name,$test]=$cpu
        printf '%-6s %-6s %12s %10s %16s\n' "$name" "$test" "$rps" "$p99" "$cpu"
    done
done
printf '\nkeel / nginx, requests per proxy CPU-second:\n'
for test in small 1m; do
    awk -v k="${RES[keel,$test]}" -v n="${RES[nginx,$test]}" -v t="$test" \
        'BEGIN {printf "  %-6s %.2fx\n", t, k / n}'
done
printf '\nnginx %s, wrk %s, %s\n' "$(nginx -v 2>&1 | sed 's/.*version: //')" \
    "$(wrk -v 2>&1 | head -1 | awk '{print $2}')" "$(uname -srm)"
