#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/ws.sh — the WebSocket echo scenario of run.sh: keel (http1 +
# deflate + websocket + hello) against libwebsockets (ws_lws_echo.c, built
# here against Debian's libwebsockets-dev) and Node.js `ws`. Sourced by
# run.sh; runnable alone (then TESTS defaults to its group, "ws"):
#
#   DURATION=3 WARMUP=1 tests/bench/ws.sh
#   SERVERS="keel lws" WS_MODES=deflate WS_SIZES=4096 tests/bench/ws.sh
#
# Every server runs one thread (keel workers = 1, one lws context, node),
# pinned to SERVER_CPU; the load client on CLIENT_CPU. Per mode (WS_MODES:
# plain, and deflate = permessage-deflate with no context takeover both
# ways) all servers are started, then:
#   wsecho  per message size (WS_SIZES), every server in turn, ROUNDS times:
#           WS_CONNS connections in a closed loop (ws_load.c), WARMUP s then
#           DURATION s measured: messages/s, p99, messages per second of
#           server CPU time (utime + stime from /proc)
#   wsidle  RSS growth per idle WebSocket connection (WS_IDLE of them,
#           ws_idle.py; with deflate, after one compressed message each)
# Settings (defaults in brackets): WS_CONNS [64] WS_SIZES ["32 4096"]
# WS_MODES ["plain deflate"] WS_IDLE [5000] NODE_WS_DIR
# [~/.cache/keel-bench/node] (where `npm install ws` goes) KEEL_WS_OPTS [""]
# (more lines for keel's [websocket] section, separated by ";", e.g.
# KEEL_WS_OPTS="compression_level = 1": libwebsockets compresses at level 1,
# keel and Node `ws` at zlib's default, 6).
# Ports BASE_PORT + 20..25.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WS_CONNS=${WS_CONNS:-64}
WS_SIZES=${WS_SIZES:-"32 4096"}
WS_MODES=${WS_MODES:-"plain deflate"}
WS_IDLE=${WS_IDLE:-5000}
KEEL_WS_OPTS=${KEEL_WS_OPTS:-}
NODE_WS_DIR=${NODE_WS_DIR:-$HOME/.cache/keel-bench/node}

bench_scenario ws "wsecho wsidle" "keel lws node" 20

WS_DIR=$TMP/ws

# Deflate's servers three ports up.
ws_port() { port_of ws "$1" $((3 * $2)); }

ws_settings() {
    printf '%s\n' "WS_CONNS=$WS_CONNS" "WS_SIZES=\"$WS_SIZES\"" "WS_MODES=\"$WS_MODES\"" "WS_IDLE=$WS_IDLE"
    if [[ -n $KEEL_WS_OPTS ]]; then echo "KEEL_WS_OPTS=\"$KEEL_WS_OPTS\""; fi
    return 0
}

ws_needs() {
    need cc gcc
    need_file /usr/include/zlib.h zlib1g-dev
    need_servers ws
    if [[ " $(servers_of ws) " == *" node "* ]]; then need npm npm; fi
    return 0
}

# The load client, the lws server and the ws package; a server that cannot
# be had is left out (WS_SERVERS: the others).
ws_prepare() {
    mkdir -p "$WS_DIR"
    cc -O2 "$BENCH_DIR/ws_load.c" -o "$WS_DIR/ws_load" -lz || die "cannot build ws_load.c"
    WS_SERVERS=""
    local s
    for s in $(servers_of ws); do
        case $s in
        keel) ensure_keel http1 deflate websocket hello ;;
        lws)
            # shellcheck disable=SC2046
            cc -O2 "$BENCH_DIR/ws_lws_echo.c" -o "$WS_DIR/ws_lws_echo" \
                $(pkg-config --cflags --libs libwebsockets) || {
                log "bench: cannot build ws_lws_echo.c: lws left out"
                continue
            }
            ;;
        node)
            if ! NODE_PATH="$NODE_WS_DIR/node_modules" node -e "require('ws')" 2>/dev/null; then
                log "bench: installing ws into $NODE_WS_DIR (npm)"
                mkdir -p "$NODE_WS_DIR"
                npm install --prefix "$NODE_WS_DIR" --no-audit --no-fund ws@8 >&2 || {
                    log "bench: npm install ws failed: node left out"
                    continue
                }
            fi
            ;;
        esac
        WS_SERVERS+=" $s"
    done
}

ws_start() { # NAME DEFLATE
    local name=$1 deflate=$2 port
    port=$(ws_port "$name" "$deflate")
    port_busy "$port" && die "port $port (for ws $name) is in use; set BASE_PORT"
    case $name in
    keel)
        keel_conf "$WS_DIR/keel.conf" "$port" "http1 deflate websocket hello" "[websocket]
compression = $([[ $deflate == 1 ]] && echo on || echo off)
ping_interval = 600s
idle_timeout = 600s
$(tr ';' '\n' <<<"$KEEL_WS_OPTS" | sed 's/^ *//')"
        spawn ws.keel "$WS_DIR/keel.log" "$KEEL_BUILD/keel" -c "$WS_DIR/keel.conf"
        ;;
    lws) spawn ws.lws "$WS_DIR/lws.log" "$WS_DIR/ws_lws_echo" "$port" "$deflate" ;;
    node)
        spawn ws.node "$WS_DIR/node.log" env NODE_PATH="$NODE_WS_DIR/node_modules" \
            node "$BENCH_DIR/ws_node_echo.js" "$port" "$deflate"
        ;;
    esac
    wait_port "$port" || {
        log "bench: ws $name did not start on port $port:"
        tail -n 20 "$WS_DIR/$name.log" >&2 || true
        stop_server "ws.$name"
        return 1
    }
}

# ws_echo NAME DEFLATE MODE SIZE
ws_echo() {
    local name=$1 deflate=$2 mode=$3 size=$4 out k
    k="ws/$name/$mode-$size"
    if ! out=$(taskset -c "$CLIENT_CPU" timeout $((DURATION + WARMUP + 60)) "$WS_DIR/ws_load" \
        "$(ws_port "$name" "$deflate")" /ws "$size" "$WS_CONNS" "$WARMUP" "$DURATION" "$deflate" \
        "${PID[ws.$name]}" 2>&1); then
        log "bench: ws $name $mode ${size} B: load failed: $out"
        record "$k/fail" 1
        return 0
    fi
    local kv
    for kv in $out; do
        case ${kv%%=*} in
        rate) record "$k/rate" "${kv#*=}" ;;
        per_cpu_s) record "$k/cpu" "${kv#*=}" ;;
        p99_us) record "$k/p99" "${kv#*=}" ;;
        esac
    done
    log "bench: ws $name $mode ${size} B: $out"
}

ws_idle() { # NAME DEFLATE MODE
    local name=$1 deflate=$2 mode=$3 out
    if ! out=$(taskset -c "$CLIENT_CPU" timeout 300 python3 "$BENCH_DIR/ws_idle.py" \
        "$(ws_port "$name" "$deflate")" /ws "$WS_IDLE" "${PID[ws.$name]}" "$deflate" 2>&1); then
        log "bench: ws $name $mode idle: failed: $out"
        return 0
    fi
    record "ws/$name/$mode/idle" "$(sed -n 's/.*bytes_per_conn=\([0-9-]*\).*/\1/p' <<<"$out")"
    log "bench: ws $name $mode idle: $out"
    sleep 1 # let the closes settle before the next server
}

ws_run() {
    local mode deflate s size round ok
    ws_prepare
    [[ -n $WS_SERVERS ]] || die "no WebSocket server can run"
    if ((WS_IDLE + 200 > $(ulimit -n))); then
        WS_IDLE=$(($(ulimit -n) - 200))
        log "bench: the open-file limit is $(ulimit -n): WS_IDLE=$WS_IDLE"
    fi
    for mode in $WS_MODES; do
        case $mode in plain) deflate=0 ;; deflate) deflate=1 ;; *) die "unknown WS mode '$mode'" ;; esac
        ok=""
        for s in $WS_SERVERS; do
            if ws_start "$s" "$deflate"; then ok+=" $s"; fi
        done
        if wants wsecho; then
            for size in $WS_SIZES; do
                for ((round = 1; round <= ROUNDS; round++)); do
                    for s in $ok; do ws_echo "$s" "$deflate" "$mode" "$size"; done
                done
            done
        fi
        if wants wsidle; then
            for s in $ok; do ws_idle "$s" "$deflate" "$mode"; done
        fi
        for s in $ok; do stop_server "ws.$s"; done
    done
}

ws_report() {
    local s mode size row peer
    echo
    echo "### WebSocket echo (keel: http1 + deflate + websocket + hello; $WS_CONNS connections)"
    if wants wsecho; then
        md_head server mode "size B" "msgs/s" "p99 µs" "msgs/CPU-s" "msgs/CPU-s, every round"
        for mode in $WS_MODES; do
            for size in $WS_SIZES; do
                for s in $WS_SERVERS; do
                    row=("$s" "$mode" "$size" "$(med "ws/$s/$mode-$size/rate")" "$(med "ws/$s/$mode-$size/p99")"
                        "$(med "ws/$s/$mode-$size/cpu")" "$(spread "ws/$s/$mode-$size/cpu")")
                    md_row "${row[@]}"
                done
            done
        done
    fi
    if wants wsidle; then
        md_head server mode "idle bytes/conn"
        for mode in $WS_MODES; do
            for s in $WS_SERVERS; do md_row "$s" "$mode" "$(med "ws/$s/$mode/idle")"; done
        done
    fi
    [[ " $WS_SERVERS " == *" keel "* ]] || return 0
    local head=("keel ÷ peer") peers=()
    for peer in $WS_SERVERS; do [[ $peer == keel ]] || peers+=("$peer"); done
    ((${#peers[@]})) || return 0
    for peer in "${peers[@]}"; do head+=("vs $peer"); done
    md_head "${head[@]}"
    if wants wsecho; then
        for mode in $WS_MODES; do
            for size in $WS_SIZES; do
                row=("$mode, $size B, msgs/CPU-s")
                for peer in "${peers[@]}"; do
                    row+=("$(ratio "$(med "ws/keel/$mode-$size/cpu")" "$(med "ws/$peer/$mode-$size/cpu")")")
                done
                md_row "${row[@]}"
            done
        done
    fi
    if wants wsidle; then
        for mode in $WS_MODES; do
            row=("idle memory per connection, $mode")
            for peer in "${peers[@]}"; do
                row+=("$(ratio "$(med "ws/keel/$mode/idle")" "$(med "ws/$peer/$mode/idle")") ($(med "ws/keel/$mode/idle") B vs $(med "ws/$peer/$mode/idle") B)")
            done
            md_row "${row[@]}"
        done
    fi
    echo
    echo "Messages: above 1.00× keel is ahead; memory: below 1.00× keel uses less."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone ws.sh ws "keel lws node"
fi
