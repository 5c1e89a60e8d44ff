#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/run.sh — keel against its peers, every scenario in one run, on
# loopback: HTTP/1.1 (nginx, h2o, Caddy, Node.js), static files (nginx,
# h2o, Caddy), WebSocket echo (libwebsockets, Node.js `ws`), HTTPS (nginx),
# HTTP/2 (nginx, h2o, Node.js), reverse proxying (nginx, Caddy), pub/sub
# across instances through Redis, and io_uring against epoll in raw loops
# (whether io_uring would pay under keel). A benchmark, not a test: never
# part of ctest.
#
#   tests/bench/run.sh                                 everything (about 15 min)
#   DURATION=3 WARMUP=1 tests/bench/run.sh             quick run (about 9 min)
#   DURATION=4 WARMUP=1 ROUNDS=3 tests/bench/run.sh    medians of 3 (about 18 min)
#   TESTS="plain static4k" SERVERS="keel nginx" tests/bench/run.sh
#   TESTS="h2 proxy" tests/bench/run.sh                two groups
#   TESTS=ws tests/bench/ws.sh                         one scenario alone
#
# The scenarios (each in its own file, with its tests and settings in the
# file's header; lib.sh holds what they share):
#   http.sh    plain pipeline post idle syscalls instr latency  (group "http")
#   static.sh  static4k static1m staticsyscalls staticinstr  (group "static")
#   ws.sh      wsecho wsidle                              (group "ws")
#   tls.sh     tlskeepalive tlshandshake tlsresume tls1m tlsidle tlssyscalls tlsinstr (group "tls")
#   h2.sh      h2small h2file h2idle                      (group "h2")
#   proxy.sh   proxysmall proxy1m proxysyscalls proxyinstr (group "proxy")
#   fastcgi.sh fcgismall fcgisyscalls fcgiinstr           (group "fastcgi")
#   cluster.sh clusterlat clusterrate                     (group "cluster")
#   udp.sh     udprecv                                    (group "udp")
#   uring.sh   uringplain uringpipeline uringsyscalls uringinstr (group "uring")
# TESTS takes tests and groups, "all" for every one. SERVERS names the
# servers; each scenario runs those it knows: keel everywhere, nginx in http,
# static, tls, h2, proxy (proxy_pass; proxy's upstream is nginx whatever
# SERVERS says) and fastcgi (fastcgi_pass to the same PHP-FPM), h2o in
# http, static and h2, caddy in http, static, tls and proxy, node in http, ws
# and h2, lws in ws, keel_nocache (keel without its open-file cache) in
# static, epoll and iouring (uring_loop.c's raw loops) in uring.
#
# Method, in every scenario: each server gets one worker / thread / process,
# pinned to SERVER_CPU; the load (wrk -t1, h2load -t1, ws_load, the idle
# clients, and proxy's upstream) runs on CLIENT_CPU. Test by test, the servers take turns, ROUNDS times, each
# measurement after a warm-up; the median of the rounds is reported. Besides
# requests (messages, MB) per second, every throughput test reports them per
# second of server CPU time (utime + stime from /proc/PID/stat over the
# measurement): on a 2-core machine the one-thread client is often the
# bottleneck, and CPU time tells apart servers that the client cannot.
# syscalls and instr are counts (perf, callgrind): repeatable where a shared
# machine makes the rates wobble. The report (markdown, on standard output;
# progress on standard error) ends each scenario with keel's ratio to each
# peer, and gives the command that reproduces it.
#
# Bounded: every load is bounded in time (timeout), and the whole run stops
# itself after MAX_MINUTES. A full run measures 3 x 4 (http) + 2 x 3
# (static) + 4 x 3 (ws) + 2 x 2 (tls) + 2 x 4 (h2) + 2 x 2 (proxy) = 46
# loads of WARMUP + DURATION seconds per round (uring adds 2 x 3 and a
# minute of counts), plus about 6 minutes that do
# not depend on them (idle connections, system call and callgrind counts,
# start-ups): about 15 minutes with the defaults, 18 with DURATION=4
# WARMUP=1 ROUNDS=3.
#
# Environment (defaults in brackets):
#   DURATION [10]  seconds per measurement       WARMUP [2]  seconds of warm-up before each
#   ROUNDS [1]     measurements per server and test, in turns; the median is reported
#   TESTS [all]    SERVERS ["keel nginx h2o caddy lws node recvmmsg epoll iouring"]
#                  (recvmmsg: udp's plain loop; epoll, iouring: uring's raw loops)
#   SERVER_CPU [0] CLIENT_CPU [1]
#   BASE_PORT [19080] (http +0..4, static +10..14, ws +20..25, tls +30..33,
#                  proxy +100..103, h2 +200..203, cluster +300..303, udp +400..401,
#                  fastcgi +500..502, uring +600..603)
#   KEEL_BUILD [<repo>/build]  where keel and modules/ are; built (Release) if missing
#   INSTR_SECS [5] seconds of load for the counts (syscalls, instr, staticsyscalls, staticinstr)
#   CONNS [64]     wrk connections (http, static4k, tlskeepalive, proxysmall)
#   MAX_MINUTES [60]  the whole run's bound
#   NO_INSTALL=1   do not apt-get missing packages
#   and each scenario's own (CONNS, DEPTH, BODY, IDLE, H2O_MODE, STATIC_CONNS_LARGE,
#   WS_CONNS, WS_SIZES, WS_MODES, WS_IDLE, KEEL_WS_OPTS, TLS_IDLE, H2_CONNS,
#   H2_STREAMS, H2_IDLE, PROXY_CONNS_1M, CLUSTER_SUBS, CLUSTER_RATE, ...): see its file.
#
# Packages (installed with apt-get when missing; cmake/packages.txt's bench
# list holds them all): wrk curl python3, nginx-light
# libnginx-mod-http-echo h2o caddy nodejs npm php-fpm valgrind gcc zlib1g-dev pkg-config
# libwebsockets-dev liburing-dev openssl nghttp2-client redis-server as the selection needs
# them (keel's own build needs libmbedtls-dev for the tls module and
# keel-cert, libhiredis-dev for pubsub_redis); the `ws` package with npm;
# perf (linux-perf) is used when present.
# Everything listens on 127.0.0.1 only; every server this script started is
# killed when it exits (trap).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SERVERS=${SERVERS:-"keel nginx h2o caddy lws node recvmmsg epoll iouring"}
TESTS=${TESTS:-all}

# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=http.sh
source "$HERE/http.sh"
# shellcheck source=static.sh
source "$HERE/static.sh"
# shellcheck source=ws.sh
source "$HERE/ws.sh"
# shellcheck source=tls.sh
source "$HERE/tls.sh"
# shellcheck source=h2.sh
source "$HERE/h2.sh"
# shellcheck source=proxy.sh
source "$HERE/proxy.sh"
# shellcheck source=fastcgi.sh
source "$HERE/fastcgi.sh"
# shellcheck source=cluster.sh
source "$HERE/cluster.sh"
# shellcheck source=udp.sh
source "$HERE/udp.sh"
# shellcheck source=uring.sh
source "$HERE/uring.sh"

bench_main run.sh
