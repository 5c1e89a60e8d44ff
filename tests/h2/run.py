#!/usr/bin/env python3
"""tests/h2/run.py — the h2 module against raw HTTP/2 frame sequences.

    run.py conformance|attacks KEEL MODULE_DIR TEST_MODULE_DIR [CASE...]

conformance: cases in the spirit of h2spec's sections (RFC 9113 3.4 the
preface, 4.2 frame sizes, 5.1 stream states, 5.1.2 concurrency, 6.5
SETTINGS, 6.7 PING, 6.8 GOAWAY, 6.9 flow control, RFC 7541 HPACK errors, 8
HTTP semantics), plus what keel promises above them (hello's routes, the
core's pipeline, limits, timeouts, shutdown).

attacks: each published HTTP/2 attack performed against keel. Each must end
with GOAWAY ENHANCE_YOUR_CALM (or a reset stream), while another connection
opened before it keeps being answered, and keel's memory stays bounded.

Each case runs under an alarm (20 s); exit 0 if all pass, 1 otherwise, 77 if
hyperframe/hpack are missing.
"""

import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    from h2lib import *  # noqa: F401,F403
    from h2lib import (CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR,
                       FRAME_SIZE_ERROR, NO_ERROR, PROTOCOL_ERROR, REFUSED_STREAM, STREAM_CLOSED,
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

    def start(self, sections):
        mods = "http1 h2 hello h2test probe trailers static accesslog stats"
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
