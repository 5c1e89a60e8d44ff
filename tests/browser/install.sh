#!/usr/bin/env bash
# Installs tests/browser/package.json's dependencies (playwright-core, pinned)
# into a cache directory outside the source tree, once, and prints that
# directory. node_modules is never committed nor made in the tree.
#   install.sh [DIR]     default: $KEEL_NPM_CACHE or ~/.cache/keel-npm
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${KEEL_NPM_CACHE:-$HOME/.cache/keel-npm}}
want=$(sed -n 's/.*"playwright-core": *"\([^"]*\)".*/\1/p' "$here/package.json")
installed() {
    sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/playwright-core/package.json" \
        2>/dev/null | head -n1
}
if [ "$(installed)" != "$want" ]; then
    mkdir -p "$dir"
    # The browser tests started at once (ctest -j) install one at a time:
    # the second finds the first's work done.
    if command -v flock >/dev/null; then
        exec 9>"$dir/.install.lock"
        flock -w 300 9 || true
    fi
    if [ "$(installed)" != "$want" ]; then
        cp "$here/package.json" "$dir/package.json"
        echo "installing playwright-core $want into $dir" >&2
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
    fi
fi
echo "$dir"
