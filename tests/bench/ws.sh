#!/usr/bin/env bash
# tests/bench/ws.sh — WebSocket echo: keel against libwebsockets and Node.js
# `ws`, side by side in one run, on loopback. A benchmark, not a test:
# never part of ctest. Runnable alone.
#
#   tests/bench/ws.sh                              full run
#   DURATION=3 SERVERS="keel lws" tests/bench/ws.sh
#
# Each server runs one thread (keel workers = 1, one lws context, node),
# pinned to SERVER_CPU; the load client runs on CLIENT_CPU. For every
# server, message size (SIZES) and mode (MODES: plain, deflate =
# permessage-deflate with no context takeover both ways):
#   echo   CONNS connections in a closed loop (ws_load.c): messages/s,
#          messages per second of server CPU time (utime + stime from
#          /proc over the measurement: what tells servers apart when the
#          client is the bottleneck) and p99 latency
# and, per mode:
#   idle   RSS growth per idle WebSocket connection (IDLE of them,
#          ws_idle.py; with deflate, after one compressed message each)
# It ends with keel's ratios to each peer.
#
# Environment (defaults in brackets):
#   DURATION [5] seconds measured   WARMUP [1]   CONNS [64]   IDLE [5000]
#   SIZES ["32 4096"]   MODES ["plain deflate"]   SERVERS ["keel lws node"]
#   SERVER_CPU [0]  CLIENT_CPU [1]   (ports: free ones, picked at each start)
#   KEEL_BUILD [<repo>/build]       built (Release) if missing
#   NODE_WS_DIR [~/.cache/keel-bench/node]  where `npm install ws` goes
#
# Needs: a C compiler, zlib (zlib1g-dev), libwebsockets (libwebsockets-dev),
# pkg-config, python3, node and npm (for `ws`, installed with npm into
# NODE_WS_DIR when missing). A server whose tools are missing is skipped
# with a message. Every load is bounded in time; every server this script
# started is killed when it exits (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNS=${CONNS:-64}
IDLE=${IDLE:-5000}
SIZES=${SIZES:-"32 4096"}
MODES=${MODES:-"plain deflate"}
SERVERS=${SERVERS:-"keel lws node"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
NODE_WS_DIR=${NODE_WS_DIR:-$HOME/.cache/keel-bench/node}

log() { printf '%s\n' "$*" >&2; }
die() {
    log "ws bench: $*"
    exit 1
}

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]:-}"; do
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

PIN_S=()
PIN_C=()
if command -v taskset >/dev/null; then
    PIN_S=(taskset -c "$SERVER_CPU")
    PIN_C=(taskset -c "$CLIENT_CPU")
fi

# ---- Tools ------------------------------------------------------------------------

cc -O2 "$HERE/ws_load.c" -o "$WORK/ws_load" -lz || die "cannot build ws_load.c (zlib1g-dev?)"

if [[ " $SERVERS " == *" lws "* ]]; then
    if pkg-config --exists libwebsockets &&
        cc -O2 "$HERE/ws_lws_echo.c" -o "$WORK/ws_lws_echo" \
            $(pkg-config --cflags --libs libwebsockets); then :; else
        log "libwebsockets-dev missing: lws skipped"
        SERVERS=${SERVERS//lws/}
    fi
fi
if [[ " $SERVERS " == *" node "* ]]; then
    if ! command -v node >/dev/null; then
        log "node missing: node skipped"
        SERVERS=${SERVERS//node/}
    elif ! NODE_PATH="$NODE_WS_DIR/node_modules" node -e "require('ws')" 2>/dev/null; then
        log "installing ws into $NODE_WS_DIR (npm)"
        mkdir -p "$NODE_WS_DIR"
        npm install --prefix "$NODE_WS_DIR" --no-audit --no-fund ws@8 >/dev/null ||
            { log "npm install ws failed: node skipped"; SERVERS=${SERVERS//node/}; }
    fi
fi
if [[ " $SERVERS " == *" keel "* ]] && [ ! -x "$KEEL_BUILD/keel" ]; then
    cmake -S "$ROOT" -B "$KEEL_BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=OFF >/dev/null
    cmake --build "$KEEL_BUILD" --parallel >/dev/null
fi

# ---- Servers ----------------------------------------------------------------------

# A port nobody listens on now (other benchmarks may share the machine).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() { # port
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}

SPID=
start_server() { # name deflate port
    local name=$1 deflate=$2 port=$3
    case $name in
    keel)
        local comp=off
        [ "$deflate" = 1 ] && comp=on
        cat >"$WORK/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:$port http1
workers = 1
modules = http1 deflate websocket hello
module_path = $KEEL_BUILD/modules
log_level = warn
[http1]
keepalive_timeout = 600s
[websocket]
compression = $comp
ping_interval = 600s
idle_timeout = 600s
CONF
        "${PIN_S[@]}" "$KEEL_BUILD/keel" -c "$WORK/keel.conf" 2>"$WORK/keel.log" &
        ;;
    lws) "${PIN_S[@]}" "$WORK/ws_lws_echo" "$port" "$deflate" 2>"$WORK/lws.log" & ;;
    node) NODE_PATH="$NODE_WS_DIR/node_modules" "${PIN_S[@]}" node "$HERE/ws_node_echo.js" "$port" "$deflate" >/dev/null 2>"$WORK/node.log" & ;;
    esac
    SPID=$!
    PIDS+=("$SPID")
    wait_port "$port" || die "$name did not start on port $port"
}

stop_server() {
    kill "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
}

# ---- Runs -------------------------------------------------------------------------

declare -A RATE PERCPU P99 IDLEB
for srv in $SERVERS; do
    for mode in $MODES; do
        deflate=0
        [ "$mode" = deflate ] && deflate=1
        port=$(free_port)
        start_server "$srv" "$deflate" "$port"
        for size in $SIZES; do
            out=$("${PIN_C[@]}" timeout $((DURATION + WARMUP + 60)) "$WORK/ws_load" "$port" /ws "$size" "$CONNS" "$WARMUP" "$DURATION" "$deflate" "$SPID") ||
                die "$srv $mode $size: load failed: $out"
            key="$srv/$mode/$size"
            RATE[$key]=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<<"$out")
            PERCPU[$key]=$(sed -n 's/.*per_cpu_s=\([0-9]*\).*/\1/p' <<<"$out")
            P99[$key]=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$out")
            log "$srv $mode ${size}B: $out"
        done
        out=$("${PIN_C[@]}" timeout 300 python3 "$HERE/ws_idle.py" "$port" /ws "$IDLE" "$SPID" "$deflate") ||
            die "$srv $mode idle: $out"
        IDLEB[$srv/$mode]=$(sed -n 's/.*bytes_per_conn=\([0-9-]*\).*/\1/p' <<<"$out")
        log "$srv $mode idle: $out"
        stop_server
    done
done

# ---- Report -----------------------------------------------------------------------

printf '\n%-6s %-8s %6s %12s %14s %10s\n' server mode size "msgs/s" "msgs/CPU-s" "p99 us"
for srv in $SERVERS; do
    for mode in $MODES; do
        for size in $SIZES; do
            k="$srv/$mode/$size"
            printf '%-6s %-8s %6s %12s %14s %10s\n' "$srv" "$mode" "$size" "${RATE[$k]}" "${PERCPU[$k]}" "${P99[$k]}"
        done
    done
done
printf '\n%-6s %-8s %16s\n' server mode "idle bytes/conn"
for srv in $SERVERS; do
    for mode in $MODES; do
        printf '%-6s %-8s %16s\n' "$srv" "$mode" "${IDLEB[$srv/$mode]}"
    done
done
if [[ " $SERVERS " == *" keel "* ]]; then
    printf '\nkeel / peer, messages per server CPU-second (higher is better for keel):\n'
    for peer in $SERVERS; do
        [ "$peer" = keel ] && continue
        for mode in $MODES; do
            for size in $SIZES; do
                a=${PERCPU[keel/$mode/$size]} b=${PERCPU[$peer/$mode/$size]}
                [ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt 0 ] &&
                    printf '  vs %-5s %-8s %6sB  x%s\n' "$peer" "$mode" "$size" "$(python3 -c "print(round($a/$b,2))")"
            done
        done
    done
    printf 'keel / peer, idle bytes per connection (lower is better for keel):\n'
    for peer in $SERVERS; do
        [ "$peer" = keel ] && continue
        for mode in $MODES; do
            a=${IDLEB[keel/$mode]} b=${IDLEB[$peer/$mode]}
            [ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt 0 ] &&
                printf '  vs %-5s %-8s x%s\n' "$peer" "$mode" "$(python3 -c "print(round($a/$b,2))")"
        done
    done
fi
