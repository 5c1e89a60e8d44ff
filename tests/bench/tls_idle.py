#!/usr/bin/env python3
"""tls_idle.py — open N TLS keep-alive connections and leave them idle.

    tls_idle.py HOST PORT N HOLD_SECONDS [DEADLINE_SECONDS]

Each connection completes a TLS handshake (no certificate check: the
benchmark's own self-signed one), makes one request (GET /) and reads its
answer, so that it sits idle as a browser leaves one. When all N are idle it
prints "READY <n>", holds them HOLD_SECONDS (tls.sh reads the server's
memory meanwhile), prints "HELD <still open>" and closes them. Sessions are
not resumed (each is a full handshake). Bounded by DEADLINE_SECONDS
(default 120): past it, "TIMEOUT <idle so far>" and exit 1.
"""
import resource
import socket
import ssl
import sys
import time


def main():
    host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    deadline = time.monotonic() + (float(sys.argv[5]) if len(sys.argv) > 5 else 120.0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n + 64, hard), hard))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    request = b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\n\r\n"
    conns = []
    while len(conns) < n:
        if time.monotonic() > deadline:
            print("TIMEOUT %d" % len(conns), flush=True)
            return 1
        raw = socket.create_connection((host, port), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(request)
        got = b""
        while b"Hello, World!" not in got:
            chunk = s.recv(4096)
            if not chunk:
                print("closed early", file=sys.stderr)
                return 1
            got += chunk
        conns.append(s)
    print("READY %d" % len(conns), flush=True)
    time.sleep(hold)
    still = 0
    for s in conns:
        try:
            s.settimeout(0)
            s.recv(1)
        except (BlockingIOError, ssl.SSLWantReadError):
            still += 1
        except OSError:
            pass
    print("HELD %d" % still, flush=True)
    for s in conns:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
