#!/bin/sh
# cmake/install-deps.sh — install what keel needs to build and test.
#
# Debian/Ubuntu: checks each package with dpkg and runs apt-get (update +
# install) only when something is missing, so a second run costs a fraction
# of a second. Uses sudo when not root. macOS and others: prints what to
# install. Called by `make deps` (and so by `make run`, `make test`, .ci/run).
#
# Environment: KEEL_DEPS_EXTRA="pkg ..." adds Debian packages to the list.
set -eu

# The second line is what the optional parts build with (pubsub_redis on
# hiredis, rewrite on PCRE2, auth_basic on libxcrypt's crypt_r, deflate's br
# and zstd codings on libbrotli and libzstd, the HTML docs on cmark-gfm); the
# rest is what tests drive keel with: mandoc to lint the man pages, Python's websockets and h2 clients, Prometheus's promtool (its
# package), headless Chromium for the pages, testssl.sh for the TLS
# listener, nghttp/h2load, nginx and HAProxy as peers and balancers, a
# Redis server, and wrk for the load under which tests/cluster reloads keel.
DEBIAN_PACKAGES="build-essential cmake ninja-build pkg-config libuv1-dev zlib1g-dev \
libmbedtls-dev libcriterion-dev node-llhttp curl openssl valgrind \
libhiredis-dev libpcre2-dev libcrypt-dev libbrotli-dev libzstd-dev \
libcmark-gfm-dev libcmark-gfm-extensions-dev mandoc \
python3-websockets python3-h2 prometheus chromium testssl.sh nghttp2-client nginx-light \
haproxy redis-server wrk ${KEEL_DEPS_EXTRA:-}"
# Node.js and npm run the browser tests (playwright-core, fetched by
# tests/browser/install.sh); a Node.js installed otherwise (NodeSource,
# nvm) is used as it is.
if ! command -v npm >/dev/null 2>&1; then
    DEBIAN_PACKAGES="$DEBIAN_PACKAGES nodejs npm"
fi
BREW_PACKAGES="cmake ninja pkg-config libuv zlib mbedtls criterion llhttp hiredis pcre2 brotli zstd cmark-gfm"
VCPKG_PACKAGES="libuv zlib mbedtls llhttp hiredis pcre2 brotli zstd"

say() { printf 'install-deps: %s\n' "$*"; }

if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    . "$(dirname "$0")/apt-missing.sh"
    # shellcheck disable=SC2086
    apt_install_missing install-deps $DEBIAN_PACKAGES
    exit $?
fi

case "$(uname -s 2>/dev/null || echo unknown)" in
Darwin)
    say "macOS: install the dependencies with Homebrew, then build:"
    say "  brew install $BREW_PACKAGES"
    ;;
MINGW* | MSYS* | CYGWIN*)
    say "Windows: install the dependencies with vcpkg and configure with its toolchain:"
    say "  vcpkg install $VCPKG_PACKAGES"
    say "  cmake -B build -DCMAKE_TOOLCHAIN_FILE=<vcpkg>/scripts/buildsystems/vcpkg.cmake -DKEEL_BUILD_TESTS=OFF"
    ;;
*)
    say "not a Debian/Ubuntu system: install a C11 compiler, CMake >= 3.16, pkg-config, and the"
    say "development files of libuv, zlib, mbedTLS, llhttp and Criterion (see docs/building.md)"
    ;;
esac
exit 0
