#!/usr/bin/env python3
"""An HTTP/1.1 upstream for the proxy tests that misbehaves on purpose.

Started by tests/integration/test_proxy*.c: it listens on 127.0.0.1 (port 0
unless given) and logs "listening on 127.0.0.1:PORT (upstream)" to stderr,
the line keel itself logs, so the harness finds the port the same way.
Connections are kept alive (HTTP/1.1); every request is logged to stderr as
"req PORT METHOD TARGET conn=N" (N counts this server's connections), so a
test can tell reuse and retries apart.

Paths (query: ?k=v&...):
  /id                 "PORT" (which server answered)
  /headers            the request head's fields, one per line
  /big?n=N            N bytes (Content-Length), written as fast as the socket takes them
  /chunked?n=N&piece=P  N bytes in chunks of P, with a trailer X-Sum: N
  /slow?ms=M          answers after M ms
  /hang               reads the request and never answers
  /truncate?n=N       declares N bytes, sends N/2, closes
  /truncate_chunked   two chunks and then closes without the last-chunk
  /reset              resets the connection (SO_LINGER 0) without answering
  /close              closes without answering
  /garbage            answers something that is not HTTP
  /status?code=C      an empty response with that status
  /redirect           302 to http://<Host it was sent>/target and to http://127.0.0.1:PORT/moved
  /upload?rate=B&wait=MS  reads nothing for MS ms (0), then the body at B bytes per
                      100 ms, answers its length
  /echo               echoes the request body (Content-Length or chunked);
                      with Expect: 100-continue sends 100 first unless ?refuse=1,
                      then 417 without reading the body
  /trailers           reads a body, answers its length and the trailer lines it came with
  /ws?proto=P         101 (Upgrade: P, websocket by default) then echoes bytes until EOF
  /count              how many requests this connection carried: "conn=N req=K"
  /count_close?v=V    as /count, with "Connection: V" (close by default), the
                      connection kept open all the same: a proxy that honours
                      it opens another for the next request
  /eof?n=N            an HTTP/1.0-style body: no length, ends with the connection
  /bighead?n=N        a response head with a field of N bytes (&count=K: K of
                      them, &name=NAME: named NAME rather than X-Big)
  /nobody?code=C&cl=N a head with that status and Content-Length: N, and no body (204, 304:
                      RFC 9110 8.6 says none follows whatever the length says)
  /oddnames?trailers=1  the same names in a chunked body's trailer section
  /interim_cl         103 Early Hints declaring Content-Length: 5, then a 200 ("ok")
  /twoconn            a response with two Connection fields, the second naming X-Hop2
  /bare_cr?at=W       a CR before a byte other than LF (RFC 9112 2.2) where W says: in the
                      status line (status, and split: the CR ending a write), as the empty
                      line's (end), in an interim head before a 200 (interim); the connection
                      kept open; in a chunked body: the chunk-size line's (size), after chunk
                      data (data), the last chunk's line (last), a trailer line's (trailer),
                      the final empty line's (final). body: a chunked body holding "a\rb"

Any path, with "Upgrade: h2c" (an h2c-capable server, RFC 7540 3.2): 101 with
Upgrade: h2c, then the server's HTTP/2 SETTINGS frame, and the connection closes;
logged as "upgrade h2c PORT PATH".
"""
import socket
import struct
import sys
import threading
import time
from urllib.parse import urlsplit, parse_qs

CONN_COUNTER = [0]
LOCK = threading.Lock()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Conn:
    def __init__(self, sock, port):
        self.sock = sock
        self.port = port
        # A bytearray: bytes += copies the whole buffer each time, and a
        # 16 MiB body read 64 KiB at a time then took 9 s of copying (and
        # page faults), which made proxy_stream's 16 MiB/s upload outlast
        # curl's 20 s on a loaded machine (issue 23, section 6).
        self.buf = bytearray()
        with LOCK:
            CONN_COUNTER[0] += 1
            self.n = CONN_COUNTER[0]
        self.requests = 0

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError()
        self.buf += data

    def take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_head(self):
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self.fill()
        head = self.take(end + 4)[:-4]
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        fields = []
        for line in lines[1:]:
            name, value = line.split(":", 1)
            fields.append((name.strip(), value.strip()))
        return method, target, version, fields

    def read_exact(self, n):
        while len(self.buf) < n:
            self.fill()
        return self.take(n)

    def read_line(self):
        while (end := self.buf.find(b"\r\n")) < 0:
            self.fill()
        return self.take(end + 2)[:-2]

    def read_body(self, fields, rate=None):
        get = {k.lower(): v for k, v in fields}
        if "transfer-encoding" in get:
            body = bytearray()
            while True:
                size = int(self.read_line().split(b";")[0], 16)
                if size == 0:
                    self.trailers = []
                    while (line := self.read_line()) != b"":
                        self.trailers.append(line)
                    return bytes(body)
                body += self.read_exact(size)
                self.read_exact(2)
        n = int(get.get("content-length", "0"))
        if rate is None:
            return self.read_exact(n)
        got = 0
        while got < n:
            take = min(rate, n - got)
            self.read_exact(take)
            got += take
            time.sleep(0.1)
        return b"x" * n

    def send(self, data):
        self.sock.sendall(data)

    def respond(self, status, body=b"", fields=(), reason="OK"):
        head = "HTTP/1.1 %d %s\r\n" % (status, reason)
        for k, v in fields:
            head += "%s: %s\r\n" % (k, v)
        head += "Content-Length: %d\r\n\r\n" % len(body)
        self.send(head.encode("latin-1") + body)


def handle(c):
    while True:
        try:
            method, target, version, fields = c.read_head()
        except (EOFError, ConnectionError, OSError):
            return
        c.requests += 1
        url = urlsplit(target)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        path = url.path
        get = {k.lower(): v for k, v in fields}
        log("req %d %s %s conn=%d" % (c.port, method, target, c.n))
        upgrade = [p.strip().lower() for p in get.get("upgrade", "").split(",")]
        if "h2c" in upgrade:
            # What an h2c-capable backend does for any path: switches the
            # connection to HTTP/2 (RFC 7540 3.2) and speaks first.
            log("upgrade h2c %d %s" % (c.port, path))
            c.send(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
                   b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            time.sleep(0.5)
            c.sock.close()
            return
        if path == "/id":
            c.read_body(fields)
            c.respond(200, str(c.port).encode(), [("Server", "pyup"), ("Date", "Mon, 01 Jan 2001 00:00:00 GMT")])
        elif path == "/headers":
            c.read_body(fields)
            body = "".join("%s: %s\n" % kv for kv in fields).encode("latin-1")
            c.respond(200, body, [("Connection", "X-Hop"), ("X-Hop", "secret"), ("Keep-Alive", "timeout=5"), ("Via", "1.1 inner")])
        elif path == "/big":
            n = int(q.get("n", "1048576"))
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            block = bytes(range(256)) * 256
            left = n
            while left > 0:
                take = min(left, len(block))
                c.send(block[:take])
                left -= take
        elif path == "/chunked":
            n = int(q.get("n", "100000"))
            piece = int(q.get("piece", "1000"))
            c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n")
            left = n
            while left > 0:
                take = min(left, piece)
                c.send(b"%x\r\n" % take + b"a" * take + b"\r\n")
                left -= take
            c.send(b"0\r\nX-Sum: %d\r\n\r\n" % n)
        elif path == "/slow":
            c.read_body(fields)
            time.sleep(int(q.get("ms", "1000")) / 1000.0)
            c.respond(200, b"slow")
        elif path == "/hang":
            time.sleep(120)
            return
        elif path == "/truncate":
            n = int(q.get("n", "100000"))
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + b"t" * (n // 2))
            time.sleep(0.2)
            c.sock.close()
            return
        elif path == "/truncate_chunked":
            c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n")
            time.sleep(0.2)
            c.sock.close()
            return
        elif path == "/reset":
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
            return
        elif path == "/close":
            c.sock.close()
            return
        elif path == "/text":
            # n bytes of text in one send: the plainest response
            c.read_body(fields)
            n = int(q.get("n", "2000"))
            c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % n
                   + b"a" * n)
        elif path == "/oddnames":
            # names llhttp takes that are not tokens (RFC 9110 5.1), between
            # fields that are (one with obs-text and trailing blanks)
            c.read_body(fields)
            if q.get("trailers"):
                c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"
                       b"0\r\n: empty\r\nFoo Bar: x\r\nX-After: 2\r\n\r\n")
            else:
                c.send(b"HTTP/1.1 200 OK\r\nX-Before: 1\r\nFoo Bar: x\r\n: empty\r\n"
                       b"X-Obs: caf\xe9\t \r\nX-After: 2\r\nContent-Length: 2\r\n\r\nok")
        elif path == "/garbage":
            c.send(b"SMTP READY\r\n\r\n")
            time.sleep(0.2)
            c.sock.close()
            return
        elif path == "/te_gzip":
            # a transfer coding besides chunked, which the proxy does not
            # decode: relayed, the client would get gzip bytes unlabelled
            c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                   b"2\r\nok\r\n0\r\n\r\n")
            time.sleep(0.2)
            c.sock.close()
            return
        elif path == "/bad_chunk_ext":
            # a chunk extension with a quoted CR LF: invalid after a valid head
            c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"2;a=\"\r\n\"\r\nok\r\n0\r\n\r\n")
            time.sleep(0.2)
            c.sock.close()
            return
        elif path == "/status":
            c.read_body(fields)
            code = int(q.get("code", "200"))
            c.respond(code, b"", reason="Status")
        elif path == "/redirect":
            c.read_body(fields)
            if q.get("to") == "self":
                loc = "http://127.0.0.1:%d/moved" % c.port
            else:
                loc = "http://%s/target" % get.get("host", "")
            c.respond(302, b"", [("Location", loc)])
        elif path == "/upload":
            time.sleep(int(q.get("wait", "0")) / 1000)
            body = c.read_body(fields, rate=int(q.get("rate", "65536")))
            c.respond(200, str(len(body)).encode())
        elif path == "/echo":
            if get.get("expect", "").lower() == "100-continue":
                if q.get("refuse") == "1":
                    c.respond(417, b"no", reason="Expectation Failed")
                    c.sock.close()
                    return
                c.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = c.read_body(fields)
            c.respond(200, body)
        elif path == "/trailers":
            c.trailers = []
            body = c.read_body(fields)
            c.respond(200, b"%d\n" % len(body) + b"".join(t + b"\n" for t in c.trailers))
        elif path == "/ws":
            proto = q.get("proto", "websocket").encode("latin-1")
            c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + proto + b"\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
            if c.buf:
                c.send(c.take(len(c.buf)))
            while True:
                try:
                    data = c.sock.recv(65536)
                except OSError:
                    return
                if not data:
                    c.sock.close()
                    return
                c.send(data)
        elif path == "/eof":
            c.read_body(fields)
            n = int(q.get("n", "10000"))
            c.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"e" * n)
            c.sock.close()
            return
        elif path == "/bighead":
            c.read_body(fields)
            field = (q.get("name", "X-Big"), "b" * int(q.get("n", "100000")))
            c.respond(200, b"big head", [field] * int(q.get("count", "1")))
        elif path == "/twoconn":
            c.read_body(fields)
            c.respond(200, b"two", [("Connection", "keep-alive"), ("Connection", "X-Hop2"), ("X-Hop2", "secret")])
        elif path == "/nobody":
            c.read_body(fields)
            c.send(b"HTTP/1.1 %d Status\r\nContent-Length: %d\r\n\r\n"
                   % (int(q.get("code", "304")), int(q.get("cl", "10"))))
        elif path == "/interim_cl":
            c.read_body(fields)
            c.send(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nContent-Length: 5\r\n\r\n"
                   b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif path == "/bare_cr":
            c.read_body(fields)
            at = q.get("at", "status")
            heads = {"status": b"HTTP/1.1 200 O\rXContent-Length: 0\r\n\r\n",
                     "end": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\rXok",
                     "interim": b"HTTP/1.1 103 Early Hints\r\n\rXHTTP/1.1 200 OK\r\n"
                                b"Content-Length: 2\r\n\r\nok"}
            chunked = {"body": b"3\r\na\rb\r\n0\r\n\r\n",
                       "size": b"2\rXok\r\n0\r\n\r\n",
                       "data": b"2\r\nok\rX0\r\n\r\n",
                       "last": b"2\r\nok\r\n0\rX\r\n",
                       "trailer": b"2\r\nok\r\n0\r\nX-T: 1\rX\r\n\r\n",
                       "final": b"2\r\nok\r\n0\r\n\rX"}
            if at == "split":
                c.send(b"HTTP/1.1 200 O\r")
                time.sleep(0.1)
                c.send(b"XContent-Length: 0\r\n\r\n")
            elif at in heads:
                c.send(heads[at])
            else:
                c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked[at])
        elif path == "/count":
            c.read_body(fields)
            c.respond(200, ("conn=%d req=%d" % (c.n, c.requests)).encode())
        elif path == "/count_close":
            c.read_body(fields)
            c.respond(200, ("conn=%d req=%d" % (c.n, c.requests)).encode(),
                      fields=[("Connection", q.get("v", "close"))])
        else:
            c.read_body(fields)
            c.respond(404, b"not here", reason="Not Found")


def serve(sock, port):
    while True:
        s, _ = sock.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=conn_main, args=(s, port), daemon=True).start()


def conn_main(s, port):
    try:
        handle(Conn(s, port))
    except (ConnectionError, OSError, EOFError):
        pass
    finally:
        try:
            s.close()
        except OSError:
            pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    port = sock.getsockname()[1]
    log("listening on 127.0.0.1:%d (upstream)" % port)
    serve(sock, port)


if __name__ == "__main__":
    main()
