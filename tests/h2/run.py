#!/usr/bin/env python3
"""tests/h2/run.py — the h2 module against raw HTTP/2 frame sequences.

    run.py conformance|attacks KEEL MODULE_DIR TEST_MODULE_DIR [CASE...]

conformance: cases in the spirit of h2spec's sections (RFC 9113 3.4 the
preface, 4.1 frame format, 4.2 frame sizes, 4.3 header compression, 5.1
stream states, 5.1.1 stream ids, 5.1.2 concurrency, 5.3.1 dependencies, 5.5
extensions, 6.1-6.10 each frame type, 6.9 flow control, RFC 7541 HPACK, 8
HTTP semantics: fields, pseudo-fields, content-length, trailers), plus what
keel promises above them (hello's routes, the core's pipeline, limits,
timeouts, shutdown).

attacks: each published HTTP/2 attack performed against keel. Each must end
with GOAWAY ENHANCE_YOUR_CALM (or a reset stream), while another connection
opened before it keeps being answered, and keel's memory stays bounded.

Each case runs under an alarm (20 s); exit 0 if all pass, 1 otherwise, 77 if
hyperframe/hpack are missing.
"""

import os
import signal
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    from h2lib import *  # noqa: F401,F403
    from h2lib import (CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR,
                       FRAME_SIZE_ERROR, NO_ERROR, PREFACE, PROTOCOL_ERROR, REFUSED_STREAM,
                       STREAM_CLOSED,
                       Conn, ContinuationFrame, DataFrame, ExtensionFrame, Fail, GoAwayFrame,
                       HeadersFrame, Keel, PingFrame, PriorityFrame, RstStreamFrame,
                       SettingsFrame, WindowUpdateFrame, check)
    from hpack.hpack import encode_integer
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e} (Debian: python3-h2)")
    sys.exit(77)

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

# ---- conformance ---------------------------------------------------------------------


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
def get_root(env):
    c = Conn(env.k.port())
    r = c.get("/")
    check(r.status == 200 and r.body == b"Hello, World!", f"{r.status} {r.body!r}")
    check(r.header("content-length") == "13" and r.header("date") and r.header("server"),
          f"{r.headers}")


@case("conformance")
def head_has_no_body(env):
    """RFC 9110 9.3.2: HEADERS with END_STREAM, no DATA."""
    c = Conn(env.k.port())
    r = c.get("/", method="HEAD")
    check(r.status == 200 and r.body == b"" and not r.frames, f"{r.status} {r.body!r}")


@case("conformance")
def status_204_and_304_have_no_body(env):
    c = Conn(env.k.port())
    for code in (204, 304):
        r = c.get(f"/h2test/status?code={code}")
        check(r.status == code and not r.frames, f"{code}: {r.status} {len(r.frames)} DATA")
        check(r.header("content-length") is None, f"{code} with content-length")


@case("conformance")
def authority_stands_for_host(env):
    """8.3.1: :authority is what the handler sees as Host; version 20."""
    c = Conn(env.k.port())
    r = c.get("/h2test/head?x=1", authority="example.test:8443")
    check(b"host=example.test:8443\n" in r.body, r.body)
    check(b"version=20\n" in r.body and b"target=/h2test/head?x=1\n" in r.body, r.body)


@case("conformance")
def cookies_are_joined(env):
    """8.2.3: cookie crumbs in separate fields reach the handler joined."""
    c = Conn(env.k.port())
    r = c.get("/h2test/head", fields=[("cookie", "a=1"), ("x-y", "z"), ("cookie", "b=2")])
    check(b"cookie=a=1; b=2\n" in r.body, r.body)


@case("conformance")
def post_echo_across_windows(env):
    """6.9: a body larger than the initial window arrives whole."""
    c = Conn(env.k.port())
    body = os.urandom(300000)
    sid = c.request("/echo", method="POST", body=body,
                    fields=[("content-length", str(len(body)))])
    r = c.response(sid)
    check(r.status == 200 and r.body == body, f"{r.status} {len(r.body)}")


@case("conformance")
def post_without_length(env):
    """8.1.1: no content-length: the body ends with END_STREAM."""
    c = Conn(env.k.port())
    r = c.response(c.request("/echo", method="POST", body=b"abc" * 1000))
    check(r.status == 200 and r.body == b"abc" * 1000, f"{r.status} {r.body[:20]!r}")


@case("conformance")
def slow_reader_holds_only_its_stream(env):
    """6.9: a handler that has not read its body keeps its stream's window
    closed (no WINDOW_UPDATE for it), while other streams are answered."""
    c = Conn(env.k.port())
    sid = c.request("/h2test/late?ms=800", method="POST", end_stream=False)
    c.send_data(sid, b"x" * 65535, end_stream=True)
    t0 = time.time()
    r2 = c.get("/")
    check(r2.status == 200 and time.time() - t0 < 0.5, "another stream was held up")
    end = t0 + 0.4
    while time.time() < end:
        try:
            f = c.read_frame(max(0.01, end - time.time()))
        except Fail:
            break
        check(not (isinstance(f, WindowUpdateFrame) and f.stream_id == sid),
              "the stream's window was given back before the handler read")
    r = c.response(sid)
    check(r.status == 200 and r.body == b"len=65535", f"{r.status} {r.body!r}")


@case("conformance")
def response_trailers(env):
    """8.1: trailers after DATA close the stream."""
    c = Conn(env.k.port())
    r = c.get("/stream?n=3")
    check(r.status == 200 and r.body.count(b"chunk") == 3, r.body)
    check(("x-stream-chunks", "3") in r.trailers, f"trailers {r.trailers}")


@case("conformance")
def request_trailers_accepted(env):
    """8.1: a request may end with a trailer section."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send(c.headers_frame(sid, [("x-trailer", "1")], end_stream=True))
    r = c.response(sid)
    check(r.status == 200 and r.body == b"hello", f"{r.status} {r.body!r}")


@case("conformance")
def request_trailers_reach_the_handler(env):
    """8.1: the trailer section's fields reach the handler once it has read
    the body (ABI 1.5), less those RFC 9110 6.5.1 keeps out of trailers;
    read whole or streamed alike."""
    for route in ("/trailers/read", "/trailers/stream"):
        c = Conn(env.k.port())
        sid = c.request(route, method="POST", end_stream=False)
        c.send_data(sid, b"hello ", end_stream=False)
        c.send_data(sid, b"world", end_stream=False)
        c.send(c.headers_frame(sid, [("x-checksum", "c0ffee"), ("host", "evil"),
                                     ("x-other", "two words")], end_stream=True))
        r = c.response(sid)
        text = r.body.decode()
        check(r.status == 200, f"{route}: {r.status} {text}")
        check("before=0\n" in text and "body=11\n" in text and "count=2\n" in text,
              f"{route}: {text}")
        check("x-checksum: c0ffee\n" in text and "x-other: two words\n" in text
              and "host" not in text, f"{route}: {text}")
        check("lookup=c0ffee\n" in text, f"{route}: {text}")

    # No trailers: none seen.
    c = Conn(env.k.port())
    sid = c.request("/trailers/read", method="POST", end_stream=False)
    c.send_data(sid, b"abc", end_stream=True)
    r = c.response(sid)
    check(r.status == 200 and b"count=0\n" in r.body, r.body)


@case("conformance")
def flow_control_small_window(env):
    """6.9.1: the server sends no more than the client's window allows."""
    c = Conn(env.k.port(), settings={SettingsFrame.INITIAL_WINDOW_SIZE: 100}, auto_window=False)
    sid = c.request("/files/4k.bin")
    got = 0
    deadline = time.time() + 5
    while got < 4096:
        check(time.time() < deadline, f"only {got} bytes came")
        f = c.read_frame()
        if isinstance(f, DataFrame) and f.stream_id == sid:
            check(len(f.data) <= 100, f"DATA of {len(f.data)} bytes over a 100-byte window")
            got += len(f.data)
            c.send(WindowUpdateFrame(sid, window_increment=len(f.data)),
                   WindowUpdateFrame(0, window_increment=len(f.data)))
    r = c.response(sid)
    with open(os.path.join(env.www, "4k.bin"), "rb") as fh:
        check(r.body == fh.read(), "body differs from the file")


@case("conformance")
def goaway_last_stream_never_rises(env):
    """6.8: after a graceful GOAWAY naming stream N, a stream the client
    opens later is ignored, and a later GOAWAY (a connection error) names
    no stream above N (fuzz_h2 once saw it rise)."""
    c = Conn(env.k.port())
    slow = c.request("/slow?ms=600")  # keeps the connection open meanwhile
    c.request("/h2test/close")  # Connection: close becomes GOAWAY NO_ERROR
    g1 = c.expect_goaway(NO_ERROR)
    first_last = g1.last_stream_id
    late = c.request("/")
    c.send_raw(raw_frame(0x6, 0x0, 1, b"\0" * 8))  # PING on a stream: PROTOCOL_ERROR
    g2 = c.expect_goaway(PROTOCOL_ERROR)
    check(g2.last_stream_id <= first_last,
          f"GOAWAY's last stream went up from {first_last} to {g2.last_stream_id}")
    check(late not in c.responses or c.responses[late].status is None,
          "a stream opened after GOAWAY was answered")
    check(slow <= first_last, "the stream in flight was not covered by the first GOAWAY")


@case("conformance")
def repeated_heads_stay_right(env):
    """A connection's last response head is reused when the next one is the
    same (headcache.c): heads that differ in status, length or fields must
    each come out as themselves, before and after a repeat."""
    c = Conn(env.k.port())
    a1, a2 = c.get("/files/4k.bin"), c.get("/files/4k.bin")
    b = c.response(c.request("/files/big.bin"), timeout=10)
    s204 = c.get("/h2test/status?code=204")
    s304 = c.get("/h2test/status?code=304")
    a3 = c.get("/files/4k.bin")
    h = c.get("/files/4k.bin", method="HEAD")
    for r in (a1, a2, a3, h):
        check(r.status == 200 and r.header("content-length") == "4096",
              f"{r.status} {r.header('content-length')}")
        check(r.header("etag") == a1.header("etag"), "the file's ETag changed")
    check(len(a3.body) == 4096 and h.body == b"", "bodies")
    check(b.status == 200 and b.header("content-length") == "300000", "big.bin's head")
    check(b.header("etag") != a1.header("etag"), "big.bin got 4k.bin's ETag")
    check(s204.status == 204 and s204.header("content-length") is None, "204's head")
    check(s304.status == 304 and s304.header("etag") == '"x"', "304's head")


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
def concurrency_limit(env):
    """5.1.2: a stream over SETTINGS_MAX_CONCURRENT_STREAMS (8), once the
    client acknowledged it, is refused (RST_STREAM REFUSED_STREAM, which a
    client may retry, 8.7; the RFC allows PROTOCOL_ERROR too); the streams
    within the limit are answered and the connection goes on; counted."""
    c = Conn(env.k.port())
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags, what="SETTINGS ACK")
    sids = [c.request("/slow?ms=400") for _ in range(9)]
    c.expect_rst(sids[-1], REFUSED_STREAM)
    for sid in sids[:-1]:
        check(c.response(sid).status == 200, f"stream {sid} not answered")
    check(c.get("/h2test/head").status == 200, "the connection did not go on")
    check(metric(env, "h2_limits_total", 'limit="concurrent_streams"') >= 1, "not counted")


def metric(env, name, label):
    body = Conn(env.k.port()).get("/metrics").body.decode()
    for line in body.splitlines():
        if line.startswith(name) and label in line:
            return float(line.split()[-1])
    raise Fail(f"no {name}{{{label}}} in /metrics")


@case("conformance")
def data_on_idle_stream(env):
    """5.1: DATA on an idle stream: PROTOCOL_ERROR."""
    c = Conn(env.k.port())
    c.send(DataFrame(1, b"x"))
    c.expect_goaway(PROTOCOL_ERROR)


@case("conformance")
def even_stream_id(env):
    """5.1.1: a client stream id must be odd."""
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x1, 0x5, 2, GET_ROOT))
    c.expect_goaway(PROTOCOL_ERROR)


@case("conformance")
def headers_on_closed_stream(env):
    """5.1: HEADERS on a stream that was closed (both sides ended): a
    connection error STREAM_CLOSED, as h2spec wants."""
    c = Conn(env.k.port())
    sid = c.request("/")
    c.response(sid)
    c.request("/h2test/head", sid=sid)
    c.expect_goaway(STREAM_CLOSED)


@case("conformance")
def headers_after_our_reset(env):
    """5.1: frames the client sent on a stream before it saw our
    RST_STREAM are ignored: a refused stream's late DATA is dropped (its
    window given back) and the connection goes on."""
    c = Conn(env.k.port())
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags, what="SETTINGS ACK")
    sids = [c.request("/slow?ms=300", end_stream=False) for _ in range(9)]
    c.expect_rst(sids[-1], REFUSED_STREAM)
    c.send(DataFrame(sids[-1], b"late", flags=["END_STREAM"]))
    c.ping()
    for sid in sids[:-1]:
        check(c.response(sid).status == 200, f"stream {sid} not answered")
    # Answered, the eight are half-closed (local) until the client ends
    # them (8.1; they count toward the limit, 5.1.2): it does.
    c.send(*[DataFrame(sid, b"", flags=["END_STREAM"]) for sid in sids[:-1]])
    check(c.get("/h2test/head").status == 200, "the connection did not go on")


@case("conformance")
def rst_on_idle_stream(env):
    """6.4: RST_STREAM on an idle stream: PROTOCOL_ERROR."""
    c = Conn(env.k.port())
    c.send(RstStreamFrame(5, error_code=CANCEL))
    c.expect_goaway(PROTOCOL_ERROR)


@case("conformance")
def window_update_zero(env):
    """6.9: a WINDOW_UPDATE of 0 on the connection: PROTOCOL_ERROR."""
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x8, 0x0, 0, (0).to_bytes(4, "big")))
    c.expect_goaway(PROTOCOL_ERROR)


@case("conformance")
def window_overflow(env):
    """6.9.1: a window above 2^31-1: FLOW_CONTROL_ERROR."""
    c = Conn(env.k.port())
    c.send(WindowUpdateFrame(0, window_increment=0x7fffffff))
    c.expect_goaway(FLOW_CONTROL_ERROR)


@case("conformance")
def settings_initial_window_too_large(env):
    """6.5.2: SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1: FLOW_CONTROL_ERROR."""
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x4, 0x0, 0, (4).to_bytes(2, "big") + (1 << 31).to_bytes(4, "big")))
    c.expect_goaway(FLOW_CONTROL_ERROR)


@case("conformance")
def settings_ack_with_payload(env):
    """6.5: a SETTINGS ACK with a payload: FRAME_SIZE_ERROR."""
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x4, 0x1, 0, b"\0" * 6))
    c.expect_goaway(FRAME_SIZE_ERROR)


@case("conformance")
def ping_answered(env):
    """6.7: PING is answered with the same 8 bytes."""
    c = Conn(env.k.port())
    c.ping()


@case("conformance")
def unknown_frame_ignored(env):
    """5.5: frames of unknown types are ignored."""
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x20, 0x0, 0, b"whatever"))
    c.ping()
    check(c.get("/").status == 200, "no answer after an unknown frame")


@case("conformance")
def hpack_bad_index(env):
    """RFC 7541 2.3.3: an index beyond both tables: COMPRESSION_ERROR."""
    c = Conn(env.k.port())
    block = b"\x82\x84\x86" + b"\xff" + bytes(encode_integer(300 - 127, 8))  # index 300
    c.send_raw(raw_frame(0x1, 0x5, 1, block))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_table_size_over_settings(env):
    """RFC 7541 6.3, RFC 9113 4.3: a dynamic table size update above our
    SETTINGS_HEADER_TABLE_SIZE (4096): COMPRESSION_ERROR."""
    c = Conn(env.k.port())
    block = b"\x3f\xe1\x3f" + GET_ROOT  # size update to 8192
    c.send_raw(raw_frame(0x1, 0x5, 1, block))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def body_over_max_while_streaming(env):
    """An undeclared body that passes [h2] max_body (1m): 413, the stream
    ends, the connection goes on."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    try:
        c.send_data(sid, b"x" * (1024 * 1024 + 20000), end_stream=True, deadline=5)
    except Fail:
        pass  # the server stopped taking it: fine
    r = c.response(sid)
    check(r.status == 413 or r.reset is not None, f"status {r.status} reset {r.reset}")
    check(c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def max_requests_goaway(env):
    """[h2] max_requests = 3: the third stream is the last (GOAWAY NO_ERROR
    naming it), all three are answered."""
    k = env.start("[h2]\nmax_requests = 3\n")
    try:
        c = Conn(k.port())
        sids = [c.request("/") for _ in range(3)]
        for sid in sids:
            check(c.response(sid).status == 200, f"stream {sid}")
        g = c.expect_goaway(NO_ERROR)
        check(g.last_stream_id == sids[-1], f"last stream {g.last_stream_id}")
        c.expect_closed()
    finally:
        k.stop()


@case("conformance")
def uppercase_field_name(env):
    """8.2.1: an uppercase field name makes the request malformed."""
    c = Conn(env.k.port())
    c.expect_rst(c.request("/", fields=[("X-Upper", "1")]), PROTOCOL_ERROR)


@case("conformance")
def connection_specific_field(env):
    """8.2.2: Connection in a request: malformed."""
    c = Conn(env.k.port())
    c.expect_rst(c.request("/", fields=[("connection", "close")]), PROTOCOL_ERROR)


@case("conformance")
def missing_path(env):
    """8.3.1: no :path: malformed."""
    c = Conn(env.k.port())
    sid = c.new_id()
    c.send(c.headers_frame(sid, [(":method", "GET"), (":scheme", "http"),
                                 (":authority", "x")]))
    c.expect_rst(sid, PROTOCOL_ERROR)


@case("conformance")
def content_length_mismatch(env):
    """8.1.1: DATA not matching content-length: malformed."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", fields=[("content-length", "10")], end_stream=False)
    c.send_data(sid, b"12345", end_stream=True)
    c.expect_rst(sid, PROTOCOL_ERROR)


@case("conformance")
def header_list_too_large_431(env):
    """6.5.2, 10.5.1: a field list over max_header_list (32k) gets 431."""
    c = Conn(env.k.port())
    r = c.get("/", fields=[("x-big", "a" * 40000)])
    check(r.status == 431, f"status {r.status} reset {r.reset}")
    check(c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def body_over_max_413(env):
    """A declared body over [h2] max_body gets 413."""
    c = Conn(env.k.port())
    r = c.get("/echo", method="POST", fields=[("content-length", "2000000")], end_stream=False)
    check(r.status == 413, f"status {r.status}")


@case("conformance")
def close_connection_is_goaway(env):
    """6.8: a handler that asks to close gets GOAWAY NO_ERROR after its answer."""
    c = Conn(env.k.port())
    sid = c.request("/h2test/close")
    r = c.response(sid)
    check(r.status == 200 and r.body == b"bye", f"{r.status} {r.body!r}")
    g = c.expect_goaway(NO_ERROR)
    check(g.last_stream_id == sid, f"last stream {g.last_stream_id}")
    c.expect_closed()


@case("conformance")
def connection_fields_not_sent(env):
    """8.2.2: no connection-specific field in a response."""
    c = Conn(env.k.port())
    r = c.get("/probe/hop")
    names = {k for k, _ in r.headers}
    bad = names & {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
    check(r.status == 200 and not bad, f"{r.status} {bad}")


@case("conformance")
def many_streams_multiplexed(env):
    """100 requests in one write, answered on one connection."""
    c = Conn(env.k.port())
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags, what="SETTINGS ACK")
    frames = []
    sids = []
    for i in range(8):
        sid = c.new_id()
        sids.append(sid)
        frames.append(c.headers_frame(sid, [(":method", "GET"), (":path", "/"),
                                            (":scheme", "http"), (":authority", "x")]))
    c.send(*frames)
    for sid in sids:
        check(c.response(sid).status == 200, f"stream {sid}")


@case("conformance")
def hello_routes(env):
    """hello's routes, unchanged, over HTTP/2: async, offload, streaming."""
    c = Conn(env.k.port())
    s1, s2, s3 = c.request("/slow?ms=100"), c.request("/offload?n=1000"), c.request("/stream?n=5")
    for sid in (s1, s2, s3):
        r = c.response(sid)
        check(r.status == 200 and r.body, f"stream {sid}: {r.status}")
    check(c.get("/nope").status == 404, "404")
    # The access log is written by a background thread (keel_appender):
    # the line arrives soon, not at once (a loaded machine showed it).
    want = '"GET /slow?ms=100 HTTP/2.0" 200'
    deadline = time.monotonic() + 5
    log = ""
    while time.monotonic() < deadline:
        log = open(env.access_log).read()
        if want in log:
            break
        time.sleep(0.05)
    check(want in log, "no access log line with HTTP/2.0")


@case("conformance")
def idle_timeout_goaway(env):
    """An idle connection gets GOAWAY NO_ERROR and is closed (idle_timeout 1s)."""
    k = env.start("[h2]\nidle_timeout = 1s\n")
    try:
        c = Conn(k.port())
        check(c.get("/").status == 200, "first request")
        t0 = time.time()
        c.expect_goaway(NO_ERROR, timeout=4)
        c.expect_closed(timeout=4)
        check(time.time() - t0 >= 0.8, "closed before idle_timeout")
    finally:
        k.stop()


@case("conformance")
def busy_after_idle_trim(env):
    """An idle connection's nghttp2 buffers give their pages back (mem.c,
    at the first stream-timeout tick without streams: every 250 ms here);
    the same connection then answers as before, HPACK state and all."""
    k = env.start("[h2]\nstream_timeout = 1s\n")
    try:
        c = Conn(k.port())
        with open(os.path.join(env.www, "4k.bin"), "rb") as fh:
            want = fh.read()
        for rnd in range(3):
            for _ in range(3):
                r = c.get("/")
                check(r.status == 200 and r.body == b"Hello, World!", f"round {rnd}: {r.body!r}")
                r = c.get("/files/4k.bin")
                check(r.status == 200 and r.body == want, f"round {rnd}: file differs")
                check(r.header("content-length") == "4096" and r.header("etag"), f"{r.headers}")
            time.sleep(0.7)  # two ticks at least: trimmed, then the tick stops
    finally:
        k.stop()


@case("conformance")
def graceful_shutdown(env):
    """6.8: SIGTERM: GOAWAY with the last stream id, in-flight streams finish."""
    k = env.start("")
    try:
        c = Conn(k.port())
        sid = c.request("/slow?ms=700")
        time.sleep(0.2)
        k.term()
        g = c.expect_goaway(NO_ERROR, timeout=3)
        check(g.last_stream_id == sid, f"last stream {g.last_stream_id}, expected {sid}")
        r = c.response(sid, timeout=5)
        check(r.status == 200 and r.body.startswith(b"Hello after"), f"{r.status} {r.body!r}")
        c.expect_closed(timeout=5)
        check(k.wait(10) == 0, "keel did not exit 0")
    finally:
        k.stop()


# ---- conformance: h2spec's sections, frame by frame -----------------------------------
#
# The cases below follow h2spec's list (http2/, hpack/), each asserting the
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


def conn_error_either(c, codes):
    """A connection error with one of codes (h2spec accepts any of them)."""
    deadline = time.time() + c.timeout
    while c.goaway is None and not c.eof:
        check(time.time() < deadline, "no GOAWAY came")
        try:
            if c.read_frame(max(0.01, deadline - time.time())) is None:
                break
        except Fail:
            pass
    check(c.goaway is not None, f"closed without GOAWAY (expected one of {codes})")
    check(c.goaway.error_code in codes, f"GOAWAY {c.goaway.error_code:#x}, expected one of {codes}")
    c.expect_closed()


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


# -- 3.4, 4.1, 4.2, 4.3


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


# -- RFC 7541 (h2spec hpack/)


@case("conformance")
def hpack_index_zero(env):
    """RFC 7541 6.1: an indexed field of index 0: COMPRESSION_ERROR."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x80"), COMPRESSION_ERROR)


@case("conformance")
def hpack_bad_name_index(env):
    """RFC 7541 2.3.3, 6.2.1: a literal whose name index is beyond both
    tables (70, the dynamic table empty): COMPRESSION_ERROR."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x7f\x07" + lit("v")), COMPRESSION_ERROR)


@case("conformance")
def hpack_size_update_after_field(env):
    """RFC 7541 4.2, 6.3: a dynamic table size update after the first field
    of a block: COMPRESSION_ERROR (h2spec hpack 6.3)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x20"), COMPRESSION_ERROR)


@case("conformance")
def hpack_two_size_updates_at_start(env):
    """RFC 7541 4.2: two size updates at a block's start (0, then 4096)
    are allowed, and the table works after them."""
    c = settled(env)
    ins = b"\x40" + lit("x-a") + lit("one")  # entry 62
    c.send_raw(raw_frame(0x1, 0x5, 1, b"\x20\x3f\xe1\x1f" + b"\x82\x04" + lit("/headers") +
                         b"\x86\x01" + lit("x") + ins))
    r = c.response(1)
    check(r.status == 200 and b"x-a: one\n" in r.body, f"{r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 3, b"\x82\x04" + lit("/headers") + b"\x86\x01" +
                         lit("x") + b"\xbe"))
    r = c.response(3)
    check(r.status == 200 and b"x-a: one\n" in r.body, f"{r.status} {r.body!r}")


@case("conformance")
def hpack_huffman_eos(env):
    """RFC 7541 5.2: a Huffman string containing the EOS symbol (30 ones):
    COMPRESSION_ERROR (h2spec hpack 5.2/1)."""
    block = GET_ROOT + b"\x00" + lit("x-h") + b"\x84\xff\xff\xff\xff"
    conn_error(env, raw_frame(0x1, 0x5, 1, block), COMPRESSION_ERROR)


@case("conformance")
def hpack_huffman_padding_too_long(env):
    """RFC 7541 5.2: Huffman padding longer than 7 bits ("a", 00011, then
    11 ones): COMPRESSION_ERROR (h2spec hpack 5.2/2)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x00" + lit("x-h") + b"\x82\x1f\xff"),
               COMPRESSION_ERROR)


@case("conformance")
def hpack_huffman_padding_not_eos(env):
    """RFC 7541 5.2: Huffman padding that is not the EOS code's leading
    ones ("a", 00011, then 000): COMPRESSION_ERROR (h2spec hpack 5.2/3)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x00" + lit("x-h") + b"\x81\x18"),
               COMPRESSION_ERROR)


@case("conformance")
def hpack_huffman_accepted(env):
    """RFC 7541 5.2: Huffman-coded names and values decode (the client's
    encoder codes them when shorter); the value arrives as sent."""
    c = Conn(env.k.port())
    value = "the quick brown fox jumps over the lazy dog 0123456789"
    r = c.get("/headers", fields=[("x-huffman", value), ("cookie", "abc=defghi")])
    check(r.status == 200 and f"x-huffman: {value}\n".encode() in r.body, r.body)


@case("conformance")
def hpack_dynamic_table_across_blocks(env):
    """RFC 7541 2.3, 4.4, RFC 9113 4.3: the dynamic table lives across
    header blocks split over CONTINUATION frames: entries inserted in one
    request are referenced in the next (indices shifting as entries are
    added), never-indexed and without-indexing literals add none."""
    c = settled(env)
    # Stream 1: HEADERS | CONTINUATION | CONTINUATION. Inserts, oldest
    # first: :path /h2test/head, :authority dyn.test, cookie c=1 (so 62 is
    # cookie, 63 :authority, 64 :path).
    c.send_raw(raw_frame(0x1, 0x1, 1, b"\x82\x44" + lit("/h2test/head")) +
               raw_frame(0x9, 0x0, 1, b"\x86\x41" + lit("dyn.test")) +
               raw_frame(0x9, 0x4, 1, b"\x60" + lit("c=1") + b"\x10" + lit("x-never") + lit("n")
                         + b"\x00" + lit("x-plain") + lit("p")))
    r = c.response(1)
    check(r.status == 200, f"stream 1: {r.status} {r.reset}")
    check(b"target=/h2test/head\n" in r.body and b"host=dyn.test\n" in r.body and
          b"cookie=c=1\n" in r.body, f"stream 1: {r.body!r}")
    # Stream 3: every field from the table, split after one byte, and one
    # more cookie inserted (62 cookie d=2, 63 cookie c=1, 64 :authority,
    # 65 :path after it).
    c.send_raw(raw_frame(0x1, 0x1, 3, b"\x82") +
               raw_frame(0x9, 0x0, 3, b"\xc0") +
               raw_frame(0x9, 0x4, 3, b"\x86\xbf\xbe\x60" + lit("d=2")))
    r = c.response(3)
    check(r.status == 200 and b"host=dyn.test\n" in r.body and
          b"cookie=c=1; d=2\n" in r.body, f"stream 3: {r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 5, b"\x82\xc1\x86\xc0\xbe\xbf"))
    r = c.response(5)
    check(r.status == 200 and b"target=/h2test/head\n" in r.body and
          b"host=dyn.test\n" in r.body and b"cookie=d=2; c=1\n" in r.body,
          f"stream 5: {r.status} {r.body!r}")
    # Nothing else was inserted: 66 is beyond the table.
    c.send_raw(raw_frame(0x1, 0x5, 7, b"\x82\xc1\x86\xc0\xc2"))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_eviction(env):
    """RFC 7541 4.3, 4.4: with the table sized to 100 bytes, a second
    78-byte entry evicts the first: index 62 is the newer, 63 is beyond
    the table (COMPRESSION_ERROR)."""
    c = settled(env)
    head = b"\x82\x04" + lit("/h2test/head") + b"\x86\x01" + lit("x")
    c.send_raw(raw_frame(0x1, 0x5, 1, b"\x3f\x45" + head + b"\x60" + lit("a" * 40) +
                         b"\x60" + lit("b" * 40)))
    r = c.response(1)
    check(r.status == 200 and ("cookie=" + "a" * 40 + "; " + "b" * 40).encode() in r.body,
          f"stream 1: {r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 3, head + b"\xbe"))
    r = c.response(3)
    check(r.status == 200 and ("cookie=" + "b" * 40 + "\n").encode() in r.body,
          f"stream 3: {r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 5, head + b"\xbf"))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_client_table_size_zero(env):
    """RFC 7541 4.2, RFC 9113 6.5.2: a client that sets
    SETTINGS_HEADER_TABLE_SIZE to 0 gets header blocks that leave nothing
    in its dynamic table (the server's encoder signals the size, 0)."""
    c = Conn(env.k.port(), settings={SettingsFrame.HEADER_TABLE_SIZE: 0})
    c.dec.max_allowed_table_size = 0
    for path in ("/", "/h2test/head", "/files/4k.bin", "/", "/h2test/status?code=204"):
        r = c.get(path)
        check(r.status in (200, 204), f"{path}: {r.status}")
        check(len(c.dec.header_table.dynamic_entries) == 0,
              f"{path}: the server's block inserted {len(c.dec.header_table.dynamic_entries)} "
              "entries into a table of size 0")


# -- 5.1 stream states


def open_stream(c, path="/slow?ms=1500", end_stream=True):
    """A stream the server keeps open a while (half-closed (remote) when
    end_stream: the handler answers later)."""
    return c.request(path, end_stream=end_stream)


@case("conformance")
def window_update_on_idle_stream(env):
    """5.1: WINDOW_UPDATE on an idle stream: PROTOCOL_ERROR (h2spec 5.1/3)."""
    conn_error(env, WindowUpdateFrame(1, window_increment=100).serialize(), PROTOCOL_ERROR)


@case("conformance")
def continuation_on_idle_stream(env):
    """5.1, 6.10: a CONTINUATION without a HEADERS before it, on an idle
    stream: PROTOCOL_ERROR (h2spec 5.1/4)."""
    conn_error(env, raw_frame(0x9, 0x4, 1, GET_ROOT), PROTOCOL_ERROR)


@case("conformance")
def priority_on_idle_stream_accepted(env):
    """5.1: PRIORITY may be sent on an idle stream; it opens nothing, and
    a lower stream id can still be opened after it."""
    c = settled(env)
    c.send(PriorityFrame(9, depends_on=0, stream_weight=16))
    c.ping()
    check(c.get("/").status == 200, "stream 1")
    check(c.response(c.request("/", sid=9)).status == 200, "stream 9")


@case("conformance")
def half_closed_remote_data(env):
    """5.1: DATA on a half-closed (remote) stream: STREAM_CLOSED (h2spec
    5.1/5; stream or connection error)."""
    c = settled(env)
    sid = open_stream(c)
    c.send(DataFrame(sid, b"late"))
    stream_or_conn_error(c, sid, STREAM_CLOSED)


@case("conformance")
def half_closed_remote_headers(env):
    """5.1: HEADERS on a half-closed (remote) stream: STREAM_CLOSED
    (h2spec 5.1/6; stream or connection error)."""
    c = settled(env)
    sid = open_stream(c)
    c.send_raw(raw_frame(0x1, 0x5, sid, plain([("x-trailer", "1")])))
    stream_or_conn_error(c, sid, STREAM_CLOSED)


@case("conformance")
def half_closed_remote_continuation(env):
    """5.1, 6.10: a CONTINUATION on a half-closed (remote) stream with no
    header block open: a connection error, STREAM_CLOSED or PROTOCOL_ERROR
    (h2spec 5.1/7)."""
    c = settled(env)
    sid = open_stream(c)
    c.ping()
    c.send_raw(raw_frame(0x9, 0x4, sid, plain([("x-a", "1")])))
    conn_error_either(c, (STREAM_CLOSED, PROTOCOL_ERROR))


@case("conformance")
def closed_by_client_reset_data(env):
    """5.1: DATA after the client's own RST_STREAM on the stream:
    STREAM_CLOSED (h2spec 5.1/8; stream or connection error)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send(RstStreamFrame(sid, error_code=CANCEL))
    c.send(DataFrame(sid, b"x"))
    stream_or_conn_error(c, sid, STREAM_CLOSED)


@case("conformance")
def closed_by_client_reset_headers(env):
    """5.1: HEADERS after the client's own RST_STREAM on the stream:
    STREAM_CLOSED (h2spec 5.1/9)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send(RstStreamFrame(sid, error_code=CANCEL))
    c.send_raw(raw_frame(0x1, 0x5, sid, plain([("x-trailer", "1")])))
    stream_or_conn_error(c, sid, STREAM_CLOSED)


@case("conformance")
def closed_stream_data(env):
    """5.1: DATA on a stream both sides ended: STREAM_CLOSED (h2spec 5.1/11)."""
    c = settled(env)
    sid = c.request("/")
    check(c.response(sid).status == 200, "the stream's answer")
    c.send(DataFrame(sid, b"x"))
    stream_or_conn_error(c, sid, STREAM_CLOSED)


@case("conformance")
def closed_stream_continuation(env):
    """5.1, 6.10: CONTINUATION on a closed stream, no block open: a
    connection error, STREAM_CLOSED or PROTOCOL_ERROR (h2spec 5.1/13)."""
    c = settled(env)
    sid = c.request("/")
    check(c.response(sid).status == 200, "the stream's answer")
    c.send_raw(raw_frame(0x9, 0x4, sid, plain([("x-a", "1")])))
    conn_error_either(c, (STREAM_CLOSED, PROTOCOL_ERROR))


@case("conformance")
def closed_stream_tolerated_frames(env):
    """5.1: WINDOW_UPDATE and RST_STREAM may arrive on a stream just closed
    (they crossed our END_STREAM), PRIORITY on any closed stream: all
    ignored, the connection goes on."""
    c = settled(env)
    sid = c.request("/")
    check(c.response(sid).status == 200, "the stream's answer")
    c.send(WindowUpdateFrame(sid, window_increment=1000),
           PriorityFrame(sid, depends_on=0, stream_weight=200),
           RstStreamFrame(sid, error_code=CANCEL))
    c.ping()
    check(c.goaway is None, f"GOAWAY {c.goaway.error_code if c.goaway else 0:#x}")
    check(c.responses[sid].reset is None, "RST_STREAM on the closed stream")
    check(c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def stream_id_lower_than_opened(env):
    """5.1.1: a new stream's id must exceed every id the client opened: a
    HEADERS on 3 after 5: PROTOCOL_ERROR (h2spec 5.1.1/2)."""
    c = settled(env)
    check(c.response(c.request("/", sid=5)).status == 200, "stream 5")
    conn_error(env, raw_frame(0x1, 0x5, 3, GET_ROOT), PROTOCOL_ERROR, c)


@case("conformance")
def headers_self_dependency(env):
    """5.3.1: a HEADERS whose priority names its own stream: a stream error
    PROTOCOL_ERROR (h2spec 5.3.1/1)."""
    c = settled(env)
    payload = (1).to_bytes(4, "big") + b"\x10" + GET_ROOT
    c.send_raw(raw_frame(0x1, 0x25, 1, payload))
    stream_error(c, 1, PROTOCOL_ERROR)
    check(c.response(c.request("/", sid=3)).status == 200, "the connection did not go on")


@case("conformance")
def priority_self_dependency(env):
    """5.3.1: a PRIORITY naming its own stream: a stream error
    PROTOCOL_ERROR (h2spec 5.3.1/2)."""
    c = settled(env)
    sid = open_stream(c)
    c.send(PriorityFrame(sid, depends_on=sid, stream_weight=16))
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def priority_accepted(env):
    """6.2, 6.3: a HEADERS with the PRIORITY and PADDED flags, and a
    PRIORITY frame on an open stream, are taken (RFC 9113 5.3.2: the
    scheme is deprecated, not forbidden)."""
    c = settled(env)
    payload = b"\x06" + (0x80000000).to_bytes(4, "big") + b"\x20" + GET_ROOT + b"\0" * 6
    c.send_raw(raw_frame(0x1, 0x2d, 1, payload))
    r = c.response(1)
    check(r.status == 200 and r.body == b"Hello, World!", f"{r.status} {r.reset}")
    sid = open_stream(c, "/slow?ms=100")
    c.send(PriorityFrame(sid, depends_on=1, stream_weight=100, exclusive=True))
    check(c.response(sid).status == 200, "the prioritized stream")


@case("conformance")
def unknown_frame_inside_header_block(env):
    """5.5, 6.10: a frame of an unknown type between HEADERS and its
    CONTINUATION: PROTOCOL_ERROR (h2spec 5.5/2)."""
    conn_error(env, raw_frame(0x1, 0x1, 1, b"\x82\x84") + raw_frame(0x20, 0x0, 1, b"junk") +
               raw_frame(0x9, 0x4, 1, b"\x86\x01" + lit("x")), PROTOCOL_ERROR)


@case("conformance")
def unknown_setting_ignored(env):
    """5.5, 6.5.2: settings of unknown identifiers are ignored; the frame is
    acknowledged (h2spec 6.5.2/5)."""
    c = settled(env)
    c.send_raw(raw_frame(0x4, 0x0, 0, (0xff).to_bytes(2, "big") + (1).to_bytes(4, "big") +
                         (0x4242).to_bytes(2, "big") + (0xffffffff).to_bytes(4, "big")))
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
               what="the SETTINGS ACK")
    check(c.get("/").status == 200, "the connection did not go on")


# -- 6.1 DATA, 6.2 HEADERS, 6.3 PRIORITY, 6.4 RST_STREAM


@case("conformance")
def data_on_stream_zero(env):
    """6.1: DATA on stream 0: PROTOCOL_ERROR (h2spec 6.1/1)."""
    conn_error(env, raw_frame(0x0, 0x0, 0, b"x"), PROTOCOL_ERROR)


@case("conformance")
def data_padding_too_long(env):
    """6.1: a pad length of the payload's length or more: PROTOCOL_ERROR
    (h2spec 6.1/3)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    conn_error(env, raw_frame(0x0, 0x8, sid, b"\x06" + b"x" * 5), PROTOCOL_ERROR, c)


@case("conformance")
def padded_data_accepted(env):
    """6.1, 6.9.1: padded DATA: the data arrives without its padding, and
    the whole frame (pad length byte and padding too) counts against the
    windows: a body of 100 frames of 1000 bytes each padded with 255 is
    125,600 flow-controlled bytes, more than the stream's 65,535, so it
    arrives only if the server gives the padding's share back. Frames whose
    payload is all padding, or a pad length of 0, are taken too."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    sent = b""
    deadline = time.time() + 10
    frames = [(os.urandom(1000), 255) for _ in range(100)] + [(b"", 200), (b"tail", 0)]
    for i, (data, pad) in enumerate(frames):
        n = len(data) + 1 + pad
        while c.send_window < n or c.stream_windows[sid] < n:
            check(time.time() < deadline, f"frame {i}: the server's windows stayed closed "
                  f"(stream {c.stream_windows[sid]}, connection {c.send_window})")
            f = c._read_one(max(0.01, deadline - time.time()))
            check(f is not None, "connection closed")
            c.backlog.append(f)
        flags = 0x8 | (0x1 if i == len(frames) - 1 else 0)
        c.send_raw(raw_frame(0x0, flags, sid, bytes([pad]) + data + b"\0" * pad))
        c.send_window -= n
        c.stream_windows[sid] -= n
        sent += data
    r = c.response(sid)
    check(r.status == 200 and r.body == sent, f"{r.status} {len(r.body)} of {len(sent)} bytes")


@case("conformance")
def padding_counts_against_window(env):
    """6.1, 6.9.1: padding is flow-controlled: 65,280 bytes of data whose
    last frame's padding takes the frame past the stream's window of
    65,535 (the handler has not read, so none was given back) is over the
    window: FLOW_CONTROL_ERROR (stream or connection error)."""
    c = settled(env)
    sid = c.request("/h2test/late?ms=1000", method="POST", end_stream=False)
    frames = b"".join(raw_frame(0x0, 0x0, sid, b"x" * 16384) for _ in range(3))
    frames += raw_frame(0x0, 0x8, sid, b"\xff" + b"x" * 16128 + b"\0" * 255)  # 16384, padded
    c.send_raw(frames)
    stream_or_conn_error(c, sid, FLOW_CONTROL_ERROR)
    # The handler holds its (reset) request until its timer fires: let it,
    # or a suite that ends sooner stops keel with it pending (LeakSanitizer
    # reports the request under make test-asan).
    time.sleep(1.3)


@case("conformance")
def headers_on_stream_zero(env):
    """6.2: HEADERS on stream 0: PROTOCOL_ERROR (h2spec 6.2/3)."""
    conn_error(env, raw_frame(0x1, 0x5, 0, GET_ROOT), PROTOCOL_ERROR)


@case("conformance")
def headers_padding_too_long(env):
    """6.2: padding longer than what is left of the HEADERS payload:
    PROTOCOL_ERROR (h2spec 6.2/4)."""
    conn_error(env, raw_frame(0x1, 0xd, 1, b"\xff" + GET_ROOT), PROTOCOL_ERROR)


@case("conformance")
def headers_then_priority_in_block(env):
    """6.2: a HEADERS without END_HEADERS followed by a PRIORITY on the same
    stream: PROTOCOL_ERROR (h2spec 6.2/1)."""
    conn_error(env, raw_frame(0x1, 0x1, 1, GET_ROOT) +
               raw_frame(0x2, 0x0, 1, (0).to_bytes(4, "big") + b"\x10"), PROTOCOL_ERROR)


@case("conformance")
def priority_on_stream_zero(env):
    """6.3: PRIORITY on stream 0: PROTOCOL_ERROR (h2spec 6.3/1)."""
    conn_error(env, raw_frame(0x2, 0x0, 0, (1).to_bytes(4, "big") + b"\x10"), PROTOCOL_ERROR)


@case("conformance")
def priority_wrong_length(env):
    """6.3: a PRIORITY of other than 5 bytes: a stream error
    FRAME_SIZE_ERROR (h2spec 6.3/2)."""
    c = settled(env)
    sid = open_stream(c)
    c.send_raw(raw_frame(0x2, 0x0, sid, (0).to_bytes(4, "big")))
    stream_error(c, sid, FRAME_SIZE_ERROR)


@case("conformance")
def rst_on_stream_zero(env):
    """6.4: RST_STREAM on stream 0: PROTOCOL_ERROR (h2spec 6.4/1)."""
    conn_error(env, raw_frame(0x3, 0x0, 0, (CANCEL).to_bytes(4, "big")), PROTOCOL_ERROR)


@case("conformance")
def rst_wrong_length(env):
    """6.4: an RST_STREAM of other than 4 bytes: FRAME_SIZE_ERROR (h2spec
    6.4/3)."""
    c = settled(env)
    sid = open_stream(c)
    conn_error(env, raw_frame(0x3, 0x0, sid, b"\0\0\x08"), FRAME_SIZE_ERROR, c)


@case("conformance")
def client_reset_ends_only_its_stream(env):
    """6.4: the client's RST_STREAM ends that stream (no answer on it), the
    others are answered."""
    c = settled(env)
    s1 = open_stream(c, "/slow?ms=300")
    s2 = open_stream(c, "/slow?ms=300")
    c.send(RstStreamFrame(s1, error_code=CANCEL))
    check(c.response(s2).status == 200, "the other stream")
    c.ping()
    r = c.responses.get(s1)
    check(r is None or (not r.ended and not r.body), "the reset stream was answered")


# -- 6.5 SETTINGS


@case("conformance")
def settings_on_stream(env):
    """6.5: SETTINGS on a stream other than 0: PROTOCOL_ERROR (h2spec 6.5/2)."""
    conn_error(env, raw_frame(0x4, 0x0, 1, b""), PROTOCOL_ERROR)


@case("conformance")
def settings_length_not_multiple_of_6(env):
    """6.5: a SETTINGS payload not a multiple of 6 bytes: FRAME_SIZE_ERROR
    (h2spec 6.5/3)."""
    conn_error(env, raw_frame(0x4, 0x0, 0, b"\0\x03\0\0\0"), FRAME_SIZE_ERROR)


@case("conformance")
def settings_enable_push_invalid(env):
    """6.5.2: SETTINGS_ENABLE_PUSH other than 0 or 1: PROTOCOL_ERROR
    (h2spec 6.5.2/1)."""
    conn_error(env, raw_frame(0x4, 0x0, 0, (2).to_bytes(2, "big") + (2).to_bytes(4, "big")),
               PROTOCOL_ERROR)


@case("conformance")
def settings_max_frame_size_out_of_range(env):
    """6.5.2: SETTINGS_MAX_FRAME_SIZE below 16384 or above 2^24-1:
    PROTOCOL_ERROR (h2spec 6.5.2/3, 6.5.2/4)."""
    for v in (16383, 1 << 24):
        conn_error(env, raw_frame(0x4, 0x0, 0, (5).to_bytes(2, "big") + v.to_bytes(4, "big")),
                   PROTOCOL_ERROR)


@case("conformance")
def settings_initial_window_applies_to_open_streams(env):
    """6.9.2: a response waiting on a stream window of 0 (the client's
    SETTINGS_INITIAL_WINDOW_SIZE) sends nothing; when the client raises
    SETTINGS_INITIAL_WINDOW_SIZE, the open stream's window grows by the
    difference and the response arrives, each frame within the windows
    (h2spec 6.9.2/1)."""
    c = settled(env, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0}, auto_window=False)
    s1 = c.request("/files/4k.bin")
    s2 = c.request("/h2test/big?n=100000")
    c.ping()
    time.sleep(0.1)
    c.ping()
    for sid in (s1, s2):
        r = c.responses.get(sid)
        check(r is None or not r.body, f"stream {sid}: DATA through a window of 0")
    c.send(SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 16384}))
    rs = read_within_windows(c, [s1, s2], 16384)
    check(rs[s1].status == 200 and rs[s1].body == file_bytes(env, "4k.bin"), "4k.bin differs")
    check(rs[s2].status == 200 and rs[s2].body == b"x" * 100000,
          f"big: {len(rs[s2].body)} bytes")


@case("conformance")
def settings_initial_window_negative(env):
    """6.9.2: a SETTINGS_INITIAL_WINDOW_SIZE lowered below what a stream
    has used makes its window negative: the server sends nothing until
    WINDOW_UPDATE brings it above 0, then only what it allows (h2spec
    6.9.2/2)."""
    c = settled(env, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 100}, auto_window=False)
    sid = c.request("/files/4k.bin")
    got = 0
    while got < 100:
        f = c.wait_for(lambda f: isinstance(f, DataFrame) and f.stream_id == sid,
                       what=f"DATA (got {got} of the window's 100 bytes)")
        got += len(f.data)
        check(got <= 100, f"{got} bytes through a window of 100")
    c.send(SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 50}))  # window -50
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags, what="SETTINGS ACK")
    c.send(WindowUpdateFrame(sid, window_increment=60))  # window 10
    while got < 110:
        f = c.wait_for(lambda f: isinstance(f, DataFrame) and f.stream_id == sid,
                       what=f"DATA (got {got - 100} of the 10 bytes the window allows)")
        got += len(f.data)
        check(got <= 110, f"{got - 100} bytes through a window of 10")
    c.ping()
    check(len(c.responses[sid].body) == 110, f"{len(c.responses[sid].body) - 100} bytes "
          "through a window of 10")
    c.send(SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 65535}))
    r = c.response(sid)
    check(r.body == file_bytes(env, "4k.bin"), f"body of {len(r.body)} bytes differs")


# -- 6.7 PING, 6.8 GOAWAY


@case("conformance")
def ping_ack_not_answered(env):
    """6.7: a PING with ACK set is not answered (h2spec 6.7/2): the first
    PING the server sends back answers the later PING without ACK."""
    c = settled(env)
    c.send(PingFrame(0, opaque_data=b"ackackac", flags=["ACK"]),
           PingFrame(0, opaque_data=b"question"))
    f = c.wait_for(lambda f: isinstance(f, PingFrame), what="a PING")
    check("ACK" in f.flags and f.opaque_data == b"question", f"PING {f.flags} {f.opaque_data!r}")


@case("conformance")
def ping_on_stream(env):
    """6.7: PING on a stream other than 0: PROTOCOL_ERROR (h2spec 6.7/3)."""
    conn_error(env, raw_frame(0x6, 0x0, 1, b"12345678"), PROTOCOL_ERROR)


@case("conformance")
def ping_wrong_length(env):
    """6.7: a PING of other than 8 bytes: FRAME_SIZE_ERROR (h2spec 6.7/4)."""
    conn_error(env, raw_frame(0x6, 0x0, 0, b"123456"), FRAME_SIZE_ERROR)


@case("conformance")
def goaway_on_stream(env):
    """6.8: GOAWAY on a stream other than 0: PROTOCOL_ERROR (h2spec 6.8/1)."""
    conn_error(env, raw_frame(0x7, 0x0, 1, b"\0" * 8), PROTOCOL_ERROR)


@case("conformance")
def client_goaway_lets_streams_finish(env):
    """6.8: after the client's GOAWAY NO_ERROR, the streams it opened
    before are answered."""
    c = settled(env)
    sid = open_stream(c, "/slow?ms=200")
    c.send(GoAwayFrame(0, last_stream_id=0, error_code=NO_ERROR))
    r = c.response(sid)
    check(r.status == 200 and r.body, f"{r.status} {r.reset}")


@case("conformance")
def push_promise_from_client(env):
    """8.4: a client cannot push: PUSH_PROMISE from it is a connection error
    PROTOCOL_ERROR."""
    c = settled(env)
    sid = open_stream(c)
    conn_error(env, raw_frame(0x5, 0x4, sid, (2).to_bytes(4, "big") + GET_ROOT),
               PROTOCOL_ERROR, c)


# -- 6.9 WINDOW_UPDATE and flow control


@case("conformance")
def window_update_zero_on_stream(env):
    """6.9: a WINDOW_UPDATE of 0 on a stream: a stream error PROTOCOL_ERROR
    (h2spec 6.9/2)."""
    c = settled(env)
    sid = open_stream(c)
    c.send_raw(raw_frame(0x8, 0x0, sid, (0).to_bytes(4, "big")))
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def window_update_wrong_length(env):
    """6.9: a WINDOW_UPDATE of other than 4 bytes: FRAME_SIZE_ERROR (h2spec
    6.9/3)."""
    conn_error(env, raw_frame(0x8, 0x0, 0, b"\0\0\x01"), FRAME_SIZE_ERROR)


@case("conformance")
def window_overflow_on_stream(env):
    """6.9.1: a stream window above 2^31-1 (65,535 + 2^31-1): a stream
    error FLOW_CONTROL_ERROR (h2spec 6.9.1/3)."""
    c = settled(env)
    sid = open_stream(c)
    c.send(WindowUpdateFrame(sid, window_increment=0x7fffffff))
    stream_error(c, sid, FLOW_CONTROL_ERROR)


@case("conformance")
def window_overflow_in_two_steps(env):
    """6.9.1: two WINDOW_UPDATEs on the connection that together take its
    window past 2^31-1: FLOW_CONTROL_ERROR (h2spec 6.9.1/2)."""
    c = settled(env)
    c.send(WindowUpdateFrame(0, window_increment=0x7fffffff - 65535))
    c.ping()
    check(c.goaway is None, "GOAWAY at a window of exactly 2^31-1")
    conn_error(env, WindowUpdateFrame(0, window_increment=1).serialize(), FLOW_CONTROL_ERROR, c)


@case("conformance")
def initial_window_of_one(env):
    """6.9.1: with SETTINGS_INITIAL_WINDOW_SIZE 1 the first DATA carries 1
    byte (h2spec 6.9.1/1); nothing more until the window grows."""
    c = settled(env, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1}, auto_window=False)
    sid = c.request("/files/4k.bin")
    f = c.wait_for(lambda f: isinstance(f, DataFrame) and f.stream_id == sid and f.data,
                   what="DATA")
    check(len(f.data) == 1, f"DATA of {len(f.data)} bytes through a window of 1")
    c.ping()
    got = len(c.responses[sid].body)
    check(got == 1, f"{got} bytes through a window of 1")
    c.send(WindowUpdateFrame(sid, window_increment=4095))
    r = c.response(sid)
    check(r.body == file_bytes(env, "4k.bin"), "body differs")


@case("conformance")
def large_responses_small_windows(env):
    """6.9.1: large responses (300,000-byte big.bin, 200,000 bytes from
    /h2test/big) arrive whole through stream windows of 1,000 bytes given
    back frame by frame, every frame within its window."""
    c = settled(env, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1000}, auto_window=False)
    s1 = c.request("/files/big.bin")
    s2 = c.request("/h2test/big?n=200000")
    rs = read_within_windows(c, [s1, s2], 1000, timeout=15)
    check(rs[s1].body == file_bytes(env, "big.bin"), f"big.bin: {len(rs[s1].body)} bytes")
    check(rs[s2].body == b"x" * 200000, f"big: {len(rs[s2].body)} bytes")


@case("conformance")
def connection_window_shared_by_streams(env):
    """6.9.1: streams with large windows share the connection's 65,535:
    the server's DATA on all of them together never exceeds it; the
    responses arrive whole as it is given back."""
    c = settled(env, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1 << 20}, auto_window=False)
    s1 = c.request("/files/big.bin")
    s2 = c.request("/h2test/big?n=300000")
    s3 = c.request("/files/4k.bin")
    rs = read_within_windows(c, [s1, s2, s3], 1 << 20, give_stream=False, timeout=15)
    check(rs[s1].body == file_bytes(env, "big.bin"), f"big.bin: {len(rs[s1].body)} bytes")
    check(rs[s2].body == b"x" * 300000, f"big: {len(rs[s2].body)} bytes")
    check(rs[s3].body == file_bytes(env, "4k.bin"), "4k.bin differs")


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


# -- 6.10 CONTINUATION


@case("conformance")
def continuation_frames_accepted(env):
    """6.10: a header block in a HEADERS and several CONTINUATIONs (one of
    them empty) is a request (h2spec 6.10/1)."""
    c = settled(env)
    c.send_raw(raw_frame(0x1, 0x1, 1, b"\x82") + raw_frame(0x9, 0x0, 1, b"\x84") +
               raw_frame(0x9, 0x0, 1, b"") +
               raw_frame(0x9, 0x0, 1, b"\x86\x01") + raw_frame(0x9, 0x4, 1, lit("x")))
    r = c.response(1)
    check(r.status == 200 and r.body == b"Hello, World!", f"{r.status} {r.reset}")


@case("conformance")
def continuation_then_other_frame(env):
    """6.10: a CONTINUATION without END_HEADERS followed by a DATA:
    PROTOCOL_ERROR (h2spec 6.10/2)."""
    conn_error(env, raw_frame(0x1, 0x0, 1, b"\x83\x84") + raw_frame(0x9, 0x0, 1, b"\x86") +
               raw_frame(0x0, 0x1, 1, b"x"), PROTOCOL_ERROR)


@case("conformance")
def continuation_on_stream_zero(env):
    """6.10: CONTINUATION on stream 0: PROTOCOL_ERROR (h2spec 6.10/3)."""
    conn_error(env, raw_frame(0x1, 0x1, 1, b"\x82\x84") +
               raw_frame(0x9, 0x4, 0, b"\x86\x01" + lit("x")), PROTOCOL_ERROR)


@case("conformance")
def continuation_after_end_headers(env):
    """6.10: a CONTINUATION after a HEADERS with END_HEADERS:
    PROTOCOL_ERROR (h2spec 6.10/4)."""
    conn_error(env, raw_frame(0x1, 0x4, 1, GET_ROOT) +
               raw_frame(0x9, 0x4, 1, plain([("x-a", "1")])), PROTOCOL_ERROR)


@case("conformance")
def continuation_after_continuation_end_headers(env):
    """6.10: a CONTINUATION after a CONTINUATION with END_HEADERS:
    PROTOCOL_ERROR (h2spec 6.10/5)."""
    conn_error(env, raw_frame(0x1, 0x0, 1, b"\x82\x84") +
               raw_frame(0x9, 0x4, 1, b"\x86\x01" + lit("x")) +
               raw_frame(0x9, 0x4, 1, plain([("x-a", "1")])), PROTOCOL_ERROR)


@case("conformance")
def continuation_on_another_stream(env):
    """6.10: a CONTINUATION on another stream than the open header block's:
    PROTOCOL_ERROR."""
    conn_error(env, raw_frame(0x1, 0x1, 1, b"\x82\x84") +
               raw_frame(0x9, 0x4, 3, b"\x86\x01" + lit("x")), PROTOCOL_ERROR)


@case("conformance")
def continuation_after_data(env):
    """6.10: a CONTINUATION after a DATA: PROTOCOL_ERROR (h2spec 6.10/6)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    conn_error(env, raw_frame(0x0, 0x0, sid, b"x") +
               raw_frame(0x9, 0x4, sid, plain([("x-a", "1")])), PROTOCOL_ERROR, c)


# -- 8.1 the exchange


@case("conformance")
def second_headers_without_end_stream(env):
    """8.1: a second HEADERS (trailers) without END_STREAM: malformed,
    PROTOCOL_ERROR (h2spec 8.1/1; stream or connection error)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send_raw(raw_frame(0x1, 0x4, sid, plain([("x-trailer", "1")])))
    stream_or_conn_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def trailers_with_pseudo_field(env):
    """8.1, 8.3: a pseudo-field in trailers: malformed, RST_STREAM
    PROTOCOL_ERROR (h2spec 8.1.2.1/3)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send_raw(raw_frame(0x1, 0x5, sid, plain([(":method", "POST"), ("x-trailer", "1")])))
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def trailers_with_long_pseudo_field(env):
    """8.1: a pseudo-field in trailers, long enough that keeping it would
    have grown the memory the request's head lives in while the core (and
    the access log, at the reset) still read the head: refused before any
    copy, RST_STREAM PROTOCOL_ERROR (an attack review found the
    use-after-free; make test-asan reports it if it comes back)."""
    c = settled(env)
    sid = c.request("/h2test/late?ms=200", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send_raw(raw_frame(0x1, 0x5, sid, plain([(":path", "/" + "a" * 2000)])))
    stream_error(c, sid, PROTOCOL_ERROR)
    time.sleep(0.3)  # the late handler finishes before the suite goes on
    check(env.k.alive(), "keel died")


@case("conformance")
def small_file_behind_a_shut_window(env):
    """6.9.2: a small file asked for on a stream whose window is 0 still
    arrives whole once the client opens it (it goes out from the file as
    the window allows, never read into memory for a peer that keeps its
    windows shut)."""
    c = Conn(env.k.port(), settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0}, auto_window=False)
    c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags, what="SETTINGS ACK")
    sid = c.request("/files/4k.bin")
    c.wait_for(lambda f: isinstance(f, HeadersFrame) and f.stream_id == sid, what="HEADERS")
    c.send(SettingsFrame(settings={SettingsFrame.INITIAL_WINDOW_SIZE: 65535}))
    r = c.response(sid)
    with open(os.path.join(env.www, "4k.bin"), "rb") as fh:
        check(r.body == fh.read(), "body differs from the file")


@case("conformance")
def data_on_long_refused_stream_ignored(env):
    """5.1: DATA a client sent on a stream we refused is ignored even when
    many streams closed since (more than the ring of recently closed ids
    remembers): the connection goes on."""
    c = settled(env)
    frames = b""
    sids = []
    for _ in range(50):  # 8 taken (max_concurrent_streams), 42 refused
        sid = c.new_id()
        sids.append(sid)
        frames += raw_frame(0x1, 0x4, sid, plain(req_fields("/slow?ms=200")))
    c.send_raw(frames)
    c.expect_rst(sids[-1], REFUSED_STREAM)
    c.send_raw(raw_frame(0x0, 0x1, sids[8], b"late"))  # the first refused one
    c.ping()
    check(c.goaway is None, "the connection ended")


@case("conformance")
def content_length_exceeded(env):
    """8.1.1: more DATA than content-length, over several frames:
    malformed, RST_STREAM PROTOCOL_ERROR (h2spec 8.1.2.6/2)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", fields=[("content-length", "8")], end_stream=False)
    c.send_data(sid, b"12345", end_stream=False)
    c.send_data(sid, b"67890", end_stream=True)
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def content_length_without_data(env):
    """8.1.1: a content-length above 0 on a HEADERS with END_STREAM (no
    DATA can follow): malformed, RST_STREAM PROTOCOL_ERROR."""
    c = settled(env)
    sid = c.request("/echo", method="POST", fields=[("content-length", "3")], end_stream=True)
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def content_length_matching_accepted(env):
    """8.1.1: a content-length matching the DATA over several frames, and
    a content-length of 0 with END_STREAM on the HEADERS, are taken."""
    c = settled(env)
    sid = c.request("/echo", method="POST", fields=[("content-length", "10")], end_stream=False)
    c.send_data(sid, b"12345", end_stream=False)
    c.send_data(sid, b"67890", end_stream=False)
    c.send(DataFrame(sid, b"", flags=["END_STREAM"]))
    r = c.response(sid)
    check(r.status == 200 and r.body == b"1234567890", f"{r.status} {r.reset} {r.body!r}")
    r = c.get("/echo", method="POST", fields=[("content-length", "0")])
    check(r.status == 200 and r.body == b"", f"{r.status} {r.reset} {r.body!r}")


# -- 8.2 fields


def each_malformed(env, field_lists, what):
    """Each field list on its own stream of one connection: each stream
    reset PROTOCOL_ERROR (8.1.1), the connection going on."""
    c = settled(env)
    for fields in field_lists:
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x5, sid, plain(fields)))
        try:
            stream_error(c, sid, PROTOCOL_ERROR)
        except Fail as e:
            raise Fail(f"{what} {fields}: {e}")
    check(c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def connection_specific_fields(env):
    """8.2.2: keep-alive, proxy-connection, transfer-encoding and upgrade
    in a request, and TE other than "trailers": malformed (h2spec
    8.1.2.2/1, 8.1.2.2/2)."""
    each_malformed(env, [req_fields() + [(n, v)] for n, v in (
        ("keep-alive", "timeout=5"), ("proxy-connection", "keep-alive"),
        ("transfer-encoding", "chunked"), ("upgrade", "h2c"), ("te", "gzip"),
        ("te", "trailers, deflate"))], "connection-specific")


@case("conformance")
def te_trailers_accepted(env):
    """8.2.2: TE: trailers is the one TE a request may carry."""
    c = Conn(env.k.port())
    r = c.get("/", fields=[("te", "trailers")])
    check(r.status == 200, f"{r.status} {r.reset}")


@case("conformance")
def field_value_invalid(env):
    """8.2.1: a field value with NUL, CR or LF, or with whitespace at
    either end: malformed."""
    each_malformed(env, [req_fields() + [("x-v", v)] for v in (
        "a\0b", "a\rb", "a\nb", " lead", "trail ", "\ttab", "tab\t")], "field value")


@case("conformance")
def field_name_invalid(env):
    """8.2.1: a field name with a space, a colon past its start, a
    non-ASCII byte, or empty: malformed (h2spec 8.1.2/1 for uppercase)."""
    each_malformed(env, [req_fields() + [(n, "v")] for n in (
        "x y", "x:y", b"x\xc3\xa9", "")], "field name")


@case("conformance")
def field_value_inner_space_accepted(env):
    """8.2.1: whitespace inside a value, and an empty value, are fine."""
    c = Conn(env.k.port())
    r = c.get("/headers", fields=[("x-inner", "a  b\tc"), ("x-empty", "")])
    check(r.status == 200 and b"x-inner: a  b\tc\n" in r.body and b"x-empty: \n" in r.body,
          f"{r.status} {r.body!r}")


# -- 8.3 pseudo-fields


@case("conformance")
def pseudo_fields_malformed(env):
    """8.3, 8.3.1: missing :method or :scheme, empty :path, a duplicated
    :method, :scheme or :path, an unknown pseudo-field (:foo), a response
    pseudo-field (:status) in a request, a pseudo-field after a regular
    field: malformed (h2spec 8.1.2.1, 8.1.2.3)."""
    base = dict(req_fields())

    def without(name):
        return [(k, v) for k, v in base.items() if k != name]
    each_malformed(env, [
        without(":method"),
        without(":scheme"),
        [(k, "" if k == ":path" else v) for k, v in base.items()],
        req_fields() + [(":method", "GET")],
        req_fields() + [(":scheme", "http")],
        req_fields() + [(":path", "/")],
        req_fields() + [(":foo", "bar")],
        req_fields() + [(":status", "200")],
        req_fields()[:2] + [("x-a", "1")] + req_fields()[2:],
    ], "pseudo-fields")


@case("conformance")
def connect_pseudo_fields(env):
    """8.5: CONNECT without :authority, or with :scheme or :path: malformed;
    a well-formed one is answered (501: no tunnels here)."""
    each_malformed(env, [
        [(":method", "CONNECT")],
        [(":method", "CONNECT"), (":authority", "x:443"), (":path", "/")],
        [(":method", "CONNECT"), (":authority", "x:443"), (":scheme", "http")],
    ], "CONNECT")
    c = settled(env)
    c.send_raw(raw_frame(0x1, 0x5, 1, plain([(":method", "CONNECT"), (":authority", "x:443")])))
    r = c.response(1)
    check(r.status == 501, f"{r.status} {r.reset}")


@case("conformance")
def head_response_of_a_file(env):
    """8.1, RFC 9110 9.3.2: HEAD of a file: its content-length, no DATA
    frame, the stream ended by the HEADERS."""
    c = Conn(env.k.port())
    r = c.get("/files/big.bin", method="HEAD")
    check(r.status == 200 and not r.frames and r.body == b"", f"{r.status} {len(r.frames)} DATA")
    check(r.header("content-length") == "300000", f"{r.headers}")


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


@case("conformance")
def path_fragment_never_routed(env):
    """8.3.1, RFC 9110 4.2.4: `#` in :path is refused, wherever it is. The
    fragment never travels, and the core resolves the dot segments after
    it: `/admin#/../h2test/head` was routed as /h2test/head while an
    upstream would serve /admin (a route and ACL bypass, issue 23)."""
    c = settled(env)
    r = answered(c, req_fields("/h2test/head"), "the route itself")
    check(r.status == 200, f"/h2test/head: {r.status}")
    each_malformed(env, [req_fields(p) for p in (
        "/admin#/../h2test/head", "/admin%2F#/../h2test/head", "/h2test/head#",
        "/h2test/head?a=1#frag", "/#", "#")], "fragment")


@case("conformance")
def path_origin_form_only(env):
    """8.3.1: :path is the path and query of the target (origin-form), or
    `*` for OPTIONS only: absolute-form, authority-form, a relative path
    or `*` for another method is malformed."""
    each_malformed(env, [req_fields(p, method=m) for m, p in (
        ("GET", "http://x/h2test/head"), ("GET", "https://evil.example/"),
        ("GET", "x:80"), ("GET", "h2test/head"), ("GET", "?a=1"), ("GET", "*"),
        ("POST", "*"), ("OPTIONS", "*x"), ("OPTIONS", "http://x/"))], "form")
    c = settled(env)
    answered(c, req_fields("*", method="OPTIONS"), "OPTIONS *")
    answered(c, req_fields("//x/h2test/head"), "origin-form with an empty segment")


@case("conformance")
def path_characters(env):
    """8.3.1 with http1's request-target set (RFC 3986: VCHAR but `#`): a
    space, a tab, a control byte, DEL or a byte above 0x7e in :path is
    malformed. `GET /admin /public` was forwarded as an HTTP/1.1 request
    line with four words (issue 23)."""
    each_malformed(env, [req_fields(p) for p in (
        "/admin /public", "/a\tb", "/a\x01b", "/a\x1bb", "/a\x7fb", b"/caf\xc3\xa9",
        "/a\x0bb", "/a\x0cb")], "path byte")
    c = settled(env)
    r = answered(c, req_fields("/h2test/head?q=a/b?c&d=%20e!$'()*+,;=:@~-._\"<>{}|\\^`[]"),
                 "every VCHAR but #")
    check(r.status == 200, f"{r.status} {r.body!r}")


@case("conformance")
def method_must_be_token(env):
    """8.3.1, RFC 9110 9.1, 5.6.2: :method is a token (tchar only): a space,
    a tab, a delimiter, a control byte or an empty value is malformed; any
    token is a method (answered 405/501 by the core, not reset)."""
    each_malformed(env, [[(":method", m), (":scheme", "http"), (":path", "/"),
                          (":authority", "x")] for m in (
        "G T", "GET /admin", "G\tT", "GET/", "GE(T", 'G"T', "GE\x01T", b"G\xc3\xa9T", "",
        "GET:")], "method")
    c = settled(env)
    answered(c, req_fields("/", method="X-CUSTOM!~"), "a token method")


@case("conformance")
def scheme_syntax(env):
    """8.3.1, RFC 3986 3.1: :scheme is ALPHA *( ALPHA / DIGIT / + / - / . )."""
    each_malformed(env, [[(":method", "GET"), (":scheme", s), (":path", "/"),
                          (":authority", "x")] for s in (
        "ht tp", "1http", "", "http:", "http://", "ht/tp", "-http", "h\x01")], "scheme")
    c = settled(env)
    for s in ("https", "coap+tcp", "a.b-c"):
        answered(c, [(":method", "GET"), (":scheme", s), (":path", "/"), (":authority", "x")],
                 "scheme")


@case("conformance")
def authority_syntax(env):
    """8.3.1, RFC 3986 3.2.2, RFC 9110 4.2.1: :authority is host [":" port]
    (a reg-name, an IPv4 address or an [IP-literal]; digits for the port),
    without userinfo; an http(s) request needs a non-empty one (or a Host
    field)."""
    each_malformed(env, [req_fields("/h2test/head", authority=a) for a in (
        "user@x", "user:pw@x:80", "x@evil.example", "x y", "x\ty", "x/y", "x?y", "x#y",
        "x:8a", "x:80:80", "[::1", "[::1]x", ":80", "", "x\x01", b"caf\xc3\xa9.example",
        "x%zz", "x\\y")], "authority")
    c = settled(env)
    for a in ("example.test:8443", "127.0.0.1:80", "[::1]:8080", "a-b_c~d.EXAMPLE",
              "%41.example", "x:", "[v1.fe]"):
        r = answered(c, req_fields("/h2test/head", authority=a), "authority")
        check(r.status == 200 and f"host={a}\n".encode() in r.body, f"{a}: {r.body!r}")
    each_malformed(env, [[(":method", "GET"), (":scheme", s), (":path", "/")]
                         for s in ("http", "https")], "no :authority nor host")


@case("conformance")
def host_must_match_authority(env):
    """8.3.1: a Host field that differs from :authority is malformed (the
    two compared normalized, RFC 3986 6.2.2, 6.2.3: the host ignoring case,
    an absent port the scheme's); Host twice, or an invalid Host standing
    for a missing :authority, is malformed too. Without :authority, Host is
    the request's authority as before."""
    each_malformed(env, [
        req_fields("/h2test/head", authority="x") + [("host", "evil.example")],
        req_fields("/h2test/head", authority="x") + [("host", "x:8080")],
        req_fields("/h2test/head", authority="x:80") + [("host", "x:81")],
        req_fields("/h2test/head", authority="x") + [("host", "x"), ("host", "x")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/h2test/head"),
         ("host", "a b")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/h2test/head"),
         ("host", "u@x")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/h2test/head"),
         ("host", "x"), ("host", "y")],
    ], "host")
    c = settled(env)
    for auth, host in (("x", "x"), ("Example.Test", "example.test"), ("x", "x:80"),
                       ("x:80", "X"), ("[::1]", "[::1]:80")):
        r = answered(c, req_fields("/h2test/head", authority=auth) + [("host", host)],
                     "host")
        check(r.status == 200, f"{auth} / {host}: {r.status}")
    r = answered(c, [(":method", "GET"), (":scheme", "https"), (":path", "/h2test/head"),
                     ("host", "example.test")], "Host alone")
    check(b"host=example.test\n" in r.body, r.body)


class Upstream:
    """An HTTP/1.1 upstream on loopback that records each request head it
    receives and answers 200 "ok"; for the proxy module's cases."""

    def __init__(self):
        import threading
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.heads = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _serve(self, conn):
        conn.settimeout(2)
        buf = b""
        try:
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                self.heads.append(head)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        except OSError:
            pass
        finally:
            conn.close()

    def _run(self):
        import threading
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def close(self):
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


@case("conformance")
def malformed_never_forwarded(env):
    """Issue 23's own reproduction: requests the checks refuse reached the
    proxy module's upstream as HTTP/1.1 request lines (`GET /px/admin
    /public HTTP/1.1`). Each is reset PROTOCOL_ERROR and the upstream sees
    nothing; a valid request on the same connection is forwarded."""
    up = Upstream()
    k = env.start(f"[h2]\nmax_concurrent_streams = 8\n[proxy]\n"
                  f"upstream = up 127.0.0.1:{up.port}\npass = /px up\n", extra="proxy")
    try:
        c = Conn(k.port())
        c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                   what="SETTINGS ACK")
        bad = [req_fields(p) for p in ("/px/admin /public", "/px/admin#/../public",
                                       "/px/a\tb", "http://evil.example/px/x")]
        bad += [req_fields("/px/x", method=m) for m in ("GET /px/y", "G\x01T")]
        bad += [req_fields("/px/x", authority=a) for a in ("u@evil.example", "x y", "x/y")]
        bad += [req_fields("/px/x") + [("host", "evil.example")],
                req_fields("/px/x") + [("x-v", "a\x01b")]]
        for fields in bad:
            sid = c.new_id()
            c.send_raw(raw_frame(0x1, 0x5, sid, plain(fields)))
            try:
                stream_error(c, sid, PROTOCOL_ERROR)
            except Fail as e:
                raise Fail(f"{fields}: {e}; the upstream saw {up.heads}")
        r = c.response(c.request("/px/ok", authority="x"))
        check(r.status == 200 and r.body == b"ok", f"the valid request: {r.status} {r.body!r}")
        check(len(up.heads) == 1 and up.heads[0].startswith(b"GET /px/ok HTTP/1.1\r\n"),
              f"the upstream saw {up.heads}")
    finally:
        k.stop()
        up.close()


class GatedUpstream:
    """An HTTP/1.1 upstream on loopback for uploads through the proxy
    module: /px/hold reads its request head, then nothing more until
    `gate` is set, then the whole body (Content-Length), answering its
    length and SHA-256; any other path reads its body and answers its
    length at once. Its receive buffer is small, so that the kernel holds
    little of what it does not read."""

    def __init__(self):
        import threading
        self.gate = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _serve(self, conn):
        import hashlib
        conn.settimeout(20)
        buf = b""
        try:
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if head.split(b" ")[1].startswith(b"/px/hold"):
                    while not self.gate.wait(0.1):
                        if self.stop.is_set():
                            return
                digest, got = hashlib.sha256(), 0
                while got < length:
                    if not buf:
                        buf = conn.recv(1 << 20)
                        if not buf:
                            return
                    take = buf[:length - got]
                    buf = buf[len(take):]
                    digest.update(take)
                    got += len(take)
                body = b"%d %s" % (got, digest.hexdigest().encode())
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        except OSError:
            pass
        finally:
            conn.close()

    def _run(self):
        import threading
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def close(self):
        self.stop.set()
        self.gate.set()
        self.thread.join(2)
        self.sock.close()


@case("conformance")
def upload_stall_holds_its_stream_only(env):
    """One upload through the proxy module to an upstream that reads
    nothing pauses its own stream, not the connection (issue 23's
    follow-up: the proxy paused the client's connection, and a GET and a
    PING on other streams waited for the upstream's send_timeout). The
    paused stream's DATA is held and its window not given back (RFC 9113
    5.2, 6.9: no WINDOW_UPDATE while the upstream takes nothing), so the
    client runs out of window on it; meanwhile a GET, a PING and another
    stream's upload are answered at once, and stream_timeout (1 s) does not
    reset the paused stream: the wait is the handler's, not the client's.
    Once the upstream reads, the upload completes byte for byte."""
    import hashlib
    up = GatedUpstream()
    k = env.start(f"[h2]\nmax_concurrent_streams = 8\nstream_timeout = 1s\nmax_body = 64m\n"
                  f"[proxy]\nupstream = up 127.0.0.1:{up.port}\npass = /px up\n", extra="proxy")
    total = 12 << 20  # well past what the sockets between keel and the upstream hold
    body = os.urandom(total)
    try:
        c = Conn(k.port())
        c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                   what="SETTINGS ACK")
        sid = c.request("/px/hold", method="POST", authority="x",
                        fields=[("content-length", str(total))], end_stream=False)
        # Send what the windows allow until no window is left for a second.
        sent, quiet = 0, time.time()
        c.sock.settimeout(0.5)
        while time.time() - quiet < 1.0:
            check(sent < total - (1 << 20),
                  f"keel took {sent} bytes for an upstream that read none of them")
            n = min(16384, total - sent, c.send_window, c.stream_windows[sid])
            if n > 0:
                f = DataFrame(sid, body[sent:sent + n])
                try:
                    c.send(f)
                except socket.timeout:
                    raise Fail(f"keel stopped reading the connection after {sent} bytes: "
                               "one stream's upload paused all of them")
                c.send_window -= n
                c.stream_windows[sid] -= n
                sent += n
                quiet = time.time()
                continue
            try:
                f = c._read_one(0.1)
            except Fail:
                continue  # nothing came
            check(f is not None, f"the connection closed after {sent} bytes")
            c.backlog.append(f)
        c.sock.settimeout(c.timeout)
        window = c.stream_windows[sid]
        check(window <= 0, f"stream {sid} still has {window} bytes of window")
        # The connection goes on: a GET, a PING, another upload.
        t0 = time.time()
        get = c.request("/px/get", authority="x")
        r = c.response(get, timeout=1.0)
        check(r.status == 200, f"GET: {r.status} {r.body!r}")
        c.ping(timeout=1.0)
        check(time.time() - t0 < 1.0, f"GET and PING took {time.time() - t0:.2f}s")
        small = os.urandom(200000)
        r = c.response(c.request("/px/echo", method="POST", authority="x", body=small,
                                 fields=[("content-length", str(len(small)))]), timeout=3.0)
        check(r.body == b"%d %s" % (len(small), hashlib.sha256(small).hexdigest().encode()),
              f"the other upload: {r.status} {r.body!r}")
        # Still held two stream_timeouts after its last byte: no
        # WINDOW_UPDATE for the paused stream, no reset.
        while time.time() - quiet < 2.0:
            try:
                c.backlog.append(c._read_one(0.1))
            except Fail:
                pass
        check(c.stream_windows[sid] == window,
              f"stream {sid}'s window grew by {c.stream_windows[sid] - window} while the "
              "upstream read nothing")
        r = c.responses.get(sid)
        check(r is None or (r.reset is None and r.status is None),
              f"the paused stream was answered: reset {r and r.reset}, status {r and r.status}")
        # The upstream reads: the rest goes, and arrives whole.
        up.gate.set()
        c.send_data(sid, body[sent:], end_stream=True, deadline=15.0)
        r = c.response(sid, timeout=10.0)
        want = b"%d %s" % (total, hashlib.sha256(body).hexdigest().encode())
        check(r.status == 200 and r.body == want, f"the upload: {r.status} {r.body!r}")
        c.close()
    finally:
        k.stop()
        up.close()


@case("conformance")
def field_value_control_bytes(env):
    """8.2.1, RFC 9110 5.5: a control byte other than HTAB (or DEL) in any
    field value is malformed: what HTTP/1.1 cannot carry is never handed on
    to a gateway; obs-text (bytes above 0x7f) and inner whitespace are
    fine."""
    each_malformed(env, [req_fields() + [("x-v", v)] for v in (
        "a\x01b", "a\x7fb", "\x1b[31m", "a\x0bb", "a\x0cb", "ab\x08")], "value")
    c = settled(env)
    r = answered(c, req_fields("/headers") + [("x-v", b"caf\xc3\xa9 a\tb")], "obs-text")
    check(r.status == 200, f"{r.status}")


@case("conformance")
def malformed_counted(env):
    """A malformed request is counted (h2_malformed_total) and never
    reaches a handler: a route that would answer is not run."""
    before = metric(env, "h2_malformed_total", "")
    c = settled(env)
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x5, sid, plain(req_fields("/h2test/head x"))))
    stream_error(c, sid, PROTOCOL_ERROR)
    check(metric(env, "h2_malformed_total", "") == before + 1, "not counted")


# -- issue 23: answers that must reach the client (RFC 9113 8.1, 8.1.1)


def quiesce(c):
    """Two PINGs answered: whatever the server wrote for frames sent before
    them has been read (a PING's ACK is written at once, a stream's frames
    at the end of the read that carried it, so the ACK of a PING in that
    same read can come first; the second PING is in a later read)."""
    c.ping()
    c.ping()


def body_request(c, method, path, length, body, end_stream=True):
    """HEADERS (content-length: length) and DATA (body, END_STREAM) in one
    write: the server reads them in one read."""
    sid = c.new_id()
    hd = plain(req_fields(path, method=method) + [("content-length", str(length))])
    c.send_raw(raw_frame(0x1, 0x4, sid, hd) +
               raw_frame(0x0, 0x1 if end_stream else 0x0, sid, body))
    return sid


@case("conformance")
def unread_body_in_one_read(env):
    """8.1, 8.1.1: a request whose body the handler does not read (405 for
    POST /, 404, hello's GET /) with HEADERS and DATA in one read is
    answered, whole: its DATA still counts toward content-length, so the
    request is not malformed (it was reset PROTOCOL_ERROR and its answer
    dropped: `curl --http2-prior-knowledge -d abc`, issue 23)."""
    c = settled(env)
    for _ in range(3):
        for method, path, status, body in (("POST", "/", 405, None), ("POST", "/nope", 404, None),
                                           ("GET", "/", 200, b"Hello, World!")):
            sid = body_request(c, method, path, 3, b"abc")
            r = c.response(sid)
            check(r.status == status and r.ended and r.reset in (None, NO_ERROR),
                  f"{method} {path}: status {r.status}, reset {r.reset}")
            check(body is None or r.body == body, f"{method} {path}: {r.body!r}")
    quiesce(c)
    for sid, r in c.responses.items():
        check(r.reset in (None, NO_ERROR), f"stream {sid} reset {r.reset}")
    check(c.goaway is None, "GOAWAY")


@case("conformance")
def unread_body_in_separate_reads(env):
    """8.1: the same with the DATA written after the server answered (a
    PING between them). A rest the client may send within its windows is
    awaited and dropped, and the stream ends cleanly, without RST_STREAM
    (curl 7.88 takes a RST_STREAM NO_ERROR in mid-upload for a failure); a
    longer one is stopped with RST_STREAM NO_ERROR after the answer; one
    that never comes, at stream_timeout (1s here), the same. The
    connection goes on."""
    c = settled(env)
    for method, path, status in (("POST", "/", 405), ("GET", "/", 200)):
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields(path, method=method) +
                                                  [("content-length", "3")])))
        r = c.response(sid)
        quiesce(c)
        check(r.status == status and r.ended and r.reset is None,
              f"{method} {path}: {r.status} reset {r.reset} before the body")
        c.send_raw(raw_frame(0x0, 0x0, sid, b"ab") + raw_frame(0x0, 0x1, sid, b"c"))
        quiesce(c)
        check(r.reset is None, f"{method} {path}: RST_STREAM {r.reset} after the body")
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields("/nope", method="POST") +
                                              [("content-length", "100000")])))
    c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid,
               what="RST_STREAM NO_ERROR for a body beyond the window")
    r = c.responses[sid]
    check(r.status == 404 and r.ended and r.reset == NO_ERROR, f"{r.status} {r.reset}")
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields("/", method="POST") +
                                              [("content-length", "3")])))
    t0 = time.time()
    c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid, timeout=4,
               what="RST_STREAM NO_ERROR at stream_timeout")
    r = c.responses[sid]
    check(r.status == 405 and r.reset == NO_ERROR and time.time() - t0 >= 0.8,
          f"{r.status} {r.reset} after {time.time() - t0:.2f} s")
    check(c.goaway is None and c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def frames_after_an_early_answer(env):
    """5.1, 8.1, 8.1.1: a stream answered before its request ended (no
    content-length) stays half-closed (local) and the client's later
    frames are answered as on any open stream, whichever read they come
    in (h2spec 5.1/9, 6.9.1/3, 8.1/1, 8.1.2.1/3 failed when the answer had
    gone first, with RST_STREAM NO_ERROR, and the frames were ignored):
    its RST_STREAM or END_STREAM closes it (a frame after that: a
    connection error STREAM_CLOSED); a WINDOW_UPDATE past 2^31-1:
    FLOW_CONTROL_ERROR; trailers without
    END_STREAM or with a pseudo-field: PROTOCOL_ERROR; a stream window
    spent without END_STREAM: RST_STREAM NO_ERROR (stop sending)."""
    def answered_open(c, path="/"):
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields(path))))
        r = c.response(sid)
        quiesce(c)
        check(r.status == 200 and r.reset is None, f"{path}: {r.status} reset {r.reset}")
        return sid, r

    for late, code in (
            (lambda sid: raw_frame(0x8, 0, sid, (0x7fffffff).to_bytes(4, "big")) * 2,
             FLOW_CONTROL_ERROR),
            (lambda sid: raw_frame(0x1, 0x4, sid, plain([("x-t", "1")])), PROTOCOL_ERROR),
            (lambda sid: raw_frame(0x0, 0x0, sid, b"abc") +
             raw_frame(0x1, 0x5, sid, plain([(":method", "GET")])), PROTOCOL_ERROR),
            (lambda sid: b"".join(raw_frame(0x0, 0x0, sid, b"x" * 16383) for _ in range(4)) +
             raw_frame(0x0, 0x0, sid, b"xxx"), NO_ERROR)):
        c = settled(env)
        sid, r = answered_open(c)
        c.send_raw(late(sid))
        c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid,
                   what=f"RST_STREAM {code:#x}")
        check(r.reset == code, f"RST_STREAM {r.reset:#x}, expected {code:#x}")
        check(c.goaway is None, "GOAWAY after a stream error")
        c.ping()
    for late in (raw_frame(0x3, 0, 1, (CANCEL).to_bytes(4, "big")) +
                 raw_frame(0x1, 0x5, 1, plain(req_fields())),
                 raw_frame(0x0, 0x1, 1, b"abc") + raw_frame(0x0, 0x1, 1, b"d")):
        c = settled(env)
        answered_open(c)
        c.send_raw(late)
        c.expect_goaway(STREAM_CLOSED)


@case("conformance")
def frames_on_a_reset_stream_ignored(env):
    """5.1: after our RST_STREAM, what the client sent on the stream is
    ignored: a malformed PRIORITY (wrong length, or depending on itself)
    there gets no second RST_STREAM (fuzz_h2 found one, on the code before
    issue 23 too); the connection goes on."""
    c = settled(env)
    for bad in (b"\0\0\0\0", None):
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x5, sid, plain(req_fields("/a b"))))
        c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid,
                   what="the malformed request's RST_STREAM")
        payload = bad if bad is not None else sid.to_bytes(4, "big") + b"\x10"
        c.send_raw(raw_frame(0x2, 0x0, sid, payload))
        data = os.urandom(8)
        c.send(PingFrame(0, opaque_data=data))
        again = []

        def seen(f):
            if isinstance(f, RstStreamFrame) and f.stream_id == sid:
                again.append(f)
            return isinstance(f, PingFrame) and "ACK" in f.flags and f.opaque_data == data
        c.wait_for(seen, what="the PING's ACK")
        check(not again, f"a second RST_STREAM on stream {sid}")
    check(c.goaway is None and c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def answer_before_reset_of_malformed_body(env):
    """8.1, 8.1.1: DATA that breaks content-length (more, or less with
    END_STREAM) after the handler answered without reading (the answer
    in the same read, not yet written): the answer goes out whole, then
    RST_STREAM PROTOCOL_ERROR (h2spec 8.1.2.6's shape: POST /, length 1,
    DATA "test")."""
    c = settled(env)
    for path, status, length, body, end in (("/", 405, 1, b"test", True),
                                            ("/nope", 404, 3, b"abcdef", True),
                                            ("/nope", 404, 3, b"abcdef", False),
                                            ("/", 405, 10, b"abc", True)):
        sid = body_request(c, "POST", path, length, body, end)
        c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid,
                   what=f"RST_STREAM on {path} (length {length}, {len(body)} sent)")
        r = c.responses[sid]
        check(r.reset == PROTOCOL_ERROR, f"{path}: RST_STREAM {r.reset:#x}")
        check(r.status == status and r.ended, f"{path}: the answer did not come whole before "
              f"the reset (status {r.status}, ended {r.ended})")
    quiesce(c)
    check(c.goaway is None, "GOAWAY")


@case("conformance")
def peer_eof_behind_shut_windows(env):
    """After the client's FIN no WINDOW_UPDATE can come: a connection whose
    responses wait behind shut windows is closed once what can be written
    is (a HEAD answered later goes out first), not held in CLOSE-WAIT
    until stream_timeout (30 s here; issue 23)."""
    k = env.start("[h2]\nmax_concurrent_streams = 8\n")
    try:
        c = Conn(k.port(), settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0}, auto_window=False)
        c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                   what="SETTINGS ACK")
        big = c.request("/h2test/big?n=10000000")
        c.wait_for(lambda f: isinstance(f, HeadersFrame) and f.stream_id == big,
                   what="the big response's HEADERS")
        head = c.request("/slow?ms=300", method="HEAD")
        t0 = time.time()
        c.sock.shutdown(socket.SHUT_WR)
        while not c.eof:
            check(time.time() - t0 < 3, "the connection stayed open after the client's FIN")
            try:
                c.read_frame(0.2)
            except Fail:
                pass
        took = time.time() - t0
        r = c.responses.get(head)
        check(r is not None and r.status == 200 and r.ended, "the HEAD answer was not written")
        check(took < 1.5, f"closed {took:.2f} s after the FIN")
    finally:
        k.stop()



# ---- attacks -----------------------------------------------------------------------------


def bystander(env):
    """A connection opened before the attack, with a request in flight."""
    b = Conn(env.k.port())
    sid = b.request("/slow?ms=300")
    return b, sid


def unaffected(env, b, sid):
    r = b.response(sid, timeout=5)
    check(r.status == 200, f"the bystander's request: {r.status} {r.reset}")
    check(b.get("/").status == 200, "the bystander's next request")
    check(Conn(env.k.port()).get("/").status == 200, "a new connection")
    check(env.k.alive(), "keel died")


def flood_metric(env, kind):
    """The flood was counted (the stats module's /metrics)."""
    c = Conn(env.k.port())
    body = c.get("/metrics").body.decode()
    for line in body.splitlines():
        if line.startswith("h2_floods_total") and f'kind="{kind}"' in line:
            check(float(line.split()[-1]) >= 1, f"{line}")
            return
    raise Fail(f"no h2_floods_total{{kind=\"{kind}\"}} in /metrics")


@case("attacks")
def rapid_reset(env):
    """CVE-2023-44487: streams opened and reset at once, faster than they
    could complete; max_resets = 50."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    frames = []
    for _ in range(300):
        sid = c.new_id()
        frames.append(c.headers_frame(sid, [(":method", "GET"), (":path", "/slow?ms=1000"),
                                            (":scheme", "http"), (":authority", "x")]))
        frames.append(RstStreamFrame(sid, error_code=CANCEL))
    try:
        c.send(*frames)
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    c.expect_closed()
    unaffected(env, b, bsid)
    flood_metric(env, "rapid_reset")


@case("attacks")
def continuation_flood_frames(env):
    """CVE-2024-27316: a header block that never ends, in small frames."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    data = c.send_raw
    data(raw_frame(0x1, 0x1, 1, GET_ROOT))  # END_STREAM, no END_HEADERS
    try:
        for i in range(1000):
            data(raw_frame(0x9, 0x0, 1, b"\x40" + lit(f"x-{i}") + lit("y" * 50)))
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)
    flood_metric(env, "continuation")


@case("attacks")
def continuation_flood_bytes(env):
    """CVE-2024-27316: a header block of a few big frames past max_header_block."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x1, 0x1, 1, GET_ROOT))
    try:
        for i in range(7):
            c.send_raw(raw_frame(0x9, 0x0, 1, b"\x00" + lit(f"x-{i}") + lit("y" * 16000)))
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)


def calmed(env, b, bsid, c, flood, metric=None):
    """Sends a flood on c (OSError: keel closed the connection first):
    keel answers GOAWAY ENHANCE_YOUR_CALM, the bystander's stream is served
    as if nothing happened, and the flood is counted (metric, if given)."""
    try:
        flood()
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)
    if metric:
        flood_metric(env, metric)


@case("attacks")
def ping_flood(env):
    """CVE-2019-9512: PINGs, each asking for an ACK; max_pings = 50."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    calmed(env, b, bsid, c, lambda: c.send(*[PingFrame(0, opaque_data=i.to_bytes(8, "big")) for i in range(1000)]), "ping")


@case("attacks")
def settings_flood(env):
    """CVE-2019-9515: SETTINGS frames, each asking for an ACK."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    calmed(env, b, bsid, c, lambda: c.send(*[SettingsFrame(0) for _ in range(500)]), "settings")


@case("attacks")
def empty_data_flood(env):
    """CVE-2019-9518: DATA frames without payload or END_STREAM."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    sid = c.request("/h2test/late?ms=300", method="POST", end_stream=False)
    calmed(env, b, bsid, c, lambda: c.send(*[DataFrame(sid, b"") for _ in range(1000)]), "empty_frames")


@case("attacks")
def unknown_frame_flood(env):
    """5.5 + CVE-2019-9518: frames of unknown types cost nothing to send."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    calmed(env, b, bsid, c, lambda: c.send_raw(b"".join(raw_frame(0x20, 0, 0, b"junk") for _ in range(1000))))


@case("attacks")
def priority_churn(env):
    """CVE-2019-9513: PRIORITY frames reshuffling streams; max_priority = 100."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    frames = [PriorityFrame(1 + 2 * (i % 50), depends_on=1 + 2 * ((i + 7) % 50),
                            stream_weight=i % 256) for i in range(2000)]
    calmed(env, b, bsid, c, lambda: c.send(*frames), "priority")


@case("attacks")
def hpack_bomb(env):
    """RFC 7541 7.3: one 4 KB dynamic-table entry referenced 300 times: a
    1.2 MB field list from a few hundred bytes."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    insert = b"\x40" + lit("x-bomb") + lit("a" * 4000)  # literal, indexed: entry 62
    c.send_raw(raw_frame(0x1, 0x5, 1, GET_ROOT + insert))
    r = c.response(1)
    check(r.status == 200, f"the entry's request: {r.status}")
    c.send_raw(raw_frame(0x1, 0x5, 3, GET_ROOT + b"\xbe" * 300))
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)
    flood_metric(env, "hpack_bomb")


@case("attacks")
def reset_provoked(env):
    """CVE-2019-9514: requests the server must reset, as fast as possible."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    frames = []
    for _ in range(300):
        sid = c.new_id()
        frames.append(c.headers_frame(sid, [(":method", "GET"), (":path", "/"),
                                            (":scheme", "http"), (":authority", "x"),
                                            ("connection", "bad")]))
    calmed(env, b, bsid, c, lambda: c.send(*frames))


@case("attacks")
def zero_window_stall(env):
    """A client that never opens its window holds a response; the stream is
    reset after stream_timeout (1s), the connection goes on."""
    b, bsid = bystander(env)
    c = Conn(env.k.port(), settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0}, auto_window=False)
    sid = c.request("/h2test/big?n=10000000")
    t0 = time.time()
    c.expect_rst(sid, CANCEL, timeout=5)
    check(time.time() - t0 >= 0.8, "reset before stream_timeout")
    c.ping()
    unaffected(env, b, bsid)


@case("attacks")
def slow_body_stall(env):
    """A request body that stops coming is reset after stream_timeout."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"x" * 100, end_stream=False)
    c.expect_rst(sid, CANCEL, timeout=5)
    c.ping()


def trickle(c, data, interval, limit):
    """Sends data a byte every interval seconds until the server closes the
    connection or limit seconds pass; returns the seconds it took."""
    t0 = time.time()
    for i in range(len(data)):
        if time.time() - t0 > limit:
            break
        try:
            c.send_raw(data[i:i + 1])
        except OSError:
            break
        end = time.time() + interval
        while time.time() < end and not c.eof:
            c._fill(max(0.0, end - time.time()))
        if c.eof:
            break
    return time.time() - t0


@case("attacks")
def header_block_trickled(env):
    """A header block whose bytes are trickled, under every size and frame
    limit (one CONTINUATION frame, or the HEADERS frame itself, a byte at a
    time): held ~115 KiB a connection with no deadline (issue 23). It gets
    [h2] header_timeout (1s here) from its HEADERS frame, never renewed by
    bytes: GOAWAY ENHANCE_YOUR_CALM, the connection closed, counted; other
    connections untouched."""
    k = env.start("[h2]\nmax_concurrent_streams = 8\nheader_timeout = 1s\n")
    try:
        b = Conn(k.port())
        bsid = b.request("/slow?ms=1500")
        def cont(sid):
            return (16000).to_bytes(3, "big") + b"\x09\x00" + sid.to_bytes(4, "big") + \
                b"\x00" + lit("x-a") + lit("y" * 15990)
        headers = (16000).to_bytes(3, "big") + b"\x01\x05" + (1).to_bytes(4, "big") + \
            GET_ROOT + b"\x00" + lit("x-a") + lit("y" * 15990)
        slow = plain(req_fields("/slow?ms=3000"))
        # With no stream under way the deadline is the core's; with one
        # (a slow answer on stream 1) the module's tick.
        for what, lead, rest in (
                ("CONTINUATION", raw_frame(0x1, 0x1, 1, GET_ROOT), cont(1)),
                ("HEADERS", b"", headers),
                ("CONTINUATION, a stream open",
                 raw_frame(0x1, 0x5, 1, slow) + raw_frame(0x1, 0x1, 3, GET_ROOT), cont(3))):
            c = Conn(k.port())
            c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                       what="SETTINGS ACK")
            if lead:
                c.send_raw(lead)
            took = trickle(c, rest, 0.1, 4)
            check(c.eof, f"{what} trickled: the connection was open after {took:.1f} s")
            check(0.9 <= took < 2.5, f"{what} trickled: closed after {took:.2f} s")
            c.expect_goaway(ENHANCE_YOUR_CALM)
        r = b.response(bsid, timeout=5)
        check(r.status == 200, f"the bystander's request: {r.status} {r.reset}")
        check(Conn(k.port()).get("/").status == 200, "a new connection")
        body = Conn(k.port()).get("/metrics").body.decode()
        check(any(line.startswith("h2_limits_total") and 'limit="header_timeout"' in line
                  and float(line.split()[-1]) >= 3 for line in body.splitlines()),
              "not counted in h2_limits_total{limit=\"header_timeout\"}")
    finally:
        k.stop()


@case("attacks")
def header_blocks_hold_no_slots(env):
    """At max_connections (2 here), connections whose peers trickle a header
    block with no stream under way are closed, oldest first, to admit new
    clients (the core's reclaiming of unfinished heads, as http1's), not
    left to hold every slot until header_timeout (10s)."""
    k = env.start("max_connections = 2\n[h2]\nmax_concurrent_streams = 8\n")
    try:
        hold = []
        for _ in range(2):
            c = Conn(k.port())
            c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                       what="SETTINGS ACK")
            # A PING and a HEADERS without END_HEADERS in one write (one
            # read): once the PING is answered, the block is under way.
            c.send_raw(raw_frame(0x6, 0x0, 0, b"blockpng") + raw_frame(0x1, 0x1, 1, GET_ROOT))
            c.wait_for(lambda f: isinstance(f, PingFrame) and "ACK" in f.flags,
                       what="the PING's ACK")
            hold.append(c)
        t0 = time.time()
        n = Conn(k.port(), timeout=3)
        r = n.response(n.request("/"))
        check(r.status == 200, f"a new client at max_connections: {r.status}")
        check(time.time() - t0 < 2, "the new client waited")
        hold[0].expect_closed(timeout=2)
    finally:
        for c in hold:
            c.close()
        k.stop()


@case("attacks")
def body_trickled(env):
    """A request body trickled a byte every 250 ms: each byte renews
    stream_timeout (1s here), so it was held without end (issue 23). As
    http1's body_min_rate, the body gets stream_timeout plus a second per
    body_min_rate (1k) bytes from when the handler asks for it: 408 (no
    answer had begun), counted."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    t0 = time.time()
    while time.time() - t0 < 4:
        r = c.responses.get(sid)
        if r is not None and (r.ended or r.reset is not None):
            break
        try:
            c.send(DataFrame(sid, b"x"))
        except OSError:
            break
        end = time.time() + 0.25
        while time.time() < end:
            try:
                c.read_frame(max(0.01, end - time.time()))
            except Fail:
                pass
    took = time.time() - t0
    r = c.responses.get(sid)
    check(r is not None and r.status == 408, f"after {took:.1f} s: "
          f"{'no answer' if r is None else f'status {r.status}, reset {r.reset}'}")
    check(0.9 <= took < 2.5, f"answered after {took:.2f} s")
    c.ping()
    check(c.get("/").status == 200, "the connection did not go on")
    check(metric(env, "h2_limits_total", 'limit="body_min_rate"') >= 1, "not counted")


@case("attacks")
def memory_bounded(env):
    """After every attack above, keel's memory is where it was, give or take."""
    grown = env.k.rss_kib() - env.rss0
    check(grown < 64 * 1024, f"RSS grew by {grown} KiB")


# ---- running -----------------------------------------------------------------------------------


class Env:
    def __init__(self, suite, keel, mods, testmods):
        self.keel = keel
        self.dirs = [os.path.abspath(mods), os.path.abspath(testmods)]
        import tempfile
        self.www = tempfile.mkdtemp(prefix="keel-h2-www-")
        with open(os.path.join(self.www, "4k.bin"), "wb") as f:
            f.write(os.urandom(4096))
        with open(os.path.join(self.www, "big.bin"), "wb") as f:
            f.write(os.urandom(300000))
        self.access_log = os.path.join(self.www, "access.log")
        self.started = []
        limits = ("" if suite == "conformance" else
                  "max_resets = 50\nmax_pings = 50\nmax_settings = 20\nmax_empty_frames = 50\n"
                  "max_priority = 100\nmax_continuations = 8\n")
        self.base = f"[h2]\nmax_concurrent_streams = 8\nstream_timeout = 1s\n{limits}"
        # Every keel started here writes its access log into the temporary
        # folder, whatever [h2] section it was given.
        self.common = (f"[static]\nmount = /files {self.www}\n"
                       f"[accesslog]\npath = {self.access_log}\n")
        self.k = self.start(self.base)
        self.rss0 = self.k.rss_kib()

    def start(self, sections, extra=""):
        mods = "http1 h2 hello h2test probe trailers static accesslog stats " + extra
        k = Keel(self.keel, self.dirs, mods, (sections if sections else self.base) + self.common)
        self.started.append(k)
        return k


def main():
    if len(sys.argv) < 5 or sys.argv[1] not in CASES:
        print(__doc__)
        return 2
    suite, keel, mods, testmods = sys.argv[1:5]
    only = set(sys.argv[5:])
    env = Env(suite, keel, mods, testmods)
    failed = []
    try:
        for fn in CASES[suite]:
            if only and fn.__name__ not in only:
                continue
            t0 = time.time()

            def alarm(signum, frame):
                raise Fail("case timed out (20 s)")
            signal.signal(signal.SIGALRM, alarm)
            signal.alarm(20)
            try:
                fn(env)
                print(f"ok    {fn.__name__} ({time.time() - t0:.2f}s)")
            except Exception as e:  # a failing case must not stop the others
                failed.append(fn.__name__)
                print(f"FAIL  {fn.__name__}: {e}")
                if not isinstance(e, Fail):
                    traceback.print_exc()
            finally:
                signal.alarm(0)
            if not env.k.alive():
                print("keel died; its log:\n" + env.k.text())
                failed.append("(keel died)")
                break
    finally:
        env.k.stop()
    # Under ASan/UBSan (make test-asan) a report in keel's log is a failure
    # even when every case passed.
    for k in env.started:
        text = k.text()
        for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if mark in text:
                failed.append(f"(sanitizer report in {k.log})")
                print(text[text.index(mark) - 200:][:4000])
                break
    if failed:
        print(f"{len(failed)} failed: {' '.join(failed)}\nkeel log: {env.k.log}")
        return 1
    # Kept when something failed (the logs say why); removed otherwise.
    import shutil
    for k in env.started:
        shutil.rmtree(k.dir, ignore_errors=True)
    shutil.rmtree(env.www, ignore_errors=True)
    print(f"all {suite} cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
