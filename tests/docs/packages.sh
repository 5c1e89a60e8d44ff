#!/bin/sh
# tests/docs/packages.sh [--update] — README.md and docs/building.md show
# package lists in blocks generated from cmake/packages.txt (the lists the
# install scripts install). This regenerates every block and fails, with
# the difference, when a document does not match (ctest docs.packages);
# --update rewrites the documents instead, after a change to the lists.
#
# A block is the lines between a marker and <!-- /packages -->:
#   <!-- packages: build run -->              the packages, wrapped, indented
#   <!-- packages brew install: brew-build --> one line: "brew install ..."
# Each document must hold at least one block.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
keel_cmake_dir=$root/cmake
. "$keel_cmake_dir/packages.sh"

update=
case "${1:-}" in
--update) update=1 ;;
"") ;;
*)
    echo "usage: $0 [--update]" >&2
    exit 2
    ;;
esac

# render DOC: DOC with every block regenerated, on stdout.
render() {
    skipping=
    blocks=0
    while IFS= read -r line || [ -n "$line" ]; do
        if [ -n "$skipping" ]; then
            if [ "$line" = "<!-- /packages -->" ]; then
                skipping=
                printf '%s\n' "$line"
            fi
            continue
        fi
        printf '%s\n' "$line"
        case "$line" in
        "<!-- packages"*": "*" -->")
            spec=${line#<!-- packages}
            spec=${spec% -->}
            prefix=${spec%%: *}
            prefix=${prefix# }
            lists=${spec#*: }
            # shellcheck disable=SC2086
            pkgs=$(keel_packages $lists) || return 1
            if [ -n "$prefix" ]; then
                printf '    %s %s\n' "$prefix" "$pkgs"
            else
                printf '%s\n' "$pkgs" | fold -s -w 76 | sed 's/ *$//; s/^/    /'
            fi
            skipping=1
            blocks=$((blocks + 1))
            ;;
        esac
    done <"$1"
    if [ -n "$skipping" ]; then
        echo "packages: $1: a <!-- packages ... --> block has no <!-- /packages -->" >&2
        return 1
    fi
    if [ "$blocks" = 0 ]; then
        echo "packages: $1: no <!-- packages: LIST --> block (its lists would go stale)" >&2
        return 1
    fi
}

status=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for doc in README.md docs/building.md; do
    if ! render "$root/$doc" >"$tmp"; then
        status=1
        continue
    fi
    if cmp -s "$root/$doc" "$tmp"; then
        continue
    fi
    if [ -n "$update" ]; then
        cp "$tmp" "$root/$doc"
        echo "packages: rewrote $doc"
    else
        diff -u "$root/$doc" "$tmp" >&2 || true
        echo "packages: $doc differs from cmake/packages.txt (run tests/docs/packages.sh --update)" >&2
        status=1
    fi
done
[ "$status" != 0 ] || [ -n "$update" ] || echo "packages: README.md and docs/building.md match cmake/packages.txt"
exit "$status"
