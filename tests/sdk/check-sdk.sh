#!/usr/bin/env bash
# The installed SDK, end to end, as a third party uses it:
#   1. cmake --install the build tree into a fresh prefix; its keel runs
#      the embedded default config from there;
#   2. build plugins/echo out of tree with find_package(keel) against that
#      prefix (at RelWithDebInfo when the project sets no build type), the
#      installed copy of it (share/doc/keel/examples) with
#      find_package(Keel), and again with nothing but
#      `pkg-config --cflags keel`;
#   3. build an embedding program with `pkg-config --cflags --libs libkeel`,
#      and statically with libkeel-static;
#   4. check that the installed keel finds and loads each module built so,
#      and that the module exports nothing but its descriptor.
# Usage: check-sdk.sh BUILD_DIR SOURCE_DIR   (ctest passes both)
set -euo pipefail

build=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/keel-sdk-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install"; }
for f in include/keel/keel.h include/keel/embed.h bin/keel; do
    [ -e "$prefix/$f" ] || fail "install lacks $f"
done

# 1b. the installed keel runs its embedded default config (no arguments):
# everything it needs was installed and is found from bin/ alone. -t loads
# the modules without binding 127.0.0.1:8080, which may be taken here.
out=$(cd "$work" && "$prefix/bin/keel" -t 2>&1) || fail "installed keel -t (the default config): $out"
case $out in *"configuration ok: (default)"*) ;; *) fail "installed keel -t said: $out" ;; esac
# ... and serves the welcome page from the installed docroot (on a port of
# its choosing rather than 8080, which may be taken here).
(cd "$work" && exec "$prefix/bin/keel" --set "keel.listen=127.0.0.1:0 http1" \
    --set keel.workers=1 2>"$work/default.log") &
kpid=$!
port=""
# Up to 30 s: on a loaded CI machine the start (loading every module of
# the default config from the prefix) has taken longer than 10.
for _ in $(seq 300); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/default.log" | head -n1)
    [ -n "$port" ] && break
    kill -0 "$kpid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    kill "$kpid" 2>/dev/null || true
    wait "$kpid" 2>/dev/null || true
    fail "installed keel did not say where it listens within 30 s: $(cat "$work/default.log")"
fi
page=$(curl -s --max-time 10 "http://127.0.0.1:$port/" || true)
kill "$kpid" 2>/dev/null || true
wait "$kpid" 2>/dev/null || true
case $page in *"keel is running"*) ;; *) fail "installed keel's default page: $(cat "$work/default.log")" ;; esac
pcdir=$(dirname "$(find "$prefix" -name keel.pc | head -n1)")
[ -n "$pcdir" ] || fail "install lacks keel.pc"

# 2a. find_package(keel), from a copy of the plugin's folder only.
cp -r "$src/plugins/echo" "$work/echo"
cmake -S "$work/echo" -B "$work/echo-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$work/cfg.log" 2>&1 ||
    { cat "$work/cfg.log"; fail "configure the out-of-tree echo"; }
cmake --build "$work/echo-build" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log"; fail "build the out-of-tree echo"; }
mod=$(find "$work/echo-build" -name 'mod_echo.*' -type f | head -n1)
[ -n "$mod" ] || fail "no mod_echo built"
# No build type given: the package's default, not CMake's empty one (-O0).
grep -q '^CMAKE_BUILD_TYPE:STRING=RelWithDebInfo$' "$work/echo-build/CMakeCache.txt" ||
    fail "the module's build type: $(grep '^CMAKE_BUILD_TYPE' "$work/echo-build/CMakeCache.txt")"

# 2c. The guide and the examples are installed; the installed echo builds
# with find_package(Keel), the capital spelling.
docdir=$(dirname "$(find "$prefix" -path '*/doc/keel/README.md' | head -n1)")
[ -f "$docdir/README.md" ] || fail "install lacks share/doc/keel/README.md"
for f in examples/echo/echo.c examples/echo/CMakeLists.txt examples/hello/hello.c; do
    [ -f "$docdir/$f" ] || fail "install lacks share/doc/keel/$f"
done
cp -r "$docdir/examples/echo" "$work/echo-capital"
sed -i.orig 's/find_package(keel /find_package(Keel /' "$work/echo-capital/CMakeLists.txt"
grep -q 'find_package(Keel ' "$work/echo-capital/CMakeLists.txt" || fail "no find_package(Keel)"
cmake -S "$work/echo-capital" -B "$work/echo-capital-build" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$work/cfg-capital.log" 2>&1 || { cat "$work/cfg-capital.log"; fail "find_package(Keel)"; }
cmake --build "$work/echo-capital-build" >"$work/build-capital.log" 2>&1 ||
    { cat "$work/build-capital.log"; fail "build the echo found as Keel"; }

# 2b. pkg-config only.
mkdir -p "$work/pc"
# shellcheck disable=SC2046
cc -std=c11 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags keel) \
    "$src/plugins/echo/echo.c" -o "$work/pc/mod_echo.so" || fail "pkg-config build of echo"

# The descriptor is the only symbol a module exports. Mach-O has no ELF
# dynamic symbol table: its exports are the global defined symbols, with
# the C compiler's leading underscore.
if [ "$(uname -s)" = Darwin ]; then
    exported=$(nm -gU "$work/pc/mod_echo.so" | awk '{print $3}' | sed 's/^_//' | grep -v '^_' || true)
else
    exported=$(nm -D --defined-only "$work/pc/mod_echo.so" | awk '{print $3}' | grep -v '^_' || true)
fi
[ "$exported" = "keel_module_echo" ] || fail "mod_echo exports: $exported"

# 3. an embedding program through libkeel.pc (static and shared both link).
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags libkeel) \
    "$src/examples/embed/embed_echo.c" "$src/plugins/echo/echo.c" -o "$work/embed" \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --libs libkeel) -Wl,-rpath,"$prefix/lib" ||
    fail "embedding program through pkg-config libkeel"
# libkeel-static links the archive: the program needs no libkeel.so.
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags libkeel-static) \
    "$src/examples/embed/embed_echo.c" "$src/plugins/echo/echo.c" -o "$work/embed-static" \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --libs libkeel-static) ||
    fail "embedding program through pkg-config libkeel-static"
if command -v readelf >/dev/null 2>&1; then
    if readelf -d "$work/embed-static" | grep -q 'NEEDED.*libkeel'; then
        fail "libkeel-static linked libkeel.so: $(readelf -d "$work/embed-static" | grep NEEDED)"
    fi
fi

# 4. the installed keel loads both modules.
printf '[keel]\nlisten = 127.0.0.1:0 echo\nmodules = echo\n' >"$work/echo.conf"
for dir in "$(dirname "$mod")" "$work/pc"; do
    out=$("$prefix/bin/keel" -t -c "$work/echo.conf" --set "keel.module_path=$dir" 2>&1) ||
        fail "keel -t with $dir: $out"
    case $out in *"configuration ok"*) ;; *) fail "keel -t said: $out" ;; esac
done
# The embedding program runs (test_embed.c checks its behaviour): given a
# bad address it must refuse to start, naming the listen value.
if out=$("$work/embed" not-an-address 1 2>&1); then fail "embed accepted a bad address"; fi
case $out in *"[keel] listen"*) ;; *) fail "embed said: $out" ;; esac
if out=$("$work/embed-static" not-an-address 1 2>&1); then fail "embed-static accepted a bad address"; fi
case $out in *"[keel] listen"*) ;; *) fail "embed-static said: $out" ;; esac

echo "sdk: install, find_package, pkg-config (module and embedding) all work"
