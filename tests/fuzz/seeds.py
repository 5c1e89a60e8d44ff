#!/usr/bin/env python3
"""tests/fuzz/seeds.py — regenerates corpus/http1 from tests/http/cases.

Each case's `--- send` steps, decoded as tests/http/README.md says (CRLF
line ends, `\\` escapes, `\\[N:TEXT]` repeats), concatenated, with one
leading byte (the harness's split seed). Run it after adding cases:

    python3 tests/fuzz/seeds.py
"""
import hashlib
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
cases = os.path.join(here, "..", "http", "cases")
out = os.path.join(here, "corpus", "http1")


def unescape(s):
    b = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            b += c.encode()
            i += 1
            continue
        n = s[i + 1]
        if n in "rnt0\\":
            b += {"r": b"\r", "n": b"\n", "t": b"\t", "0": b"\0", "\\": b"\\"}[n]
            i += 2
        elif n == "x":
            b.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif n == "[":
            m = re.match(r"\\\[(\d+):((?:\\\]|[^\]])*)\]", s[i:])
            b += unescape(m.group(2).replace("\\]", "]")) * int(m.group(1))
            i += m.end()
        else:
            b += c.encode()
            i += 1
    return bytes(b)


def main():
    os.makedirs(out, exist_ok=True)
    n = 0
    for name in sorted(os.listdir(cases)):
        if not name.endswith(".txt"):
            continue
        data = bytearray()
        sending = False
        with open(os.path.join(cases, name), encoding="utf-8") as f:
            for line in f.read().split("\n"):
                if line.startswith("---"):
                    sending = line.strip() == "--- send"
                    continue
                if not sending:
                    continue
                if line.endswith("\\") and not line.endswith("\\\\"):
                    data += unescape(line[:-1])
                else:
                    data += unescape(line) + b"\r\n"
        if not data:
            continue
        for seed in (0, 7):  # whole, and split in small pieces
            blob = bytes([seed]) + bytes(data[:8191])
            digest = hashlib.sha1(blob).hexdigest()[:12]
            with open(os.path.join(out, name[:-4] + "-" + digest), "wb") as f:
                f.write(blob)
            n += 1
    print("%d seeds in %s" % (n, out), file=sys.stderr)


main()
