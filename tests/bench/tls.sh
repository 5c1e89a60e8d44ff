#!/usr/bin/env bash
# tests/bench/tls.sh — HTTPS: keel's tls module (mbedTLS) against nginx
# (OpenSSL), side by side, on loopback. A benchmark, not a test.
#
#   tests/bench/tls.sh                       full run (10 s per measurement)
#   DURATION=3 WARMUP=1 tests/bench/tls.sh   quick run
#   SERVERS="keel" TESTS="idle" tests/bench/tls.sh
#
# Both servers: one worker, pinned to SERVER_CPU; the clients run on
# CLIENT_CPU. The same ECDSA P-256 certificate (made by keel-cert), TLS 1.2,
# the same suite (ECDHE-ECDSA-AES128-GCM-SHA256) and key exchange (X25519),
# the same "Hello, World!" answer. For each server in turn:
#   keepalive  wrk -t1 -c64 over HTTPS keep-alive: requests/s and requests
#              per second of server CPU time (utime + stime from /proc)
#   handshake  openssl s_time -new: full handshakes (no resumption) per
#              second and per server CPU-second
#   idle       RSS growth for IDLE idle TLS connections (each did one
#              request; tls_idle.py), in bytes per connection
# and reports keel's ratio to nginx (for memory: nginx's bytes over keel's,
# so that above 1 is better for keel in every row).
#
# Environment (defaults in brackets):
#   DURATION [10]  WARMUP [2]  CONNS [64]  IDLE [2000]  IDLE_HOLD [3]
#   SERVERS ["keel nginx"]  TESTS ["keepalive handshake idle"]
#   SERVER_CPU [0]  CLIENT_CPU [1]  BASE_PORT [19443] (keel; nginx +1)
#   KEEL_BUILD [<repo>/build]  where keel, keel-cert and modules/ are
# Needs wrk, nginx, openssl, python3, curl, taskset (run.sh installs the
# first ones; this script only checks). Everything listens on 127.0.0.1;
# every load is bounded in time; the servers are killed on exit (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-64}
IDLE=${IDLE:-2000}
IDLE_HOLD=${IDLE_HOLD:-3}
SERVERS=${SERVERS:-"keel nginx"}
TESTS=${TESTS:-"keepalive handshake idle"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-19443}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
SUITE_OPENSSL=ECDHE-ECDSA-AES128-GCM-SHA256
SUITE_MBEDTLS=TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256

log() { printf '%s\n' "$*" >&2; }
die() {
    log "bench: $*"
    exit 1
}
has() { [[ " $SERVERS " == *" $1 "* ]]; }
wants() { [[ " $TESTS " == *" $1 "* ]]; }

for tool in wrk openssl curl taskset python3; do
    command -v "$tool" >/dev/null || die "$tool is missing (tests/bench/run.sh installs it)"
done
if has nginx; then
    command -v nginx >/dev/null || die "nginx is missing (apt-get install nginx-light)"
fi
[[ -x "$KEEL_BUILD/keel" && -x "$KEEL_BUILD/keel-cert" && -e "$KEEL_BUILD/modules/mod_tls.so" ]] ||
    die "build keel first (make build), or set KEEL_BUILD"

TMP=$(mktemp -d /tmp/keel-tlsbench.XXXXXX)
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

CLK_TCK=$(getconf CLK_TCK)
server_pids() {
    echo "$1"
    pgrep -P "$1" 2>/dev/null || true
}
# utime + stime of the server's processes (nginx: master and worker), in ticks.
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
    local total=0 p v
    for p in $(server_pids "$1"); do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}
port_of() { if [[ $1 == keel ]]; then echo "$BASE_PORT"; else echo $((BASE_PORT + 1)); fi; }

"$KEEL_BUILD/keel-cert" "$TMP/cert.pem" "$TMP/key.pem" localhost 127.0.0.1 >/dev/null

start_keel() {
    cat >"$TMP/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:$1 http1 tls
workers = 1
modules = tls http1 hello
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
[http1]
keepalive_timeout = 5m
max_requests = 0
[tls]
cert = $TMP/cert.pem $TMP/key.pem
min_version = 1.2
max_version = 1.2
ciphers = $SUITE_MBEDTLS
curves = x25519
CONF
    taskset -c "$SERVER_CPU" "$KEEL_BUILD/keel" -c "$TMP/keel.conf" >"$TMP/keel.log" 2>&1 &
    PID[keel]=$!
}

start_nginx() {
    mkdir -p "$TMP/nginx/logs"
    cat >"$TMP/nginx/nginx.conf" <<CONF
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
    server {
        listen 127.0.0.1:$1 ssl backlog=4096;
        ssl_certificate $TMP/cert.pem;
        ssl_certificate_key $TMP/key.pem;
        ssl_protocols TLSv1.2;
        ssl_ciphers $SUITE_OPENSSL;
        ssl_ecdh_curve X25519;
        location = / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
    }
}
CONF
    taskset -c "$SERVER_CPU" nginx -p "$TMP/nginx" -e "$TMP/nginx/logs/error.log" \
        -c "$TMP/nginx/nginx.conf" >"$TMP/nginx.log" 2>&1 &
    PID[nginx]=$!
}

check_server() {
    local name=$1 port=$2 i body=""
    for ((i = 0; i < 100; i++)); do
        body=$(curl -sk --max-time 1 "https://127.0.0.1:$port/" 2>/dev/null || true)
        [[ "$body" == "Hello, World!" ]] && return 0
        kill -0 "${PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    log "bench: $name does not answer over HTTPS on port $port:"
    tail -n 20 "$TMP/$name.log" "$TMP/$name"/logs/*.log 2>/dev/null >&2 || true
    return 1
}

declare -A RPS=() CPURPS=() HS=() CPUHS=() IDLEB=()

measure_keepalive() {
    local name=$1 port=$2 pid=${PID[$1]} out t0 t1 reqs secs
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${WARMUP}s" "https://127.0.0.1:$port/" >/dev/null 2>&1 || true
    t0=$(cpu_ticks "$pid")
    out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "https://127.0.0.1:$port/" 2>&1)
    t1=$(cpu_ticks "$pid")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    RPS[$name]=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
    secs=$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" 'BEGIN {printf "%.3f", d / hz}')
    CPURPS[$name]=$(awk -v r="${reqs:-0}" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? r / s : 0)}')
    if grep -qE "Non-2xx|Socket errors" <<<"$out"; then
        log "bench: $name keepalive: $(grep -E 'Non-2xx|Socket errors' <<<"$out")"
    fi
    log "bench: $name keepalive: ${RPS[$name]} req/s, ${CPURPS[$name]} req per CPU-s ($secs CPU-s)"
}

measure_handshake() {
    local name=$1 port=$2 pid=${PID[$1]} out t0 t1 n secs
    taskset -c "$CLIENT_CPU" openssl s_time -connect "127.0.0.1:$port" -new -time "$WARMUP" \
        -cipher "$SUITE_OPENSSL" >/dev/null 2>&1 || true
    t0=$(cpu_ticks "$pid")
    out=$(taskset -c "$CLIENT_CPU" openssl s_time -connect "127.0.0.1:$port" -new \
        -time "$DURATION" -cipher "$SUITE_OPENSSL" 2>&1 || true)
    t1=$(cpu_ticks "$pid")
    n=$(awk '/connections in [0-9]+ real seconds/ {print $1; exit}' <<<"$out")
    if [[ -z "$n" ]]; then
        log "bench: $name s_time: $out"
        n=0
    fi
    HS[$name]=$(awk -v n="$n" -v d="$DURATION" 'BEGIN {printf "%.0f", n / d}')
    secs=$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" 'BEGIN {printf "%.3f", d / hz}')
    CPUHS[$name]=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? n / s : 0)}')
    log "bench: $name handshakes: ${HS[$name]}/s, ${CPUHS[$name]} per CPU-s ($secs CPU-s)"
}

# Two rounds of IDLE connections, opened, held and closed: the first on
# fresh memory, the second once the allocator reuses what the first freed
# (the steady state of a server that has been up for a while). Each is
# counted from the RSS before the first round; the larger is reported.
idle_round() {
    local name=$1 port=$2 pid=${PID[$1]} after="" line
    coproc IDLER {
        taskset -c "$CLIENT_CPU" python3 "$HERE/tls_idle.py" 127.0.0.1 "$port" "$IDLE" "$IDLE_HOLD" 180 2>&1
    }
    while read -r line <&"${IDLER[0]}"; do
        case $line in
        READY*)
            sleep 1
            after=$(rss_kib "$pid")
            ;;
        HELD* | TIMEOUT*) break ;;
        *) log "bench: $name idle: $line" ;;
        esac
    done
    wait "$IDLER_PID" 2>/dev/null || true
    echo "$after"
}

measure_idle() {
    local name=$1 port=$2 pid=${PID[$1]} base r1 r2 b1 b2
    base=$(rss_kib "$pid")
    r1=$(idle_round "$name" "$port")
    sleep 1
    r2=$(idle_round "$name" "$port")
    [[ -n "$r1" && -n "$r2" ]] || return 0
    b1=$(((r1 - base) * 1024 / IDLE))
    b2=$(((r2 - base) * 1024 / IDLE))
    IDLEB[$name]=$((b1 > b2 ? b1 : b2))
    log "bench: $name idle: RSS $base KiB, with $IDLE idle TLS connections $r1 KiB (fresh), $r2 KiB (reused memory): $b1 / $b2 B each"
}

for name in keel nginx; do
    has "$name" || continue
    port=$(port_of "$name")
    "start_$name" "$port"
    check_server "$name" "$port" || die "$name did not start"
    if wants keepalive; then measure_keepalive "$name" "$port"; fi
    if wants handshake; then measure_handshake "$name" "$port"; fi
    if wants idle; then measure_idle "$name" "$port"; fi
    kill "${PID[$name]}" 2>/dev/null || true
    wait "${PID[$name]}" 2>/dev/null || true
    unset "PID[$name]"
done

ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN {if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-"}'; }
row() { printf '| %-34s | %12s | %12s | %14s |\n' "$1" "${2:--}" "${3:--}" "$4"; }
echo
echo "HTTPS, one worker each: TLS 1.2 $SUITE_OPENSSL, X25519, ECDSA P-256"
echo "($(nproc) CPUs; server on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; ${DURATION}s runs)"
row measure keel nginx "keel vs nginx"
printf '|%s|%s|%s|%s|\n' "------------------------------------" "--------------" "--------------" "----------------"
if wants keepalive; then
    row "keep-alive requests/s" "${RPS[keel]:-}" "${RPS[nginx]:-}" "$(ratio "${RPS[keel]:-}" "${RPS[nginx]:-}")"
    row "keep-alive requests per CPU-s" "${CPURPS[keel]:-}" "${CPURPS[nginx]:-}" "$(ratio "${CPURPS[keel]:-}" "${CPURPS[nginx]:-}")"
fi
if wants handshake; then
    row "new handshakes/s (s_time -new)" "${HS[keel]:-}" "${HS[nginx]:-}" "$(ratio "${HS[keel]:-}" "${HS[nginx]:-}")"
    row "new handshakes per CPU-s" "${CPUHS[keel]:-}" "${CPUHS[nginx]:-}" "$(ratio "${CPUHS[keel]:-}" "${CPUHS[nginx]:-}")"
fi
if wants idle; then
    row "bytes per idle TLS connection" "${IDLEB[keel]:-}" "${IDLEB[nginx]:-}" "$(ratio "${IDLEB[nginx]:-}" "${IDLEB[keel]:-}") (n/k)"
fi
