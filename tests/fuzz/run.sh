#!/bin/sh
# tests/fuzz/run.sh [SECONDS] — builds the libFuzzer harnesses in build-fuzz/
# (clang, KEEL_FUZZ=ON) and runs each for SECONDS (default 30) on a copy of
# its seed corpus; exits non-zero if any harness finds a crash, a sanitizer
# report, a leak or a timeout. The inputs that make a harness fail are left
# in build-fuzz/fuzz/artifacts/. A longer run for people: tests/fuzz/README.md.
#
#   tests/fuzz/run.sh           # about 2 minutes: 30 s per harness
#   tests/fuzz/run.sh 300       # 5 minutes each
#   tests/fuzz/run.sh 0         # build only
#   KEEL_FUZZ_ONLY=http1 tests/fuzz/run.sh 60
#   KEEL_FUZZ_JOBS=2 ...        # parallel build jobs (default 2)
set -eu

seconds=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${KEEL_FUZZ_BUILD_DIR:-$root/build-fuzz}
cc=${KEEL_FUZZ_CC:-}
if [ -z "$cc" ]; then
    for c in clang clang-14 clang-15 clang-16 clang-17 clang-18; do
        if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
    done
fi
if [ -z "$cc" ]; then
    echo "run.sh: no clang found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 2
fi

mkdir -p "$build"
if [ ! -f "$build/CMakeCache.txt" ]; then
    gen=""
    command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
    # shellcheck disable=SC2086
    cmake -S "$root" -B "$build" $gen -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DKEEL_FUZZ=ON -DKEEL_BUILD_TESTS=OFF -DKEEL_BUILD_EXAMPLES=OFF -DKEEL_BUILD_PLUGINS=OFF \
        >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 2; }
fi
cmake --build "$build" --target fuzz --parallel "${KEEL_FUZZ_JOBS:-2}"
[ "$seconds" = 0 ] && exit 0 # build only

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
for h in http1 h1_head target config loader ws inflate accept range static_path allow hpack h2frame h2 proxy proxy_head statsd fcgi ocsp_http; do
    case ${KEEL_FUZZ_ONLY:-$h} in *"$h"*) ;; *) continue ;; esac
    bin=$build/fuzz/fuzz_$h
    work=$build/fuzz/corpus-$h
    art=$build/fuzz/artifacts/$h/
    mkdir -p "$work" "$art"
    # New inputs go to the work corpus; the seeds in the repository are read.
    dict=""
    [ -f "$here/$h.dict" ] && dict="-dict=$here/$h.dict"
    seeds=$here/corpus/$h
    # fuzz_h1_head reads fuzz_http1's seeds: heads behind a leading byte.
    [ "$h" = h1_head ] && dict="-dict=$here/http1.dict" && seeds=$here/corpus/http1
    [ "$h" = hpack ] && dict="-dict=$here/h2.dict" # HPACK's bytes are among HTTP/2's
    [ "$h" = h2frame ] && dict="-dict=$here/h2.dict"
    [ "$h" = proxy ] && dict="-dict=$here/h2.dict" # HTTP/2 clients, to the proxy
    [ "$h" = proxy_head ] && dict="-dict=$here/http1.dict" # an upstream's HTTP/1.1
    echo "== fuzz_$h: ${seconds}s"
    # shellcheck disable=SC2086
    if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$art" $dict "$work" "$seeds" \
        >"$build/fuzz/$h.log" 2>&1; then
        status=1
        echo "== fuzz_$h FAILED: the input is in $art; the end of its log:" >&2
        tail -n 60 "$build/fuzz/$h.log" >&2
    else
        grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)|cov: " \
            "$build/fuzz/$h.log" | tail -n 4
    fi
done
exit $status
