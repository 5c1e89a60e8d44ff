# shellcheck shell=bash
# tests/bench/lib.sh — what run.sh and the scenario files (http.sh,
# static.sh, ws.sh, tls.sh, h2.sh, proxy.sh, cluster.sh) share: settings, packages, process bookkeeping, CPU time
# and memory of a server, wrk, medians and ratios, the peers' configuration
# frames, the driver that selects and runs the scenarios, and the report's
# head. Sourced, never run; the documentation of the settings is run.sh's
# header.
[[ -n ${KEEL_BENCH_LIB:-} ]] && return 0
KEEL_BENCH_LIB=1
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/../.." && pwd)

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-19080}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
MAX_MINUTES=${MAX_MINUTES:-60}
INSTR_SECS=${INSTR_SECS:-5}
CONNS=${CONNS:-64}

log() { printf '%s\n' "$*" >&2; }
die() {
    log "bench: $*"
    exit 1
}

# ---- Scenarios and the selection ------------------------------------------------
#
# A scenario file registers itself with bench_scenario NAME "TESTS" "SERVERS"
# and defines NAME_needs (packages), NAME_run (starts its servers, measures,
# stops them), NAME_report (markdown tables) and NAME_settings (its variables,
# for the command line in the report); NAME_versions, if defined, adds lines
# to the report's versions (its own clients).

SCENARIOS=()
declare -A SCEN_TESTS=() SCEN_SERVERS=() SCEN_OF=() SCEN_PORT=() UP=()

# bench_scenario NAME "TESTS" "SERVERS" PORT_OFFSET: the servers' ports are
# BASE_PORT + PORT_OFFSET + their rank in SERVERS.
bench_scenario() {
    local t
    SCENARIOS+=("$1")
    SCEN_TESTS[$1]=$2
    SCEN_SERVERS[$1]=$3
    SCEN_PORT[$1]=$4
    for t in $2; do SCEN_OF[$t]=$1; done
}

# port_of SCENARIO SERVER [SHIFT]
port_of() {
    local s i=0
    for s in ${SCEN_SERVERS[$1]}; do
        [[ $s == "$2" ]] && break
        i=$((i + 1))
    done
    echo $((BASE_PORT + SCEN_PORT[$1] + i + ${3:-0}))
}

TESTLIST=" "
# TESTS words: a test, a scenario's name (all its tests) or "all".
expand_tests() {
    local w s
    TESTLIST=" "
    for w in $TESTS; do
        if [[ $w == all ]]; then
            for s in "${SCENARIOS[@]}"; do TESTLIST+="${SCEN_TESTS[$s]} "; done
        elif [[ -n ${SCEN_TESTS[$w]:-} ]]; then
            TESTLIST+="${SCEN_TESTS[$w]} "
        elif [[ -n ${SCEN_OF[$w]:-} ]]; then
            TESTLIST+="$w "
        else
            die "unknown test or group '$w' (known: all ${SCENARIOS[*]} $(for s in "${SCENARIOS[@]}"; do printf '%s ' "${SCEN_TESTS[$s]}"; done))"
        fi
    done
}

wants() { [[ $TESTLIST == *" $1 "* ]]; }

scenario_wanted() {
    local t
    for t in ${SCEN_TESTS[$1]}; do wants "$t" && return 0; done
    return 1
}

# The servers of SERVERS that scenario $1 runs, in SERVERS' order.
servers_of() {
    local s out=""
    for s in $SERVERS; do
        [[ " ${SCEN_SERVERS[$1]} " == *" $s "* ]] && out+="$s "
    done
    echo "${out% }"
}

# ---- Packages ---------------------------------------------------------------------

NEED_PKGS=()
need() { command -v "$1" >/dev/null || NEED_PKGS+=("$2"); }
need_file() { [[ -e $1 ]] || NEED_PKGS+=("$2"); }

# The packages of the peers that scenario $1 runs.
need_servers() {
    local s
    for s in $(servers_of "$1"); do
        case $s in
        nginx) need nginx nginx-light ;;
        h2o) need h2o h2o ;;
        caddy) need caddy caddy ;;
        node) need node nodejs ;;
        lws)
            need cc gcc
            need pkg-config pkg-config
            need_file /usr/include/libwebsockets.h libwebsockets-dev
            ;;
        esac
    done
}

install_needed() {
    ((${#NEED_PKGS[@]})) || return 0
    local pkgs
    read -r -a pkgs <<<"$(printf '%s\n' "${NEED_PKGS[@]}" | sort -u | paste -sd' ')"
    [[ -n ${NO_INSTALL:-} ]] && die "missing packages: ${pkgs[*]} (NO_INSTALL is set)"
    # Every package the benchmarks may install is in cmake/packages.txt's
    # bench list, so that the list the docs show is the whole truth.
    local listed p
    # shellcheck disable=SC2034  # read by cmake/packages.sh
    keel_cmake_dir=$ROOT/cmake
    # shellcheck source=../../cmake/packages.sh
    . "$ROOT/cmake/packages.sh"
    listed=" $(keel_packages bench) "
    for p in "${pkgs[@]}"; do
        [[ $listed == *" $p "* ]] || die "bench: $p is not in cmake/packages.txt's bench list: add it there"
    done
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
    [[ -n $policy ]] && "${sudo[@]}" rm -f "$policy"
    ((rc == 0)) || die "apt-get install ${pkgs[*]} failed"
}

# keel and the modules named, built (Release) in KEEL_BUILD when missing.
ensure_keel() {
    local m missing=0
    [[ -x $KEEL_BUILD/keel ]] || missing=1
    for m in "$@"; do [[ -e $KEEL_BUILD/modules/mod_$m.so ]] || missing=1; done
    ((missing)) || return 0
    log "bench: building keel in $KEEL_BUILD (Release)"
    cmake -S "$ROOT" -B "$KEEL_BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=OFF >&2
    cmake --build "$KEEL_BUILD" >&2
}

# ---- Processes -----------------------------------------------------------------------

TMP=$(mktemp -d /tmp/keel-bench.XXXXXX)
declare -A PID=()
WATCHDOG=""
WRAP=() # a command the next server starts under (valgrind, for instr)

cleanup() {
    local p
    [[ -n $WATCHDOG ]] && kill "$WATCHDOG" 2>/dev/null
    for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PID[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The whole run is bounded: past MAX_MINUTES the script stops itself (and the
# EXIT trap stops every server).
start_watchdog() {
    local secs=$((MAX_MINUTES * 60)) main=$$
    (
        trap 'kill $sp 2>/dev/null; exit 0' TERM
        sleep "$secs" &
        sp=$!
        wait "$sp"
        log "bench: MAX_MINUTES=$MAX_MINUTES reached, stopping"
        kill -TERM "$main"
    ) &
    WATCHDOG=$!
}

# spawn KEY LOG COMMAND...: a server, pinned to SERVER_CPU (under WRAP).
spawn() {
    local key=$1 out=$2
    shift 2
    taskset -c "$SERVER_CPU" "${WRAP[@]}" "$@" >"$out" 2>&1 &
    PID[$key]=$!
}

stop_server() {
    [[ -n ${PID[$1]:-} ]] || return 0
    kill "${PID[$1]}" 2>/dev/null || true
    wait "${PID[$1]}" 2>/dev/null || true
    unset "PID[$1]"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        port_busy "$1" && return 0
        sleep 0.05
    done
    return 1
}

# The server's processes: the one started and its children (nginx's worker).
server_pids() {
    echo "$1"
    pgrep -P "$1" 2>/dev/null || true
}

CLK_TCK=$(getconf CLK_TCK)

# proc_ticks PID user|all: utime (user) or utime + stime (all) of the
# server's processes, in clock ticks (fields 14 and 15 of stat(5)).
proc_ticks() {
    local total=0 p stat rest f
    for p in $(server_pids "$1"); do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        rest=${stat##*) } # after "pid (comm) "
        read -r -a f <<<"$rest"
        if [[ $2 == all ]]; then
            total=$((total + f[11] + f[12]))
        else
            total=$((total + f[11]))
        fi
    done
    echo "$total"
}

# utime + stime of all the server's processes, in clock ticks.
cpu_ticks() { proc_ticks "$1" all; }

# utime alone: with cpu_ticks, how much of a server's CPU its own code
# takes and how much the kernel does on its behalf (which no change in
# user space can win back).
user_ticks() { proc_ticks "$1" user; }

# Resident memory of all the server's processes, in KiB.
rss_kib() {
    local total=0 p v
    for p in $(server_pids "$1"); do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

# ---- wrk ---------------------------------------------------------------------------

# wrk_run KEY URL SECONDS CONNS MODE ARG: wrk -t1 on CLIENT_CPU with
# bench.lua; sets WRK_REQS, WRK_SECS, WRK_P99_MS, WRK_ERRS, WRK_TICKS (the
# server's CPU ticks over the run) and WRK_UTICKS (those in user space), for
# the caller. Returns 1 (with wrk's output logged) when
# wrk printed no result.
# shellcheck disable=SC2034
wrk_run() {
    local key=$1 url=$2 secs=$3 conns=$4 mode=$5 arg=$6 t0 u0 out line
    t0=$(cpu_ticks "${PID[$key]}")
    u0=$(user_ticks "${PID[$key]}")
    out=$(BENCH_MODE=$mode BENCH_ARG=$arg timeout $((secs + 30)) \
        taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"${secs}s" --timeout 5s \
        -s "$BENCH_DIR/bench.lua" "$url" 2>&1) || true
    WRK_TICKS=$(($(cpu_ticks "${PID[$key]}") - t0))
    WRK_UTICKS=$(($(user_ticks "${PID[$key]}") - u0))
    line=$(grep '^WRK_RESULT ' <<<"$out" || true)
    if [[ -z $line ]]; then
        log "bench: wrk failed against $key ($url):"
        log "$out"
        return 1
    fi
    local kv k v
    WRK_ERRS=0
    for kv in ${line#WRK_RESULT }; do
        k=${kv%%=*} v=${kv#*=}
        case $k in
        requests) WRK_REQS=$v ;;
        duration_us) WRK_SECS=$(awk -v d="$v" 'BEGIN{printf "%.6f", d / 1e6}') ;;
        p99_us) WRK_P99_MS=$(awk -v p="$v" 'BEGIN{printf "%.2f", p / 1000}') ;;
        p50_us) ;;
        *) WRK_ERRS=$((WRK_ERRS + v)) ;;
        esac
    done
}

# per_cpu_s COUNT TICKS: COUNT per second of server CPU time.
per_cpu_s() {
    awk -v n="$1" -v t="$2" -v hz="$CLK_TCK" 'BEGIN{ if (t > 0) printf "%.0f", n / (t / hz); else print 0 }'
}

# ---- Results -------------------------------------------------------------------------

# RES[scenario/server/test/metric]: the values of the rounds, space-separated.
declare -A RES=()
record() { RES[$1]+=" $2"; }

# The median of a list of numbers, printed with the printf format $2.
median() {
    tr ' ' '\n' <<<"$1" | { grep . || true; } | sort -g | awk -v fmt="$2" '{v[NR] = $1} END {
        if (NR == 0) print "-";
        else printf fmt "\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# med KEY [FORMAT]: the median of RES[KEY] ("-" without values).
med() { median "${RES[$1]:-}" "${2:-%.0f}"; }

# All the values of RES[KEY], for the log of wobble ("a b c").
spread() {
    local v=${RES[$1]:-}
    echo "${v# }"
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf (a / b < 0.1 ? "%.3f×" : "%.2f×"), a / b; else print "–" }'
}

# ---- Peers' configuration frames -------------------------------------------------

# keel_conf FILE PORT MODULES [SECTIONS] [LISTEN_WORDS]: one worker on
# 127.0.0.1:PORT, speaking LISTEN_WORDS (http1); with http1 among MODULES,
# its keep-alive unbounded (keel refuses a section no module loaded owns).
keel_conf() {
    local http1=""
    [[ " $3 " == *" http1 "* ]] && http1="[http1]
keepalive_timeout = 5m
max_requests = 0"
    cat >"$1" <<EOF
[keel]
listen = 127.0.0.1:$2 ${5:-http1}
workers = 1
modules = $3
module_path = $KEEL_BUILD/modules
max_connections = 30000
log_level = warn
$http1
${4:-}
EOF
}

# nginx_conf DIR PORT HTTP_LINES SERVER_LINES [MAIN_LINES] [LISTEN_WORDS]:
# one worker.
nginx_conf() {
    mkdir -p "$1/logs"
    cat >"$1/nginx.conf" <<EOF
${5:-}
worker_processes 1;
daemon off;
$([[ ${#WRAP[@]} -gt 0 ]] && echo "master_process off; # under valgrind: one process to count")
pid $1/nginx.pid;
error_log $1/logs/error.log warn;
worker_rlimit_nofile 65536;
events {
    worker_connections 30000;
}
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    client_body_temp_path $1/body;
$3
    server {
        listen 127.0.0.1:$2 ${6:-}${6:+ }backlog=4096;
$4
    }
}
EOF
}

spawn_nginx() { # KEY DIR
    spawn "$1" "$2/nginx.log" nginx -p "$2" -e "$2/logs/error.log" -c "$2/nginx.conf"
}

# h2o_conf DIR PORT PATHS_YAML [TOP_LINES]: one thread.
h2o_conf() {
    mkdir -p "$1"
    # Started as root, h2o drops to nobody unless told otherwise, and nobody
    # cannot read the private temporary directory.
    local user=""
    [[ $(id -u) -eq 0 ]] && user="user: root"
    cat >"$1/h2o.conf" <<EOF
$user
listen:
  host: 127.0.0.1
  port: $2
num-threads: 1
max-connections: 30000
http1-request-timeout: 300
error-log: $1/error.log
pid-file: $1/h2o.pid
${4:-}
hosts:
  default:
    paths:
$3
EOF
}

spawn_h2o() { # KEY DIR
    spawn "$1" "$2/h2o.log" h2o -c "$2/h2o.conf"
}

# caddy_conf DIR PORT SITE_LINES [GLOBAL_LINES] [SITE_ADDRESS]: one site,
# no admin endpoint, no automatic HTTPS, no logs (as the others: access
# logs off). Caddy is one Go process: GOMAXPROCS=1 (spawn_caddy) keeps it
# to one thread running Go code, as the others get one worker.
caddy_conf() {
    mkdir -p "$1"
    cat >"$1/Caddyfile" <<EOF
{
	admin off
	auto_https off
	log {
		output discard
	}
${4:-}
}
${5:-http://127.0.0.1:$2} {
$3
}
EOF
}

spawn_caddy() { # KEY DIR
    XDG_DATA_HOME=$2 XDG_CONFIG_HOME=$2 GOMAXPROCS=1 spawn "$1" "$2/caddy.log" \
        caddy run --config "$2/Caddyfile" --adapter caddyfile
}

is_hello() { [[ $1 == "Hello, World!" ]]; }

# check_up KEY URL PREDICATE DESCRIPTION LOGDIR [CURL_OPTION...]: waits (10 s
# at most) until the body of URL satisfies the shell function PREDICATE; 1
# (with the logs under LOGDIR) if it never does.
check_up() {
    local key=$1 url=$2 pred=$3 what=$4 logs=$5 i body=""
    shift 5
    for ((i = 0; i < 100; i++)); do
        body=$(curl -sk "$@" --max-time 1 "$url" 2>/dev/null || true)
        "$pred" "$body" && return 0
        kill -0 "${PID[$key]}" 2>/dev/null || break
        sleep 0.1
    done
    log "bench: $key does not answer $url as it should ($what; got '${body:0:80}'):"
    tail -n 20 "$logs"/*.log "$logs"/*/*.log "$logs"/*/logs/*.log 2>/dev/null >&2 || true
    return 1
}

# same_file NAME URL FILE [CURL_OPTION...]: does server NAME answer URL with
# the bytes of FILE? (Logged when not.)
same_file() {
    local name=$1 url=$2 file=$3
    shift 3
    curl -s "$@" --max-time 5 "$url" | cmp -s - "$file" && return 0
    log "bench: $name answers $url with other bytes than $file"
    return 1
}

# start_all SCENARIO: starts its servers (SCENARIO_start_NAME PORT), checks
# each (SCENARIO_check NAME) and stops those that fail; UP[SCENARIO] lists
# the others.
start_all() {
    local sc=$1 s port up=""
    for s in $(servers_of "$sc"); do
        port=$(port_of "$sc" "$s")
        port_busy "$port" && die "port $port (for $sc $s) is in use; set BASE_PORT"
        "${sc}_start_$s" "$port"
    done
    for s in $(servers_of "$sc"); do
        if "${sc}_check" "$s"; then up+=" $s"; else stop_server "$sc.$s"; fi
    done
    [[ -n $up ]] || die "no $sc server came up"
    UP[$sc]=$up
}

stop_all() {
    local s
    for s in ${UP[$1]}; do stop_server "$1.$s"; done
}

# take_turns SCENARIO TEST FUNCTION: ROUNDS times, every server up in turn:
# FUNCTION NAME TEST WARMUP 0 (not recorded), then FUNCTION NAME TEST DURATION 1.
take_turns() {
    local round s
    for ((round = 1; round <= ROUNDS; round++)); do
        for s in ${UP[$1]}; do
            ((WARMUP > 0)) && "$3" "$s" "$2" "$WARMUP" 0
            "$3" "$s" "$2" "$DURATION" 1
        done
    done
}

# wrk_record SCENARIO NAME TEST SECONDS RECORD URL CONNS MODE ARG SCALE UNIT:
# a wrk measurement; recorded (when RECORD is 1) as RES[SCENARIO/NAME/TEST/x]
# with x = val (UNIT/s: requests times SCALE per second), cpu (UNIT per
# server CPU-second), p99 (ms), errs, or fail when wrk gave no result.
wrk_record() {
    local sc=$1 name=$2 test=$3 secs=$4 rec=$5 k="$1/$2/$3"
    if ! wrk_run "$sc.$name" "$6" "$secs" "$7" "$8" "$9"; then
        ((rec)) && record "$k/fail" 1
        return 0
    fi
    ((rec)) || return 0
    local val cpu
    val=$(awk -v r="$WRK_REQS" -v d="$WRK_SECS" -v m="${10}" 'BEGIN{printf "%.0f", r * m / d}')
    cpu=$(per_cpu_s "$(awk -v r="$WRK_REQS" -v m="${10}" 'BEGIN{printf "%.0f", r * m}')" "$WRK_TICKS")
    record "$k/val" "$val"
    record "$k/cpu" "$cpu"
    record "$k/p99" "$WRK_P99_MS"
    record "$k/errs" "$WRK_ERRS"
    local user=0
    ((WRK_TICKS > 0)) && user=$((WRK_UTICKS * 100 / WRK_TICKS))
    record "$k/user" "$user"
    log "bench: $name $test: $val ${11}/s, p99 $WRK_P99_MS ms, $cpu ${11}/CPU-s," \
        "server CPU $((WRK_TICKS * 100 / CLK_TCK / secs))% (user space $user% of it), errors $WRK_ERRS"
}

# wrk_notes SCENARIO TESTS...: a line for each server and test with errors or
# failed wrk runs.
wrk_notes() { load_notes "$1" wrk "${@:2}"; }

# load_notes SCENARIO CLIENT TESTS...: the same for the load client CLIENT
# (RES[SCENARIO/server/test/errs] and .../fail).
load_notes() {
    local sc=$1 client=$2 s t e f
    shift 2
    for s in ${UP[$sc]}; do
        for t in "$@"; do
            wants "$t" || continue
            e=$(tr ' ' '\n' <<<"${RES[$sc/$s/$t/errs]:-}" | awk '{n += $1} END {print n + 0}')
            f=$(wc -w <<<"${RES[$sc/$s/$t/fail]:-}")
            ((e == 0)) || echo "note: $s $t had $e errors (socket errors, timeouts or non-2xx answers)"
            ((f == 0)) || echo "note: $client failed $f time(s) against $s ($t); see the log"
        done
    done
    return 0
}

# report_tables SCENARIO COLUMN...: the table of medians (a row per server
# up) and, if keel is up, the table of keel's ratios to each peer. A COLUMN
# is "TEST|KEY|FORMAT|TITLE|RATIO": shown when TEST is wanted, the median of
# RES[SCENARIO/server/KEY] in FORMAT; RATIO 1 puts it in the ratio table too.
report_tables() {
    local sc=$1 col t k f title r s row head=(server) rhead=("keel ÷ peer") cols=() rcols=()
    shift
    for col in "$@"; do
        IFS='|' read -r t k f title r <<<"$col"
        wants "$t" || continue
        head+=("$title")
        cols+=("$k|$f")
        if ((r)); then
            rhead+=("$title")
            rcols+=("$k")
        fi
    done
    md_head "${head[@]}"
    for s in ${UP[$sc]}; do
        row=("$s")
        for col in "${cols[@]}"; do row+=("$(med "$sc/$s/${col%|*}" "${col#*|}")"); done
        md_row "${row[@]}"
    done
    [[ " ${UP[$sc]} " == *" keel "* ]] || return 0
    md_head "${rhead[@]}"
    for s in ${UP[$sc]}; do
        [[ $s == keel ]] && continue
        row=("$s")
        for k in "${rcols[@]}"; do row+=("$(ratio "$(med "$sc/keel/$k" %.2f)" "$(med "$sc/$s/$k" %.2f)")"); done
        md_row "${row[@]}"
    done
}

# count_load NAME URL CONNS SECS: the load a count divides by; prints how
# many it did. wrk's requests on URL, or, with COUNT_LOAD set to a
# function, what it prints for `COUNT_LOAD NAME SECS` (tls.sh: the TLS
# connections of openssl s_time).
count_load() {
    if [[ -n ${COUNT_LOAD:-} ]]; then
        "$COUNT_LOAD" "$1" "$4"
        return
    fi
    { timeout $(($4 + 30)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$3" -d"$4s" "$2" 2>&1 || true; } |
        awk '/requests in/ {print $1}'
}

# count_syscalls SCENARIO NAME PATH: system calls per request, perf
# counting the server's syscall entries while the load (count_load) runs
# for INSTR_SECS; recorded as RES[SCENARIO/NAME/syscalls/n].
count_syscalls() {
    local sc=$1 name=$2 key=$1.$2 pids requests calls each
    pids=$(server_pids "${PID[$key]}" | paste -sd, -)
    perf stat -x, -e raw_syscalls:sys_enter -p "$pids" -o "$TMP/perf.$key" 2>/dev/null &
    local perf_pid=$!
    sleep 0.5
    requests=$(count_load "$name" "http://127.0.0.1:$(port_of "$sc" "$name")$3" "$CONNS" "$INSTR_SECS")
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    calls=$(awk -F, '/raw_syscalls:sys_enter/ {print $1}' "$TMP/perf.$key" 2>/dev/null)
    if [[ -z $requests || $requests -eq 0 || ! $calls =~ ^[0-9]+$ ]]; then
        log "bench: $key syscalls: no count (is perf usable here?)"
        return 0
    fi
    each=$(awk -v c="$calls" -v r="$requests" 'BEGIN{printf "%.2f", c / r}')
    record "$sc/$name/syscalls/n" "$each"
    log "bench: $key syscalls: $calls for $requests requests ($each each)"
}

# count_instr SCENARIO NAME PATH [cache]: user-space instructions per
# request. The server (stopped before: one at a time) runs under callgrind;
# its counters are zeroed after a warm-up, the load (count_load) runs for
# INSTR_SECS, the counters are dumped and divided by the requests it saw
# answered;
# recorded as RES[SCENARIO/NAME/instr/n]. With "cache", callgrind also
# simulates the caches (the host's sizes) and the first-level instruction
# cache's misses per request are recorded as RES[SCENARIO/NAME/i1miss/n]:
# a code path that touches more distinct lines than fit pays for it in
# cycles that the instruction count does not show.
count_instr() {
    local sc=$1 name=$2 key=$1.$2 port pids p requests ir url i1
    port=$(port_of "$sc" "$name")
    url="http://127.0.0.1:$port$3"
    rm -f "$TMP/cg.$key".*
    WRAP=(valgrind --tool=callgrind --dump-instr=no "--callgrind-out-file=$TMP/cg.$key.%p")
    [[ ${4:-} == cache ]] && WRAP+=(--cache-sim=yes)
    "${sc}_start_$name" "$port"
    WRAP=()
    "${sc}_check" "$name" || {
        stop_server "$key"
        return 0
    }
    sleep 1 # nginx's worker: started after the master answers
    count_load "$name" "$url" 16 2 >/dev/null
    pids=$(server_pids "${PID[$key]}")
    for p in $pids; do callgrind_control -z "$p" >/dev/null 2>&1 || true; done
    requests=$(count_load "$name" "$url" 16 "$INSTR_SECS")
    for p in $pids; do callgrind_control -d "$p" >/dev/null 2>&1 || true; done
    ir=$(cat "$TMP/cg.$key".*.[0-9]* 2>/dev/null | awk '/^summary:/ {s += $2} END {print s + 0}')
    # With --cache-sim the events are Ir Dr Dw I1mr ...: I1mr is the fifth field.
    i1=$(cat "$TMP/cg.$key".*.[0-9]* 2>/dev/null | awk '/^summary:/ && NF > 4 {s += $5} END {print s + 0}')
    stop_server "$key"
    if [[ -z $requests || $requests -eq 0 || $ir -eq 0 ]]; then
        log "bench: $key instr: no count (the load answered ${requests:-nothing})"
        return 0
    fi
    record "$sc/$name/instr/n" $((ir / requests))
    log "bench: $key instr: $ir instructions for $requests requests ($((ir / requests)) each)"
    if [[ ${4:-} == cache ]]; then
        record "$sc/$name/i1miss/n" $((i1 / requests))
        log "bench: $key instr: $i1 I1 misses (simulated) for $requests requests ($((i1 / requests)) each)"
    fi
}

# run_counts SCENARIO PATH SYSCALLS_TEST INSTR_TEST [NOT_UNDER_VALGRIND...]:
# the counts of a scenario's end: system calls per request of every server
# up (when SYSCALLS_TEST is wanted), then every server stopped, then the
# instructions of each (when INSTR_TEST is wanted; one at a time under
# valgrind) but those named last.
run_counts() {
    local sc=$1 path=$2 st=$3 it=$4 s
    shift 4
    if wants "$st"; then
        if command -v perf >/dev/null; then
            for s in ${UP[$sc]}; do count_syscalls "$sc" "$s" "$path"; done
        else
            log "bench: no perf: $st skipped (apt-get install linux-perf)"
        fi
    fi
    stop_all "$sc"
    if wants "$it"; then
        for s in ${UP[$sc]}; do
            [[ " $* " == *" $s "* ]] || count_instr "$sc" "$s" "$path"
        done
    fi
}

# ---- The run ------------------------------------------------------------------------

setup_limits() {
    local want=$1
    if (($(ulimit -n) < want + 2000)); then
        ulimit -n $((want + 2000)) 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    fi
    if (($(nproc) < 2)); then
        log "bench: only one CPU: server and client share it (numbers will be low)"
        CLIENT_CPU=$SERVER_CPU
    fi
}

versions() {
    echo "keel $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- core modules 2>/dev/null || echo '+changes') ($(basename "$KEEL_BUILD"))"
    [[ " $SERVERS " == *" nginx "* ]] && command -v nginx >/dev/null && nginx -v 2>&1 | sed 's/.*version: //'
    [[ " $SERVERS " == *" h2o "* ]] && command -v h2o >/dev/null && h2o --version 2>/dev/null | head -1
    [[ " $SERVERS " == *" caddy "* ]] && command -v caddy >/dev/null && echo "caddy $(caddy version | cut -d' ' -f1)"
    [[ " $SERVERS " == *" node "* ]] && command -v node >/dev/null && echo "node $(node --version)"
    [[ " $SERVERS " == *" lws "* ]] && pkg-config --exists libwebsockets 2>/dev/null &&
        echo "libwebsockets $(pkg-config --modversion libwebsockets)"
    command -v wrk >/dev/null && wrk --version 2>&1 | head -1 | awk '{print "wrk", $2}'
    local s
    for s in "${SCENARIOS[@]}"; do
        if scenario_wanted "$s" && declare -F "${s}_versions" >/dev/null; then "${s}_versions"; fi
    done
    return 0
}

# bench_main SCRIPT: the whole run of the tests selected by TESTS, scenario
# after scenario (each stops its servers before the next starts), then the
# report on standard output.
bench_main() {
    local script=$1 s
    expand_tests
    for s in $SERVERS; do
        local known=0 sc
        for sc in "${SCENARIOS[@]}"; do [[ " ${SCEN_SERVERS[$sc]} " == *" $s "* ]] && known=1; done
        ((known)) || die "unknown server '$s'"
    done
    need wrk wrk
    need taskset util-linux
    need curl curl
    need python3 python3
    for s in "${SCENARIOS[@]}"; do scenario_wanted "$s" && "${s}_needs"; done
    install_needed
    local most=${IDLE:-0} n
    for n in "${WS_IDLE:-0}" "${TLS_IDLE:-0}" "${H2_IDLE:-0}"; do ((n > most)) && most=$n; done
    setup_limits "$most"
    start_watchdog
    local started=$SECONDS
    LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$LOAD_BEFORE" 'BEGIN{exit !(l > 0.5)}'; then
        log "bench: load average is $LOAD_BEFORE: something else is running, numbers will suffer"
    fi
    for s in "${SCENARIOS[@]}"; do scenario_wanted "$s" && "${s}_run"; done

    local settings=""
    for s in "${SCENARIOS[@]}"; do scenario_wanted "$s" && settings+="$("${s}_settings")"$'\n'; done
    # (one setting a line; scenarios may share one: each once)
    settings=$(awk 'NF && !seen[$0]++' <<<"$settings" | paste -sd' ')
    echo
    echo "## keel benchmark — $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); servers on CPU $SERVER_CPU, one worker each; clients on CPU $CLIENT_CPU;" \
        "${DURATION} s per measurement after ${WARMUP} s of warm-up; medians of $ROUNDS round(s); $((SECONDS - started)) s in all."
    echo "Versions: $(versions | paste -sd ';' | sed 's/;/; /g')."
    echo "Load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1 /proc/loadavg) (the benchmark itself adds about 1–2)."
    echo
    echo "    $([[ $KEEL_BUILD != "$ROOT/build" ]] && echo "KEEL_BUILD=$KEEL_BUILD ")DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS SERVERS=\"$SERVERS\" TESTS=\"$TESTS\" ${settings} tests/bench/$script"
    for s in "${SCENARIOS[@]}"; do scenario_wanted "$s" && "${s}_report"; done
    return 0
}

# For a scenario file run alone: bench_alone SCRIPT GROUP DEFAULT_SERVERS.
bench_alone() {
    SERVERS=${SERVERS:-$3}
    TESTS=${TESTS:-$2}
    bench_main "$1"
}

# ---- Markdown ----------------------------------------------------------------------

# md_row CELL...: one row of a markdown table.
md_row() {
    local c out="|"
    for c in "$@"; do out+=" $c |"; done
    echo "$out"
}

# md_head CELL...: a table's head and its rule.
md_head() {
    echo
    md_row "$@"
    local c out="|"
    for c in "$@"; do out+="---|"; done
    echo "$out"
}
