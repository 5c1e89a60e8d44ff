#!/bin/sh
# cmake/windows/packages.sh — install the Debian packages the Windows
# cross-build and its Wine tests need. Checks each package with dpkg-query
# and calls apt-get only when one is missing (a second run costs well under
# a second). Uses sudo when not root.
#
#   gcc-mingw-w64-x86-64-win32  the cross compiler (win32 threads: keel uses
#                               libuv's threads, so no libwinpthread)
#   libz-mingw-w64-dev          zlib built for Windows (static libz.a used)
#   wine wine64                 runs the .exe tests
#   cmake ninja-build           the build
#   dpkg-dev                    `apt-get source` unpacks libuv1 and mbedtls
#   node-llhttp                 llhttp's generated C, compiled for Windows too
#   python3                     the black-box tests (standard library only)
#   ccache                      optional: speeds up rebuilds when present
#
# Environment: KEEL_WIN_PACKAGES_EXTRA="pkg ..." adds packages.
set -eu

PACKAGES="gcc-mingw-w64-x86-64-win32 libz-mingw-w64-dev wine wine64 cmake ninja-build \
dpkg-dev node-llhttp python3 ccache ${KEEL_WIN_PACKAGES_EXTRA:-}"

say() { printf 'windows/packages: %s\n' "$*"; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    say "not a Debian/Ubuntu system: install by hand a mingw-w64 cross compiler (x86_64-w64-mingw32-gcc),"
    say "zlib for mingw, Wine, CMake, Ninja and Python 3 (see docs/windows.md)"
    exit 0
fi

. "$(dirname "$0")/../apt-missing.sh"
# shellcheck disable=SC2086
apt_install_missing windows/packages $PACKAGES
