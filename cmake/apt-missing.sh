# cmake/apt-missing.sh — sourced by the install scripts (POSIX sh).
#
# apt_install_missing NAME PACKAGE...
#   Checks each package with dpkg-query and runs apt-get (update + install,
#   no recommends) only for the missing ones, so a second run costs a
#   fraction of a second. Uses sudo when not root. Messages start with
#   "NAME: ". Returns 0 when everything is installed, 1 if it cannot be.
#   The caller makes sure dpkg-query and apt-get exist.

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
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $_sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $_sudo apt-get install -y -qq --no-install-recommends \
            $_missing >/dev/null || return 1
    printf '%s: installed:%s\n' "$_name" "$_missing"
}
