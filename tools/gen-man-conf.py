#!/usr/bin/env python3
"""Writes docs/man/keel.conf.5 from docs/man/keel.conf.5.in and the key tables.

The [keel] section comes from the table in docs/running.md, each module's
section from docs/reference/NAME.md, which `keel --help-module NAME
--markdown` generates from the module's declared keys (ctest docs.reference
checks that they match the built modules). So keel.conf(5) follows the
tables as the reference pages do: edit a table, regenerate the page with
tests/docs/reference.sh, then run this. --check compares instead of
writing, and fails on any difference (ctest docs.man.generated).
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TEMPLATE = os.path.join(ROOT, "docs/man/keel.conf.5.in")
OUTPUT = os.path.join(ROOT, "docs/man/keel.conf.5")


def roff_text(md):
    """One table cell of Markdown as roff text: code spans bold, links as
    their text, escapes for the backslash and a leading control character."""
    md = md.replace("\\|", "|").strip()
    out = []
    # Code spans first: their contents are literal.
    for i, part in enumerate(re.split(r"(`[^`]*`)", md)):
        if i % 2 == 1:
            out.append("\\fB" + part[1:-1].replace("\\", "\\e") + "\\fR")
            continue
        part = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", part)
        part = part.replace("\\", "\\e")
        part = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", part)
        out.append(part)
    text = "".join(out)
    # Not ASCII: roff's named or numbered glyphs (groff warns otherwise).
    names = {"\u2013": "\\(en", "\u2014": "\\(em", "\u2019": "\\(cq", "\u00d7": "\\(mu"}
    text = "".join(names.get(c, "\\[u%04X]" % ord(c)) if ord(c) > 127 else c for c in text)
    # One sentence a line: roff puts the space after a full stop by itself.
    lines = re.split(r"(?<=[a-z)0-9R][.?!]) +(?=[A-Z(\\])", text)
    return "\n".join("\\&" + l if l[:1] in (".", "'") else l for l in lines)


def table_rows(path):
    """The rows of the first Markdown table in a file, as lists of cells."""
    rows, seen = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("|"):
                cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
                cells = [c.strip() for c in cells]
                if all(re.fullmatch(r":?-+:?", c) for c in cells):
                    seen = True
                    continue
                if seen:
                    rows.append(cells)
            elif seen:
                break
    return rows


def key_name(cell):
    return cell.strip().strip("`")


def keel_section(lines):
    rows = table_rows(os.path.join(ROOT, "docs/running.md"))
    lines.append(".Bl -tag -width Ds")
    for key, default, meaning in rows:
        lines.append(".It Cm " + key_name(key))
        if default not in ("—", "-", ""):
            lines.append("Default: " + roff_text(default) + ".")
            lines.append(".br")
        lines.append(roff_text(meaning))
    lines.append(".El")


def module_sections(lines):
    ref = os.path.join(ROOT, "docs/reference")
    for name in sorted(os.listdir(ref)):
        if not name.endswith(".md"):
            continue
        module = name[:-3]
        lines.append(".Ss [%s]" % module)
        lines.append(".Bl -tag -width Ds")
        for key, kind, default, scopes, doc in table_rows(os.path.join(ref, name)):
            lines.append(".It Cm %s Ar %s" % (key_name(key), roff_text(kind).replace(" ", "\\ ")))
            default = key_name(default)
            if default == "(required)":
                lines.append("Required.")
            elif default != "(none)":
                lines.append("Default: \\fB" + default.replace("\\", "\\e") + "\\fR.")
            lines.append("Scopes: " + scopes + ".")
            lines.append(".br")
            lines.append(roff_text(doc))
        lines.append(".El")


def generate():
    lines = []
    with open(TEMPLATE, encoding="utf-8") as f:
        for line in f.read().splitlines():
            if line == '.\\" @KEEL@':
                keel_section(lines)
            elif line == '.\\" @MODULES@':
                module_sections(lines)
            else:
                lines.append(line)
    return "\n".join(lines) + "\n"


def main():
    text = generate()
    if "--check" in sys.argv[1:]:
        try:
            with open(OUTPUT, encoding="utf-8") as f:
                old = f.read()
        except OSError:
            old = None
        if old != text:
            print("docs/man/keel.conf.5 differs from the key tables: run tools/gen-man-conf.py",
                  file=sys.stderr)
            return 1
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote", os.path.relpath(OUTPUT, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
