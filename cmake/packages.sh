# shellcheck shell=sh
# cmake/packages.sh — sourced (POSIX sh, bash too): reads cmake/packages.txt.
#
# keel_packages LIST...
#   Prints the packages of the named lists on one line, each once, in the
#   file's order. Fails, naming it, on a list the file does not have or on
#   a line that is neither a list's head ("NAME:") nor indented.
#
# The caller sets keel_cmake_dir (the folder of this file) before sourcing
# it; KEEL_PACKAGES_FILE overrides the file.

keel_packages_file=${KEEL_PACKAGES_FILE:-$keel_cmake_dir/packages.txt}

keel_packages() {
    awk -v want="$*" -v file="$keel_packages_file" '
        BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) wanted[w[i]] = 1 }
        {
            line = $0
            sub(/#.*/, "", line)
            if (line ~ /^[A-Za-z0-9_.-]+:/) {
                cur = substr(line, 1, index(line, ":") - 1)
                known[cur] = 1
                line = substr(line, index(line, ":") + 1)
            } else if (line ~ /^[^ \t]/) {
                printf "%s:%d: neither a list (NAME:) nor an indented line\n", file, NR > "/dev/stderr"
                bad = 1
                next
            }
            if (!(cur in wanted)) next
            m = split(line, p, /[ \t]+/)
            for (i = 1; i <= m; i++)
                if (p[i] != "" && !(p[i] in seen)) {
                    seen[p[i]] = 1
                    out = out (out == "" ? "" : " ") p[i]
                }
        }
        END {
            for (k in wanted)
                if (!(k in known)) { printf "%s: no list \"%s\"\n", file, k > "/dev/stderr"; bad = 1 }
            if (bad) exit 1
            print out
        }' "$keel_packages_file"
}
