#!/bin/sh
# cmake/install-fuzz-deps.sh — what tests/fuzz/run.sh needs: clang and the
# runtime of its sanitizers and libFuzzer (Debian: libclang-rt-N-dev, N
# being clang's major version): the fuzz list of cmake/packages.txt, then
# that runtime. Debian/Ubuntu only; elsewhere it says what to install.
# Called by .ci/run before the fuzz step.
set -eu
say() { printf 'install-fuzz-deps: %s\n' "$*"; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    say "not Debian/Ubuntu: install clang with its libFuzzer and sanitizer runtimes"
    exit 0
fi
keel_cmake_dir=$(dirname "$0")
. "$keel_cmake_dir/packages.sh"
. "$keel_cmake_dir/apt-missing.sh"
# shellcheck disable=SC2046
apt_install_missing install-fuzz-deps $(keel_packages fuzz)
major=$(clang --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n1)
if [ -z "$major" ]; then
    say "cannot tell clang's version"
    exit 1
fi
apt_install_missing install-fuzz-deps "libclang-rt-$major-dev"
