#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/h2.sh — the HTTP/2 scenario of run.sh: keel's h2 module against
# nginx (http2 on), h2o and Node.js's http2 (node_h2.js), cleartext with
# prior knowledge (h2c), loaded by h2load. Sourced by run.sh; runnable alone
# (then TESTS defaults to its group, "h2"):
#
#   DURATION=4 WARMUP=1 ROUNDS=3 tests/bench/h2.sh
#   SERVERS="keel h2o" TESTS=h2small tests/bench/h2.sh
#
# Each server gets one worker / thread / process, pinned to SERVER_CPU;
# h2load (-t1) runs on CLIENT_CPU. Tests, every server in turn, ROUNDS times:
#   h2small  h2load -c H2_CONNS -m H2_STREAMS: GET / answering "Hello, World!"
#            (keel: hello's /, nginx: return 200, h2o: a 13-byte file, node:
#            stream.end): requests/s, requests per server CPU-second
#   h2file   the same with a 4 KiB file (keel: static, nginx: root, h2o:
#            file.dir, node: fs.readFile)
#   h2idle   RSS growth for H2_IDLE idle HTTP/2 connections, each after one
#            request answered (h2_idle.py): bytes per connection
# Settings (defaults in brackets): H2_CONNS [4] H2_STREAMS [100] H2_IDLE
# [2000] IDLE_HOLD [3]. Ports BASE_PORT + 200..203 (19280..19283).
# Packages: nghttp2-client (h2load), and the peers' (run.sh's header).
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

H2_CONNS=${H2_CONNS:-4}
H2_STREAMS=${H2_STREAMS:-100}
H2_IDLE=${H2_IDLE:-2000}
IDLE_HOLD=${IDLE_HOLD:-3}

bench_scenario h2 "h2small h2file h2idle" "keel nginx h2o node" 200

H2_DIR=$TMP/h2
H2_WWW=$H2_DIR/www

h2_settings() {
    printf '%s\n' "H2_CONNS=$H2_CONNS" "H2_STREAMS=$H2_STREAMS" "H2_IDLE=$H2_IDLE"
}

h2_needs() {
    need h2load nghttp2-client
    need_servers h2
}

h2_versions() {
    command -v h2load >/dev/null && h2load --version 2>&1 | head -1 | awk '{print "h2load", $NF}'
    return 0
}

# ---- Servers ----------------------------------------------------------------------

h2_start_keel() {
    keel_conf "$H2_DIR/keel.conf" "$1" "h2 hello static" "[h2]
idle_timeout = 5m
[static]
mount = /files $H2_WWW/files" h2
    spawn h2.keel "$H2_DIR/keel.log" "$KEEL_BUILD/keel" -c "$H2_DIR/keel.conf"
}

h2_start_nginx() {
    nginx_conf "$H2_DIR/nginx" "$1" "    http2_max_requests 100000000;
    http2_max_concurrent_streams 128;
    sendfile on;
    open_file_cache max=1000 inactive=60s;
    default_type application/octet-stream;" "        location = / { default_type text/plain; return 200 \"Hello, World!\"; }
        location /files/ { root $H2_WWW; }" "" http2
    spawn_nginx h2.nginx "$H2_DIR/nginx"
}

h2_start_h2o() {
    h2o_conf "$H2_DIR/h2o" "$1" "      \"/\":
        file.file: $H2_WWW/index.txt
      \"/files\":
        file.dir: $H2_WWW/files" "http2-idle-timeout: 300"
    spawn_h2o h2.h2o "$H2_DIR/h2o"
}

h2_start_node() {
    spawn h2.node "$H2_DIR/node.log" node "$BENCH_DIR/node_h2.js" "$1" "$H2_WWW/files"
}

# Answers GET / with "Hello, World!" and /files/4k.bin as it is, over h2c?
h2_check() {
    local name=$1 port
    port=$(port_of h2 "$name")
    check_up "h2.$name" "http://127.0.0.1:$port/" is_hello "Hello, World!" "$H2_DIR" \
        --http2-prior-knowledge || return 1
    same_file "$name" "http://127.0.0.1:$port/files/4k.bin" "$H2_WWW/files/4k.bin" --http2-prior-knowledge
}

# ---- Measurements ----------------------------------------------------------------

# h2_load NAME TEST SECONDS RECORD: h2load on CLIENT_CPU; recorded (when
# RECORD is 1) as RES[h2/NAME/TEST/x], x = val (requests answered with
# success per second), cpu (per server CPU-second), errs (non-2xx answers),
# or fail when h2load had no success.
h2_load() {
    local name=$1 test=$2 secs=$3 key=h2.$1 path=/files/4k.bin t0 ticks out
    [[ $test == h2small ]] && path=/
    t0=$(cpu_ticks "${PID[$key]}")
    out=$(timeout $((secs + 30)) taskset -c "$CLIENT_CPU" h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" \
        -D"$secs" "http://127.0.0.1:$(port_of h2 "$name")$path" 2>&1) || true
    ticks=$(($(cpu_ticks "${PID[$key]}") - t0))
    (($4)) || return 0
    local ok bad val cpu
    ok=$(awk '/^requests:/ {print $8}' <<<"$out")
    if [[ -z $ok || $ok -eq 0 ]]; then
        log "bench: h2load failed against $name ($test):"
        log "$out"
        record "h2/$name/$test/fail" 1
        return 0
    fi
    bad=$(awk '/^status codes:/ {print $5 + $7 + $9}' <<<"$out")
    val=$(awk -v r="$ok" -v d="$secs" 'BEGIN{printf "%.0f", r / d}')
    cpu=$(per_cpu_s "$ok" "$ticks")
    record "h2/$name/$test/val" "$val"
    record "h2/$name/$test/cpu" "$cpu"
    record "h2/$name/$test/errs" "${bad:-0}"
    log "bench: $name $test: $val req/s, $cpu req/CPU-s, server CPU $((ticks * 100 / CLK_TCK / secs))%," \
        "non-2xx ${bad:-0}"
}

h2_idle() {
    local name=$1 key=h2.$1 before after ready per
    before=$(rss_kib "${PID[$key]}")
    exec 3< <(taskset -c "$CLIENT_CPU" python3 "$BENCH_DIR/h2_idle.py" "$(port_of h2 "$name")" \
        "$H2_IDLE" "$IDLE_HOLD")
    read -r -t 60 _ ready <&3 || ready=0
    sleep 1
    after=$(rss_kib "${PID[$key]}")
    exec 3<&-
    sleep "$IDLE_HOLD"
    if [[ ${ready:-0} -lt 1 ]]; then
        log "bench: $name: no idle HTTP/2 connection was answered"
        return 0
    fi
    per=$(((after - before) * 1024 / ready))
    record "h2/$name/idle/bytes" "$per"
    log "bench: $name h2idle: $ready connections, RSS +$((after - before)) KiB, $per B each"
}

h2_run() {
    local t s
    mkdir -p "$H2_WWW/files"
    # nginx's workers run as nobody: the private temporary directory must be
    # readable to them.
    chmod 755 "$TMP" "$H2_DIR" "$H2_WWW" "$H2_WWW/files"
    head -c 4096 /dev/urandom >"$H2_WWW/files/4k.bin"
    printf 'Hello, World!' >"$H2_WWW/index.txt"
    if [[ " $(servers_of h2) " == *" keel "* ]]; then
        ensure_keel h2 hello static
        [[ -e $KEEL_BUILD/modules/mod_h2.so ]] || die "no mod_h2 in $KEEL_BUILD"
    fi
    start_all h2
    for t in h2small h2file h2idle; do
        wants "$t" || continue
        if [[ $t == h2idle ]]; then
            for s in ${UP[h2]}; do h2_idle "$s"; done
        else
            take_turns h2 "$t" h2_load
        fi
    done
    stop_all h2
}

# ---- Report ------------------------------------------------------------------------

h2_report() {
    echo
    echo "### HTTP/2 (keel: h2 + hello + static)"
    echo
    echo "h2load -t1 -c$H2_CONNS -m$H2_STREAMS, h2c (prior knowledge)$(wants h2idle && echo "; idle: $H2_IDLE connections")."
    report_tables h2 "h2small|h2small/val|%.0f|small req/s|1" "h2small|h2small/cpu|%.0f|small req/CPU-s|1" \
        "h2file|h2file/val|%.0f|4 KiB file req/s|1" "h2file|h2file/cpu|%.0f|4 KiB file req/CPU-s|1" \
        "h2idle|idle/bytes|%.0f|idle h2 conn bytes|1"
    load_notes h2 h2load h2small h2file
    echo
    echo "Above 1.00× keel is ahead for req/s and req/CPU-s; below 1.00× keel uses less memory."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone h2.sh h2 "keel nginx h2o node"
fi
