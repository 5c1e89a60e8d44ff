"""tests/h2/cases_keel.py — what keel promises above RFC 9113: hello's routes, the
access log, [h2] max_requests and max_body, idle timeout and trimming, requests
through the proxy module, answers to bodies nobody reads.

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import os
import socket
import time

from h2lib import (NO_ERROR, PROTOCOL_ERROR, Conn, DataFrame, Fail, HeadersFrame, SettingsFrame,
                   check)
from h2cases import case, raw_frame, metric, plain, req_fields, settled, stream_error


@case("conformance")
def get_root(env):
    c = Conn(env.k.port())
    r = c.get("/")
    check(r.status == 200 and r.body == b"Hello, World!", f"{r.status} {r.body!r}")
    check(r.header("content-length") == "13" and r.header("date") and r.header("server"),
          f"{r.headers}")


@case("conformance")
def header_lookup_by_name(env):
    """keel_request_header in any case: a well-known name is found by its
    token (h2 classifies each name once, from the HPACK static index when
    there is one), any other by its bytes, and a name of the same length
    as a field that is not it finds nothing."""
    c = Conn(env.k.port())
    fields = [("x-custom-abc", "1"), ("x-custom-abd", "2"), ("via", "v"), ("age", "3"),
              ("user-agent", "ua"), ("accept", "a")]
    for asked, want in (("X-Custom-Abd", "2"), ("x-custom-abc", "1"), ("VIA", "v"), ("Age", "3"),
                        ("User-Agent", "ua"), ("Accept", "a"), ("x-custom-abe", "-"),
                        ("Allow", "-"), ("Etag", "-"), ("Host", "localhost")):
        r = c.get(f"/h2test/head?field={asked}", fields=fields)
        check(r.status == 200 and f"field={want}\n".encode() in r.body,
              f"{asked}: {r.status} {r.body!r}")


@case("conformance")
def header_lookup_by_token(env):
    """keel_request_header_token (ABI 1.10): a well-known field by its id,
    whether HPACK sent its name by the static table's index or as a
    literal; nothing for an absent name, for 0 and for an unknown id."""
    c = Conn(env.k.port())
    fields = [("authorization", "Basic one"), ("authorization", "Basic two"), ("accept", "a"),
              ("x-allow", "no"), ("via", "v")]
    for token, want in (("14", "Basic one"), ("10", "a"), ("51", "v"), ("13", "-"), ("0", "-"),
                        ("4096", "-")):
        r = c.get(f"/h2test/head?token={token}", fields=fields)
        check(r.status == 200 and f"token={want}\n".encode() in r.body,
              f"{token}: {r.status} {r.body!r}")


@case("conformance")
def status_204_and_304_have_no_body(env):
    c = Conn(env.k.port())
    for code in (204, 304):
        r = c.get(f"/h2test/status?code={code}")
        check(r.status == code and not r.frames, f"{code}: {r.status} {len(r.frames)} DATA")
        check(r.header("content-length") is None, f"{code} with content-length")


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
def refused_heads_carry_always_fields(env):
    """A head h2 refuses before its request exists (431 over max_header_list,
    413 over max_body by content-length) goes through the core: [headers]
    always fields reach it, and the connection goes on."""
    k = env.start("[h2]\nmax_body = 1k\n[headers]\nalways = on\nadd = X-Frame-Options: DENY\n",
                  extra="headers")
    try:
        c = Conn(k.port())
        for status, r in (
                (431, c.get("/", fields=[("x-big", "a" * 40000)])),
                (413, c.get("/echo", method="POST", fields=[("content-length", "5000")],
                            end_stream=False))):
            check(r.status == status, f"status {r.status} reset {r.reset}, want {status}")
            check(("x-frame-options", "DENY") in r.headers, f"{status}: {r.headers}")
        check(c.get("/").status == 200, "the connection did not go on")
    finally:
        k.stop()


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
def body_over_max_413(env):
    """A declared body over [h2] max_body gets 413."""
    c = Conn(env.k.port())
    r = c.get("/echo", method="POST", fields=[("content-length", "2000000")], end_stream=False)
    check(r.status == 413, f"status {r.status}")


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
def malformed_counted(env):
    """A malformed request is counted (h2_malformed_total) and never
    reaches a handler: a route that would answer is not run."""
    before = metric(env, "h2_malformed_total", "")
    c = settled(env)
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x5, sid, plain(req_fields("/h2test/head x"))))
    stream_error(c, sid, PROTOCOL_ERROR)
    check(metric(env, "h2_malformed_total", "") == before + 1, "not counted")


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
