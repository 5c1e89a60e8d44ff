#!/usr/bin/env python3
"""The proof of issue 12, all on loopback: redis-server, two keel instances
and HAProxy in front of them with the PROXY protocol (v2).

    run.py KEEL_BIN MODULE_DIR TEST_MODULE_DIR

What it checks, in order (tests/cluster/README.md says more):

 1. WebSocket clients of the chat example (examples/chat), connected through
    HAProxy's round robin from their own loopback addresses (127.0.0.11,
    .12, ...), land on both instances, and every message any of them sends
    reaches every client exactly once, across instances through Redis.
 2. Each instance's access log names the clients by their own address, not
    HAProxy's 127.0.0.1; the same connections through the `peer` test
    protocol show that keel sees the client's port too.
 3. Redis is killed (SIGKILL): the publishes meanwhile reach the publisher's
    instance only and are counted in pubsub_redis_dropped_total; Redis is
    restarted on the same port and delivery across instances resumes.
 4. SIGHUP reloads one instance under a steady wrk load on its direct
    (non-PROXY) listener and another through HAProxy: zero socket errors,
    zero non-2xx, every answered request in the access logs, the old
    process exits 0 (its WebSocket clients closed with 1001), a new pid
    serves and rejoins the cluster.

It prints the delivery latency across instances (p50/p99) and a rough
messages/s figure; they are not asserted. Exit 0 when every check passed,
1 on a failure, 77 (ctest's skip code) when redis-server, haproxy, wrk or
Python's websockets package is missing, or the pubsub_redis or peer module
was not built; when keel cannot reload yet (no `pid_file` key, the reload
feature is missing) the other checks run and the script then exits 77,
saying so.
"""
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
BUDGET = 100.0  # seconds for the whole run; ctest's TIMEOUT is above it
START = time.monotonic()


def say(*a):
    print(*a, flush=True)


def skip(why):
    say(f"SKIP: {why}")
    sys.exit(SKIP)


try:
    import websockets
except ImportError:
    skip("the Python websockets package is missing (Debian: python3-websockets)")

if len(sys.argv) != 4:
    say(__doc__)
    sys.exit(2)
KEEL, MODULES, TEST_MODULES = (os.path.abspath(a) for a in sys.argv[1:4])


def tool(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


REDIS, HAPROXY, WRK = tool("redis-server"), tool("haproxy"), tool("wrk")
for name, path, pkg in (("redis-server", REDIS, "redis-server"), ("haproxy", HAPROXY, "haproxy"),
                        ("wrk", WRK, "wrk")):
    if path is None:
        skip(f"{name} is not installed (Debian: {pkg}; cmake/install-deps.sh installs it)")
for mod, where, why in (("pubsub_redis", MODULES, "hiredis missing: libhiredis-dev"),
                        ("chat", MODULES, "examples not built"),
                        ("peer", TEST_MODULES, "tests/modules not built")):
    if not os.path.exists(os.path.join(where, f"mod_{mod}.so")):
        skip(f"the {mod} module is not built ({why})")


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def remaining():
    return BUDGET - (time.monotonic() - START)


def bounded(timeout):
    """A wait's timeout, never past the whole run's budget."""
    return max(0.1, min(timeout, remaining()))


def poll(pred, timeout, what, interval=0.02):
    """Calls pred until it returns a true value (returned); Failure after
    timeout seconds."""
    end = time.monotonic() + bounded(timeout)
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise Failure(f"timed out after {timeout}s: {what}")
        time.sleep(interval)


async def apoll(pred, timeout, what, interval=0.01):
    """poll() for the asyncio side; what may be a function, called for the
    message when the time is up (to say what was seen by then)."""
    end = time.monotonic() + bounded(timeout)
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise Failure(f"timed out after {timeout}s: {what() if callable(what) else what}")
        await asyncio.sleep(interval)


def free_port():
    """A port free right now on 127.0.0.1 (bound to 0 and released): the
    caller retries with another if someone takes it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def can_connect(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


# ---- Processes -------------------------------------------------------------------
# Each one starts in a session of its own so that what it spawns (a reloaded
# keel) is in its process group; every group is killed at the end, whatever
# happened.

def become_subreaper():
    """Linux: orphans among our descendants (the keel a reload started,
    once the old one exits) become our children rather than init's, so
    that whoever kills this script's process tree (ctest on its timeout)
    finds them too."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


PROCS = []  # (name, Popen)
EXTRA_PIDS = set()  # processes that are not our children (a keel after reload)
WORK = tempfile.mkdtemp(prefix="keel-cluster-")


def spawn(name, argv, out):
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    PROCS.append((name, p))
    return p


def kill_everything():
    for name, p in PROCS:
        for sig_target in (lambda: os.killpg(p.pid, signal.SIGKILL), lambda: p.kill()):
            try:
                sig_target()
            except (ProcessLookupError, PermissionError):
                pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            say(f"warning: {name} (pid {p.pid}) did not die")
    for pid in EXTRA_PIDS:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours is not alive either.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


class Redis:
    def __init__(self):
        self.port = None
        self.proc = None
        self.log = os.path.join(WORK, "redis.log")

    def start(self, port=None):
        """Starts on port (a restart) or on a free port, retrying with
        another if it was taken meanwhile."""
        for _ in range(5 if port is None else 1):
            p = port or free_port()
            out = open(self.log, "a")
            self.proc = spawn("redis-server", [REDIS, "--port", str(p), "--bind", "127.0.0.1",
                                               "--save", "", "--appendonly", "no", "--daemonize",
                                               "no", "--dir", WORK], out)
            out.close()
            try:
                poll(lambda: self.proc.poll() is not None or self.ping(p), 10,
                     "redis-server answers PING")
            except Failure:
                raise Failure("redis-server did not start:\n" + open(self.log).read()[-2000:])
            if self.proc.poll() is None:
                self.port = p
                return
        raise Failure(f"redis-server could not start on port {port}:\n" +
                      open(self.log).read()[-2000:])

    @staticmethod
    def ping(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)


class Keel:
    """One instance: listeners 0 (http1, PROXY), 1 (http1, direct: wrk and
    /metrics) and 2 (peer, PROXY), each with its own log and access log."""

    def __init__(self, name, redis_port, pid_file):
        self.name = name
        self.errlog = os.path.join(WORK, f"{name}.log")
        self.access = os.path.join(WORK, f"{name}-access.log")
        self.pid_file = os.path.join(WORK, f"{name}.pid") if pid_file else None
        self.conf = os.path.join(WORK, f"{name}.conf")
        with open(self.conf, "w") as f:
            f.write(keel_conf(redis_port, self.access, self.pid_file))
        out = open(self.errlog, "w")
        self.proc = spawn(name, [KEEL, "-c", self.conf], out)
        out.close()
        self.pid = self.proc.pid
        ports = poll(lambda: self._ports(), 10, f"{name} logs its 3 listeners")
        self.ws_port, self.http_port, self.peer_port = ports

    def _ports(self):
        if self.proc.poll() is not None:
            raise Failure(f"{self.name} exited ({self.proc.returncode}):\n{self.log()}")
        found = re.findall(r"listening on 127\.0\.0\.1:(\d+) \((\w+)\)", self.log())
        if len(found) < 3:
            return None
        check([p for _, p in found[:3]] == ["http1", "http1", "peer"],
              f"{self.name}: unexpected listeners {found}")
        return [int(port) for port, _ in found[:3]]

    def log(self):
        with open(self.errlog, errors="replace") as f:
            return f.read()

    def access_size(self):
        try:
            return os.path.getsize(self.access)
        except FileNotFoundError:
            return 0

    def access_lines(self, since=0):
        """The access log's lines from byte offset since on."""
        try:
            with open(self.access, "rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def get(self, path, timeout=3):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}",
                                    timeout=timeout) as r:
            return r.status, r.read().decode()

    def metric(self, name):
        """The sum of a series over its labels, from the stats module."""
        _, body = self.get("/metrics")
        total, seen = 0.0, False
        for line in body.splitlines():
            m = re.match(rf"{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", line)
            if m:
                total += float(m.group(1))
                seen = True
        check(seen, f"{self.name}: no {name} in /metrics")
        return total


def keel_conf(redis_port, access, pid_file):
    return f"""[keel]
listen = 127.0.0.1:0 http1 proxy_protocol=on proxy_from=127.0.0.1
listen = 127.0.0.1:0 http1
listen = 127.0.0.1:0 peer proxy_protocol=on proxy_from=127.0.0.1
workers = 2
modules = http1 accesslog stats websocket chat hello peer pubsub_redis
module_path = {MODULES}
module_path = {TEST_MODULES}
shutdown_timeout = 5s
{f"pid_file = {pid_file}" if pid_file else ""}
[accesslog]
path = {access}
[pubsub_redis]
address = 127.0.0.1:{redis_port}
prefix = proof:
reconnect_max = 300ms
"""


def reload_supported():
    """keel -t on a config with [keel] pid_file: refused as an unknown key
    while the reload feature has not landed."""
    conf = os.path.join(WORK, "probe.conf")
    with open(conf, "w") as f:
        f.write(keel_conf(1, os.path.join(WORK, "probe-access.log"),
                          os.path.join(WORK, "probe.pid")))
    r = subprocess.run([KEEL, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
    if r.returncode == 0:
        return True
    out = r.stdout + r.stderr
    check("pid_file" in out, f"keel -t refuses the test's config:\n{out}")
    return False


class HAProxy:
    """Mode tcp, send-proxy-v2, round robin over both instances: frontends
    `ws` and `http` (the chat clients; wrk) to their PROXY http1
    listeners, `peer` to their peer listeners."""

    def __init__(self, keels):
        self.log = os.path.join(WORK, "haproxy.log")
        for _ in range(5):
            self.ws_port, self.peer_port, self.http_port = free_port(), free_port(), free_port()
            cfg = os.path.join(WORK, "haproxy.cfg")
            servers = lambda attr, opt="": "".join(
                f"  server {k.name} 127.0.0.1:{getattr(k, attr)} send-proxy-v2{opt}\n"
                for k in keels)
            with open(cfg, "w") as f:
                f.write("global\n  maxconn 2000\n"
                        "defaults\n  mode tcp\n  timeout connect 5s\n"
                        "  timeout client 60s\n  timeout server 60s\n"
                        f"frontend ws\n  bind 127.0.0.1:{self.ws_port}\n  default_backend keel_ws\n"
                        f"frontend http\n  bind 127.0.0.1:{self.http_port}\n"
                        "  default_backend keel_ws\n"
                        f"frontend peer\n  bind 127.0.0.1:{self.peer_port}\n"
                        "  default_backend keel_peer\n"
                        "backend keel_ws\n  balance roundrobin\n"
                        "  option httpchk GET /__ready\n"
                        "  timeout check 2s\n  default-server inter 500ms fall 3 rise 2\n" +
                        servers("ws_port", " check") +
                        "backend keel_peer\n  balance roundrobin\n" + servers("peer_port"))
            out = open(self.log, "a")
            self.proc = spawn("haproxy", [HAPROXY, "-db", "-f", cfg], out)
            out.close()
            poll(lambda: self.proc.poll() is not None or
                 all(can_connect(p) for p in (self.ws_port, self.peer_port, self.http_port)), 10,
                 "haproxy listens")
            if self.proc.poll() is None:
                return
            say("haproxy exited (a port taken meanwhile?); again with other ports")
        raise Failure("haproxy did not start:\n" + open(self.log).read()[-2000:])


# ---- Chat clients ------------------------------------------------------------------------
# A text message is "TAG|SENDER|SEQ|SENT_NS"; the chat module sends
# {"type":"msg","name":SENDER,"text":TEXT} to everyone in the room, its
# sender included.

class Client:
    def __init__(self, name, src):
        self.name, self.src = name, src
        self.got = {}  # (tag, sender, seq) -> [receive times, ns]
        self.sent_ns = {}
        self.events = []  # ("join" | "leave", name)
        self.members = []  # names from the roll calls it was sent
        self.closed = None  # (code, reason) once the connection ended

    async def connect(self, port):
        try:
            self.ws = await asyncio.wait_for(websockets.connect(
                f"ws://127.0.0.1:{port}/chat/ws?name={self.name}", compression=None,
                local_addr=(self.src, 0), open_timeout=5, max_queue=None), bounded(10))
        except (OSError, EOFError, asyncio.TimeoutError, websockets.WebSocketException) as e:
            raise Failure(f"{self.name} from {self.src} cannot join through HAProxy: {e!r}")
        self.port = self.ws.transport.get_extra_info("sockname")[1]
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self):
        try:
            async for text in self.ws:
                now = time.monotonic_ns()
                m = json.loads(text)
                if m.get("type") in ("join", "leave"):
                    self.events.append((m["type"], m["name"]))
                if m.get("type") == "members":
                    self.members.extend(m["names"])
                if m.get("type") != "msg":
                    continue
                tag, sender, seq, _ = m["text"].split("|")
                self.got.setdefault((tag, sender, int(seq)), []).append(now)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed = (self.ws.close_code, self.ws.close_reason)

    async def send(self, tag, seq):
        t = time.monotonic_ns()
        self.sent_ns[(tag, seq)] = t
        await self.ws.send(f"{tag}|{self.name}|{seq}|{t}")

    def count(self, tag, sender=None):
        return sum(len(v) for (t, s, _), v in self.got.items()
                   if t == tag and (sender is None or s == sender))


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


async def exchange(clients, tag, per_client, gap):
    """Every client sends per_client messages (gap seconds apart, 0 for a
    burst), all at once; waits until every client has every message and
    checks that none came twice. Returns the time from the first send to
    the last delivery."""
    start = time.monotonic_ns()

    async def sender(c):
        for seq in range(per_client):
            await c.send(tag, seq)
            if gap:
                await asyncio.sleep(gap)

    await asyncio.wait_for(asyncio.gather(*(sender(c) for c in clients)), bounded(20))
    want = per_client * len(clients)
    await apoll(lambda: all(c.count(tag) >= want for c in clients), 20,
                lambda: f"every client receives the {want} '{tag}' messages: " +
                ", ".join(f"{c.name} {c.count(tag)}" for c in clients))
    last = max(max(ts) for c in clients for (t, _, _), ts in c.got.items() if t == tag)
    for c in clients:
        for s in clients:
            for seq in range(per_client):
                n = len(c.got.get((tag, s.name, seq), []))
                check(n == 1, f"{c.name} received {tag} {s.name}#{seq} {n} times")
    return (last - start) / 1e9


def latencies(clients, tag, where, cross):
    out = []
    for c in clients:
        for (t, sender, seq), ts in c.got.items():
            s = next(x for x in clients if x.name == sender)
            if t == tag and (where[c.name] != where[sender]) == cross:
                out.append((ts[0] - s.sent_ns[(tag, seq)]) / 1e6)
    return out


async def until_crossing(a, b, tag, timeout):
    """a sends "tag" messages every 100ms until b has one: subscriptions
    in Redis take effect asynchronously."""
    end = time.monotonic() + bounded(timeout)
    seq = 0
    while b.count(tag, a.name) == 0:
        check(time.monotonic() < end,
              f"no message from {a.name} reached {b.name} within {timeout}s ({tag})")
        await a.send(tag, seq)
        seq += 1
        step = time.monotonic() + 0.1
        while b.count(tag, a.name) == 0 and time.monotonic() < step:
            await asyncio.sleep(0.005)
    return seq


# ---- The run ----------------------------------------------------------------------------------

async def cluster(keels, redis, lb, report):
    k1, k2 = keels
    for k in keels:
        await apoll(lambda: k.metric("pubsub_redis_links_up") == 2, 10,
                    f"{k.name} has both links to Redis up")

    # 1. Four clients, each from its own loopback address, through HAProxy.
    clients = [Client(f"c{i}", f"127.0.0.{11 + i}") for i in range(4)]
    for c in clients:
        await c.connect(lb.ws_port)

    # Where each landed, from the access logs: the line of its upgrade
    # names its own address (HAProxy's connections come from 127.0.0.1).
    def placed():
        where = {}
        for c in clients:
            mine = f'{c.src} - - ['
            hits = [k.name for k in keels for line in k.access_lines()
                    if line.startswith(mine) and f'"GET /chat/ws?name={c.name} HTTP/1.1" 101' in line]
            if len(hits) != 1:
                return None if not hits else {"twice": (c.name, hits)}
            where[c.name] = hits[0]
        return where
    where = await apoll(placed, 5, "each client's upgrade in exactly one access log")
    check("twice" not in where, f"a client's upgrade is logged twice: {where}")
    say("clients:", ", ".join(f"{c.name} {c.src}:{c.port} on {where[c.name]}" for c in clients))
    on = {k.name: [c for c in clients if where[c.name] == k.name] for k in keels}
    # The roll call answers a newcomer from its own instance: a list that
    # names a member of the other instance reached the wrong inbox (inbox
    # topics must differ between instances once Redis carries them).
    for c in clients:
        strangers = [n for n in c.members if where.get(n) != where[c.name]]
        check(not strangers, f"{c.name} on {where[c.name]} was sent the roll call of another "
              f"instance: {strangers}")
    check(on["k1"] and on["k2"], f"round robin left an instance without clients: {where}")
    for k in keels:
        bad = [l for l in k.access_lines() if "/chat/ws" in l and not
               re.match(r"127\.0\.0\.1[1-4] - - ", l)]
        check(not bad, f"{k.name}: access log lines without a client's address: {bad}")
    for k in keels:
        for line in k.access_lines():
            say(f"  {k.name} access log: {line}")

    # The port: the same kind of connection to the peer protocol, which
    # says what keel_conn_peer_name (the access log's source) returns.
    for i in range(4):
        src = f"127.0.0.{21 + i}"
        s = socket.create_connection(("127.0.0.1", lb.peer_port), timeout=5,
                                     source_address=(src, 0))
        try:
            line = b""
            end = time.monotonic() + bounded(5)
            while not line.endswith(b"\n") and time.monotonic() < end:
                chunk = s.recv(256)
                if not chunk:
                    break
                line += chunk
            want = f"peer {src}:{s.getsockname()[1]}\n"
            check(line.decode() == want, f"through HAProxy keel saw {line!r}, expected {want!r}")
        finally:
            s.close()
    say("peer protocol through HAProxy: keel sees each client's own address and port")

    # Subscriptions in Redis are asynchronous: wait for the first message
    # across, both ways.
    a, b = on["k1"][0], on["k2"][0]
    await until_crossing(a, b, "probe", 10)
    await until_crossing(b, a, "probe", 10)

    # 2. Paced messages (latency), then a burst (throughput).
    await exchange(clients, "x", 100, 0.005)
    cross = latencies(clients, "x", where, True)
    local = latencies(clients, "x", where, False)
    report["latency"] = (percentile(cross, 50), percentile(cross, 99), len(cross),
                         percentile(local, 50), percentile(local, 99))
    n = 500
    took = await exchange(clients, "burst", n, 0)
    deliveries = n * len(clients) * len(clients)
    report["burst"] = (n * len(clients), deliveries, took)
    say("delivery across instances: p50 %.2f ms, p99 %.2f ms over %d deliveries "
        "(same instance: p50 %.2f ms, p99 %.2f ms)" % report["latency"])
    say("burst: %d messages published, %d deliveries in %.2f s: %.0f published/s, "
        "%.0f delivered/s" % (n * len(clients), deliveries, took, n * len(clients) / took,
                              deliveries / took))

    # 3. Redis killed mid-test.
    dropped = {k.name: k.metric("pubsub_redis_dropped_total") for k in keels}
    reconnects = {k.name: k.metric("pubsub_redis_reconnects_total") for k in keels}
    redis.kill()
    for k in keels:
        await apoll(lambda: k.metric("pubsub_redis_links_up") == 0, 10,
                    f"{k.name} sees Redis gone")
    K = 5
    for seq in range(K):
        await a.send("outage", seq)
        await b.send("outage", seq)
    for c in clients:
        await apoll(lambda: c.count("outage") >= K, 5,
                    f"{c.name} gets its own instance's messages while Redis is down")
    for k in keels:
        d = await apoll(lambda: (k.metric("pubsub_redis_dropped_total") - dropped[k.name]) >= K
                        and k.metric("pubsub_redis_dropped_total") - dropped[k.name], 5,
                        f"{k.name} counts the drops")
        check(d == K, f"{k.name}: {d} drops counted for {K} publishes")
    report["dropped"] = {k.name: k.metric("pubsub_redis_dropped_total") for k in keels}
    t_restart = time.monotonic()
    redis.start(redis.port)
    for k in keels:
        await apoll(lambda: k.metric("pubsub_redis_links_up") == 2, 10,
                    f"{k.name} reconnects to the restarted Redis")
    t0 = time.monotonic()
    await until_crossing(a, b, "resumed", 10)
    await until_crossing(b, a, "resumed", 10)
    report["resume"] = (t0 - t_restart, time.monotonic() - t_restart)
    for k in keels:
        check(k.metric("pubsub_redis_reconnects_total") >= reconnects[k.name] + 2,
              f"{k.name}: reconnects not counted")
    await exchange(clients, "after", 20, 0.002)
    # Only the publisher's instance had the outage's messages, once each.
    for c in clients:
        for s in (a, b):
            n = c.count("outage", s.name)
            want = K if where[c.name] == where[s.name] else 0
            check(n == want, f"{c.name} ({where[c.name]}) got {n} of {s.name}'s outage "
                             f"messages ({where[s.name]}), expected {want}")
    say(f"Redis killed and restarted: {K} publishes per instance dropped and counted; "
        "after the restart (redis-server answering included) both links were up in "
        "%.2f s, delivery across instances both ways in %.2f s" % report["resume"])
    return clients, where


def wrk_result(out):
    m = re.search(r"(\d+) requests in", out)
    check(m, f"wrk printed no result:\n{out}")
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return (int(m.group(1)), [int(x) for x in errs.groups()] if errs else [0, 0, 0, 0],
            int(non2xx.group(1)) if non2xx else 0)


async def reload_under_load(keels, lb, report, clients, where):
    k1, k2 = keels
    on_k1 = [c for c in clients if where[c.name] == "k1"]
    on_k2 = [c for c in clients if where[c.name] == "k2"]
    before = k1.metric("keel_http_requests_total")
    since = {k.name: k.access_size() for k in keels}
    out = open(os.path.join(WORK, "wrk.out"), "w")
    wrk = spawn("wrk", [WRK, "-t2", "-c20", "-d6s", "--timeout", "5s",
                        f"http://127.0.0.1:{k1.http_port}/"], out)
    out.close()
    # And a lighter one through HAProxy, half of it on k1's PROXY listener.
    out = open(os.path.join(WORK, "wrk-lb.out"), "w")
    wrk_lb = spawn("wrk", [WRK, "-t1", "-c10", "-d6s", "--timeout", "5s",
                           f"http://127.0.0.1:{lb.http_port}/"], out)
    out.close()
    # Mid-run: wrk's load steady for a third of its run (its connections
    # all established and kept alive), k1 serving it.
    t0 = time.monotonic()
    await apoll(lambda: wrk.poll() is not None or
                (time.monotonic() - t0 >= 2 and
                 k1.metric("keel_http_requests_total") - before > 2000), 5,
                "wrk's load on k1", 0.05)
    check(wrk.poll() is None, "wrk ended before the reload")
    old = k1.pid
    os.kill(old, signal.SIGHUP)

    def reloaded():
        log = k1.log()
        check("reload failed" not in log, f"k1's reload failed:\n{log[-3000:]}")
        m = re.search(r"reload: new process (\d+) serving; draining", log)
        return m and int(m.group(1))
    new = await apoll(reloaded, 10, "k1 says its new process serves")
    EXTRA_PIDS.add(new)
    check(new != old, "the new process has the old pid")
    await apoll(lambda: k1.proc.poll() is not None, 10, "the old k1 process exits")
    check(k1.proc.returncode == 0, f"the old k1 exited {k1.proc.returncode}")
    check(os.path.exists(k1.pid_file), "the old k1 removed the new one's pid_file")
    await apoll(lambda: open(k1.pid_file).read().strip() == str(new), 5,
                "pid_file names the new process")
    check(alive(new), "the new k1 process is not running")
    # The chat clients of the old k1 were told it was going away (1001);
    # those of k2 stayed, and heard them leave, across instances.
    for c in on_k1:
        await apoll(lambda: c.closed is not None, 5, f"{c.name} on the old k1 is closed")
        check(c.closed[0] == 1001, f"{c.name} on the old k1 closed with {c.closed}")
    for c in on_k2:
        check(c.closed is None, f"{c.name} on k2 was disconnected by k1's reload: {c.closed}")
    # KNOWN BUG (reported, not fixed here): an instance shutting down
    # closes its Redis links first (pubsub_redis's link_shutdown) while its
    # WebSockets are still closing, so what it publishes meanwhile (the
    # chat's "leave" of each of its members) is dropped, and the clients of
    # other instances never hear them leave. Reported as XFAIL while it
    # lasts, XPASS (not a failure: it depends on timing) once fixed.
    try:
        for c in on_k2:
            await apoll(lambda: all(("leave", x.name) in c.events for x in on_k1), 2,
                        lambda: f"{c.name} on k2 hears {[x.name for x in on_k1]} leave")
        say("XPASS: k2's clients heard the old k1's members leave; the known bug about "
            "publishes during a shutdown is fixed: make this check strict")
    except Failure as e:
        say(f"XFAIL (known bug: pubsub_redis drops what is published while its instance "
            f"drains): {e}; heard {on_k2[0].events}")
    await close_all(on_k2)
    await apoll(lambda: wrk.poll() is not None and wrk_lb.poll() is not None, 15, "wrk ends")
    answered = 0
    for name, path in (("wrk on k1", "wrk.out"), ("wrk through HAProxy", "wrk-lb.out")):
        requests, errors, non2xx = wrk_result(open(os.path.join(WORK, path)).read())
        answered += requests
        say(f"{name}: {requests} requests, socket errors connect/read/write/timeout "
            f"{errors}, {non2xx} non-2xx")
        check(errors == [0, 0, 0, 0] and non2xx == 0,
              f"reload under {name}: socket errors connect/read/write/timeout {errors}, "
              f"{non2xx} non-2xx, over {requests} requests")
    # Both k1 processes wrote the same access log: every line whole, and
    # every request wrk had answered is in one of the logs (wrk may have
    # sent a few more that its end cut short).
    clf = re.compile(r'\S+ - - \[[^]]+\] "[^"]*" \d{3} (\d+|-) "[^"]*" "[^"]*"$')

    def logged():
        n = 0
        for k in keels:
            for line in k.access_lines(since[k.name]):
                check(clf.match(line), f"{k.name}: a broken access log line: {line!r}")
                n += line.endswith('"GET / HTTP/1.1" 200 13 "-" "-"')
        return n >= answered and n
    n = await apoll(logged, 5, f"wrk's {answered} answered requests in the access logs", 0.2)
    say(f"access logs across the reload: {n} lines for wrk's {answered} answered requests, "
        "all whole")
    status, body = k1.get("/")
    check(status == 200 and body == "Hello, World!", f"the new k1 answers {status} {body!r}")
    say(f"reload: pid {old} -> {new} under both loads, no errors")

    # The new process is back in the cluster: links to Redis, and a fresh
    # pair of clients through HAProxy exchanging across instances.
    k1.pid = new
    await apoll(lambda: k1.metric("pubsub_redis_links_up") == 2, 10,
                "the new k1 connects to Redis")


async def after_reload(keels, lb):
    since = {k.name: k.access_size() for k in keels}  # past wrk's lines
    clients = [Client(f"n{i}", f"127.0.0.{31 + i}") for i in range(2)]
    for c in clients:
        await c.connect(lb.ws_port)
    where = {}
    for c in clients:
        where[c.name] = await apoll(lambda: next(
            (k.name for k in keels for l in k.access_lines(since[k.name])
             if l.startswith(f"{c.src} - - [") and f"name={c.name} " in l), None), 5,
            f"{c.name}'s upgrade is logged")
    check(len(set(where.values())) == 2, f"both new clients on one instance: {where}")
    await until_crossing(clients[0], clients[1], "probe", 10)
    await until_crossing(clients[1], clients[0], "probe", 10)
    await exchange(clients, "reloaded", 10, 0.002)
    for c in clients:
        await c.ws.close()
    say("after the reload: clients on the new k1 and on k2 exchange messages")


async def close_all(clients):
    for c in clients:
        await asyncio.wait_for(c.ws.close(), bounded(5))
        await asyncio.wait_for(c.reader, bounded(5))


def main():
    report = {}
    can_reload = reload_supported()
    redis = Redis()
    redis.start()
    keels = [Keel("k1", redis.port, can_reload), Keel("k2", redis.port, can_reload)]
    lb = HAProxy(keels)
    say(f"redis 127.0.0.1:{redis.port}, haproxy 127.0.0.1:{lb.ws_port}, " +
        ", ".join(f"{k.name} pid {k.pid} ws {k.ws_port} http {k.http_port}" for k in keels))

    async def run():
        clients, where = await cluster(keels, redis, lb, report)
        # Nothing arrived twice over the whole run, and nobody was cut off.
        for c in clients:
            check(c.closed is None, f"{c.name} was disconnected: {c.closed}")
            dup = [k for k, v in c.got.items() if len(v) > 1]
            check(not dup, f"{c.name} received messages twice: {dup[:5]}")
        if can_reload:
            await reload_under_load(keels, lb, report, clients, where)
            await after_reload(keels, lb)
        else:
            await close_all(clients)
    asyncio.run(run())

    # HAProxy probed both instances' readiness (GET /__ready, through the
    # PROXY listener like any connection) all along: every probe answered
    # 200, and no server was ever taken out (HAProxy says "is DOWN" on
    # stderr), not during Redis' outage, not across the reload.
    for k in keels:
        probes = [l for l in k.access_lines() if '"GET /__ready ' in l]
        check(probes, f"{k.name}: HAProxy's health checks never reached it")
        bad = [l for l in probes if '" 200 ' not in l]
        check(not bad, f"{k.name}: readiness probes not answered 200: {bad[:3]}")
    with open(lb.log, errors="replace") as f:
        down = [l for l in f if "is DOWN" in l or "no server available" in l]
    check(not down, f"HAProxy took a server out: {down}")
    say("HAProxy's readiness probes: " + ", ".join(
        f"{k.name} {sum(1 for l in k.access_lines() if 'GET /__ready ' in l)} answered 200"
        for k in keels) + ", no server ever down")

    # Both instances stop cleanly on SIGTERM (the new k1 included), and
    # neither logged a sanitizer report.
    for k in keels:
        os.kill(k.pid, signal.SIGTERM)
    for k in keels:
        if k.pid == k.proc.pid:
            poll(lambda: k.proc.poll() is not None, 10, f"{k.name} stops")
            check(k.proc.returncode == 0, f"{k.name} exited {k.proc.returncode}")
        else:
            poll(lambda: not alive(k.pid), 10, f"{k.name} (pid {k.pid}) stops")
        check(not k.pid_file or not os.path.exists(k.pid_file),
              f"{k.name}: its pid_file outlived it")
        log = k.log()
        check("Sanitizer" not in log and "runtime error" not in log,
              f"{k.name}: sanitizer report:\n{log}")
    if not can_reload:
        say("SKIP: the reload under load was not run: this keel has no reload "
            "(no [keel] pid_file / SIGHUP reload, RELOAD-SPEC); every other check passed")
        return SKIP
    say("PASS")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    become_subreaper()
    rc = 1
    try:
        rc = main()
    except Exception as e:
        say(f"FAIL: {e}" if isinstance(e, Failure) else f"FAIL: {e!r}")
        if not isinstance(e, Failure):
            import traceback
            traceback.print_exc()
        say(f"logs in {WORK}")
        for f in sorted(os.listdir(WORK)):
            if f.endswith(".log") and not f.endswith("access.log"):
                with open(os.path.join(WORK, f), errors="replace") as fh:
                    say(f"---- {f} (last lines)\n" + "".join(fh.readlines()[-25:]))
    finally:
        kill_everything()
    if rc in (0, SKIP) and not os.environ.get("KEEL_CLUSTER_KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)
    elif rc in (0, SKIP):
        say(f"logs kept in {WORK}")
    sys.exit(rc)
