#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/udp.sh — the UDP scenario of run.sh: keel's UDP listener
# (ABI 1.9; the echo plugin's udp_discard, which counts what it receives)
# against a plain receive loop (udp_sink.c: one thread, blocking recvmmsg
# of 16 datagrams into 64 KiB slots, as keel's receive does, with no event
# loop or callback). Sourced by run.sh; runnable alone (then TESTS defaults
# to its group, "udp"):
#
#   DURATION=3 WARMUP=1 tests/bench/udp.sh
#   UDP_SIZES="64 1200" ROUNDS=3 tests/bench/udp.sh
#
# Every server runs one thread (keel workers = 1), pinned to SERVER_CPU; the
# load (udp_load.c: one socket, sendmmsg batches of 32, loopback only) on
# CLIENT_CPU. Per datagram size (UDP_SIZES), every server in turn, ROUNDS
# times, WARMUP s then DURATION s measured:
#   udprecv  datagrams received per second, and per second of server CPU
#            time (utime + stime from /proc; the count is the server's own,
#            asked after the load pauses and the server drains its queue)
# Bounded: each load stops after its seconds (and 200 million datagrams).
# Settings (defaults in brackets): UDP_SIZES ["64 512"]. Ports BASE_PORT +
# 400..401 (UDP).
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

UDP_SIZES=${UDP_SIZES:-"64 512"}

bench_scenario udp "udprecv" "keel recvmmsg" 400

UDP_DIR=$TMP/udp

udp_settings() { echo "UDP_SIZES=\"$UDP_SIZES\""; }

udp_needs() {
    need cc gcc
    return 0
}

udp_start() { # NAME
    local name=$1 port
    port=$(port_of udp "$name")
    case $name in
    keel)
        keel_conf "$UDP_DIR/keel.conf" "$port" "echo" "" "udp_discard udp"
        spawn udp.keel "$UDP_DIR/keel.log" "$KEEL_BUILD/keel" -c "$UDP_DIR/keel.conf"
        ;;
    recvmmsg)
        spawn udp.recvmmsg "$UDP_DIR/recvmmsg.log" "$UDP_DIR/udp_sink" "$port" \
            $((MAX_MINUTES * 60))
        ;;
    esac
    # Up once it answers "?count" (udp_load asks until it does, 5 s at most).
    "$UDP_DIR/udp_load" "$port" 16 0 0.01 "${PID[udp.$name]}" >/dev/null 2>&1 || {
        log "bench: udp $name did not start on port $port:"
        tail -n 20 "$UDP_DIR/$name.log" >&2 || true
        stop_server "udp.$name"
        return 1
    }
}

udp_recv() { # NAME SIZE
    local name=$1 size=$2 out k="udp/$1/udprecv-$2"
    if ! out=$(taskset -c "$CLIENT_CPU" timeout $((DURATION + WARMUP + 30)) "$UDP_DIR/udp_load" \
        "$(port_of udp "$name")" "$size" "$WARMUP" "$DURATION" "${PID[udp.$name]}" 2>&1); then
        log "bench: udp $name ${size} B: load failed: $out"
        record "$k/fail" 1
        return 0
    fi
    local kv
    for kv in $out; do
        case ${kv%%=*} in
        rate) record "$k/rate" "${kv#*=}" ;;
        per_cpu_s) record "$k/cpu" "${kv#*=}" ;;
        esac
    done
    log "bench: udp $name ${size} B: $out"
}

udp_run() {
    local s size round ok=""
    mkdir -p "$UDP_DIR"
    cc -O2 "$BENCH_DIR/udp_load.c" -o "$UDP_DIR/udp_load" || die "cannot build udp_load.c"
    cc -O2 "$BENCH_DIR/udp_sink.c" -o "$UDP_DIR/udp_sink" || die "cannot build udp_sink.c"
    ensure_keel echo
    for s in $(servers_of udp); do
        if udp_start "$s"; then ok+=" $s"; fi
    done
    UP[udp]=$ok
    for size in $UDP_SIZES; do
        for ((round = 1; round <= ROUNDS; round++)); do
            for s in $ok; do udp_recv "$s" "$size"; done
        done
    done
    for s in $ok; do stop_server "udp.$s"; done
}

udp_report() {
    local s size row
    echo
    echo "### UDP receive (keel: echo's udp_discard on a udp listener; recvmmsg: udp_sink.c)"
    md_head server "size B" "datagrams/s" "datagrams/CPU-s" "datagrams/CPU-s, every round"
    for size in $UDP_SIZES; do
        for s in ${UP[udp]}; do
            row=("$s" "$size" "$(med "udp/$s/udprecv-$size/rate")" "$(med "udp/$s/udprecv-$size/cpu")"
                "$(spread "udp/$s/udprecv-$size/cpu")")
            md_row "${row[@]}"
        done
    done
    [[ " ${UP[udp]} " == *" keel "* && " ${UP[udp]} " == *" recvmmsg "* ]] || return 0
    md_head "keel ÷ recvmmsg" "datagrams/CPU-s"
    for size in $UDP_SIZES; do
        md_row "$size B" "$(ratio "$(med "udp/keel/udprecv-$size/cpu")" "$(med "udp/recvmmsg/udprecv-$size/cpu")")"
    done
    echo
    echo "Above 1.00× keel spends less CPU per datagram than the plain loop (it cannot: the loop is the floor)."
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone udp.sh udp "keel recvmmsg"
fi
