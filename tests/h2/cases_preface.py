"""tests/h2/cases_preface.py — RFC 9113 3 (starting HTTP/2: the preface) and 4
(frames: their format, sizes, and header compression as the connection's
state).

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import os

from h2lib import (COMPRESSION_ERROR, FRAME_SIZE_ERROR, PREFACE, PROTOCOL_ERROR, Conn, DataFrame,
                   PingFrame, SettingsFrame, WindowUpdateFrame, check)
from h2cases import (case, raw_frame, lit, GET_ROOT, settled, conn_error, file_bytes,
                     read_within_windows)


@case("conformance")
def preface_server_settings_first(env):
    """3.4: the server's preface is a SETTINGS frame."""
    c = Conn(env.k.port())
    f = c.read_frame()
    check(isinstance(f, SettingsFrame) and "ACK" not in f.flags, f"first frame {f}")
    check(f.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS) == 8, f"settings {f.settings}")


@case("conformance")
def preface_invalid(env):
    """3.4: a connection that does not start with the preface is an error."""
    c = Conn(env.k.port(), preface=False)
    c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\0" * 40)
    c.expect_closed()
    check(c.goaway is None or c.goaway.error_code == PROTOCOL_ERROR,
          f"GOAWAY {c.goaway and c.goaway.error_code}")


@case("conformance")
def prior_knowledge_on_http1_listener(env):
    """3.3: http1 hands a connection that opens with the preface to h2."""
    c = Conn(env.k.port("http1"))
    r = c.get("/h2test/head")
    check(r.status == 200 and b"version=20" in r.body, f"{r.status} {r.body}")


@case("conformance")
def frames_not_above_max_frame_size(env):
    """4.2: DATA from the server fits SETTINGS_MAX_FRAME_SIZE (16384)."""
    c = Conn(env.k.port())
    r = c.response(c.request("/files/big.bin"), timeout=10)
    check(len(r.body) == 300000, f"{len(r.body)} bytes")
    check(max(len(f.data) for f in r.frames) <= 16384, "a DATA frame over 16384")


@case("conformance")
def frame_too_large(env):
    """4.2: a frame over our SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR."""
    c = Conn(env.k.port())
    c.read_frame()
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_raw(raw_frame(0x0, 0x0, sid, b"x" * 16385))
    c.expect_goaway(FRAME_SIZE_ERROR)


@case("conformance")
def preface_without_settings(env):
    """3.4: the client preface is the magic then a SETTINGS frame; anything
    else (a PING here) is a connection error PROTOCOL_ERROR."""
    c = Conn(env.k.port(), preface=False)
    c.send_raw(PREFACE + PingFrame(0, opaque_data=b"12345678").serialize())
    c.expect_goaway(PROTOCOL_ERROR)
    c.expect_closed()


@case("conformance")
def unknown_flags_ignored(env):
    """4.1: flags a frame type does not define are ignored (h2spec 4.1/2):
    a PING with every flag but ACK set is answered, and a HEADERS with
    0x2, 0x10, 0x40 and 0x80 set besides END_STREAM and END_HEADERS is a
    request like any other."""
    c = settled(env)
    c.send_raw(raw_frame(0x6, 0xfe, 0, b"flagged!"))
    c.wait_for(lambda f: isinstance(f, PingFrame) and "ACK" in f.flags and
               f.opaque_data == b"flagged!", what="the PING's ACK")
    c.send_raw(raw_frame(0x1, 0xd7, 1, GET_ROOT))
    r = c.response(1)
    check(r.status == 200 and r.body == b"Hello, World!", f"{r.status} {r.body!r}")


@case("conformance")
def reserved_bit_ignored(env):
    """4.1: the reserved bit of the stream identifier is ignored on
    receipt (h2spec 4.1/3): a PING on 0x80000000 is a PING on stream 0, a
    HEADERS on 0x80000001 opens stream 1."""
    c = settled(env)
    c.send_raw(b"\x00\x00\x08\x06\x00\x80\x00\x00\x00" + b"reserved")
    c.wait_for(lambda f: isinstance(f, PingFrame) and "ACK" in f.flags and
               f.opaque_data == b"reserved", what="the PING's ACK")
    c.send_raw(len(GET_ROOT).to_bytes(3, "big") + b"\x01\x05\x80\x00\x00\x01" + GET_ROOT)
    r = c.response(1)
    check(r.status == 200 and r.body == b"Hello, World!", f"{r.status} {r.body!r}")


@case("conformance")
def data_of_max_frame_size(env):
    """4.2: a DATA frame of exactly SETTINGS_MAX_FRAME_SIZE (16384) is
    taken (h2spec 4.2/1)."""
    c = Conn(env.k.port())
    body = os.urandom(16384)
    sid = c.request("/echo", method="POST", fields=[("content-length", "16384")],
                    end_stream=False)
    c.send(DataFrame(sid, body, flags=["END_STREAM"]))
    r = c.response(sid)
    check(r.status == 200 and r.body == body, f"{r.status} {len(r.body)} bytes")


@case("conformance")
def headers_too_large(env):
    """4.2: a HEADERS frame over SETTINGS_MAX_FRAME_SIZE: it changes the
    connection's HPACK state, so a connection error FRAME_SIZE_ERROR
    (h2spec 4.2/3)."""
    block = GET_ROOT + b"\x00" + lit("x-pad") + lit("a" * 16400)
    conn_error(env, raw_frame(0x1, 0x5, 1, block), FRAME_SIZE_ERROR)


@case("conformance")
def hpack_truncated_block(env):
    """4.3: a header block that cannot be decompressed (a literal whose
    string runs past the block's end): COMPRESSION_ERROR (h2spec 4.3/1)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, b"\x82\x84\x86\x01\x05ab"), COMPRESSION_ERROR)


@case("conformance")
def priority_inside_header_block(env):
    """4.3, 6.10: a PRIORITY between a HEADERS without END_HEADERS and its
    CONTINUATION: PROTOCOL_ERROR (h2spec 4.3/2)."""
    conn_error(env, raw_frame(0x1, 0x1, 1, b"\x82\x84") +
               raw_frame(0x2, 0x0, 1, (0).to_bytes(4, "big") + b"\x10") +
               raw_frame(0x9, 0x4, 1, b"\x86\x01" + lit("x")), PROTOCOL_ERROR)


@case("conformance")
def headers_on_another_stream_inside_block(env):
    """4.3: a HEADERS on stream 3 while stream 1's header block is open:
    PROTOCOL_ERROR (h2spec 4.3/3)."""
    conn_error(env, raw_frame(0x1, 0x1, 1, b"\x82\x84") + raw_frame(0x1, 0x5, 3, GET_ROOT),
               PROTOCOL_ERROR)


@case("conformance")
def larger_max_frame_size(env):
    """4.2, 6.5.2: a client's larger SETTINGS_MAX_FRAME_SIZE (1 MiB) with
    large windows: responses arrive whole, no frame over the client's
    limit."""
    c = settled(env, settings={SettingsFrame.MAX_FRAME_SIZE: 1 << 20,
                               SettingsFrame.INITIAL_WINDOW_SIZE: 1 << 22}, auto_window=False)
    c.send(WindowUpdateFrame(0, window_increment=(1 << 23) - 65535))
    s1 = c.request("/files/big.bin")
    s2 = c.request("/h2test/big?n=2000000")
    rs = read_within_windows(c, [s1, s2], 1 << 22, conn_window=1 << 23, max_frame=1 << 20,
                             timeout=15)
    check(rs[s1].body == file_bytes(env, "big.bin"), f"big.bin: {len(rs[s1].body)} bytes")
    check(rs[s2].body == b"x" * 2000000, f"big: {len(rs[s2].body)} bytes")
