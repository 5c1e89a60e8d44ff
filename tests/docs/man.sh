#!/bin/sh
# tests/docs/man.sh DIR: lints the man pages in DIR (keel.8, keel.conf.5,
# keel-cert.1). mandoc -Tlint at warning level when mandoc is installed
# (apt-get install mandoc), and groff's own checks (-ww -z) when groff is;
# exits 77 (ctest: skipped) with neither. Any message fails the test.
set -u
dir=$1
pages="$dir/keel.8 $dir/keel.conf.5 $dir/keel-cert.1"
ran=0
status=0
if command -v mandoc >/dev/null 2>&1; then
    ran=1
    # shellcheck disable=SC2086
    out=$(mandoc -Tlint -Wwarning $pages 2>&1) || status=1
    [ -n "$out" ] && { printf '%s\n' "$out" >&2; status=1; }
fi
if command -v groff >/dev/null 2>&1; then
    ran=1
    for page in $pages; do
        out=$(groff -mandoc -ww -z "$page" 2>&1) || status=1
        [ -n "$out" ] && { printf '%s: %s\n' "$page" "$out" >&2; status=1; }
    done
fi
if [ "$ran" = 0 ]; then
    echo "man.sh: neither mandoc nor groff is installed: not checked (apt-get install mandoc)" >&2
    exit 77
fi
[ "$status" = 0 ] && echo "man pages: no warnings ($pages)"
exit $status
