"""tests/h2/cases_flow.py — RFC 9113 6.9: WINDOW_UPDATE and flow control, the
initial window (6.9.2) and a connection's window shared by its streams.

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import os
import time

from h2lib import (FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, PROTOCOL_ERROR, Conn, DataFrame, Fail,
                   HeadersFrame, SettingsFrame, WindowUpdateFrame, check)
from h2cases import (case, raw_frame, settled, conn_error, stream_error, file_bytes,
                     read_within_windows, open_stream)


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
