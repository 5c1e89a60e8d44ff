#!/usr/bin/env bash
# tests/h2/clients.sh — the h2 module with real HTTP/2 clients: curl
# (--http2-prior-knowledge, against an `h2` listener and against an http1
# listener that hands the preface over), nghttp and h2load (Debian:
# nghttp2-client). hello's routes must answer over HTTP/2 as over HTTP/1.1.
#
#   clients.sh KEEL MODULE_DIR TEST_MODULE_DIR
#
# Exits 77 (skipped) when curl with HTTP/2 or the nghttp2 clients are
# missing. Every client runs under `timeout`; loads are small (-n 2000).
set -uo pipefail

KEEL=$1
MODS=$(cd "$2" && pwd)
TMODS=$(cd "$3" && pwd)

for tool in curl nghttp h2load timeout; do
    command -v $tool >/dev/null || { echo "skipped: $tool not found (Debian: curl nghttp2-client)"; exit 77; }
done
grep -q HTTP2 <<<"$(curl -V)" || { echo "skipped: curl without HTTP/2"; exit 77; }

DIR=$(mktemp -d)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

mkdir -p "$DIR/www"
head -c 4096 /dev/urandom >"$DIR/www/4k.bin"
head -c 1500000 /dev/urandom >"$DIR/www/big.bin"
cat >"$DIR/keel.conf" <<EOF
[keel]
listen = 127.0.0.1:0 h2
listen = 127.0.0.1:0 http1
workers = 2
modules = http1 h2 hello static accesslog
module_path = $MODS $TMODS
[static]
mount = /files $DIR/www
[accesslog]
path = $DIR/access.log
EOF
"$KEEL" -c "$DIR/keel.conf" >"$DIR/keel.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
    grep -q "(http1)" "$DIR/keel.log" 2>/dev/null && break
    sleep 0.05
done
H2=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) (h2).*/\1/p' "$DIR/keel.log")
H1=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) (http1).*/\1/p' "$DIR/keel.log")
[ -n "$H2" ] && [ -n "$H1" ] || { echo "keel did not start:"; cat "$DIR/keel.log"; exit 1; }

FAILED=0
ok() { echo "ok    $1"; }
fail() {
    echo "FAIL  $1: $2"
    FAILED=$((FAILED + 1))
}
CURL=(timeout 20 curl -sS --http2-prior-knowledge --max-time 15)

# expect NAME WANT COMMAND...: the command's output must be WANT
expect() {
    local name=$1 want=$2
    shift 2
    local got
    got=$("$@" 2>&1)
    if [ "$got" == "$want" ]; then ok "$name"; else fail "$name" "got '$got', expected '$want'"; fi
}

for port in $H2 $H1; do
    where=$([ "$port" == "$H2" ] && echo h2 || echo http1)
    base=http://127.0.0.1:$port
    expect "curl $where GET / (HTTP/2)" "Hello, World! 2 200" \
        "${CURL[@]}" -w ' %{http_version} %{http_code}' "$base/"
    expect "curl $where POST /echo" "$(printf 'hello h2')" "${CURL[@]}" --data-binary 'hello h2' "$base/echo"
    expect "curl $where /stream" "3" \
        bash -c "${CURL[*]} '$base/stream?n=3' | grep -c chunk"
    expect "curl $where /slow" "Hello after 50 ms!" "${CURL[@]}" "$base/slow"
    expect "curl $where /offload" "200" "${CURL[@]}" -o /dev/null -w '%{http_code}' "$base/offload?n=1000"
    expect "curl $where HEAD /" "200 0" "${CURL[@]}" -I -o /dev/null -w '%{http_code} %{size_download}' "$base/"
    expect "curl $where 404" "404" "${CURL[@]}" -o /dev/null -w '%{http_code}' "$base/nope"
    # A body nobody reads (issue 23: reset PROTOCOL_ERROR, the answer lost).
    expect "curl $where -d abc, unread" "405 404 200" bash -c \
        "for p in / /nope; do ${CURL[*]} -d abc -o /dev/null -w '%{http_code} ' '$base'\$p; done;
         ${CURL[*]} -X GET -d abc -o /dev/null -w '%{http_code}' '$base/'"
    "${CURL[@]}" -o "$DIR/big.out" "$base/files/big.bin" && cmp -s "$DIR/big.out" "$DIR/www/big.bin" &&
        ok "curl $where 1.5 MB file" || fail "curl $where 1.5 MB file" "differs"
    head -c 600000 /dev/urandom >"$DIR/up.bin"
    "${CURL[@]}" --data-binary @"$DIR/up.bin" -o "$DIR/up.out" "$base/echo" && cmp -s "$DIR/up.out" "$DIR/up.bin" &&
        ok "curl $where 600 KB upload echoed" || fail "curl $where 600 KB upload" "differs"
done

# Several requests on one connection at once: nghttp -m (curl 7.88's
# --parallel with prior knowledge trips over its own bug, curl#10634).
got=$(timeout 20 nghttp -n -m 20 -s "http://127.0.0.1:$H2/" 2>&1 | grep -c ' 200 ')
[ "$got" == 20 ] && ok "nghttp 20 multiplexed" || fail "nghttp 20 multiplexed" "$got answers"

# nghttp: a whole exchange, frames checked by nghttp itself.
out=$(timeout 20 nghttp -nv "http://127.0.0.1:$H2/stream?n=2" 2>&1)
grep -q "x-stream-chunks: 2" <<<"$out" && grep -q "recv GOAWAY\|send GOAWAY" <<<"$out" &&
    ok "nghttp trailers" || fail "nghttp trailers" "$(echo "$out" | tail -5)"
out=$(timeout 20 nghttp -n -s "http://127.0.0.1:$H1/files/4k.bin" 2>&1)
grep -q "200" <<<"$out" && ok "nghttp via http1 listener" || fail "nghttp via http1" "$out"

# h2load: bounded loads, every request answered.
for spec in "/:-n 2000 -c 2 -m 100" "/files/4k.bin:-n 2000 -c 2 -m 100" "/echo:-n 200 -c 2 -m 10 -d $DIR/www/4k.bin"; do
    path=${spec%%:*}
    args=${spec#*:}
    out=$(timeout 60 h2load $args "http://127.0.0.1:$H2$path" 2>&1)
    n=$(echo "$args" | sed 's/.*-n \([0-9]*\).*/\1/')
    if grep -q "requests: $n total, $n started, $n done, $n succeeded" <<<"$out"; then
        ok "h2load $path ($args)"
    else
        fail "h2load $path" "$(echo "$out" | grep -E 'requests:|status codes')"
    fi
done

# Over TLS: the tls transport negotiates ALPN "h2" and opens the protocol
# named "h2" (keel_transport_open_protocol); the module does not care how it
# was reached. Only when the tls module and keel-cert were built.
CERT_TOOL=$(dirname "$KEEL")/keel-cert
if [ -e "$MODS/mod_tls.so" ] && [ -x "$CERT_TOOL" ]; then
    "$CERT_TOOL" "$DIR/cert.pem" "$DIR/key.pem" >/dev/null 2>&1
    cat >"$DIR/tls.conf" <<EOF
[keel]
listen = 127.0.0.1:0 http1 tls
workers = 1
modules = tls http1 h2 hello static
module_path = $MODS $TMODS
[tls]
cert = $DIR/cert.pem $DIR/key.pem
[static]
mount = /files $DIR/www
EOF
    "$KEEL" -c "$DIR/tls.conf" >"$DIR/tls.log" 2>&1 &
    TPID=$!
    for _ in $(seq 100); do
        grep -q "(http1, tls" "$DIR/tls.log" 2>/dev/null && break
        sleep 0.05
    done
    TP=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) (http1, tls[:)].*/\1/p' "$DIR/tls.log")
    TCURL=(timeout 20 curl -sSk --http2 --max-time 15)
    expect "TLS ALPN h2: GET /" "Hello, World! 2" "${TCURL[@]}" -w ' %{http_version}' "https://127.0.0.1:$TP/"
    expect "TLS ALPN http/1.1 still" "Hello, World! 1.1" timeout 20 curl -sSk --http1.1 -w ' %{http_version}' "https://127.0.0.1:$TP/"
    "${TCURL[@]}" -o "$DIR/big.tls" "https://127.0.0.1:$TP/files/big.bin" && cmp -s "$DIR/big.tls" "$DIR/www/big.bin" &&
        ok "TLS h2 1.5 MB file" || fail "TLS h2 1.5 MB file" "differs"
    out=$(timeout 60 h2load -n 2000 -c 2 -m 100 "https://127.0.0.1:$TP/files/4k.bin" 2>&1)
    grep -q "Application protocol: h2" <<<"$out" && grep -q "2000 succeeded" <<<"$out" &&
        ok "TLS h2load" || fail "TLS h2load" "$(grep -E 'protocol|requests:' <<<"$out")"
    kill -TERM "$TPID"
    wait "$TPID" || fail "TLS keel exit" "status $?"
else
    echo "skip  TLS (no mod_tls or keel-cert)"
fi

# (grep reads here-strings: `echo | grep -q` fails under pipefail when grep
# stops reading early.)
# The access log saw HTTP/2.0 exchanges (written by a background thread:
# soon, not at once).
for _ in $(seq 50); do
    grep -q '"GET /slow HTTP/2.0" 200' "$DIR/access.log" && break
    sleep 0.1
done
grep -q '"GET /slow HTTP/2.0" 200' "$DIR/access.log" && ok "access log says HTTP/2.0" ||
    fail "access log" "no HTTP/2.0 line"

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
[ $rc == 0 ] && ok "keel exits 0 on SIGTERM" || fail "exit" "status $rc"
grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$DIR/keel.log" &&
    fail "sanitizers" "a report in keel's log"
if [ $FAILED -gt 0 ]; then
    echo "$FAILED failed; keel's log:"
    cat "$DIR/keel.log"
    exit 1
fi
echo "all client cases passed"
