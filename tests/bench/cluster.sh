#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/cluster.sh — the "several instances" scenario of run.sh:
# WebSocket pub/sub within one keel instance, and across two instances
# bridged by the pubsub_redis module through a redis-server. Sourced by
# run.sh; runnable alone (then TESTS defaults to its group, "cluster"):
#
#   DURATION=5 WARMUP=1 ROUNDS=3 tests/bench/cluster.sh
#   TESTS=clusterlat CLUSTER_RATE=5000 tests/bench/cluster.sh
#
# Servers, all on 127.0.0.1: redis-server (no persistence), keel A and
# keel B (http1 + websocket + stats + chat + pubsub_redis, workers = 2
# each, both on that Redis) and keel "solo" (the same without
# pubsub_redis: the one-instance baseline). The application is the chat
# example's module (examples/chat: a WebSocket at /chat/ws joins the topic
# "room"; a text message is published to it). The load client is
# ws_pubsub_load.c. Nothing is pinned: with 2 workers per instance, three
# servers and the client share the machine's CPUs, and the report says how
# many there were.
#   clusterlat   one publisher sends CLUSTER_RATE messages a second
#                (CLUSTER_SIZE bytes, its send time inside) to
#                CLUSTER_SUBS subscribers: on solo (same instance) and
#                from A to subscribers on B (across, through Redis);
#                p50 / p99 / max of the delivery latency over every
#                (message, subscriber), and messages lost
#   clusterrate  CLUSTER_PUBS publishers flood CLUSTER_FLOOD_SUBS
#                subscribers, each publisher with at most 64 messages in
#                flight to subscriber 0 (end-to-end flow control):
#                messages per second reaching B's subscribers from A
#                through Redis, and the same on solo for reference (few
#                subscribers: with many, the one-thread client's reading
#                is what gets measured)
# Each measurement runs WARMUP s (not counted: subscriptions reach Redis)
# then DURATION s; ROUNDS rounds, medians reported.
# Settings (defaults in brackets): CLUSTER_SUBS [50] CLUSTER_RATE [1000]
# CLUSTER_SIZE [64] CLUSTER_PUBS [4] CLUSTER_FLOOD_SUBS [4]. Ports
# BASE_PORT + 300..303.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLUSTER_SUBS=${CLUSTER_SUBS:-50}
CLUSTER_RATE=${CLUSTER_RATE:-1000}
CLUSTER_SIZE=${CLUSTER_SIZE:-64}
CLUSTER_PUBS=${CLUSTER_PUBS:-4}
CLUSTER_FLOOD_SUBS=${CLUSTER_FLOOD_SUBS:-4}

bench_scenario cluster "clusterlat clusterrate" "keel" 300

CLUSTER_DIR=$TMP/cluster

cluster_settings() {
    printf '%s\n' "CLUSTER_SUBS=$CLUSTER_SUBS" "CLUSTER_RATE=$CLUSTER_RATE" \
        "CLUSTER_SIZE=$CLUSTER_SIZE" "CLUSTER_PUBS=$CLUSTER_PUBS" "CLUSTER_FLOOD_SUBS=$CLUSTER_FLOOD_SUBS"
}

cluster_needs() {
    need cc gcc
    need redis-server redis-server
    need_file /usr/include/hiredis/hiredis.h libhiredis-dev # for the pubsub_redis module
    return 0
}

cluster_versions() {
    redis-server --version | awk '{print "redis-server", substr($3, 3)}'
}

# Ports: Redis, A, B, solo.
cluster_port() { echo $((BASE_PORT + SCEN_PORT[cluster] + $1)); }

# cluster_spawn KEY LOG COMMAND...: a server, not pinned (see above).
cluster_spawn() {
    local key=$1 out=$2
    shift 2
    "$@" >"$out" 2>&1 &
    PID[$key]=$!
}

# cluster_keel NAME PORT MODULES: keel with two workers; Redis's address
# for pubsub_redis.
cluster_keel() {
    local name=$1 port=$2 modules=$3 conf=$CLUSTER_DIR/$1.conf
    port_busy "$port" && die "port $port (for cluster $name) is in use; set BASE_PORT"
    keel_conf "$conf" "$port" "$modules" "[websocket]
ping_interval = 600s
idle_timeout = 600s
$([[ " $modules " == *" pubsub_redis "* ]] && echo "[pubsub_redis]
address = 127.0.0.1:$(cluster_port 0)
prefix = bench:")"
    sed -i 's/^workers = 1$/workers = 2/' "$conf"
    cluster_spawn "cluster.$name" "$CLUSTER_DIR/$name.log" "$KEEL_BUILD/keel" -c "$conf"
    wait_port "$port" || {
        log "bench: cluster $name did not start on port $port:"
        tail -n 20 "$CLUSTER_DIR/$name.log" >&2 || true
        die "cluster: keel $name did not start"
    }
}

cluster_start() {
    mkdir -p "$CLUSTER_DIR"
    cc -O2 "$BENCH_DIR/ws_pubsub_load.c" -o "$CLUSTER_DIR/ws_pubsub_load" ||
        die "cannot build ws_pubsub_load.c"
    ensure_keel http1 websocket stats chat pubsub_redis
    [[ -e $KEEL_BUILD/modules/mod_pubsub_redis.so ]] ||
        die "cluster: $KEEL_BUILD has no pubsub_redis module (libhiredis-dev missing when it was configured?)"
    local rport
    rport=$(cluster_port 0)
    port_busy "$rport" && die "port $rport (for cluster redis) is in use; set BASE_PORT"
    cluster_spawn cluster.redis "$CLUSTER_DIR/redis.log" redis-server --port "$rport" \
        --bind 127.0.0.1 --save "" --appendonly no --daemonize no
    wait_port "$rport" || die "cluster: redis-server did not start"
    cluster_keel a "$(cluster_port 1)" "http1 websocket stats chat pubsub_redis"
    cluster_keel b "$(cluster_port 2)" "http1 websocket stats chat pubsub_redis"
    cluster_keel solo "$(cluster_port 3)" "http1 websocket stats chat"
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(cluster_metric a pubsub_redis_links_up) == 2 && $(cluster_metric b pubsub_redis_links_up) == 2 ]] &&
            return 0
        sleep 0.1
    done
    die "cluster: the instances did not connect to Redis"
}

# cluster_metric NAME SERIES: the value of a series in keel NAME's /metrics
# (summed over its labels).
cluster_metric() {
    local port
    case $1 in a) port=$(cluster_port 1) ;; b) port=$(cluster_port 2) ;; *) port=$(cluster_port 3) ;; esac
    curl -s --max-time 2 "http://127.0.0.1:$port/metrics" |
        awk -v s="$2" '$1 == s || index($1, s "{") == 1 {v += $2; n++} END {if (n) printf "%.0f", v}'
}

# cluster_load KEY MODE PUB_PORT SUB_PORT SUBS ARG: one run of the
# client, recorded under RES[cluster/keel/KEY/...].
cluster_load() {
    local key=$1 mode=$2 out kv k="cluster/keel/$1"
    if ! out=$(timeout $((DURATION + WARMUP + 60)) "$CLUSTER_DIR/ws_pubsub_load" "$mode" "$3" "$4" \
        "$5" "$CLUSTER_SIZE" "$6" "$WARMUP" "$DURATION" 2>&1); then
        log "bench: cluster $key: load failed: $out"
        record "$k/fail" 1
        return 0
    fi
    for kv in $out; do record "$k/${kv%%=*}" "${kv#*=}"; done
    log "bench: cluster $key: $out"
}

cluster_run() {
    local round a b solo
    a=$(cluster_port 1)
    b=$(cluster_port 2)
    solo=$(cluster_port 3)
    cluster_start
    for ((round = 1; round <= ROUNDS; round++)); do
        if wants clusterlat; then
            cluster_load lat-same latency "$solo" "$solo" "$CLUSTER_SUBS" "$CLUSTER_RATE"
            cluster_load lat-across latency "$a" "$b" "$CLUSTER_SUBS" "$CLUSTER_RATE"
        fi
        if wants clusterrate; then
            cluster_load rate-same flood "$solo" "$solo" "$CLUSTER_FLOOD_SUBS" "$CLUSTER_PUBS"
            cluster_load rate-across flood "$a" "$b" "$CLUSTER_FLOOD_SUBS" "$CLUSTER_PUBS"
        fi
    done
    CLUSTER_DROPPED=$(cluster_metric a pubsub_redis_dropped_total)
    CLUSTER_SENT=$(cluster_metric a pubsub_redis_sent_total)
    CLUSTER_RECEIVED=$(cluster_metric b pubsub_redis_received_total)
    stop_server cluster.solo
    stop_server cluster.b
    stop_server cluster.a
    stop_server cluster.redis
}

cluster_report() {
    local key what
    echo
    echo "### Several instances: pub/sub through Redis (keel: 2 workers per instance, nothing pinned; chat module; $CLUSTER_SIZE-byte messages)"
    if wants clusterlat; then
        md_head "path ($CLUSTER_SUBS subscribers)" "rate msgs/s" "p50 µs" "p99 µs" "max µs" "lost" "p99 µs, every round"
        for key in same across; do
            case $key in same) what="same instance (no Redis)" ;; across) what="across instances (A → Redis → B)" ;; esac
            md_row "$what" "$CLUSTER_RATE" "$(med "cluster/keel/lat-$key/p50_us")" \
                "$(med "cluster/keel/lat-$key/p99_us")" "$(med "cluster/keel/lat-$key/max_us")" \
                "$(med "cluster/keel/lat-$key/lost")" "$(spread "cluster/keel/lat-$key/p99_us")"
        done
    fi
    if wants clusterrate; then
        md_head "path ($CLUSTER_FLOOD_SUBS subscribers)" publishers "msgs/s" "deliveries/s" "msgs/s, every round"
        for key in same across; do
            case $key in same) what="same instance (no Redis)" ;; across) what="across instances (A → Redis → B)" ;; esac
            md_row "$what" "$CLUSTER_PUBS" "$(med "cluster/keel/rate-$key/rate")" \
                "$(med "cluster/keel/rate-$key/deliveries_per_s")" "$(spread "cluster/keel/rate-$key/rate")"
        done
    fi
    echo
    echo "Latency: from the publisher's send to a subscriber's read, for every (message, subscriber);" \
        "msgs/s: distinct messages reaching one subscriber; deliveries/s: at all of them." \
        "Over the whole run A sent ${CLUSTER_SENT:-?} messages to Redis and dropped ${CLUSTER_DROPPED:-?};" \
        "B received ${CLUSTER_RECEIVED:-?} from it."
    for key in lat-same lat-across rate-same rate-across; do
        [[ -z ${RES[cluster/keel/$key/fail]:-} ]] ||
            echo "note: ws_pubsub_load failed $(wc -w <<<"${RES[cluster/keel/$key/fail]}") time(s) ($key); see the log"
    done
    return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone cluster.sh cluster keel
fi
