#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/http.sh — the HTTP/1.1 scenario of run.sh: keel (http1 +
# hello) against nginx, h2o, Caddy and Node.js. Sourced by run.sh; runnable alone
# (then TESTS defaults to its group, "http"):
#
#   DURATION=3 WARMUP=1 tests/bench/http.sh
#
# Tests, every server in turn, ROUNDS times:
#   plain     wrk -t1 -c64 GET /                      (keep-alive)
#   pipeline  wrk -t1 -c64, 16 GET / per write        (HTTP/1.1 pipelining)
#   post      wrk -t1 -c64 POST /echo, 4 KiB bodies
#   idle      RSS growth for 10,000 idle keep-alive connections
#   syscalls  system calls per plaintext request (perf stat on the
#             raw_syscalls:sys_enter tracepoint, over INSTR_SECS; skipped
#             without perf)
#   instr     user-space instructions per plaintext request, counted by
#             valgrind's callgrind over INSTR_SECS (keel, nginx, h2o; not
#             node, whose JIT makes the count meaningless, nor Caddy, whose
#             Go runtime valgrind cannot follow): repeatable where the
#             machine's noise makes req/CPU-s wobble. Kernel time is not in
#             it.
#   latency   GET / at a fixed rate (LAT_RATE requests per second over
#             LAT_CONNS connections, rate_load.c): p50, p99 and p99.9 in
#             microseconds from each request's planned start (corrected for
#             coordinated omission, as wrk2 does), and the server's CPU
#             share at that rate.
# Settings (defaults in brackets): CONNS [64] DEPTH [16] BODY [4096]
# IDLE [10000] IDLE_HOLD [3] INSTR_SECS [5] H2O_MODE [file] (h2o answers GET /
# from a static file, or "mruby") LAT_RATE [10000] LAT_CONNS [32]. Ports
# BASE_PORT + 0..4.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEPTH=${DEPTH:-16}
BODY=${BODY:-4096}
IDLE=${IDLE:-10000}
IDLE_HOLD=${IDLE_HOLD:-3}
H2O_MODE=${H2O_MODE:-file}
LAT_RATE=${LAT_RATE:-10000}
LAT_CONNS=${LAT_CONNS:-32}

bench_scenario http "plain pipeline post idle syscalls instr latency" "keel nginx h2o node caddy" 0

HTTP_DIR=$TMP/http

http_settings() {
    printf '%s\n' "CONNS=$CONNS" "DEPTH=$DEPTH" "BODY=$BODY" "IDLE=$IDLE" "H2O_MODE=$H2O_MODE"
    if wants latency; then printf '%s\n' "LAT_RATE=$LAT_RATE" "LAT_CONNS=$LAT_CONNS"; fi
}

http_needs() {
    need_servers http
    if [[ " $(servers_of http) " == *" nginx "* ]]; then
        need_file /usr/lib/nginx/modules/ngx_http_echo_module.so libnginx-mod-http-echo
    fi
    if wants instr; then need callgrind_control valgrind; fi
    if wants latency; then need cc gcc; fi
    return 0
}

# ---- Servers ----------------------------------------------------------------------

http_start_keel() {
    ensure_keel http1 hello
    keel_conf "$HTTP_DIR/keel.conf" "$1" "http1 hello"
    spawn http.keel "$HTTP_DIR/keel.log" "$KEEL_BUILD/keel" -c "$HTTP_DIR/keel.conf"
}

http_start_nginx() {
    # The echo module (nginx-light's companion package) answers the body
    # read into memory, as keel's hello does.
    nginx_conf "$HTTP_DIR/nginx" "$1" "    client_body_buffer_size 16k;" '        location = / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
        location = /echo {
            echo_read_request_body;
            echo_request_body;
        }' "load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;"
    spawn_nginx http.nginx "$HTTP_DIR/nginx"
}

http_start_h2o() {
    mkdir -p "$HTTP_DIR/h2o"
    printf 'Hello, World!' >"$HTTP_DIR/h2o/hello.txt"
    local root_handler
    if [[ $H2O_MODE == mruby ]]; then
        root_handler='        mruby.handler: |
          Proc.new do |env|
            [200, {"content-type" => "text/plain"}, ["Hello, World!"]]
          end'
    else
        root_handler="        file.file: $HTTP_DIR/h2o/hello.txt"
    fi
    h2o_conf "$HTTP_DIR/h2o" "$1" "      \"/\":
$root_handler
      \"/echo\":
        mruby.handler: |
          Proc.new do |env|
            input = env[\"rack.input\"]
            body = input ? input.read : \"\"
            [200, {\"content-type\" => (env[\"CONTENT_TYPE\"] || \"application/octet-stream\")}, [body]]
          end" 'file.mime.addtypes:
  "text/plain": ".txt"'
    spawn_h2o http.h2o "$HTTP_DIR/h2o"
}

http_start_caddy() {
    caddy_conf "$HTTP_DIR/caddy" "$1" '	respond / "Hello, World!" 200
	respond /echo "{http.request.body}" 200'
    spawn_caddy http.caddy "$HTTP_DIR/caddy"
}

http_start_node() {
    spawn http.node "$HTTP_DIR/node.log" node "$BENCH_DIR/node_hello.js" "$1"
}

# Answers GET / with "Hello, World!" and echoes a POST?
http_check() {
    local name=$1 port
    port=$(port_of http "$name")
    check_up "http.$name" "http://127.0.0.1:$port/" is_hello "Hello, World!" "$HTTP_DIR" || return 1
    head -c "$BODY" /dev/zero | tr '\0' x >"$HTTP_DIR/post.body"
    local len
    len=$(curl -s --max-time 5 --data-binary "@$HTTP_DIR/post.body" \
        -H 'Content-Type: application/octet-stream' "http://127.0.0.1:$port/echo" | wc -c)
    if [[ $len -ne $BODY ]]; then
        log "bench: $name echoes $len bytes of a $BODY-byte POST /echo"
        return 1
    fi
}

# ---- Measurements ----------------------------------------------------------------

# http_wrk NAME TEST SECONDS RECORD
http_wrk() {
    local arg=0
    case $2 in
    pipeline) arg=$DEPTH ;;
    post) arg=$BODY ;;
    esac
    wrk_record http "$1" "$2" "$3" "$4" "http://127.0.0.1:$(port_of http "$1")/" "$CONNS" "$2" "$arg" 1 req
}

# http_latency NAME TEST SECONDS RECORD: rate_load at LAT_RATE.
http_latency() {
    local name=$1 key=http.$1 t0 out ticks kv k v
    t0=$(cpu_ticks "${PID[$key]}")
    if ! out=$(timeout $(($3 + 30)) taskset -c "$CLIENT_CPU" "$HTTP_DIR/rate_load" 127.0.0.1 \
        "$(port_of http "$name")" / "$LAT_CONNS" "$LAT_RATE" 0.5 "$3" 2>&1); then
        log "bench: rate_load failed against $name: $out"
        (($4)) && record "http/$name/latency/fail" 1
        return 0
    fi
    ticks=$(($(cpu_ticks "${PID[$key]}") - t0))
    (($4)) || return 0
    for kv in $out; do
        k=${kv%%=*} v=${kv#*=}
        case $k in
        achieved | p50_us | p99_us | p999_us) record "http/$name/latency/$k" "$v" ;;
        errors) record "http/$name/latency/errs" "$v" ;;
        esac
    done
    record "http/$name/latency/cpu" "$(awk -v t="$ticks" -v hz="$CLK_TCK" -v s="$3" \
        'BEGIN{printf "%.1f", t * 100 / hz / (s + 0.5)}')"
    log "bench: $name latency: $out, server CPU $((ticks * 100 / CLK_TCK / $3))%"
}

http_idle() {
    local name=$1 port key=http.$1 before after
    port=$(port_of http "$name")
    sleep 0.5
    before=$(rss_kib "${PID[$key]}")
    rm -f "$HTTP_DIR/idle.out"
    timeout 120 taskset -c "$CLIENT_CPU" python3 "$BENCH_DIR/idle_conns.py" 127.0.0.1 "$port" \
        "$IDLE" "$IDLE_HOLD" 90 >"$HTTP_DIR/idle.out" 2>"$HTTP_DIR/idle.err" &
    local client=$! i
    for ((i = 0; i < 1000; i++)); do
        grep -q '^\(READY\|TIMEOUT\)' "$HTTP_DIR/idle.out" 2>/dev/null && break
        kill -0 "$client" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -q '^READY' "$HTTP_DIR/idle.out"; then
        log "bench: $name: idle connections failed: $(cat "$HTTP_DIR/idle.out" "$HTTP_DIR/idle.err")"
        wait "$client" || true
        return 0
    fi
    sleep 1
    after=$(rss_kib "${PID[$key]}")
    wait "$client" || true
    local held bytes
    held=$(sed -n 's/^HELD //p' "$HTTP_DIR/idle.out")
    bytes=$(awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN{printf "%.0f", (a - b) * 1024 / n}')
    record "http/$name/idle/bytes" "$bytes"
    log "bench: $name idle: RSS $before KiB -> $after KiB for $IDLE connections" \
        "($bytes B each; $held still open at the end)"
    sleep 1 # let the closes settle before the next server
}

http_run() {
    local s t
    mkdir -p "$HTTP_DIR"
    if ((IDLE + 200 > $(ulimit -n))); then
        IDLE=$(($(ulimit -n) - 200))
        log "bench: the open-file limit is $(ulimit -n): IDLE=$IDLE"
    fi
    if wants latency; then
        cc -O2 "$BENCH_DIR/rate_load.c" -o "$HTTP_DIR/rate_load" || die "cannot build rate_load.c"
    fi
    start_all http
    for t in plain pipeline post; do
        if wants "$t"; then take_turns http "$t" http_wrk; fi
    done
    if wants latency; then take_turns http latency http_latency; fi
    if wants idle; then
        for s in ${UP[http]}; do http_idle "$s"; done
    fi
    # Not node (its JIT) nor Caddy (Go's runtime) under valgrind.
    run_counts http / syscalls instr node caddy
}

# ---- Report ------------------------------------------------------------------------

http_report() {
    local t cols=()
    local -A title=([plain]="plaintext" [pipeline]="pipelined ×$DEPTH" [post]="POST $BODY B")
    for t in plain pipeline post; do
        cols+=("$t|$t/val|%.0f|${title[$t]} req/s|1" "$t|$t/p99|%.2f|p99 ms|0" "$t|$t/cpu|%.0f|${title[$t]} req/CPU-s|1")
    done
    echo
    echo "### HTTP/1.1 (keel: http1 + hello)"
    # How much of each server's CPU is its own code: the rest is the
    # kernel's, the same system calls for every server (syscalls/req).
    cols+=("plain|plain/user|%.0f|plaintext user-space % of CPU|0")
    report_tables http "${cols[@]}" "idle|idle/bytes|%.0f|idle conn bytes|1" \
        "syscalls|syscalls/n|%.2f|syscalls/req|1" "instr|instr/n|%.0f|user instr/req|1"
    wrk_notes http plain pipeline post
    if wants latency; then
        echo
        echo "#### Latency at $LAT_RATE req/s over $LAT_CONNS connections (µs from each request's planned start)"
        report_tables http "latency|latency/achieved|%.0f|req/s done|0" \
            "latency|latency/p50_us|%.1f|p50 µs|1" "latency|latency/p99_us|%.1f|p99 µs|1" \
            "latency|latency/p999_us|%.1f|p99.9 µs|1" "latency|latency/cpu|%.1f|server CPU %|1"
        load_notes http rate_load latency
    fi
    echo
    echo "Above 1.00× keel is ahead for req/s and req/CPU-s; below 1.00× keel uses less memory, system calls, instructions, latency and CPU."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone http.sh http "keel nginx h2o node caddy"
fi
