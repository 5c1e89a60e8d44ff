"""tests/h2/h2cases.py — what the case files (cases_*.py) share: the case
registry that run.py runs, and the frame and error helpers more than one
section uses. h2lib.py is the client library under them.
"""

import os
import time

from h2lib import Conn, DataFrame, Fail, SettingsFrame, WindowUpdateFrame, check
from hpack.hpack import encode_integer


# Every case, by suite, in the order run.py runs them (the order of
# run.py's FILES, then of each file).
CASES = {"conformance": [], "attacks": []}


def case(suite):
    def deco(fn):
        CASES[suite].append(fn)
        return fn
    return deco


def raw_frame(ftype, flags, sid, payload):
    return (len(payload).to_bytes(3, "big") + bytes([ftype, flags]) +
            (sid & 0x7fffffff).to_bytes(4, "big") + payload)


def lit(s):
    """An HPACK string literal without Huffman coding (RFC 7541 5.2)."""
    b = s.encode() if isinstance(s, str) else s
    n = encode_integer(len(b), 7)
    return bytes(n) + b


# A request's pseudo-fields as static-table references (RFC 7541 A):
# :method GET (2), :path / (4), :scheme http (6), :authority literal.
GET_ROOT = b"\x82\x84\x86" + b"\x01" + lit("x")


def metric(env, name, label):
    body = Conn(env.k.port()).get("/metrics").body.decode()
    for line in body.splitlines():
        if line.startswith(name) and label in line:
            return float(line.split()[-1])
    raise Fail(f"no {name}{{{label}}} in /metrics")


# The conformance cases follow h2spec's list (http2/, hpack/), each asserting the
# answer RFC 9113 (or RFC 7541) requires. A connection error (5.4.1) is
# GOAWAY with the code, then the connection's end; a stream error (5.4.2)
# is RST_STREAM, and the connection goes on (a PING answered).
def plain(fields):
    """A header block of literals without indexing (RFC 7541 6.2.2): no
    dynamic table entry on either side, whatever the fields are."""
    return b"".join(b"\x00" + lit(n) + lit(v) for n, v in fields)


def req_fields(path="/", method="GET", authority="x"):
    return [(":method", method), (":scheme", "http"), (":path", path), (":authority", authority)]


def settled(env, **kw):
    """A connection whose SETTINGS both sides acknowledged: what follows is
    the only thing the case sends (no SETTINGS ACK of ours crosses the
    server's GOAWAY)."""
    c = Conn(env.k.port(), **kw)
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags, what="SETTINGS ACK")
    return c


def conn_error(env, data, code, c=None):
    """data sent: GOAWAY code, then the connection closed (5.4.1)."""
    c = c or settled(env)
    c.send_raw(data)
    c.expect_goaway(code)
    c.expect_closed()
    return c


def stream_error(c, sid, code):
    """RST_STREAM code on sid, and the connection goes on (5.4.2)."""
    c.expect_rst(sid, code)
    check(c.goaway is None, f"GOAWAY {c.goaway.error_code if c.goaway else 0:#x} after a "
          "stream error")
    c.ping()


def stream_or_conn_error(c, sid, code):
    """Where the RFC lets the endpoint choose (h2spec accepts either):
    RST_STREAM code on sid, or GOAWAY code."""
    r = c.responses.get(sid)
    answered = r is not None and r.ended  # before the frame that is wrong

    def seen():
        r = c.responses.get(sid)
        return c.goaway is not None or (r is not None and r.reset is not None)
    deadline = time.time() + c.timeout
    while not seen():
        check(time.time() < deadline, f"neither RST_STREAM nor GOAWAY {code:#x} came")
        try:
            f = c.read_frame(max(0.01, deadline - time.time()))
        except Fail:
            continue
        r = c.responses.get(sid)
        check(answered or not (r is not None and r.ended),
              f"stream {sid} was answered ({r and r.status})")
        if f is None:
            break
    r = c.responses.get(sid)
    if r is not None and r.reset is not None:
        check(r.reset == code, f"RST_STREAM {r.reset:#x}, expected {code:#x}")
    else:
        check(c.goaway is not None, f"closed without GOAWAY (expected {code:#x})")
        check(c.goaway.error_code == code, f"GOAWAY {c.goaway.error_code:#x}, expected {code:#x}")


def file_bytes(env, name):
    with open(os.path.join(env.www, name), "rb") as fh:
        return fh.read()


def read_within_windows(c, sids, stream_window, conn_window=65535, max_frame=16384,
                        give_stream=True, give_conn=True, timeout=10):
    """Reads the responses on sids (the connection made with auto_window
    off), checking that every DATA frame fits SETTINGS_MAX_FRAME_SIZE (4.2)
    and both windows (6.9.1); each frame's bytes are given back on the
    windows asked for as it comes. Returns {sid: Response}."""
    win = {sid: stream_window for sid in sids}
    conn = conn_window
    deadline = time.time() + timeout

    def done(sid):
        r = c.responses.get(sid)
        check(r is None or r.reset is None, f"stream {sid} reset {r and r.reset}")
        return r is not None and r.ended
    while not all(done(sid) for sid in sids):
        check(time.time() < deadline, "timed out: " + ", ".join(
            f"stream {sid} {len(c.responses[sid].body) if sid in c.responses else 0} bytes"
            for sid in sids))
        f = c.read_frame(max(0.01, deadline - time.time()))
        check(f is not None, "connection closed" +
              (f" (GOAWAY {c.goaway.error_code:#x})" if c.goaway else ""))
        if not isinstance(f, DataFrame) or f.stream_id not in win:
            continue
        n = f.flow_controlled_length
        check(n <= max_frame, f"DATA of {n} bytes over SETTINGS_MAX_FRAME_SIZE {max_frame}")
        check(n <= win[f.stream_id], f"DATA of {n} bytes on stream {f.stream_id} over its "
              f"window of {win[f.stream_id]}")
        check(n <= conn, f"DATA of {n} bytes over the connection's window of {conn}")
        win[f.stream_id] -= n
        conn -= n
        if n == 0:
            continue
        out = []
        if give_conn:
            out.append(WindowUpdateFrame(0, window_increment=n))
            conn += n
        if give_stream and "END_STREAM" not in f.flags:
            out.append(WindowUpdateFrame(f.stream_id, window_increment=n))
            win[f.stream_id] += n
        if out:
            c.send(*out)
    return {sid: c.responses[sid] for sid in sids}


def open_stream(c, path="/slow?ms=1500", end_stream=True):
    """A stream the server keeps open a while (half-closed (remote) when
    end_stream: the handler answers later)."""
    return c.request(path, end_stream=end_stream)


# -- issue 23: requests checked before anything is routed or forwarded (RFC 9113
# 8.2, 8.2.1, 8.3, 8.3.1; RFC 9110 5.5, 5.6.2). Each refusal is a stream error
# PROTOCOL_ERROR (8.1.1) before the core sees the request.
def answered(c, fields, what):
    """fields on a new stream of c: answered (any status), not reset."""
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x5, sid, plain(fields)))
    r = c.response(sid)
    check(r.reset is None and r.status is not None,
          f"{what} {fields}: reset {r.reset}, status {r.status}")
    return r


# -- issue 23: answers that must reach the client (RFC 9113 8.1, 8.1.1)
def quiesce(c):
    """Two PINGs answered: whatever the server wrote for frames sent before
    them has been read (a PING's ACK is written at once, a stream's frames
    at the end of the read that carried it, so the ACK of a PING in that
    same read can come first; the second PING is in a later read)."""
    c.ping()
    c.ping()
