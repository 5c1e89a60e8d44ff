#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/proxy.sh — the reverse-proxy scenario of run.sh: keel's proxy
# module against nginx's proxy_pass and Caddy's reverse_proxy, all in front
# of the same upstream.
# Sourced by run.sh; runnable alone (then TESTS defaults to its group,
# "proxy"):
#
#   DURATION=3 WARMUP=1 tests/bench/proxy.sh
#   TESTS=proxy1m ROUNDS=3 tests/bench/proxy.sh
#
# One upstream, nginx (worker_processes 1, on CLIENT_CPU with wrk), serves
# "Hello, World!" at / and a 1 MiB file at /1m. The proxies in front of it,
# in turn, each with one worker pinned to SERVER_CPU and keep-alive
# connections to the upstream:
#   keel   http1 + proxy: upstream = up 127.0.0.1:UP, pass = / up,
#          keepalive = 64 (X-Forwarded-*, Forwarded and Via added, as by
#          default)
#   nginx  proxy_pass http://up; upstream up { keepalive 64; }
#          proxy_http_version 1.1; Connection ""; X-Forwarded-For/-Proto
#          and Host set as a typical deployment does
#   caddy  reverse_proxy 127.0.0.1:UP (its defaults: keep-alive, X-Forwarded-*
#          added)
# Tests, every proxy in turn, ROUNDS times:
#   proxysmall  wrk -t1 -c CONNS GET /    (keep-alive)
#   proxy1m     wrk -t1 -c PROXY_CONNS_1M GET /1m
#   proxysyscalls, proxyinstr  the proxy's system calls (perf) and user
#               instructions (callgrind) a small response, as http's
#               syscalls and instr: counts the loaded other core cannot blur
#               (Caddy, a Go program, is left out of the callgrind count)
# Each reports requests/s, p99 latency and requests per second of the
# proxy's CPU time (utime + stime from /proc/PID/stat over the run: the
# proxy's own cost, which wrk and the upstream sharing a core cannot blur);
# keel's ratio to nginx is on that last number.
# Settings (defaults in brackets): CONNS [64] PROXY_CONNS_1M [16].
# Ports BASE_PORT + 100 (the upstream), + 101..103 (the proxies): 19180..19183.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROXY_CONNS_1M=${PROXY_CONNS_1M:-16}

bench_scenario proxy "proxysmall proxy1m proxysyscalls proxyinstr" "keel nginx caddy" 101

PROXY_DIR=$TMP/proxy
PROXY_UP_PORT=$((BASE_PORT + 100))

proxy_settings() {
    printf '%s\n' "CONNS=$CONNS" "PROXY_CONNS_1M=$PROXY_CONNS_1M"
}

proxy_needs() {
    need nginx nginx-light # the upstream, whichever proxies run
    need_servers proxy
    if wants proxyinstr; then need callgrind_control valgrind; fi
}

# nginx's version, when SERVERS does not name it (the upstream is nginx).
proxy_versions() {
    [[ " $SERVERS " == *" nginx "* ]] || echo "upstream $(nginx -v 2>&1 | sed 's/.*version: //')"
    return 0
}

# ---- The upstream -------------------------------------------------------------------

proxy_start_upstream() {
    port_busy "$PROXY_UP_PORT" && die "port $PROXY_UP_PORT (for the proxy upstream) is in use; set BASE_PORT"
    mkdir -p "$PROXY_DIR/up/www"
    head -c 1048576 /dev/urandom >"$PROXY_DIR/up/www/1m"
    nginx_conf "$PROXY_DIR/up" "$PROXY_UP_PORT" "    sendfile on;" "        root $PROXY_DIR/up/www;
        location = / {
            default_type text/plain;
            return 200 \"Hello, World!\";
        }"
    # On CLIENT_CPU, with wrk: the server's core is the proxy's alone.
    SERVER_CPU=$CLIENT_CPU spawn_nginx proxy.up "$PROXY_DIR/up"
    wait_port "$PROXY_UP_PORT" || die "the proxy upstream (nginx) does not listen on $PROXY_UP_PORT"
}

# ---- The proxies --------------------------------------------------------------------

proxy_start_keel() {
    keel_conf "$PROXY_DIR/keel.conf" "$1" "http1 proxy" "[proxy]
upstream = up 127.0.0.1:$PROXY_UP_PORT
pass = / up
keepalive = 64"
    spawn proxy.keel "$PROXY_DIR/keel.log" "$KEEL_BUILD/keel" -c "$PROXY_DIR/keel.conf"
}

proxy_start_nginx() {
    # shellcheck disable=SC2016 # $host and the others are nginx's variables
    nginx_conf "$PROXY_DIR/nginx" "$1" "    proxy_temp_path $PROXY_DIR/nginx/temp;
    upstream up {
        server 127.0.0.1:$PROXY_UP_PORT;
        keepalive 64;
    }" '        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
        }'
    spawn_nginx proxy.nginx "$PROXY_DIR/nginx"
}

proxy_start_caddy() {
    caddy_conf "$PROXY_DIR/caddy" "$1" "	reverse_proxy 127.0.0.1:$PROXY_UP_PORT"
    spawn_caddy proxy.caddy "$PROXY_DIR/caddy"
}

# Answers / with "Hello, World!" and /1m with the upstream's bytes?
proxy_check() {
    local url
    url="http://127.0.0.1:$(port_of proxy "$1")"
    check_up "proxy.$1" "$url/" is_hello "Hello, World!" "$PROXY_DIR" &&
        same_file "$1" "$url/1m" "$PROXY_DIR/up/www/1m"
}

# ---- Measurements ----------------------------------------------------------------

# proxy_wrk NAME TEST SECONDS RECORD
proxy_wrk() {
    local path=/ conns=$CONNS
    [[ $2 == proxy1m ]] && path=/1m conns=$PROXY_CONNS_1M
    wrk_record proxy "$1" "$2" "$3" "$4" "http://127.0.0.1:$(port_of proxy "$1")$path" "$conns" plain 0 1 req
}

proxy_run() {
    local t
    mkdir -p "$PROXY_DIR"
    chmod 755 "$TMP" "$PROXY_DIR" # nginx's workers run as nobody
    if [[ " $(servers_of proxy) " == *" keel "* ]]; then ensure_keel http1 proxy; fi
    proxy_start_upstream
    start_all proxy
    for t in proxysmall proxy1m; do
        if wants "$t"; then take_turns proxy "$t" proxy_wrk; fi
    done
    run_counts proxy / proxysyscalls proxyinstr caddy
    stop_server proxy.up
}

# ---- Report ------------------------------------------------------------------------

proxy_report() {
    echo
    echo "### Reverse proxy (keel: http1 + proxy; upstream: nginx on the client's CPU, keep-alive 64)"
    report_tables proxy "proxysmall|proxysmall/val|%.0f|small req/s|0" "proxysmall|proxysmall/p99|%.2f|p99 ms|0" \
        "proxysmall|proxysmall/cpu|%.0f|small req/CPU-s|1" "proxy1m|proxy1m/val|%.0f|1 MiB req/s|0" \
        "proxy1m|proxy1m/p99|%.2f|p99 ms|0" "proxy1m|proxy1m/cpu|%.0f|1 MiB req/CPU-s|1" \
        "proxysyscalls|syscalls/n|%.2f|small syscalls/req|1" "proxyinstr|instr/n|%.0f|small user instr/req|1"
    wrk_notes proxy proxysmall proxy1m
    echo
    echo "Ratios on requests per second of the proxy's own CPU time (the upstream and wrk share the other core and blur req/s); above 1.00× keel is ahead."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone proxy.sh proxy "keel nginx caddy"
fi
