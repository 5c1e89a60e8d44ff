#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# tests/bench/uring.sh — the io_uring evaluation of run.sh: would an
# io_uring path for socket reads and writes under keel's loop pay (the bar:
# 20% more requests per server CPU-second)? Three servers answer GET / with
# a "Hello, World!" response of the same length:
#   epoll    uring_loop.c's epoll back-end: the raw loop (no parsing, no
#            allocation), level-triggered epoll as libuv's loop (keel's)
#            uses it: the ceiling for HTTP/1.1 on this kernel
#   iouring  uring_loop.c's io_uring back-end, the same work: multishot
#            accept, multishot recv into a ring of provided buffers, the
#            answers as send SQEs submitted once per loop turn across
#            connections (io_uring_submit_and_wait), DEFER_TASKRUN
#   keel     http1 + hello (KEEL_BUILD's keel), for scale
#   nginx    return 200 "Hello, World!" (as http.sh's), so that the
#            ceiling and keel are both read against nginx in one run
# If io_uring cannot beat epoll by 20% in the raw loops, where the event
# loop is the largest share of the cost, it cannot under keel either.
# Sourced by run.sh; runnable alone (then TESTS defaults to its group,
# "uring"):
#
#   DURATION=4 WARMUP=1 ROUNDS=3 tests/bench/uring.sh
#   SERVERS="epoll iouring" TESTS=uringplain tests/bench/uring.sh
#
# Tests, every server in turn, ROUNDS times:
#   uringplain     wrk -t1 -c64 GET / (keep-alive)
#   uringpipeline  wrk -t1 -c64, DEPTH GET / per write (pipelining)
#   uringsyscalls  system calls per plaintext request (perf stat on the
#                  raw_syscalls:sys_enter tracepoint over INSTR_SECS;
#                  skipped without perf)
#   uringinstr     user-space instructions per plaintext request
#                  (callgrind over INSTR_SECS; the kernel's are not in it),
#                  keel and epoll: under valgrind 3.19 the io_uring loop
#                  never answers, and its waits cannot even be interrupted
# Besides req/s and req/CPU-s, the throughput tests give the server's user
# and system CPU time per request apart (utime, stime): where io_uring would
# save, in system calls and their entries, is kernel time.
# With uringplain, uringsyscalls and uringinstr together, the report also
# splits each server's user time a request into the price of its system
# calls (tests/bench/syscall_price.c: an empty call's user time, measured
# first on the servers' CPU) and what is left for its own instructions.
# The loops are built with cc -O2 (-luring when liburing-dev's header is
# there; installed unless NO_INSTALL is set). Without it, or when the
# kernel refuses io_uring (kernel.io_uring_disabled), iouring is skipped
# and the report says why. Settings (defaults in brackets): CONNS [64]
# DEPTH [16] INSTR_SECS [5]. Ports BASE_PORT + 600..603.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEPTH=${DEPTH:-16}

bench_scenario uring "uringplain uringpipeline uringsyscalls uringinstr" "keel epoll iouring nginx" 600

URING_DIR=$TMP/uring
URING_H=/usr/include/liburing.h
URING_SKIP="" # why iouring does not run, when it does not

uring_settings() { printf '%s\n' "CONNS=$CONNS" "DEPTH=$DEPTH"; }

uring_needs() {
    need cc gcc
    need_servers uring
    if [[ " $(servers_of uring) " == *" iouring "* && -z ${NO_INSTALL:-} ]]; then
        need_file "$URING_H" liburing-dev
    fi
    if wants uringinstr; then need callgrind_control valgrind; fi
    return 0
}

uring_versions() {
    echo "Linux $(uname -r)"
    if [[ -e $URING_H ]]; then
        echo "liburing $(dpkg-query -W -f '${Version}' liburing-dev 2>/dev/null || echo '?')"
    fi
}

# ---- Servers ----------------------------------------------------------------------

uring_start_keel() {
    ensure_keel http1 hello
    keel_conf "$URING_DIR/keel.conf" "$1" "http1 hello"
    spawn uring.keel "$URING_DIR/keel.log" "$KEEL_BUILD/keel" -c "$URING_DIR/keel.conf"
}

uring_start_nginx() {
    nginx_conf "$URING_DIR/nginx" "$1" "" '        location = / {
            default_type text/plain;
            return 200 "Hello, World!";
        }'
    spawn_nginx uring.nginx "$URING_DIR/nginx"
}

# The loops stop by themselves after the run's bound.
uring_start_epoll() {
    spawn uring.epoll "$URING_DIR/epoll.log" "$URING_DIR/uring_loop" epoll "$1" $((MAX_MINUTES * 60))
}

uring_start_iouring() {
    [[ -z $URING_SKIP ]] || return 0
    spawn uring.iouring "$URING_DIR/iouring.log" "$URING_DIR/uring_loop" io_uring "$1" \
        $((MAX_MINUTES * 60))
}

uring_check() {
    local name=$1
    if [[ $name == iouring && -n $URING_SKIP ]]; then
        log "bench: iouring skipped: $URING_SKIP"
        return 1
    fi
    check_up "uring.$name" "http://127.0.0.1:$(port_of uring "$name")/" is_hello "Hello, World!" \
        "$URING_DIR"
}

# ---- Measurements ----------------------------------------------------------------

# utime and stime of all the server's processes (every thread: io_uring's
# workers are threads of the process), in clock ticks.
cpu_split() {
    local u=0 s=0 p stat rest f
    for p in $(server_pids "$1"); do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        rest=${stat##*) }
        read -r -a f <<<"$rest"
        u=$((u + f[11]))
        s=$((s + f[12]))
    done
    echo "$u $s"
}

# uring_wrk NAME TEST SECONDS RECORD: wrk_record, and the user and system
# CPU microseconds per request (RES[uring/NAME/TEST/usr] and .../sys).
uring_wrk() {
    local name=$1 test=$2 mode=plain arg=0 key=uring.$1 u0 s0 u1 s1
    [[ $test == uringpipeline ]] && mode=pipeline arg=$DEPTH
    read -r u0 s0 <<<"$(cpu_split "${PID[$key]}")"
    WRK_REQS=""
    wrk_record uring "$name" "$test" "$3" "$4" "http://127.0.0.1:$(port_of uring "$name")/" \
        "$CONNS" "$mode" "$arg" 1 req
    read -r u1 s1 <<<"$(cpu_split "${PID[$key]}")"
    (($4)) && [[ -n $WRK_REQS && $WRK_REQS -gt 0 ]] || return 0
    record "uring/$name/$test/usr" "$(awk -v t=$((u1 - u0)) -v hz="$CLK_TCK" -v r="$WRK_REQS" \
        'BEGIN{printf "%.3f", t / hz * 1e6 / r}')"
    record "uring/$name/$test/sys" "$(awk -v t=$((s1 - s0)) -v hz="$CLK_TCK" -v r="$WRK_REQS" \
        'BEGIN{printf "%.3f", t / hz * 1e6 / r}')"
}

uring_run() {
    local t libs
    mkdir -p "$URING_DIR"
    if [[ " $(servers_of uring) " == *" iouring "* ]]; then
        local disabled
        disabled=$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)
        if [[ ! -e $URING_H ]]; then
            URING_SKIP="liburing's header ($URING_H, liburing-dev) is not installed"
        elif [[ $disabled != 0 ]]; then
            URING_SKIP="the kernel refuses io_uring (kernel.io_uring_disabled = $disabled)"
        fi
    fi
    if [[ -e $URING_H ]]; then libs=(-luring); else libs=(-DNO_LIBURING); fi
    cc -O2 -Wall "$BENCH_DIR/uring_loop.c" -o "$URING_DIR/uring_loop" "${libs[@]}" ||
        die "cannot build uring_loop.c"
    # What a system call costs here, user and system time apart, measured
    # on the servers' CPU before they start (syscall_price.c).
    cc -O2 "$BENCH_DIR/syscall_price.c" -o "$URING_DIR/syscall_price" ||
        die "cannot build syscall_price.c"
    local price
    price=$(taskset -c "$SERVER_CPU" "$URING_DIR/syscall_price" 2>>"$URING_DIR/price.log") ||
        die "syscall_price failed: $(cat "$URING_DIR/price.log")"
    record uring/price/user "${price% *}"
    record uring/price/sys "${price#* }"
    log "bench: $(tail -n 1 "$URING_DIR/price.log")"
    start_all uring
    # Refused by the kernel at run time (a seccomp filter, an old kernel):
    # the loop said why before exiting.
    if [[ " $(servers_of uring) " == *" iouring "* && -z $URING_SKIP &&
        " ${UP[uring]} " != *" iouring "* ]]; then
        URING_SKIP="the io_uring loop did not start: $(tail -n 1 "$URING_DIR/iouring.log" 2>/dev/null)"
    fi
    for t in uringplain uringpipeline; do
        if wants "$t"; then take_turns uring "$t" uring_wrk; fi
    done
    run_counts uring / uringsyscalls uringinstr iouring
}

# ---- Report ------------------------------------------------------------------------

uring_report() {
    local t s row
    local -A title=([uringplain]="plaintext" [uringpipeline]="pipelined ×$DEPTH")
    local cols=()
    for t in uringplain uringpipeline; do
        cols+=("$t|$t/val|%.0f|${title[$t]} req/s|0" "$t|$t/cpu|%.0f|${title[$t]} req/CPU-s|1"
            "$t|$t/usr|%.2f|user µs/req|0" "$t|$t/sys|%.2f|system µs/req|0")
    done
    echo
    echo "### io_uring against epoll (raw loops: tests/bench/uring_loop.c; keel: http1 + hello)"
    [[ -n $URING_SKIP ]] && echo && echo "iouring skipped: $URING_SKIP."
    report_tables uring "${cols[@]}" "uringsyscalls|syscalls/n|%.2f|syscalls/req|1" \
        "uringinstr|instr/n|%.0f|user instr/req|1"
    wrk_notes uring uringplain uringpipeline
    echo
    for t in uringplain uringpipeline; do
        wants "$t" || continue
        for s in ${UP[uring]}; do
            echo "${title[$t]} req/CPU-s, every round, $s: $(spread "uring/$s/$t/cpu")"
        done
    done
    uring_ceiling_report
    uring_price_report
    [[ " ${UP[uring]} " == *" epoll "* && " ${UP[uring]} " == *" iouring "* ]] || return 0
    md_head "io_uring ÷ epoll" "plaintext req/CPU-s" "pipelined ×$DEPTH req/CPU-s"
    uring_ratio_row "raw loops" iouring epoll
    echo
    echo "io_uring is worth adopting under keel at 1.20× or more here; below, keel's loop (libuv's epoll) stays."
}

# The ceiling: what the raw epoll loop, which makes the same system calls
# as keel and nginx and next to no user-space work, does against nginx,
# and how close keel comes to it (issue 29's plaintext target was set as
# about 0.9x the loop).
uring_ceiling_report() {
    [[ " ${UP[uring]} " == *" epoll "* && " ${UP[uring]} " == *" nginx "* ]] || return 0
    local s
    md_head "per CPU-second" "plaintext" "pipelined ×$DEPTH"
    for s in epoll keel; do
        [[ " ${UP[uring]} " == *" $s "* ]] && uring_ratio_row "$s ÷ nginx" "$s" nginx
    done
    if [[ " ${UP[uring]} " == *" keel "* ]]; then uring_ratio_row "keel ÷ epoll loop" keel epoll; fi
}

# uring_ratio_row LABEL A B: a table row, A's requests per CPU-second over
# B's, plaintext and pipelined.
uring_ratio_row() {
    local t row=("$1")
    for t in uringplain uringpipeline; do
        row+=("$(ratio "$(med "uring/$2/$t/cpu")" "$(med "uring/$3/$t/cpu")")")
    done
    md_row "${row[@]}"
}

# Each server's user time per plaintext request, with the part of it that
# is the price of its system calls taken out: what is left is what its own
# instructions cost. The price a call is the raw epoll loop's user time
# over its system calls (it runs next to no code of its own: its user time
# is what its reads, writes and waits leave behind), or, without the
# loop, the empty call's (syscall_price.c, which understates it: read and
# write disturb more than getppid). Where the rest comes out at about the
# same time per instruction for every server, the "user space share" of
# the CPU is mostly system calls.
uring_price_report() {
    local pu ps pl="" what s usr calls instr
    pu=$(med uring/price/user %.3f)
    ps=$(med uring/price/sys %.3f)
    [[ $pu != - ]] || return 0
    echo
    echo "An empty system call on the servers' CPU (tests/bench/syscall_price.c): $pu µs of user time, $ps µs of system time."
    wants uringplain && wants uringsyscalls && wants uringinstr || return 0
    usr=$(med uring/epoll/uringplain/usr %.3f)
    calls=$(med uring/epoll/syscalls/n %.2f)
    if [[ $usr != - && $calls != - ]]; then
        pl=$(awk -v u="$usr" -v c="$calls" 'BEGIN{printf "%.3f", u / c}')
        echo "The raw epoll loop's user time a system call (its user µs ÷ its calls): $pl µs; the table takes that as the price."
    fi
    what=${pl:-$pu}
    md_head "plaintext, per request" "user µs" "system calls" "their user-time price, µs" "the rest, µs" "user instructions" "the rest per instruction, ns"
    for s in ${UP[uring]}; do
        usr=$(med "uring/$s/uringplain/usr" %.3f)
        calls=$(med "uring/$s/syscalls/n" %.2f)
        instr=$(med "uring/$s/instr/n")
        [[ $usr != - && $calls != - && $instr != - ]] || continue
        md_row "$s" "$usr" "$calls" "$(awk -v c="$calls" -v p="$what" 'BEGIN{printf "%.2f", c * p}')" \
            "$(awk -v u="$usr" -v c="$calls" -v p="$what" 'BEGIN{printf "%.2f", u - c * p}')" "$instr" \
            "$(awk -v u="$usr" -v c="$calls" -v p="$what" -v i="$instr" \
                'BEGIN{ if (i < 1000) print "–"; else printf "%.2f", (u - c * p) * 1000 / i }')"
    done
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    bench_alone uring.sh uring "keel epoll iouring nginx"
fi
