"""tests/h2/cases_frames.py — RFC 9113 6, frame by frame: DATA (6.1), HEADERS
(6.2), PRIORITY (6.3), RST_STREAM (6.4), SETTINGS (6.5), PING (6.7), GOAWAY
(6.8), CONTINUATION (6.10); flow control (6.9) is cases_flow.py.

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import os
import time

from h2lib import (CANCEL, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, NO_ERROR, PROTOCOL_ERROR, Conn,
                   GoAwayFrame, PingFrame, PriorityFrame, RstStreamFrame, check)
from h2cases import (case, raw_frame, lit, GET_ROOT, plain, settled, conn_error, stream_error,
                     stream_or_conn_error, open_stream)


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
def rst_on_idle_stream(env):
    """6.4: RST_STREAM on an idle stream: PROTOCOL_ERROR."""
    c = Conn(env.k.port())
    c.send(RstStreamFrame(5, error_code=CANCEL))
    c.expect_goaway(PROTOCOL_ERROR)


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
def header_list_too_large_431(env):
    """6.5.2, 10.5.1: a field list over max_header_list (32k) gets 431."""
    c = Conn(env.k.port())
    r = c.get("/", fields=[("x-big", "a" * 40000)])
    check(r.status == 431, f"status {r.status} reset {r.reset}")
    check(c.get("/").status == 200, "the connection did not go on")


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
def priority_wrong_length_after_the_answer(env):
    """6.3: the same error on a stream whose exchange has ended is still a
    stream error: RST_STREAM FRAME_SIZE_ERROR (h2spec 6.3/2 sends HEADERS
    with END_STREAM, and the answer may have gone before its PRIORITY
    arrives; keel once sent nothing then, and h2spec failed about one run
    in two)."""
    c = settled(env)
    sid = c.request("/")
    r = c.response(sid)
    check(r.status == 200, f"the answer: {r.status}")
    c.send_raw(raw_frame(0x2, 0x0, sid, (0).to_bytes(4, "big")))
    f = c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid, 5,
                   f"RST_STREAM on stream {sid}")
    check(f.error_code == FRAME_SIZE_ERROR, f"RST_STREAM {f.error_code:#x}")
    check(c.goaway is None, "GOAWAY after a stream error")
    c.ping()


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
