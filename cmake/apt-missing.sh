# shellcheck shell=sh
# cmake/apt-missing.sh — sourced by the install scripts (POSIX sh).
#
# apt_install_missing NAME PACKAGE...
#   Checks each package with dpkg-query and runs apt-get (update + install,
#   no recommends) only for the missing ones, so a second run costs a
#   fraction of a second. Uses sudo when not root. Messages start with
#   "NAME: ". Returns 0 when everything is installed, 1 if it cannot be.
#   The caller makes sure dpkg-query and apt-get exist.
#
# Daemons stay off. Debian starts and enables a daemon's service when its
# package is installed: nginx on port 80 of every interface, Prometheus on
# 0.0.0.0:9090, Redis, HAProxy. The tests start their own on loopback, so
# during the install a policy-rc.d answers 101 ("action forbidden", which
# invoke-rc.d and deb-systemd-invoke honour; none is written when the
# system has one: Debian's container images do), and afterwards every
# service unit the install newly enabled is disabled (and stopped, should a
# policy of the system's have let it start), so that none starts at boot
# either. Without systemd there is nothing to disable: a container has no
# boot, and the policy kept the init scripts from starting anything.

# Written while installing; the marker lets a later run remove one left
# behind by an install that was killed.
_apt_policy=/usr/sbin/policy-rc.d
_apt_policy_marker="# written by keel's cmake/apt-missing.sh while installing"

_apt_enabled_services() {
    command -v systemctl >/dev/null 2>&1 || return 0
    systemctl list-unit-files --type=service --state=enabled --no-legend 2>/dev/null |
        awk '{ print $1 }' | sort
}

apt_install_missing() {
    _name=$1
    shift
    _missing=""
    for _p in "$@"; do
        case "$(dpkg-query -W -f='${Status}' "$_p" 2>/dev/null || true)" in
        *" installed") ;;
        *) _missing="$_missing $_p" ;;
        esac
    done
    if [ -z "$_missing" ]; then
        printf '%s: all packages present\n' "$_name"
        return 0
    fi
    if [ "$(id -u)" -eq 0 ]; then
        _sudo=""
    elif command -v sudo >/dev/null 2>&1; then
        _sudo="sudo"
    else
        printf '%s: missing:%s — run as root: apt-get install --no-install-recommends%s\n' \
            "$_name" "$_missing" "$_missing" >&2
        return 1
    fi
    printf '%s: installing:%s\n' "$_name" "$_missing"

    if [ -f "$_apt_policy" ] && grep -qx "$_apt_policy_marker" "$_apt_policy"; then
        $_sudo rm -f "$_apt_policy"
    fi
    _own_policy=""
    if [ ! -e "$_apt_policy" ]; then
        printf '#!/bin/sh\n%s\nexit 101\n' "$_apt_policy_marker" | $_sudo tee "$_apt_policy" >/dev/null &&
            $_sudo chmod 755 "$_apt_policy" && _own_policy=1
    fi
    # Only where systemctl was there before: an install that brings systemd
    # itself (into a container) enables its own units, which are no test
    # peer's business, and a container does not boot anyway.
    _had_systemctl=""
    command -v systemctl >/dev/null 2>&1 && _had_systemctl=1
    _enabled_before=$(_apt_enabled_services)

    _rc=0
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $_sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $_sudo apt-get install -y -qq --no-install-recommends \
            $_missing >/dev/null || _rc=1

    [ -z "$_own_policy" ] || $_sudo rm -f "$_apt_policy"
    _newly=$([ -z "$_had_systemctl" ] || _apt_enabled_services | while read -r _unit; do
        case "
$_enabled_before
" in
        *"
$_unit
"*) ;;
        *) printf '%s ' "$_unit" ;;
        esac
    done)
    if [ -n "$_newly" ]; then
        # shellcheck disable=SC2086
        $_sudo systemctl disable --quiet $_newly 2>/dev/null || true
        if [ -d /run/systemd/system ]; then
            # shellcheck disable=SC2086
            $_sudo systemctl stop $_newly 2>/dev/null || true
        fi
        printf '%s: left disabled and stopped (the tests start their own on loopback): %s\n' \
            "$_name" "$_newly"
    fi
    [ "$_rc" = 0 ] || return 1
    printf '%s: installed:%s\n' "$_name" "$_missing"
}
