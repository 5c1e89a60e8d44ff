#!/usr/bin/env python3
"""keel's websocket module against a real client: Python's `websockets`
(Debian: python3-websockets), echo on hello's /ws with and without
permessage-deflate, both directions, the window and context-takeover
parameters, a zip bomb (1009), pings and the close handshake.

    ws_clients.py KEEL_BIN MODULE_DIR

Exits 0 when every check passed, 1 on a failure, 77 (ctest's skip code)
when the websockets package is missing: install python3-websockets.
"""
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import websockets
    from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
except ImportError:
    print("SKIP: the Python websockets package is missing (Debian: python3-websockets)")
    sys.exit(77)

KEEL, MODULES = sys.argv[1], sys.argv[2]


class Keel:
    def __init__(self, extra=""):
        self.dir = tempfile.mkdtemp(prefix="keel-wspy-")
        conf = os.path.join(self.dir, "keel.conf")
        with open(conf, "w") as f:
            f.write("[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 2\n"
                    "modules = http1 deflate websocket hello\n"
                    f"module_path = {MODULES}\n{extra}")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen([KEEL, "-c", conf], stderr=self.err, stdout=subprocess.DEVNULL)
        deadline = time.time() + 10
        self.port = None
        while time.time() < deadline and self.port is None:
            self.err.seek(0)
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.err.read())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                break
            else:
                time.sleep(0.02)
        if self.port is None:
            self.stop()
            raise RuntimeError("keel did not start:\n" + self.log())

    def url(self, path="/ws"):
        return f"ws://127.0.0.1:{self.port}{path}"

    def log(self):
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = self.log()
        if "Sanitizer" in log or "runtime error" in log:
            raise AssertionError("sanitizer report:\n" + log)
        return self.proc.returncode


async def echo_round(ws, compressed):
    ext = ws.response_headers.get("Sec-WebSocket-Extensions")
    if compressed:
        assert ext and ext.startswith("permessage-deflate"), ext
    else:
        assert ext is None, ext
    # Random bytes do not compress: they go out plain, copied (the echo
    # sends from a buffer valid during its call only).
    samples = ["", "hello", "é" * 3000, "x" * 100000, bytes(range(256)) * 400, b"", b"\x00" * 70000,
               os.urandom(5000), os.urandom(300000)]
    for i in range(30):
        samples.append(("message %d " % i) * (i * 13))
    for s in samples:
        await ws.send(s)
        r = await ws.recv()
        assert type(r) is type(s) and r == s, (type(s), len(s), type(r), len(r))
    # Fragmented by the client: websockets sends an iterable as fragments.
    await ws.send(["ab", "cdé", "f" * 5000])
    assert await ws.recv() == "abcdé" + "f" * 5000
    pong = await ws.ping(b"py")
    await asyncio.wait_for(pong, 5)


async def run_all():
    checks = 0
    k = Keel()
    try:
        async with websockets.connect(k.url(), compression=None, max_size=None) as ws:
            await echo_round(ws, False)
            checks += 1
        async with websockets.connect(k.url(), max_size=None) as ws:  # offers permessage-deflate
            await echo_round(ws, True)
            checks += 1
        for params in [dict(server_max_window_bits=10, client_max_window_bits=9),
                       dict(server_no_context_takeover=True, client_no_context_takeover=True),
                       dict(server_max_window_bits=15, client_max_window_bits=True)]:
            ext = ClientPerMessageDeflateFactory(**params)
            async with websockets.connect(k.url(), extensions=[ext], compression=None,
                                          max_size=None) as ws:
                await echo_round(ws, True)
                checks += 1
        # The close handshake: our 1000 is echoed, then the server closes.
        ws = await websockets.connect(k.url())
        await ws.close(1000, "done")
        assert ws.close_code == 1000, ws.close_code
        checks += 1
    finally:
        rc = k.stop()
        assert rc == 0, f"keel exited {rc}:\n{k.log()}"

    # Context takeover both ways when configured.
    k = Keel("[websocket]\ncompression_context_takeover = on\n")
    try:
        async with websockets.connect(k.url(), max_size=None) as ws:
            ext = ws.response_headers.get("Sec-WebSocket-Extensions")
            assert "no_context_takeover" not in ext, ext
            await echo_round(ws, True)
            checks += 1
    finally:
        assert k.stop() == 0

    # A zip bomb: 8 MB of one byte compress to a few KB; max_message is 1m.
    k = Keel("[websocket]\nmax_message = 1m\n")
    try:
        async with websockets.connect(k.url(), max_size=None) as ws:
            await ws.send("a" * (8 << 20))
            try:
                await asyncio.wait_for(ws.recv(), 5)
                raise AssertionError("the bomb was echoed")
            except websockets.ConnectionClosed:
                pass
            assert ws.close_code == 1009, ws.close_code
            checks += 1
    finally:
        assert k.stop() == 0
    return checks


def main():
    checks = asyncio.run(asyncio.wait_for(run_all(), 90))
    print(f"ok: {checks} checks with websockets {websockets.__version__}")


if __name__ == "__main__":
    main()
