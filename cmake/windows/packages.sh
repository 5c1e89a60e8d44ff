#!/bin/sh
# cmake/windows/packages.sh — install the Debian packages the Windows
# cross-build and its Wine tests need. Checks each package with dpkg-query
# and calls apt-get only when one is missing (a second run costs well under
# a second). Uses sudo when not root.
#
#   The windows list of cmake/packages.txt says what each package is for.
#
# Environment: KEEL_WIN_PACKAGES_EXTRA="pkg ..." adds packages.
set -eu

keel_cmake_dir=$(dirname "$0")/..
. "$keel_cmake_dir/packages.sh"
PACKAGES="$(keel_packages windows) ${KEEL_WIN_PACKAGES_EXTRA:-}"

say() { printf 'windows/packages: %s\n' "$*"; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    say "not a Debian/Ubuntu system: install by hand a mingw-w64 cross compiler (x86_64-w64-mingw32-gcc),"
    say "zlib for mingw, Wine, CMake, Ninja and Python 3 (see docs/windows.md)"
    exit 0
fi

. "$keel_cmake_dir/apt-missing.sh"
# shellcheck disable=SC2086
apt_install_missing windows/packages $PACKAGES
