#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/http.sh — the HTTP/1.1 scenario of run.sh: keel (http1 +
# hello) against nginx, h2o and Node.js. Sourced by run.sh; runnable alone
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
#             node, whose JIT makes the count meaningless): repeatable where
#             the machine's noise makes req/CPU-s wobble. Kernel time is not
#             in it.
# Settings (defaults in brackets): CONNS [64] DEPTH [16] BODY [4096]
# IDLE [10000] IDLE_HOLD [3] INSTR_SECS [5] H2O_MODE [file] (h2o answers GET /
# from a static file, or "mruby"). Ports BASE_PORT + 0..3.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEPTH=${DEPTH:-16}
BODY=${BODY:-4096}
IDLE=${IDLE:-10000}
IDLE_HOLD=${IDLE_HOLD:-3}
H2O_MODE=${H2O_MODE:-file}

bench_scenario http "plain pipeline post idle syscalls instr" "keel nginx h2o node" 0

HTTP_DIR=$TMP/http

http_settings() {
    printf '%s\n' "CONNS=$CONNS" "DEPTH=$DEPTH" "BODY=$BODY" "IDLE=$IDLE" "H2O_MODE=$H2O_MODE"
}

http_needs() {
    need_servers http
    if [[ " $(servers_of http) " == *" nginx "* ]]; then
        need_file /usr/lib/nginx/modules/ngx_http_echo_module.so libnginx-mod-http-echo
    fi
    if wants instr; then need callgrind_control valgrind; fi
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
    start_all http
    for t in plain pipeline post; do
        if wants "$t"; then take_turns http "$t" http_wrk; fi
    done
    if wants idle; then
        for s in ${UP[http]}; do http_idle "$s"; done
    fi
    if wants syscalls; then
        if command -v perf >/dev/null; then
            for s in ${UP[http]}; do count_syscalls http "$s" /; done
        else
            log "bench: no perf: syscalls skipped (apt-get install linux-perf)"
        fi
    fi
    stop_all http
    if wants instr; then
        # One server at a time under valgrind.
        for s in ${UP[http]}; do
            [[ $s == node ]] || count_instr http "$s" /
        done
    fi
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
    report_tables http "${cols[@]}" "idle|idle/bytes|%.0f|idle conn bytes|1" \
        "syscalls|syscalls/n|%.2f|syscalls/req|1" "instr|instr/n|%.0f|user instr/req|1"
    wrk_notes http plain pipeline post
    echo
    echo "Above 1.00× keel is ahead for req/s and req/CPU-s; below 1.00× keel uses less memory, system calls and instructions."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone http.sh http "keel nginx h2o node"
fi
