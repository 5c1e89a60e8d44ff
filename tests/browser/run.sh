#!/usr/bin/env bash
# ctest's browser tests: starts keel, runs TEST.mjs in headless Chromium
# against it, which saves its screenshots in OUT_DIR.
#   run.sh TEST KEEL_BIN MODULE_DIR OUT_DIR
#   dashboard  stats.browser: http1 + hello + stats, the stats dashboard
#   dashboard-layout  stats.browser_layout: the same keel; the dashboard's
#              history across a reload, and its layout at desktop and
#              mobile widths in light and dark
#   chat       chat.browser: examples/chat/chat.conf on two workers, two pages
#   h2         h2.browser: a page with 80 assets over HTTPS, ALPN h2 (tls, h2,
#              static, stats; the certificate from keel-cert beside KEEL_BIN)
#   cors       cors.browser: one keel, three listeners (origins A, B, C); a
#              page of A and one of C fetch() B's API with credentials
#   spa        spa.browser: examples/configs/spa.conf, a single-page app
#   h2ws       h2.browser_websocket: a wss:// WebSocket over the page's HTTP/2
#              connection (RFC 8441; tls, h2, websocket, hello, static, stats)
#   web        web.browser: redirects (HTTP to HTTPS, 301 and 308 with a
#              POST), the Basic authentication challenge, HSTS, a CORS
#              preflight across host names (web.mjs)
# Exits 77 (ctest: skipped) only when node, npm or chromium is missing,
# saying which Debian package to install.
set -euo pipefail
test=$1 keel=$2 modules=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)

for tool in node npm; do
    command -v $tool >/dev/null || { echo "SKIP: $tool not found (Debian: apt-get install nodejs npm)"; exit 77; }
done
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$chromium" ] || { echo "SKIP: chromium not found (Debian: apt-get install chromium)"; exit 77; }
export CHROMIUM=$chromium

npm_dir=$(bash "$here/install.sh")
mkdir -p "$out"
work=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# Starts keel with these arguments, its log in $work/keel.log; sets $pid
# and $port (from keel's "listening on" line: the config listens on port 0).
start_keel() {
    # The log exists before keel starts: the background job opens it in its
    # own time, and sed on a missing file would end this script (set -e).
    : >"$work/keel.log"
    "$keel" "$@" 2>>"$work/keel.log" &
    pid=$!
    port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/keel.log" | head -n1)
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "FAIL: keel did not start"; cat "$work/keel.log"; exit 1; }
}

case $test in
dashboard | dashboard-layout)
    cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:0 http1
workers = 2
modules = http1 hello stats
module_path = $modules
CONF
    start_keel -c "$work/keel.conf"
    limit=120
    ;;
chat)
    # As examples/chat/README.md runs it (mod_chat is found in keel's own
    # module directory), on a free port and two workers.
    start_keel -c "$here/../../examples/chat/chat.conf" \
        --set "keel.listen=127.0.0.1:0 http1" --set keel.workers=2
    limit=60
    ;;
h2)
    [ -e "$modules/mod_tls.so" ] && [ -e "$modules/mod_h2.so" ] ||
        { echo "SKIP: mod_tls or mod_h2 not built"; exit 77; }
    "$(dirname "$keel")/keel-cert" "$work/cert.pem" "$work/key.pem" >/dev/null
    mkdir -p "$work/www"
    page="<!doctype html><html><head><title>h2</title>"
    for i in $(seq 40); do
        printf 'window.__scripts = (window.__scripts || 0) + 1;\n' >"$work/www/s$i.js"
        printf '.c%d { color: #%06x }\n' "$i" "$i" >"$work/www/c$i.css"
        page+="<link rel=stylesheet href=/c$i.css><script src=/s$i.js></script>"
    done
    page+="</head><body><p>keel over HTTP/2</p></body></html>"
    : >"$work/www/favicon.ico" # asked for by Chromium: no 404 in the console
    printf '%s\n' "$page" >"$work/www/index.html"
    cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:0 http1 tls
workers = 1
modules = tls http1 h2 static stats
module_path = $modules
[tls]
cert = $work/cert.pem $work/key.pem
[static]
mount = / $work/www
CONF
    start_keel -c "$work/keel.conf"
    scheme=https
    limit=60
    ;;
cors)
    # Three origins on one keel: A and C serve the same page, B the API,
    # which lets A's pages in (cors in [listener b]) and not C's. The ports
    # are chosen here: the config names A's origin.
    free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
    port_a=$(free_port) port_b=$(free_port) port_c=$(free_port)
    mkdir -p "$work/www"
    printf '<!doctype html><html><head><title>cors</title></head><body><p>origin page</p></body></html>\n' \
        >"$work/www/index.html"
    : >"$work/www/favicon.ico"
    cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:$port_a http1 name=a
listen = 127.0.0.1:$port_b http1 name=b
listen = 127.0.0.1:$port_c http1 name=c
workers = 1
modules = http1 cors static hello
module_path = $modules
[static]
mount = /app/ $work/www
[listener b]
cors.origins = http://127.0.0.1:$port_a
cors.credentials = on
cors.methods = GET POST PUT
cors.headers = Content-Type X-Token
cors.max_age = 0
CONF
    start_keel -c "$work/keel.conf"
    export CORS_API="http://127.0.0.1:$port_b" CORS_OTHER="http://127.0.0.1:$port_c"
    port=$port_a
    limit=120
    ;;
spa)
    # As examples/configs/spa.conf says to run it, on a free port.
    start_keel -c "$here/../../examples/configs/spa.conf" \
        --set "keel.listen=127.0.0.1:0 http1" --set "keel.module_path=$modules" \
        --set keel.workers=1
    limit=60
    ;;
h2ws)
    # RFC 8441: hello's /ws echo over the page's HTTP/2 connection.
    [ -e "$modules/mod_tls.so" ] && [ -e "$modules/mod_h2.so" ] ||
        { echo "SKIP: mod_tls or mod_h2 not built"; exit 77; }
    "$(dirname "$keel")/keel-cert" "$work/cert.pem" "$work/key.pem" >/dev/null
    mkdir -p "$work/www"
    # No favicon asked for (hello, on /, would answer 404: a console error).
    printf '<!doctype html><html><head><title>h2ws</title><link rel=icon href="data:,"></head><body><p>WebSocket over HTTP/2</p></body></html>\n' >"$work/www/index.html"
    cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:0 http1 tls
workers = 1
modules = tls http1 h2 websocket hello static stats
module_path = $modules
[tls]
cert = $work/cert.pem $work/key.pem
[static]
mount = /www $work/www
CONF
    start_keel -c "$work/keel.conf"
    scheme=https
    limit=60
    ;;
web)
    # What a browser decides about a site (web.mjs): redirects, the Basic
    # authentication challenge, HSTS, a CORS preflight. Host names mapped
    # to 127.0.0.1 by Chromium's resolver (HSTS is never noted for an IP
    # address, RFC 6797 8.1), one certificate for all of them whose key
    # Chromium is told to trust (--ignore-certificate-errors-spki-list:
    # the connection then counts as secure, which HSTS requires).
    for m in tls h2 rewrite headers auth_basic cors static hello accesslog; do
        [ -e "$modules/mod_$m.so" ] || { echo "SKIP: mod_$m not built"; exit 77; }
    done
    "$(dirname "$keel")/keel-cert" "$work/cert.pem" "$work/key.pem" site.test redir.test \
        api.test 127.0.0.1 >/dev/null
    WEB_SPKI=$(openssl x509 -in "$work/cert.pem" -pubkey -noout | openssl pkey -pubin -outform der |
        openssl dgst -sha256 -binary | base64)
    free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
    port_p=$(free_port) port_s=$(free_port)
    mkdir -p "$work/www" "$work/private"
    printf '<!doctype html><html><head><title>web</title><link rel=icon href="data:,"></head><body><p>a page</p></body></html>\n' \
        >"$work/www/index.html"
    printf '<!doctype html><html><head><title>private</title><link rel=icon href="data:,"></head><body><p>for members</p></body></html>\n' \
        >"$work/private/index.html"
    cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:$port_p http1 name=plain
listen = 127.0.0.1:$port_s http1 tls name=secure
workers = 1
modules = tls http1 h2 rewrite headers cors auth_basic static hello accesslog
module_path = $modules
[tls]
cert = $work/cert.pem $work/key.pem
[static]
mount = /www $work/www
mount = /private $work/private
[headers]
hsts = max-age=600
[auth_basic]
file = members $here/../../examples/configs/api-auth-ratelimit.htpasswd
realm = keel-members
[accesslog]
path = $work/access.log
[listener plain]
rewrite.return = 301 https://\$https_host\$request_uri
rewrite.https_port = $port_s
[/old301/]
rewrite.return = 301 /echo
[/old308/]
rewrite.return = 308 /echo
[/private/]
auth_basic.users = members
[site api.test]
cors.origins = https://redir.test:$port_s
cors.methods = POST
cors.headers = Content-Type X-Token
cors.max_age = 0
CONF
    start_keel -c "$work/keel.conf"
    export WEB_SPKI WEB_PLAIN=$port_p WEB_SECURE=$port_s WEB_LOG="$work/access.log"
    port=$port_s
    scheme=https
    limit=120
    ;;
*)
    echo "usage: run.sh dashboard|dashboard-layout|chat|h2|h2ws|cors|spa|web KEEL_BIN MODULE_DIR OUT_DIR" >&2
    exit 2
    ;;
esac

# A deadline from outside too where coreutils' timeout exists (not on a
# stock macOS; each test has its own).
deadline=""
command -v timeout >/dev/null && deadline="timeout $limit"
status=0
$deadline node "$here/$test.mjs" "${scheme:-http}://127.0.0.1:$port" "$out" "$npm_dir" || status=$?
if [ $status -ne 0 ]; then
    echo "---- keel's log ----"; cat "$work/keel.log"
    exit $status
fi
