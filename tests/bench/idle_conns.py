#!/usr/bin/env python3
"""idle_conns.py — open N keep-alive connections and leave them idle.

    idle_conns.py HOST PORT N HOLD_SECONDS [DEADLINE_SECONDS]

Each connection makes one request (GET /) and reads its answer, so that it
becomes an idle keep-alive connection as a browser would leave it. When all
N are idle it prints "READY <n>" and holds them for HOLD_SECONDS (run.sh
reads the server's memory meanwhile), then prints "HELD <still open>" and
closes them. Everything is bounded by DEADLINE_SECONDS (default 60): past it
the script gives up, says "TIMEOUT <idle so far>" and exits 1.
"""
import resource
import selectors
import socket
import sys
import time


def main():
    host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    deadline = time.monotonic() + (float(sys.argv[5]) if len(sys.argv) > 5 else 60.0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    request = b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\n\r\n"
    sel = selectors.DefaultSelector()
    socks = {}  # sock -> bytes received
    idle = 0
    opened = 0
    batch = 256  # connects in flight at once: stay under the listen backlog

    def open_one():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((host, port))
        sel.register(s, selectors.EVENT_WRITE)
        socks[s] = b""

    while idle < n:
        if time.monotonic() > deadline:
            print("TIMEOUT %d" % idle, flush=True)
            return 1
        while opened < n and opened - idle < batch:
            open_one()
            opened += 1
        for key, ev in sel.select(timeout=0.5):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                try:
                    s.send(request)
                except OSError as e:
                    print("connect/send failed: %s" % e, file=sys.stderr)
                    return 1
                sel.modify(s, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(65536)
            except OSError as e:
                print("recv failed: %s" % e, file=sys.stderr)
                return 1
            if not data:
                print("server closed a connection before answering", file=sys.stderr)
                return 1
            socks[s] += data
            got = socks[s]
            head_end = got.find(b"\r\n\r\n")
            # Every peer answers GET / with a short fixed body; the answer
            # is complete once the body after the head has arrived.
            if head_end >= 0 and len(got) > head_end + 4 and got.endswith(b"Hello, World!"):
                sel.unregister(s)
                idle += 1

    print("READY %d" % idle, flush=True)
    end = time.monotonic() + hold
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = 0
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=max(0.0, end - time.monotonic())):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                closed += 1
                sel.unregister(s)
    print("HELD %d" % (n - closed), flush=True)
    for s in socks:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
