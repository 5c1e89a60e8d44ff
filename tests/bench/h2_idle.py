#!/usr/bin/env python3
"""tests/bench/h2_idle.py — hold N idle HTTP/2 connections (cleartext,
prior knowledge), each after one request answered, for tests/bench/h2.sh's
memory-per-connection measurement.

    h2_idle.py PORT N HOLD_SECONDS

Prints "ready N" once every connection had its answer (or "ready K" with
the number that did), then holds them for HOLD_SECONDS. Plain sockets: no
HTTP/2 library needed (the frames are fixed bytes).
"""
import select
import socket
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"
# HEADERS, stream 1, END_STREAM|END_HEADERS: :method GET, :path /,
# :scheme http, :authority "x" (static-table references, RFC 7541 A)
BLOCK = b"\x82\x84\x86\x01\x01x"
HEADERS = len(BLOCK).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + BLOCK


def main():
    port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    socks = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            break
        s.sendall(PREFACE + SETTINGS + SETTINGS_ACK + HEADERS)
        socks.append(s)
    # Each answer: the server's SETTINGS, then HEADERS and DATA with
    # END_STREAM; 60 bytes of it is enough to know it came.
    got = {s.fileno(): 0 for s in socks}
    by_fd = {s.fileno(): s for s in socks}
    poller = select.poll()  # not select(): descriptors pass 1024
    for s in socks:
        poller.register(s, select.POLLIN)
    deadline = time.time() + 30
    waiting = set(by_fd)
    while waiting and time.time() < deadline:
        for fd, _ in poller.poll(1000):
            try:
                d = by_fd[fd].recv(65536)
            except OSError:
                d = b""
            got[fd] += len(d)
            if not d or got[fd] >= 60:
                waiting.discard(fd)
                poller.unregister(fd)
    print(f"ready {len(socks) - len(waiting)}", flush=True)
    time.sleep(hold)


if __name__ == "__main__":
    main()
