#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/fcgi/: what PHP-FPM sends (records padded to 8
bytes, STDERR among STDOUT, the end) and each hostile answer
tests/fastcgi/run.py checks, each behind fuzz_fcgi's cut byte."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fcgi")


def record(rtype, content, rid=1, version=1, pad=None):
    if pad is None:
        pad = -len(content) % 8
    return struct.pack(">BBHHBB", version, rtype, rid, len(content), pad, 0) + content + b"\0" * pad


def end(app=0, proto=0):
    return record(3, struct.pack(">IB3x", app, proto))


SEEDS = {
    "php_small": record(6, b"Content-type: text/html; charset=UTF-8\r\n\r\nhello from php\n") + end(),
    "php_stderr": record(7, b"PHP message: oops") +
    record(6, b"Status: 404 Not Found\r\nX-App: 1\r\n\r\nnot here\n") + record(6, b"") + end(),
    "redirect": record(6, b"Location: /elsewhere\r\n\r\n") + end(),
    "lf_only": record(6, b"Content-Type: text/plain\n\nbody") + end(),
    "head_in_pieces": record(6, b"Content-Type: te") + record(6, b"xt/plain\r") +
    record(6, b"\n\r") + record(6, b"\nbody") + end(),
    "status999": record(6, b"Status: 999 Odd\r\n\r\n") + end(),
    "end_without_head": record(6, b"X-A: 1\r\n") + end(),
    "other_id": record(6, b"\r\n", rid=2) + end(),
    "version2": record(6, b"\r\n", version=2) + end(),
    "after_end": record(6, b"\r\n") + end() + record(6, b"more"),
    "short_end": record(6, b"\r\n") + record(3, b"\0\0"),
    "overloaded": record(6, b"\r\n") + end(0, 2),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    for cut in (0, 7, 255):
        with open(os.path.join(OUT, f"{name}-{cut}"), "wb") as f:
            f.write(bytes([cut]) + data)
print(f"{len(SEEDS) * 3} seeds in {OUT}")
