#!/usr/bin/env python3
"""tests/fuzz/seeds_proxy.py — writes corpus/proxy (stdlib only).

Client byte streams for fuzz_proxy, each with its leading byte as for
fuzz_h2 (bit 7 clear: the harness puts the preface in front). Requests to
the in-process upstream, whose answer the path's second character chooses
(fuzz_proxy.c): every kind of answer, streams reset in the write that
opened them (issue 23), bodies with and without content-length, shut and
opened windows, many streams at once.

    python3 tests/fuzz/seeds_proxy.py
"""
import struct

from seeds_h2 import (CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, RST_STREAM,
                      SETTINGS, WINDOW_UPDATE, block, frame, request, write)


def get(sid, path, end=True):
    return frame(HEADERS, (END_STREAM if end else 0) | END_HEADERS, sid,
                 block(request("GET", path), index=False))


def rst(sid, code=8):
    return frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def seeds():
    s = {}
    for kind in "abcdefghijkl":
        s["answer-" + kind] = get(1, "/" + kind)
    # Issue 23: HEADERS and RST_STREAM in one write, then another stream
    # that may take the freed memory.
    s["reset-while-connecting"] = get(1, "/a") + rst(1) + get(3, "/a")
    s["reset-delayed"] = get(1, "/i") + rst(1) + get(3, "/b")
    s["reset-many"] = b"".join(get(2 * i + 1, "/i") + rst(2 * i + 1) for i in range(8))
    s["goaway-mid"] = get(1, "/i") + get(3, "/g") + frame(GOAWAY, 0, 0, struct.pack(">II", 3, 0))
    post = block(request("POST", "/a", [("content-length", "5")]), index=False)
    s["post-length"] = frame(HEADERS, END_HEADERS, 1, post) + frame(DATA, END_STREAM, 1, b"hello")
    s["post-unknown"] = (frame(HEADERS, END_HEADERS, 1, block(request("POST", "/j"), index=False)) +
                         frame(DATA, 0, 1, b"x" * 100) + frame(DATA, END_STREAM, 1, b"y" * 10))
    s["post-reset"] = (frame(HEADERS, END_HEADERS, 1, block(request("POST", "/i"), index=False)) +
                       frame(DATA, 0, 1, b"x" * 100) + rst(1))
    s["shut-windows"] = (frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) +
                         b"".join(get(2 * i + 1, "/g") for i in range(6)) +
                         frame(WINDOW_UPDATE, 0, 3, struct.pack(">I", 70000)))
    s["open-window"] = (get(1, "/g") + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)) +
                        frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 20)))
    big = block(request("GET", "/k", [("x-a", "a" * 60)]), index=False)
    s["continuation"] = (frame(HEADERS, END_STREAM, 1, big[:20]) +
                         frame(CONTINUATION, END_HEADERS, 1, big[20:]))
    s["upgrade"] = frame(HEADERS, END_STREAM | END_HEADERS, 1,
                         block(request("GET", "/h", [("upgrade", "websocket")]), index=False))
    s["absolute-path"] = frame(HEADERS, END_STREAM | END_HEADERS, 1,
                               block(request("GET", "http://evil/a"), index=False))
    out = {}
    for name, data in s.items():
        out[name] = bytes([0]) + data
        out[name + "-cut"] = bytes([7]) + data
    return out


if __name__ == "__main__":
    write("proxy", seeds())
