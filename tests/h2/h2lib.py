"""h2lib — a raw HTTP/2 client for keel's h2 tests, and starting keel.

Frames are built and parsed with hyperframe, header blocks with hpack
(Debian: python3-h2 brings both). Unlike a client library, this one sends
whatever a test asks for — malformed frames, floods, frames out of order —
and shows every frame the server sends back, so a case can be written as
the frame sequence it is (the style of h2spec).

Every wait has a timeout: a test can fail, never hang.
"""

import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import time

from hpack import Decoder, Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, ExtensionFrame, Frame, GoAwayFrame,
                              HeadersFrame, PingFrame, PriorityFrame, RstStreamFrame,
                              SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# RFC 9113 7
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0x0, 0x1, 0x2, 0x3
STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL = 0x5, 0x6, 0x7, 0x8
COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x9, 0xB


class Fail(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ---- keel -------------------------------------------------------------------


class Keel:
    """keel started on a config with every listener on port 0."""

    def __init__(self, keel, module_dirs, modules, sections="", listeners=("h2", "http1"),
                 workers=1):
        self.dir = tempfile.mkdtemp(prefix="keel-h2-")
        self.conf = os.path.join(self.dir, "keel.conf")
        lines = ["[keel]"]
        lines += [f"listen = 127.0.0.1:0 {p}" for p in listeners]
        lines += [f"workers = {workers}", f"modules = {modules}",
                  "module_path = " + " ".join(module_dirs), "shutdown_timeout = 5s", sections]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.log = os.path.join(self.dir, "keel.log")
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen([keel, "-c", self.conf], stdout=self.logf,
                                     stderr=subprocess.STDOUT)
        self.ports = {}
        deadline = time.time() + 10
        while time.time() < deadline and len(self.ports) < len(listeners):
            if self.proc.poll() is not None:
                break
            for m in re.finditer(r"listening on 127\.0\.0\.1:(\d+) \((\w+)\)", self.text()):
                self.ports.setdefault(m.group(2), int(m.group(1)))
            time.sleep(0.02)
        if len(self.ports) < len(listeners):
            self.stop()
            raise Fail("keel did not start:\n" + self.text())

    def text(self):
        with open(self.log) as f:
            return f.read()

    def port(self, proto="h2"):
        return self.ports[proto]

    def alive(self):
        return self.proc.poll() is None

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def term(self):
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout=10):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Fail("keel did not exit")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


# ---- a raw connection -------------------------------------------------------------


class Response:
    def __init__(self):
        self.headers = []
        self.trailers = []
        self.body = b""
        self.ended = False
        self.reset = None  # RST_STREAM error code
        self.frames = []

    @property
    def status(self):
        for k, v in self.headers:
            if k == ":status":
                return int(v)
        return None

    def header(self, name):
        for k, v in self.headers:
            if k == name:
                return v
        return None


class Conn:
    def __init__(self, port, preface=True, settings=None, auto_window=True, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.enc = Encoder()
        self.dec = Decoder()
        self.timeout = timeout
        self.eof = False
        self.goaway = None
        self.backlog = []  # frames read while waiting for something else
        self.responses = {}
        self.block = None  # (stream, bytes, end_stream, is_trailer) while CONTINUATIONs come
        self.auto_window = auto_window
        self.send_window = 65535  # what the server lets us send (connection)
        self.stream_windows = {}
        self.server_initial = 65535
        self.server_settings = {}
        self.next_id = 1
        if preface:
            self.send_raw(PREFACE)
            sf = SettingsFrame(0)
            for k, v in (settings or {}).items():
                sf.settings[k] = v
            self.send(sf)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- sending

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, *frames):
        self.sock.sendall(b"".join(f.serialize() for f in frames))

    def new_id(self):
        sid = self.next_id
        self.next_id += 2
        return sid

    def headers_frame(self, sid, fields, end_stream=True, end_headers=True):
        f = HeadersFrame(sid)
        f.data = self.enc.encode(fields)
        if end_stream:
            f.flags.add("END_STREAM")
        if end_headers:
            f.flags.add("END_HEADERS")
        return f

    def send_headers(self, sid, fields, end_stream=True):
        """A header block in frames of at most 16384 bytes (HEADERS, then
        CONTINUATION: RFC 9113 6.10)."""
        block = self.enc.encode(fields)
        first = HeadersFrame(sid)
        first.data = block[:16384]
        if end_stream:
            first.flags.add("END_STREAM")
        frames = [first]
        rest = block[16384:]
        while rest:
            frames.append(ContinuationFrame(sid))
            frames[-1].data = rest[:16384]
            rest = rest[16384:]
        frames[-1].flags.add("END_HEADERS")
        self.send(*frames)

    def request(self, path, method="GET", body=None, fields=(), authority="localhost",
                sid=None, end_stream=None):
        sid = sid or self.new_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "http"),
                (":authority", authority)] + list(fields)
        if end_stream is None:
            end_stream = body is None
        self.stream_windows.setdefault(sid, self.server_initial)
        self.send_headers(sid, hdrs, end_stream=end_stream)
        if body is not None:
            self.send_data(sid, body, end_stream=True)
        return sid

    def send_data(self, sid, data, end_stream=True, deadline=10.0):
        """Sends data as the server's windows allow (RFC 9113 6.9)."""
        limit = time.time() + deadline
        max_frame = self.server_settings.get(SettingsFrame.MAX_FRAME_SIZE, 16384)
        self.stream_windows.setdefault(sid, self.server_initial)
        while True:
            n = min(len(data), self.send_window, self.stream_windows[sid], max_frame)
            if n > 0 or not data:
                f = DataFrame(sid, data[:n])
                data = data[n:]
                if not data and end_stream:
                    f.flags.add("END_STREAM")
                self.send(f)
                self.send_window -= n
                self.stream_windows[sid] -= n
                if not data:
                    return
                continue
            check(time.time() < limit, f"stream {sid}: the server's window stayed closed")
            fr = self._read_one(max(0.01, limit - time.time()))
            if fr is None:
                raise Fail("connection closed while sending a body")
            self.backlog.append(fr)

    # -- receiving

    def _fill(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return False
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, OSError):
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _read_one(self, timeout):
        """One frame, processed (SETTINGS acked, windows tracked, header
        blocks decoded), or None at EOF. Raises Fail on timeout."""
        deadline = time.time() + timeout
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            if self.eof:
                return None
            left = deadline - time.time()
            if left <= 0:
                raise Fail("timed out waiting for a frame")
            self._fill(left)
        frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
        frame.parse_body(memoryview(self.buf[9:9 + length]))
        self.buf = self.buf[9 + length:]
        self._process(frame)
        return frame

    def _process(self, f):
        if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
            self.server_settings.update(f.settings)
            if SettingsFrame.INITIAL_WINDOW_SIZE in f.settings:
                new = f.settings[SettingsFrame.INITIAL_WINDOW_SIZE]
                for sid in self.stream_windows:
                    self.stream_windows[sid] += new - self.server_initial
                self.server_initial = new
            self.send(SettingsFrame(0, flags=["ACK"]))
        elif isinstance(f, WindowUpdateFrame):
            if f.stream_id == 0:
                self.send_window += f.window_increment
            else:
                self.stream_windows[f.stream_id] = (self.stream_windows.get(
                    f.stream_id, self.server_initial) + f.window_increment)
        elif isinstance(f, GoAwayFrame):
            self.goaway = f
        elif isinstance(f, (HeadersFrame, ContinuationFrame)):
            if isinstance(f, HeadersFrame):
                r = self.responses.setdefault(f.stream_id, Response())
                self.block = [f.stream_id, f.data, "END_STREAM" in f.flags, bool(r.headers)]
            else:
                self.block[1] += f.data
            if "END_HEADERS" in f.flags:
                sid, data, end, trailer = self.block
                self.block = None
                fields = [(k.decode() if isinstance(k, bytes) else k,
                           v.decode() if isinstance(v, bytes) else v)
                          for k, v in self.dec.decode(data)]
                r = self.responses[sid]
                if trailer:
                    r.trailers = fields
                elif fields and fields[0][1].startswith("1") and fields[0][0] == ":status":
                    pass  # informational
                else:
                    r.headers = fields
                if end:
                    r.ended = True
        elif isinstance(f, DataFrame):
            r = self.responses.setdefault(f.stream_id, Response())
            r.body += f.data
            r.frames.append(f)
            if "END_STREAM" in f.flags:
                r.ended = True
            n = f.flow_controlled_length
            if self.auto_window and n > 0:
                self.send(WindowUpdateFrame(0, window_increment=n))
                if not r.ended:
                    self.send(WindowUpdateFrame(f.stream_id, window_increment=n))
        elif isinstance(f, RstStreamFrame):
            r = self.responses.setdefault(f.stream_id, Response())
            r.reset = f.error_code
        elif isinstance(f, PingFrame) and "ACK" not in f.flags:
            self.send(PingFrame(0, opaque_data=f.opaque_data, flags=["ACK"]))

    def read_frame(self, timeout=None):
        if self.backlog:
            return self.backlog.pop(0)
        return self._read_one(self.timeout if timeout is None else timeout)

    def wait_for(self, pred, timeout=None, what="a frame"):
        """Reads until pred(frame) is true; returns that frame. EOF fails."""
        deadline = time.time() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise Fail(f"timed out waiting for {what}")
            try:
                f = self.read_frame(left)
            except Fail:
                raise Fail(f"timed out waiting for {what}")
            if f is None:
                raise Fail(f"connection closed while waiting for {what}")
            if pred(f):
                return f

    def response(self, sid, timeout=None):
        deadline = time.time() + (self.timeout if timeout is None else timeout)
        while True:
            r = self.responses.get(sid)
            if r is not None and (r.ended or r.reset is not None):
                return r
            left = deadline - time.time()
            if left <= 0:
                raise Fail(f"timed out waiting for the response on stream {sid}")
            try:
                f = self.read_frame(left)
            except Fail:
                raise Fail(f"timed out waiting for the response on stream {sid}")
            if f is None:
                raise Fail(f"connection closed before the response on stream {sid}"
                           + (f" (GOAWAY {self.goaway.error_code})" if self.goaway else ""))

    def get(self, path, **kw):
        return self.response(self.request(path, **kw))

    def expect_goaway(self, code, timeout=None):
        """A GOAWAY with this error code, then the connection's end."""
        deadline = time.time() + (self.timeout if timeout is None else timeout)
        while self.goaway is None or self.goaway.error_code == NO_ERROR and code != NO_ERROR:
            left = deadline - time.time()
            check(left > 0, f"no GOAWAY {code:#x} came")
            try:
                f = self.read_frame(left)
            except Fail:
                raise Fail(f"no GOAWAY {code:#x} came")
            if f is None:
                break
        check(self.goaway is not None, f"closed without GOAWAY (expected {code:#x})")
        check(self.goaway.error_code == code,
              f"GOAWAY {self.goaway.error_code:#x}, expected {code:#x}")
        return self.goaway

    def expect_closed(self, timeout=None):
        deadline = time.time() + (self.timeout if timeout is None else timeout)
        while not self.eof:
            left = deadline - time.time()
            check(left > 0, "the connection stayed open")
            self.backlog.clear()
            try:
                if self._read_one(left) is None:
                    break
            except Fail:
                raise Fail("the connection stayed open")

    def expect_rst(self, sid, code, timeout=None):
        r = self.response(sid, timeout)
        check(r.reset == code, f"stream {sid}: expected RST_STREAM {code:#x}, got "
              f"{'status ' + str(r.status) if r.reset is None else hex(r.reset)}")

    def ping(self, timeout=None):
        """A PING answered: the connection is alive and in order."""
        data = os.urandom(8)
        self.send(PingFrame(0, opaque_data=data))
        self.wait_for(lambda f: isinstance(f, PingFrame) and "ACK" in f.flags and
                      f.opaque_data == data, timeout, "a PING ACK")
