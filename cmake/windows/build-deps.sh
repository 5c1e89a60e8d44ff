#!/usr/bin/env bash
# cmake/windows/build-deps.sh — the Windows (mingw-w64, x86_64) builds of
# keel's dependencies, in a prefix cached by version. Prints the prefix on
# its last line of stdout (progress goes to stderr).
#
#   libuv    Debian's source package libuv1 (`apt-get source`), static libuv.a
#   mbedTLS  Debian's source package mbedtls, default config, static libraries
#   zlib     Debian's libz-mingw-w64-dev, its static libz.a copied in
#   llhttp   not here: FindLLHTTP compiles node-llhttp's C for any target
#
# The prefix is
#   ${KEEL_WIN_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keel-win-deps}/<key>
# where <key> names the Debian versions of the three libraries, of the
# compiler and of mingw-w64's headers, plus the recipe number below: a
# change to any of them builds a new prefix (older ones are removed). A
# finished prefix holds a `.complete` stamp; a half-built one is never used
# (it is built in a temporary folder and renamed at the end). A prefix
# takes about 4 MB and, on 2 cores, 2-5 minutes to build.
#
# Environment:
#   KEEL_WIN_DEPS_PREFIX  use this ready prefix, build nothing
#   KEEL_WIN_DEPS_CACHE   where the prefixes are cached (see above)
#   KEEL_WIN_DEPS_JOBS    parallel compile jobs (default: number of cores)
#
# Needs the packages of cmake/windows/packages.sh. Adds a deb-src entry
# (/etc/apt/sources.list.d/keel-deb-src.sources, mirroring the deb entries
# of debian.sources or sources.list) when apt has none, for apt-get source.
set -euo pipefail

say() { printf 'windows/deps: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ -n "${KEEL_WIN_DEPS_PREFIX:-}" ]; then
    [ -d "$KEEL_WIN_DEPS_PREFIX/include" ] || die "KEEL_WIN_DEPS_PREFIX=$KEEL_WIN_DEPS_PREFIX has no include/"
    echo "$KEEL_WIN_DEPS_PREFIX"
    exit 0
fi

export HOME="${HOME:-$(getent passwd "$(id -un)" | cut -d: -f6)}"
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
toolchain="$src/cmake/toolchain-mingw-w64-x86_64.cmake"
triplet=x86_64-w64-mingw32
sysroot=/usr/$triplet
cache_root=${KEEL_WIN_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keel-win-deps}
jobs=${KEEL_WIN_DEPS_JOBS:-$(nproc 2>/dev/null || echo 2)}

command -v apt-cache >/dev/null 2>&1 ||
    die "not a Debian system: build libuv, mbedTLS and zlib for Windows yourself and set KEEL_WIN_DEPS_PREFIX"

# ---- the key ----------------------------------------------------------------

installed() {
    case "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" in
    *" installed") dpkg-query -W -f='${Version}' "$1" ;;
    esac
}
# The version of a library: the native -dev package's when it is installed
# (as `make test` installs it: then the Windows build uses the very version
# the native one does, and the check costs nothing), else apt's candidate
# (apt-cache takes seconds here, hence not the first choice).
version_of() {
    local v
    v=$(installed "$1")
    [ -n "$v" ] || v=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2; exit }')
    echo "$v"
}

uv_version=$(version_of libuv1-dev)
mbed_version=$(version_of libmbedtls-dev)
zlib_version=$(installed libz-mingw-w64-dev)
gcc_version=$(installed gcc-mingw-w64-x86-64-win32)
crt_version=$(installed mingw-w64-x86-64-dev)
[ -n "$uv_version" ] && [ "$uv_version" != "(none)" ] || die "apt knows no libuv1-dev (apt-get update?)"
[ -n "$mbed_version" ] && [ "$mbed_version" != "(none)" ] || die "apt knows no libmbedtls-dev"
[ -n "$zlib_version" ] || die "libz-mingw-w64-dev is not installed (run cmake/windows/packages.sh)"
[ -f "$sysroot/lib/libz.a" ] || die "$sysroot/lib/libz.a missing (libz-mingw-w64-dev)"
# Bump when the way the prefix is built changes (flags, files, layout).
recipe=1
key=$(printf 'uv-%s_mbedtls-%s_zlib-%s_gcc-%s_crt-%s_r%s' "$uv_version" "$mbed_version" \
    "$zlib_version" "$gcc_version" "$crt_version" "$recipe" | tr ':~/' '___')
prefix="$cache_root/$key"

if [ -f "$prefix/.complete" ]; then
    say "cached: $prefix"
    echo "$prefix"
    exit 0
fi

# ---- sources ----------------------------------------------------------------

have_deb_src() {
    grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! have_deb_src; then
    list=/etc/apt/sources.list.d/keel-deb-src.sources
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        say "adding deb-src entries ($list, from debian.sources)"
        sed 's/^Types:.*$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
            as_root tee "$list" >/dev/null
    elif [ -f /etc/apt/sources.list ]; then
        list=/etc/apt/sources.list.d/keel-deb-src.list
        say "adding deb-src entries ($list, from sources.list)"
        sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' /etc/apt/sources.list |
            as_root tee "$list" >/dev/null
    else
        die "no apt sources found to derive a deb-src entry from"
    fi
fi
if ! apt-cache showsrc libuv1 2>/dev/null | grep -q '^Package:'; then
    say "apt-get update (for the source lists)"
    as_root apt-get update -qq
fi

mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
stage="$work/prefix"
mkdir -p "$stage/include" "$stage/lib" "$stage/share/licenses"

start=$(date +%s)
# The source versions of those binaries (a binNMU's +bN is binary-only);
# if the archive has moved on, whatever it has now.
uv_src_version=$(echo "$uv_version" | sed 's/+b[0-9]*$//')
mbed_src_version=$(echo "$mbed_version" | sed 's/+b[0-9]*$//')
say "fetching sources of libuv1 $uv_src_version and mbedtls $mbed_src_version (apt-get source)"
if ! (cd "$work" && apt-get source -qq "libuv1=$uv_src_version" "mbedtls=$mbed_src_version" \
    >"$work/source.log" 2>&1); then
    say "those versions are gone from the archive: taking the current ones"
    (cd "$work" && apt-get source -qq libuv1 mbedtls >"$work/source.log" 2>&1) ||
        { cat "$work/source.log" >&2; die "apt-get source failed"; }
fi
uv_src=$(find "$work" -maxdepth 1 -type d -name 'libuv1-*' | head -n 1)
mbed_src=$(find "$work" -maxdepth 1 -type d -name 'mbedtls-*' | head -n 1)
[ -n "$uv_src" ] && [ -n "$mbed_src" ] || die "sources not unpacked (see $work/source.log)"

generator=""
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"

# ---- libuv: the static library only -------------------------------------------

say "building libuv ($(basename "$uv_src")) for Windows"
# shellcheck disable=SC2086
cmake -S "$uv_src" -B "$work/build-uv" $generator -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DLIBUV_BUILD_TESTS=OFF -DLIBUV_BUILD_BENCH=OFF \
    >"$work/uv.log" 2>&1 || { tail -n 40 "$work/uv.log" >&2; die "libuv: configure failed"; }
cmake --build "$work/build-uv" --target uv_a --parallel "$jobs" >>"$work/uv.log" 2>&1 ||
    { tail -n 40 "$work/uv.log" >&2; die "libuv: build failed"; }
cp -R "$uv_src/include/." "$stage/include/"
# Installed as libuv.a, with no CMake package nor .pc file: keel's FindLibUV
# then links it with the Windows libraries libuv needs (ws2_32, iphlpapi...).
cp "$work/build-uv/libuv_a.a" "$stage/lib/libuv.a"
cp "$uv_src/LICENSE" "$stage/share/licenses/libuv.LICENSE"

# ---- mbedTLS: default config, static libraries ---------------------------------

say "building mbedTLS ($(basename "$mbed_src")) for Windows"
# shellcheck disable=SC2086
cmake -S "$mbed_src" -B "$work/build-mbedtls" $generator -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$stage" \
    -DENABLE_PROGRAMS=OFF -DENABLE_TESTING=OFF -DMBEDTLS_FATAL_WARNINGS=OFF \
    -DUSE_SHARED_MBEDTLS_LIBRARY=OFF -DUSE_STATIC_MBEDTLS_LIBRARY=ON \
    >"$work/mbedtls.log" 2>&1 || { tail -n 40 "$work/mbedtls.log" >&2; die "mbedTLS: configure failed"; }
cmake --build "$work/build-mbedtls" --target install --parallel "$jobs" >>"$work/mbedtls.log" 2>&1 ||
    { tail -n 40 "$work/mbedtls.log" >&2; die "mbedTLS: build failed"; }
cp "$mbed_src/LICENSE" "$stage/share/licenses/mbedtls.LICENSE"

# ---- zlib: Debian's mingw build ------------------------------------------------

# Only the static archive: a module linking it needs no zlib1.dll beside it.
cp "$sysroot/lib/libz.a" "$stage/lib/libz.a"
cp "$sysroot/include/zlib.h" "$sysroot/include/zconf.h" "$stage/include/"

cat >"$stage/VERSIONS" <<EOF
libuv1 (source)      $(basename "$uv_src")   for libuv1-dev $uv_version
mbedtls (source)     $(basename "$mbed_src")   for libmbedtls-dev $mbed_version
libz-mingw-w64-dev   $zlib_version
compiler             $(x86_64-w64-mingw32-gcc-win32 --version 2>/dev/null | head -n 1) ($gcc_version)
mingw-w64 headers    $crt_version
built                $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - start ))s
EOF
touch "$stage/.complete"

# Publish: a rename, so a concurrent or interrupted run never sees half a
# prefix; then drop prefixes of other keys.
if ! mv "$stage" "$prefix" 2>/dev/null; then
    [ -f "$prefix/.complete" ] || die "cannot move the prefix into $prefix"
fi
for old in "$cache_root"/*; do
    [ -d "$old" ] && [ "$old" != "$prefix" ] && rm -rf "$old"
done
say "built in $(( $(date +%s) - start ))s: $prefix"
echo "$prefix"
