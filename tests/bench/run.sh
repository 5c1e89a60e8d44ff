#!/usr/bin/env bash
# tests/bench/run.sh — keel against nginx, h2o and Node.js, side by side in
# one run, on loopback. A benchmark, not a test: never part of ctest.
#
#   tests/bench/run.sh                      full run (10 s per measurement)
#   DURATION=3 WARMUP=1 tests/bench/run.sh  quick run
#   SERVERS="keel nginx" TESTS="plain pipeline" tests/bench/run.sh
#
# Each server gets one worker / thread / process, all pinned to one core
# (SERVER_CPU, default 0); wrk and the idle-connection client run on another
# (CLIENT_CPU, default 1). For every server, in turn:
#   plain     wrk -t1 -c64 GET /                      (keep-alive)
#   pipeline  wrk -t1 -c64, 16 GET / per write        (HTTP/1.1 pipelining)
#   post      wrk -t1 -c64 POST /echo, 4 KiB bodies
#   idle      RSS growth for 10,000 idle keep-alive connections
#   syscalls  system calls per plaintext request (perf stat on the
#             raw_syscalls:sys_enter tracepoint; skipped without perf):
#             with instr, where the server's CPU time goes, minus the noise
#   instr     user-space instructions per plaintext request, counted by
#             valgrind's callgrind (keel, nginx, h2o; not node, whose JIT
#             makes the count meaningless): repeatable where the machine's
#             noise makes req/CPU-s wobble. Kernel time is not in it.
# and reports requests/s, p99 latency, and requests per second of server CPU
# time (utime + stime from /proc/PID/stat over the run): on a 2-core machine
# one wrk thread is often the bottleneck, and CPU time tells apart servers
# that wrk cannot. It ends with keel's ratio to each peer.
#
# Environment (defaults in brackets):
#   DURATION [10]  seconds per measurement      WARMUP [2]   seconds of warm-up before each
#   CONNS [64]     wrk connections              DEPTH [16]   requests per pipelined write
#   BODY [4096]    POST body bytes              IDLE [10000] idle connections
#   SERVERS ["keel nginx h2o node"]   TESTS ["plain pipeline post idle syscalls instr"]
#   ROUNDS [1]     measurements per server and test, in turns; the median is reported
#   SERVER_CPU [0] CLIENT_CPU [1]               BASE_PORT [19080] (keel; peers +1, +2, +3)
#   KEEL_BUILD [<repo>/build]  where keel and modules/ are; built (Release) if missing
#   H2O_MODE [file]  h2o answers GET / from a static file ("file") or mruby ("mruby")
#   NO_INSTALL=1   do not apt-get missing packages
#
# Packages (installed with apt-get when missing): wrk nginx-light
# libnginx-mod-http-echo (nginx's POST /echo) h2o nodejs python3 valgrind;
# perf (linux-perf) is used when present.
# Everything listens on 127.0.0.1 only; every load is bounded in time; every
# server this script started is killed when it exits (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-64}
DEPTH=${DEPTH:-16}
BODY=${BODY:-4096}
IDLE=${IDLE:-10000}
SERVERS=${SERVERS:-"keel nginx h2o node"}
TESTS=${TESTS:-"plain pipeline post idle syscalls instr"}
INSTR_SECS=${INSTR_SECS:-5}
WRAP=()
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-19080}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
H2O_MODE=${H2O_MODE:-file}
IDLE_HOLD=${IDLE_HOLD:-3}
ROUNDS=${ROUNDS:-1}

log() { printf '%s\n' "$*" >&2; }
die() {
    log "bench: $*"
    exit 1
}

has() { [[ " $SERVERS " == *" $1 "* ]]; }
wants() { [[ " $TESTS " == *" $1 "* ]]; }

# ---- Packages ---------------------------------------------------------------

install_missing() {
    local pkgs=()
    command -v wrk >/dev/null || pkgs+=(wrk)
    command -v taskset >/dev/null || pkgs+=(util-linux)
    command -v curl >/dev/null || pkgs+=(curl)
    if has nginx; then
        command -v nginx >/dev/null || pkgs+=(nginx-light)
        [[ -e /usr/lib/nginx/modules/ngx_http_echo_module.so ]] || pkgs+=(libnginx-mod-http-echo)
    fi
    if has h2o; then command -v h2o >/dev/null || pkgs+=(h2o); fi
    if has node; then command -v node >/dev/null || pkgs+=(nodejs); fi
    if wants idle; then command -v python3 >/dev/null || pkgs+=(python3); fi
    if wants instr; then command -v callgrind_control >/dev/null || pkgs+=(valgrind); fi
    ((${#pkgs[@]})) || return 0
    [[ -n "${NO_INSTALL:-}" ]] && die "missing packages: ${pkgs[*]} (NO_INSTALL is set)"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    log "bench: installing ${pkgs[*]}"
    # The packages' services must not start (they would take port 80): a
    # policy-rc.d that says no, unless the system already has one.
    local policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod +x "$policy"
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
        "${pkgs[@]}" >&2 ||
        { "${sudo[@]}" apt-get update >&2 &&
            DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y \
                --no-install-recommends "${pkgs[@]}" >&2; } || rc=$?
    [[ -n "$policy" ]] && "${sudo[@]}" rm -f "$policy"
    ((rc == 0)) || die "apt-get install ${pkgs[*]} failed"
}

# ---- Process bookkeeping -------------------------------------------------------

TMP=$(mktemp -d /tmp/keel-bench.XXXXXX)
declare -A PID=()

cleanup() {
    local p
    for p in "${PID[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    sleep 0.3
    for p in "${PID[@]}"; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The server's processes: the one we started and its children (nginx's worker).
server_pids() {
    local root=$1
    echo "$root"
    pgrep -P "$root" 2>/dev/null || true
}

CLK_TCK=$(getconf CLK_TCK)

# utime + stime of all the server's processes, in clock ticks.
cpu_ticks() {
    local total=0 p stat rest
    for p in $(server_pids "$1"); do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        rest=${stat##*) } # after "pid (comm) "
        read -r -a f <<<"$rest"
        total=$((total + f[11] + f[12])) # fields 14 and 15 of stat(5)
    done
    echo "$total"
}

# Resident memory of all the server's processes, in KiB.
rss_kib() {
    local total=0 p v
    for p in $(server_pids "$1"); do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        total=$((total + ${v:-0}))
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

# ---- Servers -----------------------------------------------------------------------

start_keel() {
    local port=$1 bin="$KEEL_BUILD/keel"
    if [[ ! -x "$bin" || ! -e "$KEEL_BUILD/modules/mod_http1.so" || ! -e "$KEEL_BUILD/modules/mod_hello.so" ]]; then
        log "bench: building keel in $KEEL_BUILD (Release)"
        cmake -S "$ROOT" -B "$KEEL_BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=OFF >&2
        cmake --build "$KEEL_BUILD" >&2
    fi
    cat >"$TMP/keel.conf" <<EOF
[keel]
listen = 127.0.0.1:$port http1
workers = 1
modules = http1 hello
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
[http1]
keepalive_timeout = 5m
max_requests = 0
EOF
    taskset -c "$SERVER_CPU" "${WRAP[@]}" "$bin" -c "$TMP/keel.conf" >"$TMP/keel.log" 2>&1 &
    PID[keel]=$!
}

start_nginx() {
    local port=$1
    mkdir -p "$TMP/nginx/logs"
    local echo_mod=/usr/lib/nginx/modules/ngx_http_echo_module.so
    cat >"$TMP/nginx/nginx.conf" <<EOF
load_module $echo_mod;
worker_processes 1;
daemon off;
$([[ ${#WRAP[@]} -gt 0 ]] && echo "master_process off; # under valgrind: one process to count")
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
worker_rlimit_nofile 65536;
events {
    worker_connections 30000;
}
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    client_body_buffer_size 16k;
    client_body_temp_path $TMP/nginx/body;
    server {
        listen 127.0.0.1:$port backlog=4096;
        location = / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
        location = /echo {
            # The echo module (nginx-light's companion package) answers the
            # body read into memory, as keel's hello does.
            echo_read_request_body;
            echo_request_body;
        }
    }
}
EOF
    taskset -c "$SERVER_CPU" "${WRAP[@]}" nginx -p "$TMP/nginx" -e "$TMP/nginx/logs/error.log" \
        -c "$TMP/nginx/nginx.conf" >"$TMP/nginx.log" 2>&1 &
    PID[nginx]=$!
}

start_h2o() {
    local port=$1
    mkdir -p "$TMP/h2o"
    printf 'Hello, World!' >"$TMP/h2o/hello.txt"
    local root_handler
    if [[ "$H2O_MODE" == mruby ]]; then
        root_handler='        mruby.handler: |
          Proc.new do |env|
            [200, {"content-type" => "text/plain"}, ["Hello, World!"]]
          end'
    else
        root_handler="        file.file: $TMP/h2o/hello.txt"
    fi
    # Started as root, h2o drops to nobody unless told otherwise, and nobody
    # cannot read the private temporary directory.
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
file.mime.addtypes:
  "text/plain": ".txt"
hosts:
  default:
    paths:
      "/":
$root_handler
      "/echo":
        mruby.handler: |
          Proc.new do |env|
            input = env["rack.input"]
            body = input ? input.read : ""
            [200, {"content-type" => (env["CONTENT_TYPE"] || "application/octet-stream")}, [body]]
          end
EOF
    taskset -c "$SERVER_CPU" "${WRAP[@]}" h2o -c "$TMP/h2o/h2o.conf" >"$TMP/h2o.log" 2>&1 &
    PID[h2o]=$!
}

start_node() {
    local port=$1
    taskset -c "$SERVER_CPU" "${WRAP[@]}" node "$HERE/node_hello.js" "$port" >"$TMP/node.log" 2>&1 &
    PID[node]=$!
}

# Waits until the server answers GET / with "Hello, World!" and echoes a
# POST; 0 if it does.
check_server() {
    local name=$1 port=$2 i body
    for ((i = 0; i < 100; i++)); do
        body=$(curl -s --max-time 1 "http://127.0.0.1:$port/" 2>/dev/null || true)
        [[ "$body" == "Hello, World!" ]] && break
        kill -0 "${PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    if [[ "$body" != "Hello, World!" ]]; then
        log "bench: $name does not answer GET / on port $port (got '${body:0:80}'):"
        tail -n 20 "$TMP/$name.log" "$TMP/$name"/*.log "$TMP/$name"/logs/*.log 2>/dev/null >&2 || true
        return 1
    fi
    head -c "$BODY" /dev/zero | tr '\0' x >"$TMP/post.body"
    local len
    len=$(curl -s --max-time 5 --data-binary "@$TMP/post.body" \
        -H 'Content-Type: application/octet-stream' "http://127.0.0.1:$port/echo" | wc -c)
    if [[ "$len" -ne "$BODY" ]]; then
        log "bench: $name echoes $len bytes of a $BODY-byte POST /echo"
        return 1
    fi
    return 0
}

# ---- Measurements ----------------------------------------------------------------

declare -A RPS=() P99=() CPURPS=() ERRS=() MEM=() WRKFAIL=() RPS_L=() P99_L=() CPURPS_L=() INSTR=() SYSCALLS=()

# The median of a list of numbers, printed with the printf format $2.
median() {
    tr ' ' '\n' <<<"$1" | grep . | sort -g | awk -v fmt="$2" '{v[NR] = $1} END {
        if (NR == 0) print "-";
        else printf fmt "\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_wrk NAME TEST SECONDS RECORD
run_wrk() {
    local name=$1 test=$2 secs=$3 record=$4 port mode arg
    port=$(port_of "$name")
    case $test in
    plain) mode=plain arg=0 ;;
    pipeline) mode=pipeline arg=$DEPTH ;;
    post) mode=post arg=$BODY ;;
    esac
    local t0 t1 out
    t0=$(cpu_ticks "${PID[$name]}")
    out=$(BENCH_MODE=$mode BENCH_ARG=$arg timeout $((secs + 30)) \
        taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${secs}s" --timeout 5s \
        -s "$HERE/bench.lua" "http://127.0.0.1:$port/" 2>&1) || true
    t1=$(cpu_ticks "${PID[$name]}")
    ((record)) || return 0
    local line
    line=$(grep '^WRK_RESULT ' <<<"$out" || true)
    if [[ -z "$line" ]]; then
        log "bench: wrk failed against $name ($test):"
        log "$out"
        WRKFAIL[$name,$test]=$((${WRKFAIL[$name,$test]:-0} + 1))
        return 0
    fi
    local requests duration p99 errs
    requests=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$line")
    duration=$(sed -E 's/.*duration_us=([0-9]+).*/\1/' <<<"$line")
    p99=$(sed -E 's/.*p99_us=([0-9]+).*/\1/' <<<"$line")
    errs=$(awk '{n=0; for (i=2;i<=NF;i++) { split($i,kv,"="); if (kv[1]!="requests" && kv[1]!="duration_us" && kv[1]!="p50_us" && kv[1]!="p99_us") n+=kv[2] } print n}' <<<"$line")
    local rps p99ms cpurps
    rps=$(awk -v r="$requests" -v d="$duration" 'BEGIN{printf "%.0f", r / (d / 1e6)}')
    p99ms=$(awk -v p="$p99" 'BEGIN{printf "%.2f", p / 1000}')
    cpurps=$(awk -v r="$requests" -v t=$((t1 - t0)) -v hz="$CLK_TCK" \
        'BEGIN{ if (t > 0) printf "%.0f", r / (t / hz); else print 0 }')
    RPS_L[$name,$test]+=" $rps"
    P99_L[$name,$test]+=" $p99ms"
    CPURPS_L[$name,$test]+=" $cpurps"
    ERRS[$name,$test]=$((${ERRS[$name,$test]:-0} + errs))
    log "bench: $name $test: $rps req/s, p99 $p99ms ms, $cpurps req/CPU-s," \
        "server CPU $(((t1 - t0) * 100 / CLK_TCK / secs))%, errors $errs"
}

measure_idle() {
    local name=$1 port before after out
    port=$(port_of "$name")
    sleep 0.5
    before=$(rss_kib "${PID[$name]}")
    rm -f "$TMP/idle.out"
    timeout 120 taskset -c "$CLIENT_CPU" python3 "$HERE/idle_conns.py" 127.0.0.1 "$port" \
        "$IDLE" "$IDLE_HOLD" 90 >"$TMP/idle.out" 2>"$TMP/idle.err" &
    local client=$! i
    for ((i = 0; i < 1000; i++)); do
        grep -q '^\(READY\|TIMEOUT\)' "$TMP/idle.out" 2>/dev/null && break
        kill -0 "$client" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -q '^READY' "$TMP/idle.out"; then
        log "bench: $name: idle connections failed: $(cat "$TMP/idle.out" "$TMP/idle.err")"
        wait "$client" || true
        MEM[$name]=fail
        return 0
    fi
    sleep 1
    after=$(rss_kib "${PID[$name]}")
    wait "$client" || true
    local held
    held=$(sed -n 's/^HELD //p' "$TMP/idle.out")
    MEM[$name]=$(awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN{printf "%.0f", (a - b) * 1024 / n}')
    log "bench: $name idle: RSS $before KiB -> $after KiB for $IDLE connections" \
        "(${MEM[$name]} B each; $held still open at the end)"
    sleep 1 # let the closes settle before the next server
}

# System calls per request: perf counts the server's syscall entries while
# wrk runs for INSTR_SECS.
measure_syscalls() {
    local name=$1 port pids out requests calls
    port=$(port_of "$name")
    pids=$(server_pids "${PID[$name]}" | paste -sd, -)
    perf stat -x, -e raw_syscalls:sys_enter -p "$pids" -o "$TMP/perf.$name" 2>/dev/null &
    local perf_pid=$!
    sleep 0.5
    out=$(timeout $((INSTR_SECS + 30)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" \
        -d"${INSTR_SECS}s" "http://127.0.0.1:$port/" 2>&1) || true
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    calls=$(awk -F, '/raw_syscalls:sys_enter/ {print $1}' "$TMP/perf.$name" 2>/dev/null)
    if [[ -z "$requests" || "$requests" -eq 0 || ! "$calls" =~ ^[0-9]+$ ]]; then
        log "bench: $name syscalls: no count (is perf usable here?)"
        SYSCALLS[$name]=fail
        return 0
    fi
    SYSCALLS[$name]=$(awk -v c="$calls" -v r="$requests" 'BEGIN{printf "%.2f", c / r}')
    log "bench: $name syscalls: $calls for $requests requests (${SYSCALLS[$name]} each)"
}

# Instructions per request: the server runs under callgrind; its counters
# are zeroed after a warm-up, wrk runs for INSTR_SECS, the counters are
# dumped and divided by the requests wrk saw answered.
measure_instr() {
    local name=$1 port pids p out requests ir
    port=$(port_of "$name")
    WRAP=(valgrind --tool=callgrind --dump-instr=no "--callgrind-out-file=$TMP/cg.$name.%p")
    "start_$name" "$port"
    WRAP=()
    if ! check_server "$name" "$port"; then
        INSTR[$name]=fail
        return 0
    fi
    sleep 1 # nginx's worker: started after the master answers
    taskset -c "$CLIENT_CPU" wrk -t1 -c16 -d2s "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
    pids=$(server_pids "${PID[$name]}")
    for p in $pids; do callgrind_control -z "$p" >/dev/null 2>&1 || true; done
    out=$(timeout $((INSTR_SECS + 30)) taskset -c "$CLIENT_CPU" wrk -t1 -c16 -d"${INSTR_SECS}s" \
        "http://127.0.0.1:$port/" 2>&1) || true
    for p in $pids; do callgrind_control -d "$p" >/dev/null 2>&1 || true; done
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    ir=$(cat "$TMP"/cg."$name".*.[0-9]* 2>/dev/null | awk '/^summary:/ {s += $2} END {print s + 0}')
    kill "${PID[$name]}" 2>/dev/null || true
    wait "${PID[$name]}" 2>/dev/null || true
    if [[ -z "$requests" || "$requests" -eq 0 || "$ir" -eq 0 ]]; then
        log "bench: $name instr: no count (wrk: ${out:0:200})"
        INSTR[$name]=fail
        return 0
    fi
    INSTR[$name]=$((ir / requests))
    log "bench: $name instr: $ir instructions for $requests requests (${INSTR[$name]} each)"
}

# ---- Main --------------------------------------------------------------------------

install_missing

want_fds=$((IDLE + 2000))
if (($(ulimit -n) < want_fds)); then
    ulimit -n "$want_fds" 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fi
if (($(ulimit -n) < IDLE + 100)); then
    log "bench: open-file limit $(ulimit -n) is too low for $IDLE connections; IDLE=$(($(ulimit -n) - 200))"
    IDLE=$(($(ulimit -n) - 200))
fi
if (($(nproc) < 2)); then
    log "bench: only one CPU: server and client share it (numbers will be low)"
    CLIENT_CPU=$SERVER_CPU
fi

LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$LOAD_BEFORE" 'BEGIN{exit !(l > 0.5)}'; then
    log "bench: load average is $LOAD_BEFORE: something else is running, numbers will suffer"
fi

for s in $SERVERS; do
    case $s in keel | nginx | h2o | node) ;; *) die "unknown server '$s'" ;; esac
    port=$(port_of "$s")
    if curl -s --max-time 1 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
        die "port $port (for $s) is already in use; set BASE_PORT"
    fi
    "start_$s" "$port"
done
ok_servers=""
for s in $SERVERS; do
    if check_server "$s" "$(port_of "$s")"; then
        ok_servers+=" $s"
    fi
done
[[ -n "$ok_servers" ]] || die "no server came up"

# Test by test, the servers in turn, ROUNDS times: each comparison is made
# close in time, and the median of the rounds evens out background noise.
for t in plain pipeline post; do
    wants "$t" || continue
    for ((round = 1; round <= ROUNDS; round++)); do
        for s in $ok_servers; do
            if ((WARMUP > 0)); then run_wrk "$s" "$t" "$WARMUP" 0; fi
            run_wrk "$s" "$t" "$DURATION" 1
        done
    done
    for s in $ok_servers; do
        RPS[$s,$t]=$(median "${RPS_L[$s,$t]:-}" %.0f)
        P99[$s,$t]=$(median "${P99_L[$s,$t]:-}" %.2f)
        CPURPS[$s,$t]=$(median "${CPURPS_L[$s,$t]:-}" %.0f)
    done
done
if wants idle; then
    for s in $ok_servers; do measure_idle "$s"; done
fi
if wants syscalls; then
    if command -v perf >/dev/null; then
        for s in $ok_servers; do measure_syscalls "$s"; done
    else
        log "bench: no perf: syscalls skipped (apt-get install linux-perf)"
    fi
fi
if wants instr; then
    # One server at a time under valgrind: stop the others first.
    for s in $ok_servers; do kill "${PID[$s]}" 2>/dev/null || true; done
    for s in $ok_servers; do wait "${PID[$s]}" 2>/dev/null || true; done
    for s in $ok_servers; do
        [[ "$s" == node ]] || measure_instr "$s"
    done
fi

# ---- Report ------------------------------------------------------------------------

versions() {
    echo "keel $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') ($(basename "$KEEL_BUILD"))"
    command -v nginx >/dev/null && nginx -v 2>&1 | sed 's/.*version: //'
    command -v h2o >/dev/null && h2o --version 2>/dev/null | head -1
    command -v node >/dev/null && echo "node $(node --version)"
    wrk --version 2>&1 | head -1 | awk '{print "wrk", $2}'
}

echo
echo "keel benchmark — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "servers on CPU $SERVER_CPU (1 worker each), wrk -t1 -c$CONNS on CPU $CLIENT_CPU, ${DURATION}s per run after ${WARMUP}s warm-up, median of $ROUNDS round(s)"
echo "versions: $(versions | paste -sd ';' | sed 's/;/; /g')"
echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1 /proc/loadavg) (the benchmark itself adds about 1-2)"
echo "command: $([[ "$KEEL_BUILD" != "$ROOT/build" ]] && echo "KEEL_BUILD=$KEEL_BUILD ")DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS CONNS=$CONNS DEPTH=$DEPTH BODY=$BODY IDLE=$IDLE SERVERS=\"$SERVERS\" TESTS=\"$TESTS\" H2O_MODE=$H2O_MODE tests/bench/run.sh"
echo

names=(plain pipeline post)
titles=("plaintext (keep-alive)" "pipelined x$DEPTH" "POST /echo ${BODY} B")
printf '%-8s' "server"
for i in 0 1 2; do wants "${names[$i]}" && printf ' | %-34s' "${titles[$i]}"; done
wants idle && printf ' | %s' "idle conn"
wants syscalls && printf ' | %s' "syscalls"
wants instr && printf ' | %s' "user instr"
echo
printf '%-8s' ""
for t in "${names[@]}"; do wants "$t" && printf ' | %10s %9s %13s' "req/s" "p99 ms" "req/CPU-s"; done
wants idle && printf ' | %9s' "bytes"
wants syscalls && printf ' | %8s' "/request"
wants instr && printf ' | %10s' "/request"
echo
for s in $ok_servers; do
    printf '%-8s' "$s"
    for t in "${names[@]}"; do
        wants "$t" || continue
        printf ' | %10s %9s %13s' "${RPS[$s,$t]:--}" "${P99[$s,$t]:--}" "${CPURPS[$s,$t]:--}"
    done
    wants idle && printf ' | %9s' "${MEM[$s]:--}"
    wants syscalls && printf ' | %8s' "${SYSCALLS[$s]:--}"
    wants instr && printf ' | %10s' "${INSTR[$s]:--}"
    echo
done
for s in $ok_servers; do
    for t in "${names[@]}"; do
        e=${ERRS[$s,$t]:-0}
        [[ "$e" == 0 ]] || echo "note: $s $t had $e errors (socket errors, timeouts or non-2xx answers)"
        f=${WRKFAIL[$s,$t]:-0}
        [[ "$f" == 0 ]] || echo "note: wrk failed $f time(s) against $s ($t); see the log above"
    done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }'; }

if [[ " $ok_servers " == *" keel "* ]]; then
    echo
    echo "keel / peer (above 1.00x keel is ahead; for memory, syscalls and instructions, below 1.00x keel uses less):"
    printf '%-8s' "peer"
    for i in 0 1 2; do wants "${names[$i]}" && printf ' | %-25s' "${titles[$i]}"; done
    wants idle && printf ' | %s' "idle conn memory"
    wants syscalls && printf ' | %s' "syscalls/request"
    wants instr && printf ' | %s' "user instr/request"
    echo
    printf '%-8s' ""
    for t in "${names[@]}"; do wants "$t" && printf ' | %11s %13s' "req/s" "req/CPU-s"; done
    echo
    for s in $ok_servers; do
        [[ "$s" == keel ]] && continue
        printf '%-8s' "$s"
        for t in "${names[@]}"; do
            wants "$t" || continue
            printf ' | %11s %13s' "$(ratio "${RPS[keel,$t]:-0}" "${RPS[$s,$t]:-0}")" \
                "$(ratio "${CPURPS[keel,$t]:-0}" "${CPURPS[$s,$t]:-0}")"
        done
        wants idle && printf ' | %-16s' "$(ratio "${MEM[keel]:-0}" "${MEM[$s]:-0}")"
        wants syscalls && printf ' | %-16s' "$(ratio "${SYSCALLS[keel]:-0}" "${SYSCALLS[$s]:-0}")"
        wants instr && printf ' | %s' "$(ratio "${INSTR[keel]:-0}" "${INSTR[$s]:-0}")"
        echo
    done
fi
