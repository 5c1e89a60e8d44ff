#!/bin/sh
# tests/package/run.sh without changing this machine: it runs in a
# throwaway copy of it. A private mount namespace lays an overlay over /
# whose writes go to a tmpfs (the package, the keel user, /etc/keel, the
# build directory), a network namespace of its own holds the service's port
# (only lo, so nothing clashes with servers outside), and a pid namespace
# ends every process with it. When it returns, nothing it did is left.
#
#   sudo tests/package/sandbox.sh              as the machine is (a container
#                                              with policy-rc.d denying starts:
#                                              the test starts keel itself)
#   sudo tests/package/sandbox.sh --as-host    as on a machine booted with SysV
#                                              init: no policy-rc.d, runlevel 2,
#                                              so postinst and prerm start and
#                                              stop keel through invoke-rc.d
#
# Needs root, unshare and overlayfs. Extra arguments go to run.sh.
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || {
    echo "sandbox.sh: must run as root (namespaces and mounts)" >&2
    exit 1
}
as_host=
if [ "${1:-}" = --as-host ]; then
    as_host=1
    shift
fi

if [ "${KEEL_SANDBOX_INSIDE:-}" != 1 ]; then
    # Everything below the re-exec happens in the new namespaces.
    exec env KEEL_SANDBOX_INSIDE=1 KEEL_SANDBOX_AS_HOST="$as_host" \
        timeout 1800 unshare --mount --net --pid --fork --propagation private "$0" "$@"
fi

base=$(mktemp -d /tmp/keel-sandbox-XXXXXX)
mount -t tmpfs -o size=4g tmpfs "$base"
mkdir "$base/upper" "$base/work" "$base/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
root=$base/root
mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
ip link set lo up

if [ -n "${KEEL_SANDBOX_AS_HOST:-}" ]; then
    rm -f "$root/usr/sbin/policy-rc.d" "$root/sbin/runlevel"
    printf '#!/bin/sh\necho N 2\n' >"$root/sbin/runlevel"
    chmod 755 "$root/sbin/runlevel"
fi

rc=0
chroot "$root" sh "$src/tests/package/run.sh" --yes "$@" || rc=$?
# The mounts die with the namespace; the empty folder under /tmp would not.
umount -R "$base" 2>/dev/null || umount -l "$base" || true
rmdir "$base" || true
exit "$rc"
