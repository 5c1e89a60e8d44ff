#!/bin/sh
# The Debian packages, end to end, on the machine itself (issues 12, 26):
#   1. build them with cpack in a fresh Release build directory: keel,
#      keel-dev, keel-pubsub-redis and keel-tls-openssl; keel depends on
#      neither libhiredis nor libssl;
#      lintian (installed with the package list of cmake/packages.txt)
#      reports nothing but what cmake/debian/lintian-overrides explains;
#   2. install the three with their dependencies; postinst starts the
#      service (where policy-rc.d and the runlevel let invoke-rc.d; else
#      the test);
#   3. the service answers, as the keel user, under whatever init the
#      machine has (systemd as PID 1, else /etc/init.d/keel);
#   4. each package holds its files (keel: binary, modules, units, config,
#      logrotate, /usr/share/doc/keel; keel-dev: headers, pkg-config and
#      CMake files; keel-pubsub-redis: its module); a module built against
#      the installed SDK (pkg-config and find_package) loads into the
#      installed keel, and so do pubsub_redis and examples/configs/hello.conf
#      (the systemd example's config);
#   5. a reload starts a new process that answers, and the old one leaves;
#   6. dpkg -r stops everything and closes the port; dpkg -P removes
#      /etc/keel and the logs.
# It installs and removes a package and a system user: it refuses to run
# unless root and unless CI is set or --yes is given. The service listens on
# KEEL_PKG_TEST_PORT (18080: below the ephemeral range, so not taken by
# other tests), set in /etc/keel/keel.conf before dpkg sees the package
# (dpkg keeps it, --force-confold); the rest is the shipped config.
# Every wait is bounded.
#
# Usage: tests/package/run.sh [--yes]   (from anywhere; .ci/run runs it)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${KEEL_PKG_BUILD_DIR:-$src/build-package}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
port=${KEEL_PKG_TEST_PORT:-18080}
conf=/etc/keel/keel.conf
pidfile=/run/keel/keel.pid

say() { printf '==> package: %s\n' "$*"; }
fail() {
    printf 'FAIL: package: %s\n' "$*" >&2
    exit 1
}

yes=
for arg in "$@"; do
    case "$arg" in
    --yes) yes=1 ;;
    *) fail "unknown argument $arg (usage: $0 [--yes])" ;;
    esac
done
[ "$(id -u)" = 0 ] || fail "must run as root: it installs and removes the keel package"
[ -n "$yes" ] || [ -n "${CI:-}" ] ||
    fail "this installs and removes the keel package and a keel user on this machine; run with --yes (or CI set)"
packages="keel-pubsub-redis keel-dev keel" # in removal order
for p in $packages; do
    if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok'; then
        fail "$p is installed already; remove it first (dpkg -P $packages)"
    fi
done
[ ! -e /etc/keel ] || fail "/etc/keel exists (left by an earlier install?); remove it first"

# A bounded wait: wait_for SECONDS DESCRIPTION COMMAND...
wait_for() {
    secs=$1
    what=$2
    shift 2
    n=0
    while [ "$n" -lt $((secs * 10)) ]; do
        if "$@"; then
            return 0
        fi
        sleep 0.1
        n=$((n + 1))
    done
    fail "$what: not within ${secs}s"
}

answers() { curl -fs --max-time 2 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; }
port_closed() { ! curl -sS --max-time 2 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; }
# pids of the installed keel (after dpkg -r its exe reads "... (deleted)").
keel_pids() {
    for exe in /proc/[0-9]*/exe; do
        target=$(readlink "$exe" 2>/dev/null) || continue
        case "$target" in
        /usr/bin/keel | "/usr/bin/keel (deleted)")
            pid=${exe#/proc/}
            echo "${pid%/exe}"
            ;;
        esac
    done
}
none_running() { [ -z "$(keel_pids)" ]; }
serving_pid() { cat "$pidfile" 2>/dev/null; }
pid_is_not() { p=$(serving_pid) && [ -n "$p" ] && [ "$p" != "$1" ] && [ -d "/proc/$p" ]; }
gone() { [ ! -d "/proc/$1" ]; }

if [ -d /run/systemd/system ]; then
    init=systemd
    start() { systemctl start keel; }
    reload() { systemctl reload keel; }
else
    init=sysv
    start() { /etc/init.d/keel start; }
    reload() { /etc/init.d/keel reload; }
fi

user_existed=
getent passwd keel >/dev/null && user_existed=1
work=$(mktemp -d "${TMPDIR:-/tmp}/keel-package-XXXXXX")
installed=
cleanup() {
    status=$?
    if [ -n "$installed" ]; then
        [ "$status" = 0 ] || {
            echo "--- apt-get install" >&2
            tail -n 20 "$work/install.log" >&2 || true
            echo "--- keel log" >&2
            if [ "$init" = systemd ]; then
                journalctl -u keel --no-pager -n 50 >&2 || true
            else
                tail -n 50 /var/log/keel/keel.log >&2 || true
            fi
        }
        # shellcheck disable=SC2086
        dpkg -P $packages >/dev/null 2>&1 || true
    fi
    rm -rf /etc/keel
    if [ -z "$user_existed" ] && getent passwd keel >/dev/null; then
        deluser --system keel >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

port_closed || fail "127.0.0.1:$port is taken; set KEEL_PKG_TEST_PORT"

# ---- 1. build ------------------------------------------------------------
sh "$src/cmake/install-deps.sh" package
say "building the packages in $build"
# Warnings are errors in CI here too: Release's -O3 inlining finds what
# the test builds do not (it found GCC 12 -Wuse-after-free reports through
# the proxy's reference counts, since restructured).
werror=OFF
[ -n "${CI:-}" ] && werror=ON
gen=
command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
rm -rf "$build"
# shellcheck disable=SC2086
cmake -S "$src" -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DKEEL_BUILD_TESTS=OFF -DKEEL_BUILD_EXAMPLES=OFF -DKEEL_WERROR=$werror >"$work/configure.log" 2>&1 ||
    {
        cat "$work/configure.log"
        fail "configure"
    }
cmake --build "$build" -j2 >"$work/build.log" 2>&1 || {
    tail -n 50 "$work/build.log"
    fail "build"
}
(cd "$build" && cpack >"$work/cpack.log" 2>&1) || {
    cat "$work/cpack.log"
    fail "cpack"
}
deb=$(ls "$build"/keel_*.deb)
dev_deb=$(ls "$build"/keel-dev_*.deb)
redis_deb=$(ls "$build"/keel-pubsub-redis_*.deb)
tls_deb=$(ls "$build"/keel-tls-openssl_*.deb)
say "built $(basename "$deb") $(basename "$dev_deb") $(basename "$redis_deb") $(basename "$tls_deb")"
depends=$(dpkg-deb -f "$deb" Depends)
case "$depends" in *hiredis*) fail "keel depends on hiredis: $depends" ;; esac
dpkg-deb -f "$redis_deb" Depends | grep -q libhiredis || fail "keel-pubsub-redis does not depend on libhiredis"
dpkg-deb -c "$deb" | grep -q 'mod_pubsub_redis' && fail "keel holds mod_pubsub_redis"
# The OpenSSL backend: libssl only in keel-tls-openssl.
case "$depends" in *libssl*) fail "keel depends on libssl: $depends" ;; esac
dpkg-deb -f "$tls_deb" Depends | grep -q libssl || fail "keel-tls-openssl does not depend on libssl"
dpkg-deb -c "$deb" | grep -q 'mod_tls_openssl' && fail "keel holds mod_tls_openssl"
dpkg-deb -c "$deb" | grep -q '/usr/include/' && fail "keel holds headers (keel-dev's)"
# lintian: what it reports is fixed, or kept and explained in
# cmake/debian/lintian-overrides (each package carries its overrides).
lintian --fail-on error,warning "$deb" "$dev_deb" "$redis_deb" "$tls_deb" >"$work/lintian.log" 2>&1 || {
    cat "$work/lintian.log"
    fail "lintian"
}
say "lintian: no error or warning"

# ---- 2. install ----------------------------------------------------------
# The shipped config with the test's port, in place before dpkg: dpkg keeps
# an existing conffile with --force-confold (and leaves its own beside it as
# keel.conf.dpkg-dist, which the purge must clean up too).
dpkg-deb -x "$deb" "$work/root"
mkdir -p /etc/keel
sed "s/127\\.0\\.0\\.1:8080/127.0.0.1:$port/" "$work/root/etc/keel/keel.conf" >"$conf"
grep -q "^listen = 127.0.0.1:$port http1" "$conf" || fail "the shipped config has no 127.0.0.1:8080 listen line"
say "installing (init: $init, port $port)"
installed=1
DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
    -o Dpkg::Options::=--force-confold "$deb" "$dev_deb" "$redis_deb" >"$work/install.log" 2>&1 || {
    cat "$work/install.log"
    fail "apt-get install $deb $dev_deb $redis_deb"
}

# ---- 3. the service answers ---------------------------------------------
# postinst starts keel through invoke-rc.d / deb-systemd-invoke, which ask
# policy-rc.d first: container images deny every start there (Debian's
# Docker images do), and then the test starts it as an admin would. 104:
# allowed; 105: policy undecided, which invoke-rc.d takes as allowed.
policy=0
invoke-rc.d --query keel start >/dev/null 2>&1 || policy=$?
case "$policy" in
104 | 105) by=postinst ;;
*)
    by="the test ($init; policy-rc.d denies starts here)"
    start >"$work/start.log" 2>&1 || {
        cat "$work/start.log"
        fail "starting keel through $init"
    }
    ;;
esac
wait_for 20 "the service answering on 127.0.0.1:$port (started by $by)" answers
body=$(curl -fsS --max-time 2 "http://127.0.0.1:$port/")
case "$body" in *keel*) ;; *) fail "GET / is not the welcome page" ;; esac
curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$port/__stats/" || fail "no stats dashboard"
wait_for 10 "the pid file $pidfile" test -s "$pidfile"
pid1=$(serving_pid)
[ "$(stat -c %U "/proc/$pid1")" = keel ] || fail "keel runs as $(stat -c %U "/proc/$pid1"), not keel"
if [ "$init" = systemd ]; then
    systemctl is-active --quiet keel || fail "systemctl: keel is not active"
    systemctl is-enabled --quiet keel || fail "systemctl: keel is not enabled"
else
    /etc/init.d/keel status >/dev/null || fail "/etc/init.d/keel status"
fi
say "serving as pid $pid1, started by $by"

# ---- 4. contents and the SDK ---------------------------------------------
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
lib=/usr/lib/$multiarch
# has PACKAGE FILE...: dpkg -L PACKAGE lists each FILE and it is on disk.
has() {
    pkg=$1
    shift
    dpkg -L "$pkg" >"$work/files"
    for f in "$@"; do
        grep -qx "$f" "$work/files" || fail "dpkg -L $pkg lacks $f"
        [ -e "$f" ] || fail "$f is listed but not on disk"
    done
}
has keel /usr/bin/keel /usr/bin/keel-cert \
    "$lib/keel/modules/mod_http1.so" "$lib/keel/modules/mod_static.so" \
    "$lib/keel/modules/mod_stats.so" "$lib/keel/modules/mod_tls.so" \
    "$lib/keel/modules/mod_deflate.so" "$lib/keel/modules/mod_websocket.so" \
    "$lib/keel/modules/mod_proxy.so" "$lib/keel/modules/mod_accesslog.so" \
    "$lib/keel/modules/mod_hello.so" "$lib/keel/modules/mod_echo.so" \
    /usr/share/keel/www/index.html \
    /etc/keel/keel.conf /etc/init.d/keel /etc/logrotate.d/keel \
    /lib/systemd/system/keel.service /lib/systemd/system/keel.socket \
    /usr/share/doc/keel/copyright /usr/share/doc/keel/changelog.Debian.gz \
    /usr/share/doc/keel/README.md
grep -q "^$lib/libkeel\.so\.[0-9]" "$work/files" || fail "keel lacks $lib/libkeel.so.<version>"
has keel-dev /usr/include/keel/keel.h /usr/include/keel/embed.h \
    "$lib/pkgconfig/keel.pc" "$lib/pkgconfig/libkeel.pc" \
    "$lib/cmake/keel/keelConfig.cmake" "$lib/cmake/keel/KeelModule.cmake" \
    "$lib/libkeel.so" "$lib/libkeel.a" \
    /usr/share/doc/keel-dev/copyright /usr/share/doc/keel-dev/changelog.Debian.gz
has keel-pubsub-redis "$lib/keel/modules/mod_pubsub_redis.so" \
    /usr/share/doc/keel-pubsub-redis/copyright /usr/share/doc/keel-pubsub-redis/changelog.Debian.gz

# The modules of other packages load into the installed keel: pubsub_redis,
# and hello through the config examples/systemd/README.md starts with.
printf '[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 websocket pubsub_redis\n' >"$work/redis.conf"
out=$(/usr/bin/keel -t -c "$work/redis.conf" 2>&1) || fail "keel -t with pubsub_redis: $out"
out=$(/usr/bin/keel -t -c "$src/examples/configs/hello.conf" 2>&1) ||
    fail "keel -t -c examples/configs/hello.conf (the systemd example's config): $out"

mkdir -p "$work/sdk/pc" "$work/sdk/cm"
cp "$here/mod_pkgcheck.c" "$work/sdk/"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden $(pkg-config --cflags keel) \
    -o "$work/sdk/pc/mod_pkgcheck.so" "$work/sdk/mod_pkgcheck.c" ||
    fail "building a module with pkg-config --cflags keel"
cat >"$work/sdk/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(pkgcheck C)
find_package(keel 0.1 REQUIRED)
keel_add_module(pkgcheck SOURCES mod_pkgcheck.c)
EOF
(cmake -S "$work/sdk" -B "$work/sdk/build" && cmake --build "$work/sdk/build") >"$work/sdk.log" 2>&1 || {
    cat "$work/sdk.log"
    fail "building a module with find_package(keel)"
}
cp "$work/sdk/build/modules/mod_pkgcheck.so" "$work/sdk/cm/"
for dir in pc cm; do
    printf '[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1 pkgcheck\nmodule_path = %s\n' \
        "$work/sdk/$dir" >"$work/sdk/$dir.conf"
    out=$(/usr/bin/keel -t -c "$work/sdk/$dir.conf" 2>&1) || fail "keel -t with the $dir module: $out"
    case "$out" in *"loaded (built against ABI"*) ;; *) fail "the $dir module did not load: $out" ;; esac
done
say "contents and SDK ok"

# ---- 5. reload -------------------------------------------------------------
reload || fail "reload"
wait_for 20 "a new serving process after the reload" pid_is_not "$pid1"
pid2=$(serving_pid)
answers || fail "no answer after the reload"
wait_for 20 "the old process $pid1 leaving after the reload" gone "$pid1"
[ "$init" != systemd ] || systemctl is-active --quiet keel || fail "systemctl: not active after reload"
say "reloaded: pid $pid1 -> $pid2"

# ---- 6. remove, purge ------------------------------------------------------
# shellcheck disable=SC2086
dpkg -r $packages >"$work/remove.log" 2>&1 || {
    cat "$work/remove.log"
    fail "dpkg -r $packages"
}
wait_for 40 "every keel process gone after dpkg -r" none_running
wait_for 10 "port $port closed after dpkg -r" port_closed
[ -e "$conf" ] || fail "dpkg -r removed the conffile $conf (only purge should)"
# shellcheck disable=SC2086
dpkg -P $packages >"$work/purge.log" 2>&1 || {
    cat "$work/purge.log"
    fail "dpkg -P $packages"
}
installed=
[ ! -e /etc/keel ] || fail "/etc/keel is left after dpkg -P: $(ls -A /etc/keel)"
[ ! -e /var/log/keel ] || fail "/var/log/keel is left after dpkg -P"
[ ! -e /etc/init.d/keel ] || fail "/etc/init.d/keel is left after dpkg -P"
[ ! -e /etc/logrotate.d/keel ] || fail "/etc/logrotate.d/keel is left after dpkg -P"
[ ! -e /usr/share/doc/keel ] || fail "/usr/share/doc/keel is left after dpkg -P"
[ ! -e /usr/include/keel ] || fail "/usr/include/keel is left after dpkg -P"
say "removed and purged: nothing running, port closed, /etc/keel gone"
say "ok"
