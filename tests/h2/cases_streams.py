"""tests/h2/cases_streams.py — RFC 9113 5: stream states (5.1), stream identifiers
(5.1.1), concurrency (5.1.2), dependencies (5.3.1), extensions (5.5).

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import os
import time

from h2lib import (CANCEL, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, NO_ERROR, PROTOCOL_ERROR,
                   REFUSED_STREAM, STREAM_CLOSED, Conn, DataFrame, Fail, PingFrame, PriorityFrame, RstStreamFrame,
                   SettingsFrame, WindowUpdateFrame, check)
from h2cases import (case, raw_frame, lit, GET_ROOT, metric, plain, req_fields, settled,
                     conn_error, stream_error, stream_or_conn_error, open_stream, quiesce)


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
def unknown_frame_ignored(env):
    """5.5: frames of unknown types are ignored."""
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x20, 0x0, 0, b"whatever"))
    c.ping()
    check(c.get("/").status == 200, "no answer after an unknown frame")


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


def resets_before_ping_ack(c, sid):
    """Sends a PING and returns the RST_STREAMs on sid that came before its
    ACK: everything the server made of what was sent before the PING."""
    data = os.urandom(8)
    c.send(PingFrame(0, opaque_data=data))
    resets = []

    def seen(f):
        if isinstance(f, RstStreamFrame) and f.stream_id == sid:
            resets.append(f)
        return isinstance(f, PingFrame) and "ACK" in f.flags and f.opaque_data == data
    c.wait_for(seen, what="the PING's ACK")
    return resets


@case("conformance")
def malformed_priority_on_an_idle_stream_reset_once(env):
    """5.1, 6.3: a malformed PRIORITY on a stream never opened gets one
    RST_STREAM; a second one there is sent before the client saw ours and
    gets none (fuzz_h2 found two RST_STREAMs for stream 63); the stream can
    still be opened after, and the connection goes on."""
    c = settled(env)
    sid = c.new_id() + 60
    for _ in range(2):
        c.send_raw(raw_frame(0x2, 0x0, sid, b""))
    resets = resets_before_ping_ack(c, sid)
    check(len(resets) == 1, f"{len(resets)} RST_STREAMs on stream {sid}, want 1")
    check(resets[0].error_code == FRAME_SIZE_ERROR, f"RST_STREAM {resets[0].error_code:#x}")
    check(c.goaway is None and c.get("/").status == 200, "the connection did not go on")


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
        again = resets_before_ping_ack(c, sid)
        check(not again, f"a second RST_STREAM on stream {sid}")
    check(c.goaway is None and c.get("/").status == 200, "the connection did not go on")
