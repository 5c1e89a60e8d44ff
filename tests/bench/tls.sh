#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/tls.sh — the HTTPS scenario of run.sh: keel's tls module on
# its two backends, "keel" (mbedTLS, mod_tls) and "keel-openssl" (OpenSSL 3,
# mod_tls_openssl: [tls] backend = openssl), against nginx (OpenSSL) and
# Caddy (Go's crypto/tls).
# Sourced by run.sh; runnable alone (then TESTS defaults to its group, "tls"):
#
#   DURATION=3 WARMUP=1 tests/bench/tls.sh
#   SERVERS=keel TESTS=tlsidle tests/bench/tls.sh
#
# Every server: one worker, pinned to SERVER_CPU; the clients on CLIENT_CPU.
# The same ECDSA P-256 certificate (made by keel-cert), TLS 1.2, the same
# suite (ECDHE-ECDSA-AES128-GCM-SHA256) and key exchange (X25519), the same
# "Hello, World!" answer. Tests, every server in turn, ROUNDS times:
#   tlskeepalive  wrk -t1 -c64 over HTTPS keep-alive: requests/s, p99,
#                 requests per server CPU-second
#   tlshandshake  openssl s_time -new: full handshakes (no resumption) per
#                 second and per server CPU-second
#   tlsresume     openssl s_time -reuse: resumed handshakes (the session
#                 ticket of the first), the same counts
#   tls1m         wrk -t1 -c TLS_CONNS_1M GET /files/1m (a 1 MiB file: keel's
#                 static module, nginx's and Caddy's file serving; no kernel
#                 TLS on either side): MB/s, p99, MB per server CPU-second
#   tlsidle       RSS growth per idle TLS connection (TLS_IDLE of them, each
#                 after one request; tls_idle.py), two rounds, the larger:
#                 the first on fresh memory, the second once the allocator
#                 reuses what the first freed
#   tlssyscalls   system calls per resumed handshake's connection (perf on
#                 the server while openssl s_time -reuse runs INSTR_SECS;
#                 TLS_COUNT_MODE=new: full handshakes instead)
#   tlsinstr      user-space instructions per resumed handshake's connection
#                 (callgrind on the server, one at a time, the same load;
#                 not Caddy): counts the loaded other core cannot blur.
#                 Each s_time run's first connection is a full handshake
#                 (~2 M instructions on OpenSSL, ~22 M on mbedTLS 2.28),
#                 spread over the run's connections: compare runs that made
#                 about as many (a longer INSTR_SECS spreads it thinner)
# Settings (defaults in brackets): CONNS [64] TLS_CONNS_1M [16] TLS_IDLE [2000] IDLE_HOLD [3]
# INSTR_SECS [5] TLS_COUNT_MODE [reuse]
# TLS_VERSION [1.2] (1.3: every server offers TLS 1.3 only, the suite
# TLS_AES_128_GCM_SHA256; mbedTLS 2.28 has none, so "keel" does not start).
# Ports BASE_PORT + 30..33.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TLS_IDLE=${TLS_IDLE:-2000}
TLS_CONNS_1M=${TLS_CONNS_1M:-16}
IDLE_HOLD=${IDLE_HOLD:-3}
SUITE_OPENSSL=ECDHE-ECDSA-AES128-GCM-SHA256
SUITE_MBEDTLS=TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256
TLS_VERSION=${TLS_VERSION:-1.2}
TLS_COUNT_MODE=${TLS_COUNT_MODE:-reuse}
if [[ $TLS_VERSION == 1.3 ]]; then
    SUITE_MBEDTLS=TLS_AES_128_GCM_SHA256
    S_TIME_SUITE=(-tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256)
else
    S_TIME_SUITE=(-cipher "$SUITE_OPENSSL")
fi

bench_scenario tls "tlskeepalive tlshandshake tlsresume tls1m tlsidle tlssyscalls tlsinstr" \
    "keel keel-openssl nginx caddy" 30

TLS_DIR=$TMP/tls

tls_settings() {
    printf '%s\n' "CONNS=$CONNS" "TLS_CONNS_1M=$TLS_CONNS_1M" "TLS_IDLE=$TLS_IDLE" "TLS_VERSION=$TLS_VERSION"
    if wants tlssyscalls || wants tlsinstr; then printf '%s\n' "TLS_COUNT_MODE=$TLS_COUNT_MODE"; fi
}

tls_needs() {
    need_servers tls
    need openssl openssl
    if wants tlsinstr; then need callgrind_control valgrind; fi
}

# tls_keel NAME PORT BACKEND: the same [tls] for both backends (the suite
# in mbedTLS's spelling, which both read).
tls_keel() {
    keel_conf "$TLS_DIR/$1.conf" "$2" "tls http1 hello static" "[tls]
backend = $3
cert = $TLS_DIR/cert.pem $TLS_DIR/key.pem
min_version = $TLS_VERSION
max_version = $TLS_VERSION
ciphers = $SUITE_MBEDTLS
curves = x25519
[static]
mount = /files $TLS_DIR/www/files" "http1 tls"
    spawn "tls.$1" "$TLS_DIR/$1.log" "$KEEL_BUILD/keel" -c "$TLS_DIR/$1.conf"
}

tls_start_keel() { tls_keel keel "$1" mbedtls; }
tls_start_keel-openssl() { tls_keel keel-openssl "$1" openssl; }

tls_start_nginx() {
    nginx_conf "$TLS_DIR/nginx" "$1" "" "        ssl_certificate $TLS_DIR/cert.pem;
        ssl_certificate_key $TLS_DIR/key.pem;
        ssl_protocols TLSv$TLS_VERSION;
        ssl_ciphers $SUITE_OPENSSL;
        ssl_ecdh_curve X25519;
        location /files/ {
            root $TLS_DIR/www;
        }
        location = / {
            default_type text/plain;
            return 200 \"Hello, World!\";
        }" "" ssl
    spawn_nginx tls.nginx "$TLS_DIR/nginx"
}

# Caddy: the same certificate, version, suite and curve (Go's names).
tls_start_caddy() {
    local protos="tls$TLS_VERSION tls$TLS_VERSION" ciphers=""
    [[ $TLS_VERSION == 1.2 ]] && ciphers="
		ciphers TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
    caddy_conf "$TLS_DIR/caddy" "$1" "	tls $TLS_DIR/cert.pem $TLS_DIR/key.pem {
		protocols $protos$ciphers
		curves x25519
	}
	root * $TLS_DIR/www
	file_server /files/*
	respond / \"Hello, World!\" 200" "" "https://127.0.0.1:$1"
    spawn_caddy tls.caddy "$TLS_DIR/caddy"
}

tls_check() {
    check_up "tls.$1" "https://127.0.0.1:$(port_of tls "$1")/" is_hello "Hello, World!" "$TLS_DIR"
}

# tls_wrk NAME TEST SECONDS RECORD
tls_wrk() {
    wrk_record tls "$1" "$2" "$3" "$4" "https://127.0.0.1:$(port_of tls "$1")/" "$CONNS" plain 0 1 req
}

# tls_1m NAME TEST SECONDS RECORD
tls_1m() {
    wrk_record tls "$1" "$2" "$3" "$4" "https://127.0.0.1:$(port_of tls "$1")/files/1m" \
        "$TLS_CONNS_1M" plain 0 1.048576 MB
}

# tls_handshake NAME TEST SECONDS RECORD (TEST tlshandshake: full, tlsresume: resumed)
tls_handshake() {
    local name=$1 test=$2 secs=$3 key=tls.$1 t0 ticks out n mode=-new
    [[ $test == tlsresume ]] && mode=-reuse
    t0=$(cpu_ticks "${PID[$key]}")
    out=$(timeout $((secs + 30)) taskset -c "$CLIENT_CPU" openssl s_time -connect \
        "127.0.0.1:$(port_of tls "$name")" $mode -time "$secs" "${S_TIME_SUITE[@]}" 2>&1 || true)
    ticks=$(($(cpu_ticks "${PID[$key]}") - t0))
    (($4)) || return 0
    n=$(awk '/connections in [0-9]+ real seconds/ {print $1; exit}' <<<"$out")
    if [[ -z $n ]]; then
        log "bench: $name s_time: $out"
        record "tls/$name/$test/fail" 1
        return 0
    fi
    record "tls/$name/$test/val" "$(awk -v n="$n" -v d="$secs" 'BEGIN {printf "%.0f", n / d}')"
    record "tls/$name/$test/cpu" "$(per_cpu_s "$n" "$ticks")"
    log "bench: $name $test: $n handshakes in $secs s, $(per_cpu_s "$n" "$ticks") per CPU-s"
}

# tls_count_load NAME SECS: the load of tlssyscalls and tlsinstr (lib.sh's
# count_load): openssl s_time -reuse (or -new, TLS_COUNT_MODE) for SECS;
# prints the connections it made.
tls_count_load() {
    { timeout $(($2 + 30)) taskset -c "$CLIENT_CPU" openssl s_time -connect \
        "127.0.0.1:$(port_of tls "$1")" "-$TLS_COUNT_MODE" -time "$2" "${S_TIME_SUITE[@]}" 2>&1 || true; } |
        awk '/connections in [0-9]+ real seconds/ {print $1; exit}'
}

# One round of TLS_IDLE idle connections; prints the RSS while they are held.
tls_idle_round() {
    local name=$1 pid=${PID[tls.$1]} after="" line
    coproc IDLER {
        taskset -c "$CLIENT_CPU" timeout 200 python3 "$BENCH_DIR/tls_idle.py" 127.0.0.1 \
            "$(port_of tls "$name")" "$TLS_IDLE" "$IDLE_HOLD" 180 2>&1
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

tls_idle() {
    local name=$1 base r1 r2 b1 b2
    base=$(rss_kib "${PID[tls.$name]}")
    r1=$(tls_idle_round "$name")
    sleep 1
    r2=$(tls_idle_round "$name")
    [[ -n $r1 && -n $r2 ]] || return 0
    b1=$(((r1 - base) * 1024 / TLS_IDLE))
    b2=$(((r2 - base) * 1024 / TLS_IDLE))
    record "tls/$name/idle/bytes" $((b1 > b2 ? b1 : b2))
    log "bench: $name tlsidle: RSS $base KiB, with $TLS_IDLE idle TLS connections $r1 KiB (fresh)," \
        "$r2 KiB (reused memory): $b1 / $b2 B each"
}

tls_run() {
    local s
    mkdir -p "$TLS_DIR"
    if [[ " $(servers_of tls) " == *" keel "* ]]; then ensure_keel tls http1 hello static; fi
    if [[ " $(servers_of tls) " == *" keel-openssl "* ]]; then
        ensure_keel tls_openssl http1 hello static
    fi
    mkdir -p "$TLS_DIR/www/files"
    head -c 1048576 /dev/urandom >"$TLS_DIR/www/files/1m"
    chmod -R a+rX "$TLS_DIR/www"
    [[ -x $KEEL_BUILD/keel-cert ]] || die "no $KEEL_BUILD/keel-cert (build keel with its tls module)"
    "$KEEL_BUILD/keel-cert" "$TLS_DIR/cert.pem" "$TLS_DIR/key.pem" localhost 127.0.0.1 >/dev/null
    chmod 755 "$TMP" "$TLS_DIR" # nginx's worker runs as nobody
    chmod 644 "$TLS_DIR/cert.pem" "$TLS_DIR/key.pem"
    start_all tls
    if wants tlskeepalive; then take_turns tls tlskeepalive tls_wrk; fi
    if wants tlshandshake; then take_turns tls tlshandshake tls_handshake; fi
    if wants tlsresume; then take_turns tls tlsresume tls_handshake; fi
    if wants tls1m; then take_turns tls tls1m tls_1m; fi
    if wants tlsidle; then
        for s in ${UP[tls]}; do tls_idle "$s"; done
    fi
    COUNT_LOAD=tls_count_load run_counts tls / tlssyscalls tlsinstr caddy
}

tls_report() {
    echo
    echo "### HTTPS (keel: tls + http1 + hello; TLS $TLS_VERSION ${S_TIME_SUITE[*]}, X25519, ECDSA P-256)"
    report_tables tls "tlskeepalive|tlskeepalive/val|%.0f|keep-alive req/s|1" \
        "tlskeepalive|tlskeepalive/p99|%.2f|p99 ms|0" "tlskeepalive|tlskeepalive/cpu|%.0f|keep-alive req/CPU-s|1" \
        "tlshandshake|tlshandshake/val|%.0f|handshakes/s|1" "tlshandshake|tlshandshake/cpu|%.0f|handshakes/CPU-s|1" \
        "tlsresume|tlsresume/val|%.0f|resumed/s|1" "tlsresume|tlsresume/cpu|%.0f|resumed/CPU-s|1" \
        "tls1m|tls1m/val|%.0f|1 MiB MB/s|1" "tls1m|tls1m/cpu|%.0f|1 MiB MB/CPU-s|1" \
        "tlsidle|idle/bytes|%.0f|idle TLS conn bytes|1" \
        "tlssyscalls|syscalls/n|%.2f|$TLS_COUNT_MODE syscalls/conn|1" \
        "tlsinstr|instr/n|%.0f|$TLS_COUNT_MODE user instr/conn|1"
    wrk_notes tls tlskeepalive tls1m
    # The OpenSSL backend against nginx, on the same library.
    if [[ " ${UP[tls]} " == *" keel-openssl "* && " ${UP[tls]} " == *" nginx "* ]]; then
        echo
        local tk k row=(nginx) head=("keel-openssl ÷ peer")
        for tk in tlskeepalive/tlskeepalive/cpu tlshandshake/tlshandshake/cpu \
            tlsresume/tlsresume/cpu tls1m/tls1m/cpu tlsidle/idle/bytes tlssyscalls/syscalls/n \
            tlsinstr/instr/n; do
            wants "${tk%%/*}" || continue
            k=${tk#*/}
            head+=("$k")
            row+=("$(ratio "$(med "tls/keel-openssl/$k" %.2f)" "$(med "tls/nginx/$k" %.2f)")")
        done
        md_head "${head[@]}"
        md_row "${row[@]}"
    fi
    echo
    echo "Above 1.00× keel is ahead for requests and handshakes; below 1.00× keel uses less memory, system calls and instructions."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone tls.sh tls "keel keel-openssl nginx"
fi
