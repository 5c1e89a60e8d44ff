#!/bin/sh
# cmake/install-deps.sh [--print] [WHAT...] — install what keel needs, from
# the lists in cmake/packages.txt.
#
#   run    the build and run lists: build keel and its modules, run them
#          (`make run`)
#   test   run's, plus the test and browser lists: the whole suite
#          (`make test`, .ci/run). The default.
#   NAME   any other list of cmake/packages.txt on its own (format, fuzz,
#          bench, windows)
#   --print  print the Debian packages, one line, and install nothing
#
# Debian/Ubuntu: checks each package with dpkg and runs apt-get (update +
# install, no recommends) only when something is missing, so a second run
# costs a fraction of a second; daemons among the test peers are neither
# started nor enabled (cmake/apt-missing.sh). Uses sudo when not root.
# macOS and Windows: prints the Homebrew or vcpkg command.
#
# Environment: KEEL_DEPS_EXTRA="pkg ..." adds Debian packages.
set -eu

keel_cmake_dir=$(dirname "$0")
. "$keel_cmake_dir/packages.sh"

say() { printf 'install-deps: %s\n' "$*"; }

print=""
lists=""
tests=""
for arg in "$@"; do
    case "$arg" in
    --print) print=1 ;;
    run) lists="$lists build run" ;;
    test)
        lists="$lists build run test browser"
        tests=1
        ;;
    -*)
        say "unknown option $arg (usage: $0 [--print] [run|test|LIST...])" >&2
        exit 2
        ;;
    *) lists="$lists $arg" ;;
    esac
done
if [ -z "$lists" ]; then
    lists="build run test browser"
    tests=1
fi

# shellcheck disable=SC2086
packages=$(keel_packages $lists)
# Node.js and npm run the browser tests; one installed otherwise (NodeSource,
# nvm) is used as it is.
if command -v npm >/dev/null 2>&1; then
    # shellcheck disable=SC2086  # one word per package
    packages=$(printf '%s\n' $packages | grep -vx 'nodejs\|npm' | tr '\n' ' ')
fi
packages="$packages ${KEEL_DEPS_EXTRA:-}"

if [ -n "$print" ]; then
    # shellcheck disable=SC2086
    echo $packages
    exit 0
fi

if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    . "$keel_cmake_dir/apt-missing.sh"
    # shellcheck disable=SC2086
    apt_install_missing install-deps $packages
    exit $?
fi

case "$(uname -s 2>/dev/null || echo unknown)" in
Darwin)
    say "macOS: install the dependencies with Homebrew, then build:"
    say "  brew install $(keel_packages brew-build)"
    [ -z "$tests" ] || say "  brew install $(keel_packages brew-test)    # the tests"
    ;;
MINGW* | MSYS* | CYGWIN*)
    say "Windows: install the dependencies with vcpkg and configure with its toolchain:"
    say "  vcpkg install $(keel_packages vcpkg-build)"
    say "  cmake -B build -DCMAKE_TOOLCHAIN_FILE=<vcpkg>/scripts/buildsystems/vcpkg.cmake -DKEEL_BUILD_TESTS=OFF"
    ;;
*)
    say "not a Debian/Ubuntu system: install a C11 compiler, CMake >= 3.16, pkg-config, and the"
    say "development files of libuv, zlib, mbedTLS and llhttp, and Criterion for the tests"
    say "(cmake/packages.txt has the Debian names; docs/building.md)"
    ;;
esac
exit 0
