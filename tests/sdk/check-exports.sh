#!/usr/bin/env bash
# Every module in the given directories exports exactly one symbol, its
# descriptor keel_module_<name> (mod_notmodule, the loader's "not a module"
# case, exports none; a backend mod_<name>_<backend>, chosen by the
# loader for `[<name>] backend = <backend>`, exports keel_module_<name>).
# keel_add_module() enforces it with hidden visibility
# and a version script; this catches C++ template instances and static
# libraries' symbols, which hidden visibility alone lets through.
# Usage: check-exports.sh DIR...
set -euo pipefail

fail=0
count=0
for dir in "$@"; do
    for mod in "$dir"/mod_*.so; do
        [ -e "$mod" ] || continue
        name=$(basename "$mod" .so)
        name=${name#mod_}
        want="keel_module_$name"
        [ "$name" = notmodule ] && want=""
        case $name in tls_openssl) want="keel_module_tls" ;; esac
        got=$(nm -D --defined-only "$mod" | awk '{print $3}' | sort | tr '\n' ' ')
        got=${got% }
        if [ "$got" != "$want" ]; then
            echo "FAIL: $mod exports: ${got:0:600}" >&2
            fail=1
        fi
        count=$((count + 1))
    done
done
[ "$count" -gt 0 ] || { echo "FAIL: no module found in $*" >&2; exit 1; }
[ "$fail" -eq 0 ] || exit 1
echo "exports: $count modules export their descriptor only"
