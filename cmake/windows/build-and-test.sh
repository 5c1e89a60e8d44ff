#!/usr/bin/env bash
# cmake/windows/build-and-test.sh — the Windows leg: cross-build keel with
# mingw-w64 and run its Windows tests under Wine. On a clean Debian machine:
#
#   1. packages   cmake/windows/packages.sh (mingw-w64, Wine, ...; apt-get
#                 only when something is missing)
#   2. deps       cmake/windows/build-deps.sh: libuv, mbedTLS, zlib built for
#                 Windows, cached by version under ~/.cache/keel-win-deps
#   3. configure  build-win/ with cmake/toolchain-mingw-w64-x86_64.cmake
#   4. build      keel.exe, libkeel (static + DLL), every module and plugin
#                 as mod_<name>.dll, the unit tests, tests/windows helpers
#   5. unit       ctest in build-win/: tests/unit/test_*.c under Wine, on the
#                 Criterion-compatible runner of tests/windows/criterion
#   6. blackbox   tests/windows/blackbox.py: keel.exe under Wine driven from
#                 Linux over 127.0.0.1
#
# and prints `windows: N passed, N failed` over steps 5 and 6 (exit 1 on any
# failure). Called by `make test-win` and .ci/run; `make win` runs 1-4 only.
#
# Options:  --build-only   stop after step 4
#           --no-install   skip step 1 (everything is installed already)
# Environment:
#   KEEL_WIN_BUILD_DIR   build directory (default build-win)
#   KEEL_WERROR          ON (default) / OFF
#   KEEL_WIN_JOBS        parallel jobs (default: number of cores)
#   KEEL_WINEPREFIX      Wine prefix (default ~/.cache/keel-wine; made once)
#   KEEL_WIN_DEPS_PREFIX, KEEL_WIN_DEPS_CACHE   see build-deps.sh
#   BLACKBOX_ARGS        extra arguments for blackbox.py, split on spaces
#                        (e.g. "--filter=shutdown* -v")
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
# The caches below live in $HOME: make sure it is set (some CI runners don't).
export HOME="${HOME:-$(getent passwd "$(id -un)" | cut -d: -f6)}"
cd "$src"
build=${KEEL_WIN_BUILD_DIR:-build-win}
jobs=${KEEL_WIN_JOBS:-$(nproc 2>/dev/null || echo 2)}
build_only=0
install=1
for arg in "$@"; do
    case "$arg" in
    --build-only) build_only=1 ;;
    --no-install) install=0 ;;
    *) echo "build-and-test: unknown option $arg" >&2; exit 2 ;;
    esac
done

timings=()
step() {
    local name=$1
    shift
    echo "==> windows/${name}"
    local t0=$SECONDS
    "$@"
    timings+=("${name} $((SECONDS - t0))s")
}
report_timings() {
    local summary
    summary=$(printf "%s, " "${timings[@]}")
    echo "==> windows timings: ${summary%, } (total $((SECONDS - total_start))s)"
}
total_start=$SECONDS

# ---- 1-2: packages and dependencies ----------------------------------------------

if [ "$install" = 1 ]; then
    step packages sh cmake/windows/packages.sh
fi
deps() { prefix=$(bash cmake/windows/build-deps.sh | tail -n 1); }
step deps deps
echo "    dependency prefix: $prefix"

# ---- 3-4: configure and build ----------------------------------------------------------

configure() {
    local launcher=()
    if command -v ccache >/dev/null 2>&1; then
        # Paths relative to the source tree, so a fresh clone elsewhere (CI)
        # still hits the cache for everything not naming the build dir.
        export CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1
        launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
    fi
    local gen=()
    if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
        gen=(-G Ninja)
    fi
    mkdir -p "$build"
    cmake -S . -B "$build" "${gen[@]}" \
        -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-mingw-w64-x86_64.cmake" \
        -DKEEL_WINDOWS_DEPS_PREFIX="$prefix" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DKEEL_WERROR="${KEEL_WERROR:-ON}" \
        "${launcher[@]}" >"$build/configure.log" 2>&1 ||
        { cat "$build/configure.log"; return 1; }
    grep -E '^-- keel' "$build/configure.log" || true
}
step configure configure

build_all() {
    export CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1
    cmake --build "$build" --parallel "$jobs"
    # Not in `all` (most of its tests fail on purpose); the black-box
    # tests run it. tests/windows/kl_ctrl.exe, their other helper, is.
    cmake --build "$build" --parallel "$jobs" --target kl_criterion_selftest
}
step build build_all

# What was built, and that nothing needs a mingw runtime DLL beside it.
check_artifacts() {
    local objdump missing=0 f
    objdump=$(command -v x86_64-w64-mingw32-objdump || true)
    for f in "$build/keel.exe" "$build/lib/libkeel.dll" "$build/lib/libkeel.a" "$build/modules/mod_echo.dll"; do
        [ -f "$f" ] || { echo "    missing: $f"; missing=1; }
    done
    [ "$missing" = 0 ] || return 1
    echo "    built: $(cd "$build" && ls keel.exe lib/libkeel.dll lib/libkeel.dll.a lib/libkeel.a modules/*.dll tests/modules/*.dll 2>/dev/null | tr '\n' ' ')"
    if [ -n "$objdump" ]; then
        local bad
        bad=$(for f in "$build"/keel.exe "$build"/lib/*.dll "$build"/modules/*.dll "$build"/tests/*.exe; do
            [ -f "$f" ] && "$objdump" -p "$f" | sed -n 's/^\tDLL Name: //p' |
                grep -iE 'libgcc|libwinpthread|libstdc|libuv|libmbed|zlib|libz' | sed "s|^|$f needs |"
        done || true)
        if [ -n "$bad" ]; then
            echo "$bad"
            return 1
        fi
        echo "    imports: only Windows system DLLs (mingw runtime linked statically)"
        check_exports "$objdump" || return 1
    fi
}

# The names a PE file exports (objdump's "[Ordinal/Name Pointer] Table").
exported_names() {
    "$1" -p "$2" | sed -n '/^\[Ordinal\/Name Pointer\] Table/,/^$/s/^\t\[ *[0-9]*\] //p'
}

# libkeel.dll exports keel's API; a program linked with the static libkeel
# exports none of it (the static library's objects carry no dllexport:
# KEEL_STATIC, see CMakeLists.txt), and a module exports its descriptor only.
# (An embedding program that compiles a module in, like examples/embed_echo,
# still exports that module's keel_module_<name>: KEEL_MODULE's attribute,
# not libkeel's.)
check_exports() {
    local objdump=$1 f api names bad=""
    api=$(exported_names "$objdump" "$build/lib/libkeel.dll" | sort)
    grep -qx keel_server_run <<<"$api" ||
        bad+="$build/lib/libkeel.dll does not export keel_server_run"$'\n'
    for f in "$build"/keel.exe "$build"/examples/*.exe "$build"/tests/*.exe; do
        [ -f "$f" ] || continue
        names=$(exported_names "$objdump" "$f" | sort | comm -12 - <(echo "$api") | head -n 3 | tr '\n' ' ')
        [ -z "$names" ] || bad+="$f exports libkeel's API: $names..."$'\n'
    done
    for f in "$build"/modules/mod_*.dll; do
        names=$(exported_names "$objdump" "$f" | grep -v '^keel_module_' | head -n 3 | tr '\n' ' ')
        [ -z "$names" ] || bad+="$f exports more than its descriptor: $names"$'\n'
    done
    if [ -n "$bad" ]; then
        printf '%s' "$bad"
        return 1
    fi
    echo "    exports: libkeel.dll its API; the programs linked with libkeel.a nothing of keel's; modules their descriptor"
}
step artifacts check_artifacts

if [ "$build_only" = 1 ]; then
    report_timings
    exit 0
fi

# ---- 5-6: tests under Wine ------------------------------------------------------------

export WINEPREFIX=${KEEL_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/keel-wine}
export WINEDEBUG=-all
export WINEDLLOVERRIDES="mscoree,mshtml="
export WINEARCH=win64
# No X display: Wine must not try to open windows (error boxes and the like).
unset DISPLAY WAYLAND_DISPLAY
wine=$(command -v wine || command -v wine64)

# Runs on one machine share the Wine prefix and its wineserver, and the
# `wineserver -k` that ends one run would kill the programs of another:
# one run at a time (a second waits). Wine's programs must not inherit the
# lock (fd 9), or a leftover one would keep holding it.
mkdir -p "$(dirname "$WINEPREFIX")"
exec 9>"$WINEPREFIX.lock"
if ! flock -w 1800 9; then
    echo "build-and-test: another run holds $WINEPREFIX.lock for 30 minutes; giving up" >&2
    exit 1
fi
stop_wine() { wineserver -k 9>&- >/dev/null 2>&1 || true; }
trap stop_wine EXIT

wine_up() {
    mkdir -p "$WINEPREFIX"
    # One persistent wineserver for the whole run, started before anything
    # else. A server already running on this prefix is a leftover (a crashed
    # run, a wineboot): we hold the prefix's lock, so it is ended first,
    # because `wineserver -p` cannot make a running server persistent, it
    # fails. And it must not fail quietly: Debian's /usr/bin/wineserver
    # starts every server with -p0, so the one a Wine program starts on its
    # own quits as soon as no program runs, and is started again (Wine's
    # services with it) by the next program of the run.
    wineserver -k </dev/null >/dev/null 2>&1 9>&- || true
    wineserver -w </dev/null >/dev/null 2>&1 9>&- || true
    if ! wineserver -p </dev/null 9>&-; then
        echo "build-and-test: cannot start a persistent wineserver for $WINEPREFIX" >&2
        return 1
    fi
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
        echo "    creating the Wine prefix $WINEPREFIX (once)"
        timeout 300 wineboot --init </dev/null >/dev/null 2>&1 9>&- ||
            timeout 300 "$wine" wineboot --init </dev/null >/dev/null 2>&1 9>&-
    fi
    # Wine's background services (services.exe, winedevice.exe...) started
    # now: the first Wine program starts them, they inherit its standard
    # handles and live as long as the server. Started from a test, they
    # would hold ctest's output pipe open and ctest would wait for it (a
    # test "times out" after printing its results).
    timeout 120 "$wine" cmd /c exit </dev/null >/dev/null 2>&1 9>&- || true
}
step wine wine_up

results=$(mktemp)
unit_rc=0
unit() {
    # ctest runs each tests/unit executable through `wine` (the toolchain's
    # CMAKE_CROSSCOMPILING_EMULATOR); -V keeps the runners' per-test lines.
    (cd "$build" && ctest -V -j "$jobs" --timeout 300 --no-tests=error) </dev/null >"$build/unit.log" 2>&1 9>&- ||
        unit_rc=$?
    # The runners' lines, grouped per test program (ctest -j interleaves
    # them; each carries its program's "N: " prefix).
    awk '/^[0-9]+: (\[(PASS|FAIL|SKIP)\]|[0-9]+ passed, [0-9]+ failed)/ {
             n = $1; sub(/^[0-9]+: /, ""); out[n] = out[n] "    " $0 "\n"
         }
         END { for (n in out) printf "%s", out[n] }' "$build/unit.log"
    if [ "$unit_rc" != 0 ]; then
        echo "    ctest failed ($unit_rc); its output:"
        sed 's/^/    | /' "$build/unit.log" | tail -n 200
    fi
    grep -E '(tests passed|tests failed)' "$build/unit.log" | sed 's/^/    ctest: /'
    sed -nE 's/^[0-9]+: ([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*$/unit \1 \2 \4/p' \
        "$build/unit.log" >>"$results"
}
step unit unit

bb_rc=0
blackbox() {
    local extra=()
    read -r -a extra <<<"${BLACKBOX_ARGS:-}" # split on spaces, no globbing
    python3 tests/windows/blackbox.py --build "$build" --wine "$wine" "${extra[@]}" </dev/null 9>&- |
        tee "$build/blackbox.log" || bb_rc=$?
    sed -nE 's/^([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*$/blackbox \1 \2 \4/p' \
        "$build/blackbox.log" >>"$results"
}
step blackbox blackbox

stop_wine
report_timings

read -r passed failed skipped < <(awk '{ p += $2; f += $3; s += $4 } END { print p + 0, f + 0, s + 0 }' "$results")
rm -f "$results"
# A runner that crashed before its summary line counts as one failure.
if [ "$unit_rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
if [ "$bb_rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
if [ "$skipped" != 0 ]; then
    echo "windows: $passed passed, $failed failed, $skipped skipped"
else
    echo "windows: $passed passed, $failed failed"
fi
[ "$failed" = 0 ] && [ "$unit_rc" = 0 ] && [ "$bb_rc" = 0 ]
