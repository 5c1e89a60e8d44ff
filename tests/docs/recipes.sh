#!/usr/bin/env bash
# tests/docs/recipes.sh KEEL MODULE_DIR — docs/recipes.md cannot rot:
#   1. every config in it (a block after "<!-- recipe: PATH -->") is the
#      text of PATH, and the table's keel column counts PATH's lines;
#   2. `keel -t` accepts every recipe (ports, the certificate and the
#      upstream replaced, on loopback);
#   3. the static site, the sites by Host, the HTTPS sites by SNI, the API
#      with auth and limits and the CORS API are started and asked, with curl, what the recipe
#      promises.
# A recipe whose modules are not built (rewrite without PCRE2, auth_basic
# without crypt_r) is skipped with the reason. Every server started here
# is stopped on exit.
set -euo pipefail
keel=$1 modules=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
doc=$root/docs/recipes.md
work=$(mktemp -d /tmp/keel-recipes.XXXXXX)
pids=()
cleanup() {
    for p in ${pids[@]+"${pids[@]}"}; do
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
status=0
fail() {
    echo "recipes: FAIL: $*" >&2
    status=1
}

# ---- 1. the doc's blocks are the files; the table counts their lines ----
python3 - "$doc" "$root" <<'EOF' || status=1
import re, sys
doc, root = sys.argv[1], sys.argv[2]
text = open(doc).read()
bad = 0
found = re.findall(r'<!-- recipe: (\S+) -->\n```ini\n(.*?)```\n', text, flags=re.S)
if not found:
    print("recipes: no recipe blocks found", file=sys.stderr)
    sys.exit(1)
for path, block in found:
    if open(f"{root}/{path}").read() != block:
        print(f"recipes: the block for {path} differs from the file", file=sys.stderr)
        bad = 1
    lines = sum(1 for l in block.split("\n")
                if l.strip() and not l.lstrip().startswith((";", "#")))
    name = path.split("examples/configs/")[-1] if "examples/configs/" in path \
        else "../" + "/".join(path.split("/")[-2:])
    row = re.search(r"^\|[^|\n]*\| `" + re.escape(name) + r"` \| (\d+) \|", text, flags=re.M)
    if row is None or int(row.group(1)) != lines:
        print(f"recipes: the table's keel count for {name} should be {lines}", file=sys.stderr)
        bad = 1
sys.exit(bad)
EOF

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
have() { for m in "$@"; do [ -e "$modules/mod_$m.so" ] || return 1; done; }

# A copy of the examples with this run's ports and certificate.
cp -r "$root/examples/configs" "$work/configs"
cp -r "$root/examples/chat" "$work/chat"
"$(dirname "$keel")/keel-cert" "$work/configs/cert.pem" "$work/configs/key.pem" >/dev/null
plain=$(free_port) secure=$(free_port) upstream=$(free_port)
for f in "$work"/configs/*.conf "$work"/chat/*.conf; do
    sed -i -e "s/:8080 /:$plain /; s/:8443 /:$secure /; s/https_port = 8443/https_port = $secure/" \
        -e "s/127.0.0.1:9000/127.0.0.1:$upstream/" -e "s|/etc/keel/|$work/configs/|g" \
        -e "s|/srv/www/|$work/www/|g" "$f"
done

# ---- 2. keel -t on each ----
check() { # check CONF MODULE...
    local conf=$1
    shift
    if ! have "$@"; then
        echo "recipes: SKIP $conf: a module of '$*' is not built"
        return 1
    fi
    if ! "$keel" -t -c "$conf" --set "keel.module_path=$modules" >"$work/t.log" 2>&1; then
        fail "keel -t $conf: $(cat "$work/t.log")"
        return 1
    fi
}
start() { # start CONF PORT
    "$keel" -c "$1" --set "keel.module_path=$modules" --set keel.workers=1 \
        >"$work/keel.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$2/" && return 0
        curl -sk -o /dev/null "https://127.0.0.1:$2/" && return 0
        sleep 0.1
    done
    fail "keel did not start on $1: $(cat "$work/keel.log")"
    return 1
}
stop_last() {
    local p=${pids[${#pids[@]} - 1]}
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    unset "pids[${#pids[@]}-1]"
}
header() { # header FILE NAME: the field's value (the last one)
    tr -d '\r' <"$1" | awk -v n="$(echo "$2" | tr 'A-Z' 'a-z')" \
        'BEGIN { FS = ": " } tolower($1) == n { v = substr($0, length($1) + 3) } END { print v }'
}

check "$work/configs/spa.conf" http1 deflate errors static || true
check "$work/chat/chat.conf" http1 deflate websocket static chat || true

# ---- 3. the static site ----
if check "$work/configs/static-site.conf" tls http1 h2 rewrite headers deflate static &&
    start "$work/configs/static-site.conf" "$plain"; then
    curl -s -o /dev/null -D "$work/h" "http://127.0.0.1:$plain/a?b=1"
    grep -q "^HTTP/1.1 308" "$work/h" || fail "static-site: HTTP not redirected: $(cat "$work/h")"
    [ "$(header "$work/h" Location)" = "https://127.0.0.1:$secure/a?b=1" ] ||
        fail "static-site: Location $(header "$work/h" Location)"
    curl -s --http2 --cacert "$work/configs/cert.pem" -o "$work/body" -D "$work/h" \
        "https://localhost:$secure/" --resolve "localhost:$secure:127.0.0.1"
    grep -q "^HTTP/2 200" "$work/h" || fail "static-site: not 200 over HTTP/2: $(cat "$work/h")"
    grep -q "It works" "$work/body" || fail "static-site: the page"
    [ "$(header "$work/h" Strict-Transport-Security)" = "max-age=31536000" ] ||
        fail "static-site: HSTS over TLS"
    [ "$(header "$work/h" X-Content-Type-Options)" = nosniff ] || fail "static-site: nosniff"
    curl -s --http2 --cacert "$work/configs/cert.pem" -o /dev/null -D "$work/h" \
        "https://localhost:$secure/missing" --resolve "localhost:$secure:127.0.0.1"
    grep -q "^HTTP/2 404" "$work/h" && [ "$(header "$work/h" X-Frame-Options)" = DENY ] ||
        fail "static-site: security headers on a 404 (always = on)"
    stop_last
fi

# ---- several sites on one listener ----
for d in default example.com files blog; do
    mkdir -p "$work/www/$d"
    echo "$d" >"$work/www/$d/index.html"
done
if check "$work/configs/sites.conf" http1 static && start "$work/configs/sites.conf" "$plain"; then
    for pair in example.com:example.com www.example.com:example.com blog.example.com:blog \
        other.test:default; do
        got=$(curl -s -H "Host: ${pair%%:*}" "http://127.0.0.1:$plain/")
        [ "$got" = "${pair##*:}" ] || fail "sites: Host ${pair%%:*} got '$got', not ${pair##*:}"
    done
    [ "$(curl -s -H 'Host: example.com' "http://127.0.0.1:$plain/downloads/")" != "" ] ||
        fail "sites: example.com's /downloads listing"
    stop_last
fi

# ---- several HTTPS sites, a certificate each ----
mkdir -p "$work/www/org"
echo org >"$work/www/org/index.html"
"$(dirname "$keel")/keel-cert" "$work/configs/example.com.pem" "$work/configs/example.com.key" \
    example.com www.example.com >/dev/null
"$(dirname "$keel")/keel-cert" "$work/configs/example.org.pem" "$work/configs/example.org.key" \
    '*.example.org' >/dev/null
if check "$work/configs/sites-https.conf" tls http1 h2 static &&
    start "$work/configs/sites-https.conf" "$secure"; then
    # NAME CERTIFICATE-THAT-MUST-VERIFY-IT BODY: curl checks the served
    # certificate against that file alone, over HTTP/2.
    for triple in example.com:example.com:example.com www.example.com:example.com:example.com \
        a.example.org:example.org:org localhost:cert:default; do
        IFS=: read -r name pem body <<<"$triple"
        got=$(curl -s --http2 --cacert "$work/configs/$pem.pem" -w ' %{http_version}' \
            --resolve "$name:$secure:127.0.0.1" "https://$name:$secure/") || true
        [ "$got" = "$body
 2" ] || fail "sites-https: $name got '$got', not '$body' over h2 with $pem.pem"
    done
    stop_last
fi

# An application for the API recipes: Python's file server on loopback.
mkdir -p "$work/app/api/admin"
echo items >"$work/app/items"
echo ok >"$work/app/health"
echo api >"$work/app/api/x"
echo admin >"$work/app/api/admin/x"
(cd "$work/app" && exec python3 -m http.server --bind 127.0.0.1 "$upstream" >/dev/null 2>&1) &
pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$upstream/" && break; sleep 0.1; done

# ---- the API with Basic auth and rate limits ----
if check "$work/configs/api-auth-ratelimit.conf" http1 auth_basic ratelimit proxy &&
    start "$work/configs/api-auth-ratelimit.conf" "$plain"; then
    code=$(curl -s -o /dev/null -w '%{http_code}' -D "$work/h" "http://127.0.0.1:$plain/items")
    [ "$code" = 401 ] && header "$work/h" WWW-Authenticate | grep -q 'realm="Example API"' ||
        fail "api-auth: no user must be 401 with the realm (got $code)"
    [ "$(curl -s -u demo:demo-password "http://127.0.0.1:$plain/items")" = items ] ||
        fail "api-auth: the demo user reaches the application"
    [ "$(curl -s -u demo:wrong -o /dev/null -w '%{http_code}' "http://127.0.0.1:$plain/items")" = 401 ] ||
        fail "api-auth: a wrong password"
    [ "$(curl -s "http://127.0.0.1:$plain/health")" = ok ] || fail "api-auth: /health is open"
    stop_last
fi

# ---- the CORS API ----
if check "$work/configs/api-cors.conf" access cors headers http1 proxy &&
    start "$work/configs/api-cors.conf" "$plain"; then
    code=$(curl -s -o /dev/null -w '%{http_code}' -D "$work/h" -X OPTIONS \
        -H 'Origin: https://app.example.com' -H 'Access-Control-Request-Method: PUT' \
        "http://127.0.0.1:$plain/api/x")
    [ "$code" = 204 ] && [ "$(header "$work/h" Access-Control-Allow-Origin)" = https://app.example.com ] ||
        fail "api-cors: the preflight (got $code)"
    [ "$(curl -s -H 'Origin: https://pr-7.preview.example.com' -D "$work/h" \
        "http://127.0.0.1:$plain/api/x")" = api ] &&
        [ "$(header "$work/h" Access-Control-Allow-Origin)" = https://pr-7.preview.example.com ] ||
        fail "api-cors: an actual request from a preview origin"
    [ "$(curl -s "http://127.0.0.1:$plain/api/admin/x")" = admin ] ||
        fail "api-cors: the admin path from this host"
    stop_last
fi

exit $status
