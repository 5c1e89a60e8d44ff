#!/usr/bin/env bash
# tests/tls/testssl.sh KEEL_BIN BUILD_DIR — Debian's testssl.sh against a
# keel TLS listener (http1 + hello, a keel-cert certificate): protocols,
# the standard cipher categories and the known vulnerabilities (-p -s -U,
# about 30 s). Fails on any finding rated MEDIUM, HIGH or CRITICAL.
# Exits 77 (ctest: skipped) only when testssl is missing (Debian:
# testssl.sh). The full run, for people: testssl 127.0.0.1:PORT against
# the same config (docs/tls.md). KEEL_TEST_TLS_BACKEND=openssl runs it
# against the OpenSSL backend (ctest: tls.testssl.openssl), which must
# also offer TLS 1.3.
set -euo pipefail
keel=$1 build=$2
command -v testssl >/dev/null || { echo "SKIP: testssl not found (Debian: apt-get install testssl.sh)"; exit 77; }
work=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
"$build/keel-cert" "$work/cert.pem" "$work/key.pem" >/dev/null
cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:0 http1 tls
workers = 2
modules = tls http1 hello
module_path = $build/modules
[tls]
backend = ${KEEL_TEST_TLS_BACKEND:-mbedtls}
cert = cert.pem key.pem
CONF
: >"$work/keel.log"
"$keel" -c "$work/keel.conf" 2>>"$work/keel.log" &
pid=$!
port=""
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/keel.log" | head -n1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: keel did not start"; cat "$work/keel.log"; exit 1; }
# testssl's own exit status counts findings; only timeout's 124 matters:
# a run cut short leaves a JSON file cut short, which must not read as a
# parse error of keel's making.
rc=0
timeout 240 testssl --quiet --color 0 --warnings off -p -s -U --jsonfile "$work/findings.json" \
    "127.0.0.1:$port" >"$work/testssl.out" 2>&1 || rc=$?
[ "$rc" -ne 124 ] || { echo "FAIL: testssl did not finish in 240 s (about 30 s on an idle 2-core machine)"; tail -n 20 "$work/testssl.out"; exit 1; }
[ -s "$work/findings.json" ] || { echo "FAIL: testssl wrote no findings"; cat "$work/testssl.out"; exit 1; }
python3 - "$work/findings.json" <<'PY'
import json, sys
findings = json.load(open(sys.argv[1]))
bad = [f for f in findings if f.get("severity") in ("MEDIUM", "HIGH", "CRITICAL")]
print("testssl: %d findings, %d rated MEDIUM or worse" % (len(findings), len(bad)))
for f in bad:
    print("  %s %s: %s" % (f["severity"], f["id"], f["finding"]))
sys.exit(1 if bad or not findings else 0)
PY
if [ "${KEEL_TEST_TLS_BACKEND:-}" = openssl ]; then
    grep -Eq 'TLS 1\.3 +offered' "$work/testssl.out" || {
        echo "FAIL: TLS 1.3 not offered"
        grep -E 'TLS 1' "$work/testssl.out"
        exit 1
    }
    echo "testssl: TLS 1.3 offered"
fi
