#!/usr/bin/env python3
"""One HTTP/2 request, sent as it is asked for, for the proxy tests.

    proxy_h2client.py PORT SPEC

SPEC is JSON: {"method": "GET", "path": "/", "authority": "x",
"fields": [[name, value], ...], "body": "text" or null, "body_len": N}.
Strings may hold any character (\\u0001, a space in :path...): they go out
as they are, through tests/h2/h2lib.py's raw client (hpack does not check
them), which is the point: these are requests a hostile HTTP/2 client
sends and a gateway to HTTP/1.1 must not pass on (RFC 9110 5.5, RFC 9113
8.2.1). "body" (or "body_len" bytes of a fixed pattern) goes in DATA frames
after a HEADERS frame without END_STREAM; without a content-length field
unless "fields" has one.

Prints "status N", "length L" and "echo match" when the response body is
the request body, then the body if it is short; or "reset CODE" for a
RST_STREAM, "closed" if the connection ended first. Exit status 0 unless
something failed on this side (77: hpack/hyperframe missing).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h2"))
try:
    from h2lib import Conn, Fail
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e} (Debian: python3-h2)")
    sys.exit(77)


def raw(s):
    return s.encode("latin-1") if isinstance(s, str) else s


def main():
    port = int(sys.argv[1])
    spec = json.loads(sys.argv[2])
    body = spec.get("body")
    if body is not None:
        body = raw(body)
    elif spec.get("body_len") is not None:
        body = bytes((i * 7 + i // 251) & 0xFF for i in range(int(spec["body_len"])))
    c = Conn(port, timeout=15.0)
    sid = c.new_id()
    fields = [(b":method", raw(spec.get("method", "GET"))), (b":path", raw(spec.get("path", "/"))),
              (b":scheme", b"http"), (b":authority", raw(spec.get("authority", "localhost")))]
    fields += [(raw(n), raw(v)) for n, v in spec.get("fields", [])]
    c.stream_windows.setdefault(sid, c.server_initial)
    c.send_headers(sid, fields, end_stream=body is None)
    if body is not None:
        c.send_data(sid, body, end_stream=True, deadline=15.0)
    try:
        r = c.response(sid, timeout=15.0)
    except Fail as e:
        print("closed" if c.eof else f"failed: {e}")
        return 0
    if r.reset is not None and r.status is None:
        print(f"reset {r.reset}")
        return 0
    out = b"status %d\nlength %d\n" % (r.status, len(r.body))
    if body is not None and r.body == body:
        out += b"echo match\n"
    if len(r.body) <= 4096:
        out += r.body + b"\n"  # as it came: the test compares bytes
    sys.stdout.buffer.write(out)
    c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
