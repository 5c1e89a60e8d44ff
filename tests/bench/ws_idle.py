#!/usr/bin/env python3
"""ws_idle.py PORT PATH N PID [DEFLATE] — opens N WebSocket connections to
127.0.0.1:PORT (raw sockets, handshake only; with DEFLATE=1 offering
permessage-deflate and exchanging one compressed message each), holds
them, and prints the growth of PID's resident memory per connection:
    bytes_per_conn=B rss_before_kib=X rss_after_kib=Y
For tests/bench/ws.sh."""
import socket
import sys
import time
import zlib

port, path, n, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
deflate = len(sys.argv) > 5 and sys.argv[5] == "1"


def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def masked(data, key=b"\x01\x02\x03\x04"):
    return key + bytes(b ^ key[i % 4] for i, b in enumerate(data))


time.sleep(0.3)
before = rss()
socks = []
ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else ""
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               f"Sec-WebSocket-Version: 13\r\n{ext}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("closed during the handshake")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        sys.exit("refused: " + head.decode(errors="replace"))
    if deflate:
        c = zlib.compressobj(wbits=-15)
        msg = (c.compress(b"hello world " * 20) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
        s.sendall(bytes([0xC1, 0x80 | len(msg)]) + masked(msg))
        got = head.split(b"\r\n\r\n", 1)[1]
        while len(got) < 2:
            got += s.recv(4096)
    socks.append(s)
time.sleep(1.0)
after = rss()
print(f"bytes_per_conn={(after - before) * 1024 // n} rss_before_kib={before} rss_after_kib={after}")
for s in socks:
    s.close()
