#!/usr/bin/env bash
# cmake/run-keel.sh KEEL [ARGS...] — what `make run` runs: KEEL with ARGS in
# the foreground, its log on the terminal as ever, and once it serves, the
# URLs to open:
#
#   keel is ready:
#     site       http://127.0.0.1:8080/
#     dashboard  http://127.0.0.1:8080/__stats/
#
# keel logs "listening on ADDRESS:PORT (PROTOCOL[, TRANSPORT])" for each
# listener once every worker runs; each HTTP one (http1, h2) is a site,
# https when its transport is tls. The dashboard is shown when the config
# (the embedded default, or -c FILE) loads stats, at its dashboard_path.
# The URLs come from the log on stderr: a config that logs to a file shows
# none. Ctrl-C stops keel as usual (the filter ignores it and reads keel's
# last lines); the exit status is keel's.
set -uo pipefail

keel=$1
shift

# The dashboard's path, or nothing when the config does not load stats.
dashboard_path() {
    local config="" prev=""
    for a in "$@"; do
        case "$prev" in -c | --config) config=$a ;; esac
        case "$a" in --config=*) config=${a#--config=} ;; esac
        prev=$a
    done
    if [[ -z $config ]]; then
        echo /__stats/ # the embedded default loads stats
        return
    fi
    [[ -r $config ]] || return 0
    grep -Eq '^[[:space:]]*modules[[:space:]]*=.*(^|[[:space:]=])stats([[:space:];]|$)' "$config" || return 0
    local path
    path=$(sed -n 's/^[[:space:]]*dashboard_path[[:space:]]*=[[:space:]]*\([^[:space:];]*\).*/\1/p' \
        "$config" | tail -n 1)
    echo "${path:-/__stats/}"
}

dashboard=$(dashboard_path "$@")

filter() {
    trap '' INT # keel handles Ctrl-C; keep reading its shutdown lines
    local line sites=() pending="" re='listening on ([^ ]+) \((h2|http1)(, ([a-z0-9_]+))?\)'
    while :; do
        if [[ -n $pending ]]; then
            # The listeners are logged together: a pause after the last
            # one means keel is serving.
            local status=0
            IFS= read -r -t 0.3 line || status=$?
            if ((status != 0)); then
                ((status > 128)) || break
                printf 'keel is ready:\n'
                for s in "${sites[@]}"; do
                    printf '  site       %s/\n' "$s"
                    [[ -z $dashboard ]] || printf '  dashboard  %s%s\n' "$s" "$dashboard"
                done
                printf '(Ctrl-C stops it)\n'
                pending=""
                sites=()
                continue
            fi
        elif ! IFS= read -r line; then
            break
        fi
        printf '%s\n' "$line"
        if [[ $line =~ $re ]]; then
            local scheme=http
            [[ ${BASH_REMATCH[4]} != tls ]] || scheme=https
            local addr=${BASH_REMATCH[1]}
            # A wildcard address is reachable on loopback.
            addr=${addr/#0.0.0.0:/127.0.0.1:}
            addr=${addr/#\[::\]:/[::1]:}
            sites+=("$scheme://$addr")
            pending=1
        fi
    done
}

"$keel" "$@" 2>&1 | filter
exit "${PIPESTATUS[0]}"
