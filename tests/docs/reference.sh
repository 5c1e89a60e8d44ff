#!/bin/sh
# tests/docs/reference.sh KEEL MODULE... [--write]
# docs/reference/NAME.md is generated from each module's declared keys
# (`keel --help-module NAME --markdown`). This compares every page with what
# the built modules print, and fails on any difference, a page for a module
# that declares no keys, or a module with keys and no page. --write
# regenerates the pages instead (after changing a module's table).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ref="$here/../../docs/reference"
keel=$1
shift
write=0
for a in "$@"; do [ "$a" = --write ] && write=1; done
status=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for name in "$@"; do
    [ "$name" = --write ] && continue
    if ! "$keel" --help-module "$name" --markdown >"$tmp" 2>/dev/null; then
        echo "reference: keel --help-module $name failed" >&2
        status=1
        continue
    fi
    page="$ref/$name.md"
    if grep -q 'declares no keys' "$tmp"; then
        if [ -e "$page" ]; then
            echo "reference: $page exists but $name declares no keys" >&2
            status=1
        fi
        continue
    fi
    if [ "$write" = 1 ]; then
        cp "$tmp" "$page"
        echo "wrote $page"
    elif [ ! -e "$page" ]; then
        echo "reference: $name declares keys but $page is missing (run $0 $keel $name --write)" >&2
        status=1
    elif ! diff -u "$page" "$tmp" >&2; then
        echo "reference: $page differs from the module's table (run $0 $keel $name --write)" >&2
        status=1
    fi
done
exit $status
