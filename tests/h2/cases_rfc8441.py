"""tests/h2/cases_rfc8441.py — RFC 8441: WebSocket over an HTTP/2 stream.
SETTINGS_ENABLE_CONNECT_PROTOCOL (3), the extended CONNECT and its malformed
forms (4), the WebSocket handshake over it (5) and the stream as the
WebSocket connection: frames in DATA (RFC 6455 masking and close), the
ends of the stream either way, flow control, and the other streams of the
connection going on.

Run by run.py; each case starts keel with the websocket module, hello's /ws
echo and wstest's /t/app (tests/modules/mod_wstest.c).
"""

import os
import time

from h2lib import (PROTOCOL_ERROR, Conn, DataFrame, Fail, Response, RstStreamFrame,
                   SettingsFrame, WindowUpdateFrame, check)
from h2cases import answered, case, raw_frame, plain, settled, stream_error, conn_error, metric

CANCEL = 0x8
ENABLE_CONNECT_PROTOCOL = 0x8
WS_TEXT, WS_CLOSE = 0x1, 0x8


def ws_keel(env, sections=""):
    return env.start(env.base + sections, "wstest", first="websocket")


def ws_frame(opcode, payload=b"", mask=True, fin=True):
    """A client frame (RFC 6455 5.2), masked as a client's must be (5.3)."""
    payload = payload.encode() if isinstance(payload, str) else payload
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([mbit | 127]) + n.to_bytes(8, "big")
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_parse(buf):
    """Server frames in buf: [(opcode, payload)], and the bytes left over.
    A server frame is never masked (RFC 6455 5.1)."""
    out = []
    while len(buf) >= 2:
        op, n, at = buf[0] & 0x0f, buf[1] & 0x7f, 2
        check(not buf[1] & 0x80, "a masked frame from the server")
        if n == 126:
            if len(buf) < 4:
                break
            n, at = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, at = int.from_bytes(buf[2:10], "big"), 10
        if len(buf) < at + n:
            break
        out.append((op, bytes(buf[at:at + n])))
        buf = buf[at + n:]
    return out, buf


def connect_fields(path="/ws", extra=(), protocol="websocket"):
    f = [(":method", "CONNECT"), (":protocol", protocol), (":scheme", "http"), (":path", path),
         (":authority", "x")]
    return f + [("sec-websocket-version", "13")] + list(extra)


class Tunnel:
    """An extended CONNECT on c, answered 200: WebSocket frames in DATA."""

    def __init__(self, c, path="/ws", extra=()):
        self.c = c
        self.sid = c.new_id()
        c.stream_windows.setdefault(self.sid, c.server_initial)
        c.send_headers(self.sid, connect_fields(path, extra), end_stream=False)
        c.wait_for(lambda f: self.response().headers or self.response().reset is not None,
                   what="the CONNECT's answer")
        r = self.response()
        check(r.reset is None, f"CONNECT reset {r.reset}")
        check(r.status == 200, f"CONNECT answered {r.status}, not 200 (RFC 8441 5)")
        check(not r.ended, "the 200 ended the stream")
        self.buf = b""
        self.seen = 0

    def response(self):
        return self.c.responses.setdefault(self.sid, Response())

    def send(self, frame, end_stream=False):
        self.c.send_data(self.sid, frame, end_stream=end_stream)

    def frames(self, count=1, timeout=5.0):
        """The next count WebSocket frames the server sent on the stream."""
        got = []
        deadline = time.time() + timeout
        while True:
            body = self.response().body
            self.buf += body[self.seen:]
            self.seen = len(body)
            new, self.buf = ws_parse(self.buf)
            got += new
            if len(got) >= count:
                return got
            check(time.time() < deadline, f"{len(got)} of {count} WebSocket frames came")
            check(self.response().reset is None, f"stream reset {self.response().reset}")
            f = self.c.read_frame(max(0.01, deadline - time.time()))
            check(f is not None, "connection closed")


def wait_log(k, text, timeout=5.0, count=1):
    """Waits until keel's log holds text (count times)."""
    deadline = time.time() + timeout
    while k.text().count(text) < count:
        check(time.time() < deadline, f"no {text!r} in keel's log")
        time.sleep(0.02)


@case("conformance")
def rfc8441_setting_sent(env):
    """RFC 8441 3: SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 in our SETTINGS by
    default; [h2] enable_connect_protocol = off leaves it out, and a
    :protocol is then malformed (4). A client's value other than 0 or 1 is
    a connection error PROTOCOL_ERROR."""
    c = settled(env)
    check(c.server_settings.get(ENABLE_CONNECT_PROTOCOL) == 1,
          f"SETTINGS {c.server_settings}")
    conn_error(env, raw_frame(0x4, 0, 0, (8).to_bytes(2, "big") + (2).to_bytes(4, "big")),
               PROTOCOL_ERROR)
    k = env.start(env.base + "enable_connect_protocol = off\n", first="websocket")
    try:
        c = Conn(k.port())
        c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                   what="SETTINGS ACK")
        check(ENABLE_CONNECT_PROTOCOL not in c.server_settings, f"{c.server_settings}")
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x4, sid, plain(connect_fields())))
        stream_error(c, sid, PROTOCOL_ERROR)
    finally:
        k.stop()


@case("conformance")
def rfc8441_malformed(env):
    """RFC 8441 4: :protocol on a method other than CONNECT, an extended
    CONNECT without :path or :scheme, two :protocol: malformed (RFC 9113
    8.1.1: RST_STREAM PROTOCOL_ERROR); the connection goes on."""
    c = settled(env)
    bad = [
        [(":method", "GET"), (":protocol", "websocket"), (":scheme", "http"), (":path", "/ws"),
         (":authority", "x")],
        [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
         (":authority", "x")],
        [(":method", "CONNECT"), (":protocol", "websocket"), (":path", "/ws"),
         (":authority", "x")],
        connect_fields()[:2] + connect_fields(),
        [(":method", "CONNECT"), (":protocol", "web socket"), (":scheme", "http"),
         (":path", "/ws"), (":authority", "x")],
    ]
    for fields in bad:
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x4, sid, plain(fields)))
        try:
            stream_error(c, sid, PROTOCOL_ERROR)
        except Fail as e:
            raise Fail(f"{fields}: {e}")
    # Only those: a well-formed one is answered (hello has no CONNECT route).
    answered(c, connect_fields("/"), "a well-formed extended CONNECT")
    check(c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def rfc8441_websocket_echo(env):
    """RFC 8441 5: CONNECT :protocol websocket to hello's /ws echo: 200, no
    Sec-WebSocket-Accept nor Upgrade; the subprotocol chosen as over
    HTTP/1.1; a text frame in DATA comes back in DATA, unmasked (RFC 6455
    5.1), in one piece and fragmented; the tunnel is counted."""
    k = ws_keel(env)
    try:
        c = Conn(k.port())
        t = Tunnel(c, extra=[("sec-websocket-protocol", "echo")])
        r = t.response()
        check(r.header("sec-websocket-accept") is None and r.header("upgrade") is None,
              f"{r.headers}")
        check(r.header("sec-websocket-protocol") == "echo", f"{r.headers}")
        t.send(ws_frame(WS_TEXT, "hello over h2"))
        check(t.frames(1) == [(WS_TEXT, b"hello over h2")], "echo")
        t.send(ws_frame(WS_TEXT, "hel", fin=False) + ws_frame(0x0, "lo"))
        check(t.frames(1) == [(WS_TEXT, b"hello")], "fragmented echo")
        big = os.urandom(100000)
        t.send(ws_frame(0x2, big))
        check(t.frames(1, timeout=10) == [(0x2, big)], "100 kB binary echo")
        check(metric(type("E", (), {"k": k}), "h2_tunnels_total", "") >= 1, "not counted")
        c.close()
    finally:
        k.stop()


@case("conformance")
def rfc8441_handshake_refusals(env):
    """RFC 8441 5 with RFC 6455 4.2.2: no Sec-WebSocket-Version 13 → 426;
    a :protocol other than websocket on the endpoint → 400; a CONNECT
    :protocol websocket where no endpoint is → 404. Each an ordinary
    answer that ends the stream."""
    k = ws_keel(env)
    try:
        c = settled(type("E", (), {"k": k}))
        for fields, status in ((connect_fields()[:5], 426),
                               (connect_fields(protocol="chat"), 400),
                               (connect_fields("/nowhere"), 404)):
            sid = c.new_id()
            c.send_raw(raw_frame(0x1, 0x4, sid, plain(fields)))
            r = c.response(sid)
            check(r.status == status, f"{fields}: {r.status} {r.reset}")
        check(c.get("/").status == 200, "the connection did not go on")
    finally:
        k.stop()


@case("conformance")
def rfc8441_unmasked_frame(env):
    """RFC 6455 5.1: a client frame without a mask fails the WebSocket
    connection: close 1002, then the stream's end."""
    k = ws_keel(env)
    try:
        c = Conn(k.port())
        t = Tunnel(c)
        t.send(ws_frame(WS_TEXT, "naked", mask=False))
        op, payload = t.frames(1)[0]
        check(op == WS_CLOSE and int.from_bytes(payload[:2], "big") == 1002,
              f"{op} {payload!r}")
        r = c.response(t.sid)
        check(r.ended or r.reset is not None, "the stream stayed open")
        c.ping()
    finally:
        k.stop()


@case("conformance")
def rfc8441_close_handshake(env):
    """RFC 6455 5.5.1 over RFC 8441: the client's close is answered with a
    close and END_STREAM (the tunnel's orderly end); the endpoint hears
    1000; the connection goes on with another stream."""
    k = ws_keel(env)
    try:
        c = Conn(k.port())
        t = Tunnel(c, "/t/app")
        t.send(ws_frame(WS_CLOSE, (1000).to_bytes(2, "big") + b"done"))
        op, payload = t.frames(1)[0]
        check(op == WS_CLOSE and int.from_bytes(payload[:2], "big") == 1000, f"{op} {payload!r}")
        r = c.response(t.sid)
        check(r.ended and r.reset is None, f"ended {r.ended} reset {r.reset}")
        c.send(DataFrame(t.sid, b"", flags=["END_STREAM"]))
        wait_log(k, "wstest close code=1000")
        check(c.get("/").status == 200, "the connection did not go on")
        # The server's own close: "close" makes wstest close with 1000.
        t = Tunnel(c, "/t/app")
        t.send(ws_frame(WS_TEXT, "close"))
        op, payload = t.frames(1)[0]
        check(op == WS_CLOSE and payload[2:] == b"bye", f"{op} {payload!r}")
        t.send(ws_frame(WS_CLOSE, (1000).to_bytes(2, "big")), end_stream=True)
        r = c.response(t.sid)
        check(r.ended and r.reset is None, f"ended {r.ended} reset {r.reset}")
        c.ping()
    finally:
        k.stop()


@case("conformance")
def rfc8441_client_reset(env):
    """The client's RST_STREAM reaches the protocol as its close (1006
    for the endpoint: no close frame); the connection goes on. Its
    END_STREAM without a close frame ends the WebSocket too."""
    k = ws_keel(env)
    try:
        c = Conn(k.port())
        t = Tunnel(c, "/t/app")
        t.send(ws_frame(WS_TEXT, "x"))
        check(t.frames(1) == [(WS_TEXT, b"x")], "echo")
        c.send(RstStreamFrame(t.sid, error_code=CANCEL))
        wait_log(k, "wstest close code=1006")
        c.ping()
        t = Tunnel(c, "/t/app")
        c.send(DataFrame(t.sid, b"", flags=["END_STREAM"]))
        r = c.response(t.sid)
        check(r.ended or r.reset is not None, "the stream stayed open after END_STREAM")
        # The endpoint is told after the stream's end went out: wait for it.
        wait_log(k, "wstest close code=1006", count=2)
        check(c.get("/").status == 200, "the connection did not go on")
    finally:
        k.stop()


@case("conformance")
def rfc8441_other_streams(env):
    """Streams beside an open tunnel are answered as usual, and the tunnel
    goes on after them (RFC 9113 5: streams are independent)."""
    k = ws_keel(env)
    try:
        c = Conn(k.port())
        t = Tunnel(c)
        t.send(ws_frame(WS_TEXT, "one"))
        check(t.frames(1) == [(WS_TEXT, b"one")], "echo before")
        sids = [c.request("/") for _ in range(3)]
        for sid in sids:
            check(c.response(sid).status == 200, f"GET on stream {sid}")
        t.send(ws_frame(WS_TEXT, "two"))
        check(t.frames(1) == [(WS_TEXT, b"two")], "echo after")
        c.close()
    finally:
        k.stop()


@case("conformance")
def rfc8441_flow_control(env):
    """RFC 9113 6.9 on a tunnel: wstest's "fill" sends 4 MiB; the server
    stops at the stream's window (65,535) and goes on only after a
    WINDOW_UPDATE, whose credit it never exceeds. Reading the other way:
    what the client sends gets its window back as the protocol reads."""
    k = ws_keel(env)
    try:
        c = Conn(k.port(), auto_window=False)
        t = Tunnel(c, "/t/app")
        t.send(ws_frame(WS_TEXT, "fill"))
        got = 0
        deadline = time.time() + 5
        while got < 65535:
            check(time.time() < deadline, f"{got} bytes of the first window came")
            f = c.read_frame(max(0.01, deadline - time.time()))
            check(f is not None, "closed")
            if isinstance(f, DataFrame) and f.stream_id == t.sid:
                got += f.flow_controlled_length
        check(got == 65535, f"{got} bytes, over the window")
        # Nothing more while the window is shut.
        try:
            f = c.wait_for(lambda f: isinstance(f, DataFrame), timeout=0.3)
            raise Fail(f"DATA of {f.flow_controlled_length} bytes past the window")
        except Fail as e:
            if "past the window" in str(e):
                raise
        c.send(WindowUpdateFrame(0, window_increment=10000),
               WindowUpdateFrame(t.sid, window_increment=10000))
        more = 0
        deadline = time.time() + 5
        while more < 10000:
            check(time.time() < deadline, f"{more} bytes after WINDOW_UPDATE")
            f = c.read_frame(max(0.01, deadline - time.time()))
            if isinstance(f, DataFrame) and f.stream_id == t.sid:
                more += f.flow_controlled_length
        check(more == 10000, f"{more} bytes for a credit of 10000")
        # The client's bytes: 200 kB of frames pass a 65,535-byte window
        # only if the server gives it back as the protocol reads.
        c.stream_windows[t.sid] = 65535
        c.send_data(t.sid, ws_frame(0x2, os.urandom(100000)) * 2, end_stream=False)
        c.send(RstStreamFrame(t.sid, error_code=CANCEL))
        c.ping()
    finally:
        k.stop()


@case("conformance")
def rfc8441_connection_ends(env):
    """The client's GOAWAY and the connection's end close every tunnel
    (the endpoint hears 1006), and keel goes on."""
    k = ws_keel(env)
    try:
        c = Conn(k.port())
        Tunnel(c, "/t/app")
        Tunnel(c, "/t/app")
        c.close()
        wait_log(k, "wstest close code=1006", count=2)
        c = Conn(k.port())
        check(c.get("/").status == 200, "keel did not go on")
    finally:
        k.stop()


@case("conformance")
def rfc8441_client_leaves_mid_tunnel(env):
    """The client vanishes (a TCP reset) while a tunnel has DATA queued
    beyond its window, half a WebSocket frame delivered, and another
    tunnel idle: the endpoints hear 1006, what was queued is released
    (under ASan, make test-asan: no use after free, no leak), and keel
    goes on."""
    import socket
    import struct
    k = ws_keel(env)
    try:
        c = Conn(k.port(), auto_window=False)
        t = Tunnel(c, "/t/app")
        Tunnel(c, "/t/app")
        t.send(ws_frame(WS_TEXT, "fill"))
        c.wait_for(lambda f: isinstance(f, DataFrame) and f.stream_id == t.sid,
                   what="the first DATA")
        t.send(ws_frame(0x2, os.urandom(30000))[:20000])  # half a frame
        c.ping()
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        wait_log(k, "wstest close code=1006", count=2)
        c = Conn(k.port())
        t = Tunnel(c)
        t.send(ws_frame(WS_TEXT, "still here"))
        check(t.frames(1) == [(WS_TEXT, b"still here")], "keel did not go on")
        c.close()
    finally:
        k.stop()


@case("conformance")
def rfc8441_permessage_deflate(env):
    """RFC 7692 over RFC 8441: permessage-deflate negotiated as over
    HTTP/1.1 (with the deflate module), a compressed message (RSV1) read,
    and the echo of a long one sent back compressed."""
    import zlib
    k = env.start(env.base, "wstest", first="deflate websocket")
    try:
        c = Conn(k.port())
        t = Tunnel(c, extra=[("sec-websocket-extensions",
                              "permessage-deflate; client_max_window_bits")])
        ext = t.response().header("sec-websocket-extensions") or ""
        check(ext.startswith("permessage-deflate"), f"extensions {ext!r}")
        text = ("compressed over a stream " * 20).encode()
        z = zlib.compressobj(wbits=-15)
        body = z.compress(text) + z.flush(zlib.Z_SYNC_FLUSH)
        frame = bytearray(ws_frame(WS_TEXT, body[:-4]))
        frame[0] |= 0x40  # RSV1: compressed (RFC 7692 6)
        t.send(bytes(frame))
        # The echo: a compressed frame (RSV1) whose payload inflates to text.
        deadline = time.time() + 5
        while len(t.buf) + len(t.response().body) - t.seen < 2:
            check(time.time() < deadline, "no echo")
            c.read_frame(max(0.01, deadline - time.time()))
        raw = t.buf + t.response().body[t.seen:]
        check(raw[0] & 0x40, f"the echo is not compressed: {raw[:4]!r}")
        (op, payload), = t.frames(1)
        check(op == WS_TEXT, f"opcode {op}")
        d = zlib.decompressobj(wbits=-15)
        check(d.decompress(payload + b"\x00\x00\xff\xff") == text, "inflated echo")
        c.close()
    finally:
        k.stop()
