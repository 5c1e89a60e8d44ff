#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/proxy_head/: upstream responses in one read for
fuzz_proxy_head, the plain ones the fast path takes (nginx's, keel's) and
the shapes it must leave to llhttp (framing, interim, odd bytes)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "proxy_head")

NGINX = (b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 04 Dec 2026 20:00:00 GMT\r\n"
         b"Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\n"
         b"Hello, World!")
SEEDS = {
    "nginx": NGINX,
    "keel": b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nDate: x\r\n\r\nHello, World!",
    "close": b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
    "empty_reason": b"HTTP/1.1 500 \r\nX-A:\r\nX-B: \t v \t\r\nContent-Length: 2\r\n\r\nok",
    "location": b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9000/x\r\nContent-Length: 0\r\n\r\n",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "two_lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
    "interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "no_content": b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    "http10": b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    "obs_fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n",
    "obs_text": b"HTTP/1.1 200 OK\r\nX-A: \xe9\r\nContent-Length: 0\r\n\r\n",
    "bare_lf": b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
    "connection_list": b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
    "upgrade": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    "pipelined": NGINX + NGINX,
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
