#!/usr/bin/env bash
# tests/bench/scope_counts.sh — what choosing a request's scope costs
# (docs/configuration.md): user-space instructions per HTTP/1.1 request to
# hello's GET / (callgrind, counters zeroed after a warm-up, wrk -c16 for
# SECS seconds), once with a config without scopes and once with three
# sites, a wildcard and two path scopes, the request's Host naming one;
# then with the headers, cors and access modules (docs/web.md): two added
# fields, a CORS scope the request does not use (no Origin: Vary only),
# one allow rule, written in the module sections and in the request's
# site.
# Where the rewrite module is built, twice more: the module loaded with
# nothing to do, and with two rules, one that does not match and one that
# does (a capture, the path set again, `break`).
#
#   KEEL_BUILD=build-rel tests/bench/scope_counts.sh
#
# SCENARIOS=full counts ISSUE 25's measure, the full middleware set in the
# request's site: host match among the sites above, one rewrite that
# matches, headers (two adds), auth_basic (cached) and ratelimit (key =
# user), against hello alone with the same request (docs/performance.md).
#
# SCENARIOS=auth instead counts hello behind auth_basic (a user whose
# verified password the cache holds) and ratelimit (a rate that is never
# reached) in the request's scope, against hello alone (docs/web.md).
#
# Settings: KEEL_BUILD [build] SECS [5] SCENARIOS [scopes]; KEEP_CALLGRIND=DIR
# keeps each count's callgrind output there (callgrind_annotate). Listens on an
# ephemeral port of 127.0.0.1; keel is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KEEL_BUILD=${KEEL_BUILD:-$ROOT/build}
[[ $KEEL_BUILD == /* ]] || KEEL_BUILD=$ROOT/$KEEL_BUILD
SECS=${SECS:-5}
TMP=$(mktemp -d /tmp/keel-scopes.XXXXXX)
SERVER=""
cleanup() {
    [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

SITES='[site example.com www.example.com]
[site *.example.org]
[site other.test]
[site example.com /api/]
[/static/]'

WEB='[headers]
add = X-A: one
add = X-B: two
[cors]
origins = https://app.example.com
[access]
rule = allow 127.0.0.1'

WEB_SITE='[site www.example.com]
headers.add = X-A: one
headers.add = X-B: two
cors.origins = https://app.example.com
access.rule = allow 127.0.0.1'

count() { # count LABEL EXTRA_CONFIG [MODULES] [WRK_ARGS...]
    local port out requests ir modules=${3:-http1 hello}
    local wrk_args=("${@:4}")
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$TMP/keel.conf" <<EOC
[keel]
listen = 127.0.0.1:$port http1
workers = 1
modules = $modules
module_path = $KEEL_BUILD/modules
log_level = warn
[http1]
keepalive_timeout = 5m
max_requests = 0
$2
EOC
    valgrind --tool=callgrind --dump-instr=no "--callgrind-out-file=$TMP/cg.%p" \
        "$KEEL_BUILD/keel" -c "$TMP/keel.conf" 2>"$TMP/keel.log" &
    SERVER=$!
    local _
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && break
        sleep 0.2
    done
    timeout 30 wrk -t1 -c16 -d2s -H 'Host: www.example.com' ${wrk_args[@]+"${wrk_args[@]}"} \
        "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
    callgrind_control -z "$SERVER" >/dev/null
    out=$(timeout $((SECS + 30)) wrk -t1 -c16 -d"${SECS}s" -H 'Host: www.example.com' \
        ${wrk_args[@]+"${wrk_args[@]}"} "http://127.0.0.1:$port/" 2>&1) || true
    callgrind_control -d "$SERVER" >/dev/null
    kill "$SERVER"
    wait "$SERVER" 2>/dev/null || true
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    ir=$(cat "$TMP"/cg.*.[0-9]* | awk '/^summary:/ {s += $2} END {print s + 0}')
    [[ -n ${KEEP_CALLGRIND:-} ]] && cp "$TMP"/cg.*.[0-9]* "$KEEP_CALLGRIND/" 2>/dev/null
    rm -f "$TMP"/cg.*
    SERVER=""
    echo "$1: $((ir / requests)) instr/req ($requests requests)"
}

# alice / alice-pw, bcrypt cost 5: verified once, then from the cache.
AUTH="[auth_basic]
file = staff $TMP/users
[ratelimit]
rate = 1000000
burst = 1000000
[site www.example.com]
auth_basic.users = staff
ratelimit.key = user"

FULL="[auth_basic]
file = staff $TMP/users
[ratelimit]
rate = 1000000
burst = 1000000
[site example.com]
[site *.example.org]
[site other.test]
[site www.example.com]
auth_basic.users = staff
ratelimit.key = user
headers.add = X-A: one
headers.add = X-B: two
rewrite.rewrite = ^/(.*)$ /\$1 break
[/api/]"

if [[ ${SCENARIOS:-scopes} == full ]]; then
    echo 'alice:$2b$05$.YK.aMug64QMnnB0wFWfyuWiA/HCv3o9hDYpbTX142MsCpmPFq7l6' >"$TMP/users"
    count "hello alone" "" "http1 hello" -H 'Authorization: Basic YWxpY2U6YWxpY2UtcHc='
    count "sites, rewrite, headers, auth_basic (cached), ratelimit (key = user)" "$FULL" \
        "http1 rewrite auth_basic ratelimit headers hello" \
        -H 'Authorization: Basic YWxpY2U6YWxpY2UtcHc='
elif [[ ${SCENARIOS:-scopes} == auth ]]; then
    echo 'alice:$2b$05$.YK.aMug64QMnnB0wFWfyuWiA/HCv3o9hDYpbTX142MsCpmPFq7l6' >"$TMP/users"
    # The same request, Authorization included, so that only the modules differ.
    count "hello in a site" "[site www.example.com]" "http1 hello" \
        -H 'Authorization: Basic YWxpY2U6YWxpY2UtcHc='
    count "hello in a site with ratelimit (key = client)" "[ratelimit]
rate = 1000000
burst = 1000000
[site www.example.com]" "http1 ratelimit hello" -H 'Authorization: Basic YWxpY2U6YWxpY2UtcHc=' 
    count "hello in a site with auth_basic (cached) and ratelimit (key = user)" "$AUTH" \
        "http1 auth_basic ratelimit hello" -H 'Authorization: Basic YWxpY2U6YWxpY2UtcHc='
else
    count "no scopes" ""
    count "3 sites, a wildcard, 2 path scopes" "$SITES"
    count "headers, cors, access loaded, no keys" "" "http1 access cors headers hello"
    count "headers (2 adds), cors, access (1 rule) in their sections" "$WEB" \
        "http1 access cors headers hello"
    count "the same in the request's site" "$WEB_SITE" "http1 access cors headers hello"
    if [[ -e $KEEL_BUILD/modules/mod_rewrite.so ]]; then
        count "rewrite loaded, no rule" "" "http1 rewrite hello"
        count "rewrite: a rule that misses, one that matches" '[rewrite]
rewrite = ^/nomatch/(.*)$ /x/$1
rewrite = ^/(.*)$ /$1 break' "http1 rewrite hello"
    fi
fi
