#!/usr/bin/env bash
# ctest's stats.browser: starts keel (http1 + hello + stats), runs
# dashboard.mjs in headless Chromium against it, saves the screenshot.
#   run.sh KEEL_BIN MODULE_DIR OUT_DIR
# Exits 77 (ctest: skipped) only when node, npm or chromium is missing,
# saying which Debian package to install.
set -euo pipefail
keel=$1 modules=$2 out=$3
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

cat >"$work/keel.conf" <<CONF
[keel]
listen = 127.0.0.1:0 http1
workers = 2
modules = http1 hello stats
module_path = $modules
CONF
"$keel" -c "$work/keel.conf" 2>"$work/keel.log" &
pid=$!
port=""
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/keel.log" | head -n1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: keel did not start"; cat "$work/keel.log"; exit 1; }

# A deadline from outside too where coreutils' timeout exists (not on a
# stock macOS; dashboard.mjs has its own).
deadline=""
command -v timeout >/dev/null && deadline="timeout 120"
status=0
$deadline node "$here/dashboard.mjs" "http://127.0.0.1:$port" "$out/dashboard.png" "$npm_dir" || status=$?
if [ $status -ne 0 ]; then
    echo "---- keel's log ----"; cat "$work/keel.log"
    exit $status
fi
echo "screenshot: $out/dashboard.png"
