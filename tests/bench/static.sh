#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/static.sh — the static-file scenario of run.sh: keel's static
# module against nginx, h2o and Caddy serving the same files. Sourced by run.sh;
# runnable alone (then TESTS defaults to its group, "static"):
#
#   DURATION=4 WARMUP=1 ROUNDS=3 tests/bench/static.sh
#   SERVERS="keel keel_nocache nginx h2o" TESTS=static4k tests/bench/static.sh
#
# Tests, every server in turn, ROUNDS times:
#   static4k  wrk -t1 -c64 GET /4k.bin  (4 KiB, keep-alive): requests/s, p99,
#             requests per server CPU-second
#   static1m  wrk -t1 -c16 GET /1m.bin  (1 MiB, keep-alive): MB/s, p99, MB per
#             server CPU-second
#   staticsyscalls  system calls per 4 KiB request (perf, as http's syscalls)
#   staticinstr     user-space instructions per 4 KiB request (callgrind, as
#             http's instr), and first-level instruction-cache misses per
#             request (callgrind's simulation of the host's caches): the
#             repeatable counts behind static4k
# nginx runs with sendfile on, tcp_nopush on and open_file_cache, keel with
# sendfile (plain TCP, the core's default for keel_response_send_file) and
# its open-file cache, h2o with its defaults (it keeps open files cached
# too), Caddy's file_server with its defaults (sendfile on plain TCP, no
# open-file cache). keel_nocache (only when named in SERVERS) is keel with cache_valid =
# 0, to measure the cache.
# Settings (defaults in brackets): CONNS [64] STATIC_CONNS_LARGE [16]
# KEEL_STATIC_OPTS [""] (extra words for keel's mount line).
# Ports BASE_PORT + 10..14.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATIC_CONNS_LARGE=${STATIC_CONNS_LARGE:-16}
KEEL_STATIC_OPTS=${KEEL_STATIC_OPTS:-}

bench_scenario static "static4k static1m staticsyscalls staticinstr" "keel nginx h2o keel_nocache caddy" 10

STATIC_DIR=$TMP/static
WWW=$STATIC_DIR/www

static_settings() {
    printf '%s\n' "CONNS=$CONNS" "STATIC_CONNS_LARGE=$STATIC_CONNS_LARGE"
}

static_needs() {
    need_servers static
    if wants staticinstr; then need callgrind_control valgrind; fi
    return 0
}

static_start_keel() { # PORT [NAME CACHE_VALID]
    local name=${2:-keel}
    ensure_keel http1 static
    keel_conf "$STATIC_DIR/$name.conf" "$1" "http1 static" "[static]
mount = / $WWW $KEEL_STATIC_OPTS
cache_valid = ${3:-1s}"
    spawn "static.$name" "$STATIC_DIR/$name.log" "$KEEL_BUILD/keel" -c "$STATIC_DIR/$name.conf"
}

# keel without its open-file cache: open + fstat + close on every request.
static_start_keel_nocache() {
    static_start_keel "$1" keel_nocache 0
}

static_start_nginx() {
    nginx_conf "$STATIC_DIR/nginx" "$1" "    sendfile on;
    tcp_nopush on;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    default_type application/octet-stream;" "        root $WWW;"
    spawn_nginx static.nginx "$STATIC_DIR/nginx"
}

static_start_h2o() {
    h2o_conf "$STATIC_DIR/h2o" "$1" "      \"/\":
        file.dir: $WWW"
    spawn_h2o static.h2o "$STATIC_DIR/h2o"
}

static_start_caddy() {
    caddy_conf "$STATIC_DIR/caddy" "$1" "	root * $WWW
	file_server"
    spawn_caddy static.caddy "$STATIC_DIR/caddy"
}

is_4k() { [[ ${#1} -eq 4096 ]]; }

static_check() {
    local name=$1 port
    port=$(port_of static "$name")
    check_up "static.$name" "http://127.0.0.1:$port/4k.txt" is_4k "the 4 KiB file" "$STATIC_DIR" || return 1
    same_file "$name" "http://127.0.0.1:$port/1m.bin" "$WWW/1m.bin"
}

# static_wrk NAME TEST SECONDS RECORD
static_wrk() {
    local url
    url="http://127.0.0.1:$(port_of static "$1")"
    if [[ $2 == static4k ]]; then
        wrk_record static "$1" "$2" "$3" "$4" "$url/4k.bin" "$CONNS" plain 0 1 req
    else
        wrk_record static "$1" "$2" "$3" "$4" "$url/1m.bin" "$STATIC_CONNS_LARGE" plain 0 1.048576 MB
    fi
}

static_run() {
    local t s
    mkdir -p "$WWW"
    # nginx's workers run as nobody: the private temporary directory must be
    # readable to them.
    chmod 755 "$TMP" "$STATIC_DIR" "$WWW"
    head -c 4096 /dev/urandom | base64 -w0 | head -c 4096 >"$WWW/4k.txt" # for the check
    head -c 4096 /dev/urandom >"$WWW/4k.bin"
    head -c 1048576 /dev/urandom >"$WWW/1m.bin"
    start_all static
    for t in static4k static1m; do
        if wants "$t"; then take_turns static "$t" static_wrk; fi
    done
    if wants staticsyscalls; then
        if command -v perf >/dev/null; then
            for s in ${UP[static]}; do count_syscalls static "$s" /4k.bin; done
        else
            log "bench: no perf: staticsyscalls skipped (apt-get install linux-perf)"
        fi
    fi
    stop_all static
    if wants staticinstr; then
        for s in ${UP[static]}; do [[ $s == caddy ]] || count_instr static "$s" /4k.bin cache; done
    fi
}

static_report() {
    local s
    echo
    echo "### Static files (keel: http1 + static)"
    report_tables static "static4k|static4k/val|%.0f|4 KiB req/s|1" "static4k|static4k/p99|%.2f|p99 ms|0" \
        "static4k|static4k/cpu|%.0f|4 KiB req/CPU-s|1" "static1m|static1m/val|%.0f|1 MiB MB/s|1" \
        "static1m|static1m/p99|%.2f|p99 ms|0" "static1m|static1m/cpu|%.0f|1 MiB MB/CPU-s|1" \
        "staticsyscalls|syscalls/n|%.2f|4 KiB syscalls/req|1" "staticinstr|instr/n|%.0f|4 KiB user instr/req|1" \
        "staticinstr|i1miss/n|%.0f|4 KiB I1 misses/req|1"
    wrk_notes static static4k static1m
    echo
    echo "Above 1.00× keel is ahead for req/s, MB/s and per CPU-second; below 1.00× keel uses fewer system calls and instructions."
    if wants static4k; then
        echo
        echo "4 KiB req/CPU-s, every round: $(for s in ${UP[static]}; do printf '%s [%s] ' "$s" "$(spread "static/$s/static4k/cpu")"; done)"
    fi
    return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone static.sh static "keel nginx h2o caddy"
fi
