#!/usr/bin/env python3
"""tests/soak/soak.py — the soak test's traffic and measurements (run.sh
starts keel and calls this). Python 3 standard library only: HTTP/1.1 and
WebSocket (RFC 6455, masked client frames) written by hand over asyncio.

Clients (--clients, default 40): 80% GET clients, 10% WebSocket clients,
10% POST clients (at least one of each). Every answer is checked; every
failure counts as an error. keel's RSS is sampled every 5 s from
/proc/PID/status. Exit 1 on any error or if RSS grew after the warm-up.
"""
import argparse
import asyncio
import base64
import os
import random
import struct
import sys
import time

POST_SIZE = 1 << 20


class Stats:
    def __init__(self):
        self.count = {"get": 0, "post": 0, "ws_msg": 0, "ws_ping": 0, "ws_conn": 0}
        self.errors = {}
        self.lat = {"get": [], "post": [], "ws_msg": []}

    def error(self, kind, what):
        key = f"{kind}: {what}"
        self.errors[key] = self.errors.get(key, 0) + 1

    def sample(self, kind, seconds):
        lat = self.lat[kind]
        # Keep a bounded reservoir: enough for percentiles.
        if len(lat) < 200000:
            lat.append(seconds)
        else:
            lat[random.randrange(len(lat))] = seconds


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length = None
    close = False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "connection" and "close" in value.lower():
            close = True
    body = await reader.readexactly(length) if length is not None else b""
    return status, body, close


async def get_client(host, port, deadline, rate, stats):
    names = ["soak", "keel", "x" * 40, "caf%C3%A9"]
    period = 1.0 / rate
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as e:
            stats.error("get", f"connect: {e}")
            await asyncio.sleep(0.1)
            continue
        try:
            for _ in range(random.randint(1, 8)):
                if time.monotonic() >= deadline:
                    break
                name = random.choice(names)
                path, want = (("/", b"Hello, World!") if random.random() < 0.3 else
                              (f"/hello/{name}", None))
                t0 = time.monotonic()
                writer.write(f"GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n".encode())
                status, body, close = await asyncio.wait_for(read_response(reader), 10)
                stats.sample("get", time.monotonic() - t0)
                ok = status == 200 and (body == want if want else body.startswith(b"Hello, "))
                if ok:
                    stats.count["get"] += 1
                else:
                    stats.error("get", f"status {status}")
                if close:
                    break
                await asyncio.sleep(period * random.uniform(0.5, 1.5))
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                asyncio.LimitOverrunError, ValueError) as e:
            stats.error("get", type(e).__name__)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


async def post_client(host, port, deadline, stats):
    payload = os.urandom(POST_SIZE)
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as e:
            stats.error("post", f"connect: {e}")
            await asyncio.sleep(0.5)
            continue
        try:
            t0 = time.monotonic()
            writer.write(b"POST /echo HTTP/1.1\r\nHost: soak\r\n"
                         b"Content-Type: application/octet-stream\r\n"
                         b"Content-Length: " + str(POST_SIZE).encode() + b"\r\n\r\n")
            writer.write(payload)
            await writer.drain()
            status, body, _ = await asyncio.wait_for(read_response(reader), 30)
            stats.sample("post", time.monotonic() - t0)
            if status == 200 and body == payload:
                stats.count["post"] += 1
            else:
                stats.error("post", f"status {status}, {len(body)} bytes back")
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as e:
            stats.error("post", type(e).__name__)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
        await asyncio.sleep(random.uniform(0.2, 0.6))


def ws_frame(opcode, payload):
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
    return head + mask + masked


async def ws_read(reader):
    b0, b1 = await reader.readexactly(2)
    if b1 & 0x80:
        raise ValueError("masked server frame")
    n = b1 & 127
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    return b0 & 15, await reader.readexactly(n)


async def ws_client(host, port, deadline, stats):
    """One long-lived connection (reconnecting only if it fails or after
    about two minutes): a ping every 2 s, a message every 500 ms."""
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as e:
            stats.error("ws", f"connect: {e}")
            await asyncio.sleep(0.5)
            continue
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write((f"GET /ws HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                          f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if not head.startswith(b"HTTP/1.1 101 "):
                stats.error("ws", "handshake " + head.split(b"\r\n")[0].decode("latin-1"))
                continue
            stats.count["ws_conn"] += 1
            until = min(deadline, time.monotonic() + random.uniform(90, 150))
            next_ping = time.monotonic() + 2
            seq = 0
            while time.monotonic() < until:
                if time.monotonic() >= next_ping:
                    token = os.urandom(8)
                    writer.write(ws_frame(0x9, token))
                    op, data = await asyncio.wait_for(ws_read(reader), 10)
                    if op == 0xA and data == token:
                        stats.count["ws_ping"] += 1
                    else:
                        stats.error("ws", f"heartbeat answered with opcode {op}")
                    next_ping += 2
                seq += 1
                text = f"soak message {seq} " + "é" * random.randint(0, 200)
                t0 = time.monotonic()
                writer.write(ws_frame(0x1, text.encode()))
                op, data = await asyncio.wait_for(ws_read(reader), 10)
                stats.sample("ws_msg", time.monotonic() - t0)
                if op == 0x1 and data == text.encode():
                    stats.count["ws_msg"] += 1
                else:
                    stats.error("ws", f"echo: opcode {op}, {len(data)} bytes")
                await asyncio.sleep(0.5)
            writer.write(ws_frame(0x8, struct.pack("!H", 1000)))
            op, _ = await asyncio.wait_for(ws_read(reader), 10)
            if op != 0x8:
                stats.error("ws", f"close answered with opcode {op}")
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                asyncio.LimitOverrunError, ValueError) as e:
            stats.error("ws", type(e).__name__)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


async def sampler(pid, deadline, series, start):
    while time.monotonic() < deadline:
        series.append((time.monotonic() - start, rss_kib(pid)))
        await asyncio.sleep(5)
    series.append((time.monotonic() - start, rss_kib(pid)))


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] * 1000


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--get-rate", type=float, default=25)
    args = ap.parse_args()

    n_ws = max(1, args.clients // 10)
    n_post = max(1, args.clients // 10)
    n_get = max(1, args.clients - n_ws - n_post)
    stats = Stats()
    start = time.monotonic()
    deadline = start + args.seconds
    series = []
    print(f"soak: {n_get} GET clients ({args.get_rate:g}/s each), {n_ws} WebSocket clients, "
          f"{n_post} POST clients (1 MiB) for {args.seconds:g}s", flush=True)
    tasks = [asyncio.create_task(sampler(args.pid, deadline, series, start))]
    tasks += [asyncio.create_task(get_client(args.host, args.port, deadline, args.get_rate, stats))
              for _ in range(n_get)]
    tasks += [asyncio.create_task(ws_client(args.host, args.port, deadline, stats))
              for _ in range(n_ws)]
    tasks += [asyncio.create_task(post_client(args.host, args.port, deadline, stats))
              for _ in range(n_post)]

    async def progress():
        last = dict(stats.count)
        t_last = time.monotonic()
        while time.monotonic() < deadline - 1:
            await asyncio.sleep(min(30, max(0.1, deadline - time.monotonic())))
            now, t_now = dict(stats.count), time.monotonic()
            rate = {k: (now[k] - last[k]) / (t_now - t_last) for k in now}
            last, t_last = now, t_now
            print(f"soak: {time.monotonic() - start:5.0f}s  RSS {series[-1][1] if series else -1} KiB"
                  f"  GET {rate['get']:.0f}/s  POST {rate['post']:.1f}/s  "
                  f"WS {rate['ws_msg']:.0f} msg/s  errors {sum(stats.errors.values())}", flush=True)

    tasks.append(asyncio.create_task(progress()))
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - start

    print(f"\nsoak: {elapsed:.0f}s of mixed traffic")
    c = stats.count
    print(f"  GET       {c['get']:9d}  ({c['get'] / elapsed:.0f}/s)  "
          f"p50 {pct(stats.lat['get'], 50):.2f} ms  p99 {pct(stats.lat['get'], 99):.2f} ms")
    print(f"  POST 1MiB {c['post']:9d}  ({c['post'] / elapsed:.1f}/s, "
          f"{c['post'] * 2 / elapsed:.1f} MiB/s both ways)  "
          f"p50 {pct(stats.lat['post'], 50):.1f} ms  p99 {pct(stats.lat['post'], 99):.1f} ms")
    print(f"  WebSocket {c['ws_msg']:9d} messages echoed, {c['ws_ping']} heartbeats answered, "
          f"{c['ws_conn']} connections  p50 {pct(stats.lat['ws_msg'], 50):.2f} ms  "
          f"p99 {pct(stats.lat['ws_msg'], 99):.2f} ms")
    errors = sum(stats.errors.values())
    print(f"  errors    {errors}")
    for k, v in sorted(stats.errors.items()):
        print(f"    {v:6d}  {k}")

    rss = [r for _, r in series]
    print("  RSS (KiB) every 5 s: " + " ".join(str(r) for r in rss))
    grew = False
    # After the warm-up (the first fifth): the median of the next fifth
    # against the median of the last, so that the allocator's breathing
    # (a MiB up and down as 1 MiB bodies come and go) is not a trend.
    early = sorted(r for t, r in series if elapsed / 5 <= t < 2 * elapsed / 5)
    late = sorted(r for t, r in series if t >= 4 * elapsed / 5)
    if early and late:
        first, last = early[len(early) // 2], late[len(late) // 2]
        peak = max(r for t, r in series if t >= elapsed / 5)
        growth = last - first
        print(f"  RSS after warm-up (medians, second fifth -> last fifth): {first} KiB -> "
              f"{last} KiB (peak {peak}, {growth:+d} KiB, {100.0 * growth / first:+.1f}%)")
        grew = growth > max(first // 10, 4096)
        if grew:
            print("soak: FAILED: RSS grew after the warm-up")
    if errors:
        print("soak: FAILED: errors")
    if errors == 0 and not grew:
        print("soak: passed")
    return 1 if errors or grew else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
