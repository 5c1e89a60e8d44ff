"""tests/h2/cases_attacks.py — the attacks suite, each published HTTP/2 attack
performed against keel. Each must end with GOAWAY ENHANCE_YOUR_CALM (or a reset
stream), be counted in /metrics, leave a connection opened before it answered,
and keel's memory bounded (memory_bounded runs last).

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import time

from h2lib import (CANCEL, ENHANCE_YOUR_CALM, Conn, DataFrame, Fail, PingFrame, PriorityFrame,
                   RstStreamFrame, SettingsFrame, check)
from h2cases import case, raw_frame, lit, GET_ROOT, metric, plain, req_fields


def bystander(env):
    """A connection opened before the attack, with a request in flight."""
    b = Conn(env.k.port())
    sid = b.request("/slow?ms=300")
    return b, sid


def unaffected(env, b, sid):
    r = b.response(sid, timeout=5)
    check(r.status == 200, f"the bystander's request: {r.status} {r.reset}")
    check(b.get("/").status == 200, "the bystander's next request")
    check(Conn(env.k.port()).get("/").status == 200, "a new connection")
    check(env.k.alive(), "keel died")


def flood_metric(env, kind):
    """The flood was counted (the stats module's /metrics)."""
    c = Conn(env.k.port())
    body = c.get("/metrics").body.decode()
    for line in body.splitlines():
        if line.startswith("h2_floods_total") and f'kind="{kind}"' in line:
            check(float(line.split()[-1]) >= 1, f"{line}")
            return
    raise Fail(f"no h2_floods_total{{kind=\"{kind}\"}} in /metrics")


@case("attacks")
def rapid_reset(env):
    """CVE-2023-44487: streams opened and reset at once, faster than they
    could complete; max_resets = 50."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    frames = []
    for _ in range(300):
        sid = c.new_id()
        frames.append(c.headers_frame(sid, [(":method", "GET"), (":path", "/slow?ms=1000"),
                                            (":scheme", "http"), (":authority", "x")]))
        frames.append(RstStreamFrame(sid, error_code=CANCEL))
    try:
        c.send(*frames)
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    c.expect_closed()
    unaffected(env, b, bsid)
    flood_metric(env, "rapid_reset")


@case("attacks")
def continuation_flood_frames(env):
    """CVE-2024-27316: a header block that never ends, in small frames."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    data = c.send_raw
    data(raw_frame(0x1, 0x1, 1, GET_ROOT))  # END_STREAM, no END_HEADERS
    try:
        for i in range(1000):
            data(raw_frame(0x9, 0x0, 1, b"\x40" + lit(f"x-{i}") + lit("y" * 50)))
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)
    flood_metric(env, "continuation")


@case("attacks")
def continuation_flood_bytes(env):
    """CVE-2024-27316: a header block of a few big frames past max_header_block."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    c.send_raw(raw_frame(0x1, 0x1, 1, GET_ROOT))
    try:
        for i in range(7):
            c.send_raw(raw_frame(0x9, 0x0, 1, b"\x00" + lit(f"x-{i}") + lit("y" * 16000)))
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)


def calmed(env, b, bsid, c, flood, metric=None):
    """Sends a flood on c (OSError: keel closed the connection first):
    keel answers GOAWAY ENHANCE_YOUR_CALM, the bystander's stream is served
    as if nothing happened, and the flood is counted (metric, if given)."""
    try:
        flood()
    except OSError:
        pass
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)
    if metric:
        flood_metric(env, metric)


@case("attacks")
def ping_flood(env):
    """CVE-2019-9512: PINGs, each asking for an ACK; max_pings = 50."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    calmed(env, b, bsid, c, lambda: c.send(*[PingFrame(0, opaque_data=i.to_bytes(8, "big")) for i in range(1000)]), "ping")


@case("attacks")
def settings_flood(env):
    """CVE-2019-9515: SETTINGS frames, each asking for an ACK."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    calmed(env, b, bsid, c, lambda: c.send(*[SettingsFrame(0) for _ in range(500)]), "settings")


@case("attacks")
def empty_data_flood(env):
    """CVE-2019-9518: DATA frames without payload or END_STREAM."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    sid = c.request("/h2test/late?ms=300", method="POST", end_stream=False)
    calmed(env, b, bsid, c, lambda: c.send(*[DataFrame(sid, b"") for _ in range(1000)]), "empty_frames")


@case("attacks")
def unknown_frame_flood(env):
    """5.5 + CVE-2019-9518: frames of unknown types cost nothing to send."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    calmed(env, b, bsid, c, lambda: c.send_raw(b"".join(raw_frame(0x20, 0, 0, b"junk") for _ in range(1000))))


@case("attacks")
def priority_churn(env):
    """CVE-2019-9513: PRIORITY frames reshuffling streams; max_priority = 100."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    frames = [PriorityFrame(1 + 2 * (i % 50), depends_on=1 + 2 * ((i + 7) % 50),
                            stream_weight=i % 256) for i in range(2000)]
    calmed(env, b, bsid, c, lambda: c.send(*frames), "priority")


@case("attacks")
def hpack_bomb(env):
    """RFC 7541 7.3: one 4 KB dynamic-table entry referenced 300 times: a
    1.2 MB field list from a few hundred bytes."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    insert = b"\x40" + lit("x-bomb") + lit("a" * 4000)  # literal, indexed: entry 62
    c.send_raw(raw_frame(0x1, 0x5, 1, GET_ROOT + insert))
    r = c.response(1)
    check(r.status == 200, f"the entry's request: {r.status}")
    c.send_raw(raw_frame(0x1, 0x5, 3, GET_ROOT + b"\xbe" * 300))
    c.expect_goaway(ENHANCE_YOUR_CALM)
    unaffected(env, b, bsid)
    flood_metric(env, "hpack_bomb")


@case("attacks")
def reset_provoked(env):
    """CVE-2019-9514: requests the server must reset, as fast as possible."""
    b, bsid = bystander(env)
    c = Conn(env.k.port())
    frames = []
    for _ in range(300):
        sid = c.new_id()
        frames.append(c.headers_frame(sid, [(":method", "GET"), (":path", "/"),
                                            (":scheme", "http"), (":authority", "x"),
                                            ("connection", "bad")]))
    calmed(env, b, bsid, c, lambda: c.send(*frames))


@case("attacks")
def zero_window_stall(env):
    """A client that never opens its window holds a response; the stream is
    reset after stream_timeout (1s), the connection goes on."""
    b, bsid = bystander(env)
    c = Conn(env.k.port(), settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0}, auto_window=False)
    sid = c.request("/h2test/big?n=10000000")
    t0 = time.time()
    c.expect_rst(sid, CANCEL, timeout=5)
    check(time.time() - t0 >= 0.8, "reset before stream_timeout")
    c.ping()
    unaffected(env, b, bsid)


@case("attacks")
def slow_body_stall(env):
    """A request body that stops coming is reset after stream_timeout."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"x" * 100, end_stream=False)
    c.expect_rst(sid, CANCEL, timeout=5)
    c.ping()


def trickle(c, data, interval, limit):
    """Sends data a byte every interval seconds until the server closes the
    connection or limit seconds pass; returns the seconds it took."""
    t0 = time.time()
    for i in range(len(data)):
        if time.time() - t0 > limit:
            break
        try:
            c.send_raw(data[i:i + 1])
        except OSError:
            break
        end = time.time() + interval
        while time.time() < end and not c.eof:
            c._fill(max(0.0, end - time.time()))
        if c.eof:
            break
    return time.time() - t0


@case("attacks")
def header_block_trickled(env):
    """A header block whose bytes are trickled, under every size and frame
    limit (one CONTINUATION frame, or the HEADERS frame itself, a byte at a
    time): held ~115 KiB a connection with no deadline (issue 23). It gets
    [h2] header_timeout (1s here) from its HEADERS frame, never renewed by
    bytes: GOAWAY ENHANCE_YOUR_CALM, the connection closed, counted; other
    connections untouched."""
    k = env.start("[h2]\nmax_concurrent_streams = 8\nheader_timeout = 1s\n")
    try:
        b = Conn(k.port())
        bsid = b.request("/slow?ms=1500")
        def cont(sid):
            return (16000).to_bytes(3, "big") + b"\x09\x00" + sid.to_bytes(4, "big") + \
                b"\x00" + lit("x-a") + lit("y" * 15990)
        headers = (16000).to_bytes(3, "big") + b"\x01\x05" + (1).to_bytes(4, "big") + \
            GET_ROOT + b"\x00" + lit("x-a") + lit("y" * 15990)
        slow = plain(req_fields("/slow?ms=3000"))
        # With no stream under way the deadline is the core's; with one
        # (a slow answer on stream 1) the module's tick.
        for what, lead, rest in (
                ("CONTINUATION", raw_frame(0x1, 0x1, 1, GET_ROOT), cont(1)),
                ("HEADERS", b"", headers),
                ("CONTINUATION, a stream open",
                 raw_frame(0x1, 0x5, 1, slow) + raw_frame(0x1, 0x1, 3, GET_ROOT), cont(3))):
            c = Conn(k.port())
            c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                       what="SETTINGS ACK")
            if lead:
                c.send_raw(lead)
            took = trickle(c, rest, 0.1, 4)
            check(c.eof, f"{what} trickled: the connection was open after {took:.1f} s")
            check(0.9 <= took < 2.5, f"{what} trickled: closed after {took:.2f} s")
            c.expect_goaway(ENHANCE_YOUR_CALM)
        r = b.response(bsid, timeout=5)
        check(r.status == 200, f"the bystander's request: {r.status} {r.reset}")
        check(Conn(k.port()).get("/").status == 200, "a new connection")
        body = Conn(k.port()).get("/metrics").body.decode()
        check(any(line.startswith("h2_limits_total") and 'limit="header_timeout"' in line
                  and float(line.split()[-1]) >= 3 for line in body.splitlines()),
              "not counted in h2_limits_total{limit=\"header_timeout\"}")
    finally:
        k.stop()


@case("attacks")
def header_blocks_hold_no_slots(env):
    """At max_connections (2 here), connections whose peers trickle a header
    block with no stream under way are closed, oldest first, to admit new
    clients (the core's reclaiming of unfinished heads, as http1's), not
    left to hold every slot until header_timeout (10s)."""
    k = env.start("max_connections = 2\n[h2]\nmax_concurrent_streams = 8\n")
    try:
        hold = []
        for _ in range(2):
            c = Conn(k.port())
            c.wait_for(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags,
                       what="SETTINGS ACK")
            # A PING and a HEADERS without END_HEADERS in one write (one
            # read): once the PING is answered, the block is under way.
            c.send_raw(raw_frame(0x6, 0x0, 0, b"blockpng") + raw_frame(0x1, 0x1, 1, GET_ROOT))
            c.wait_for(lambda f: isinstance(f, PingFrame) and "ACK" in f.flags,
                       what="the PING's ACK")
            hold.append(c)
        t0 = time.time()
        n = Conn(k.port(), timeout=3)
        r = n.response(n.request("/"))
        check(r.status == 200, f"a new client at max_connections: {r.status}")
        check(time.time() - t0 < 2, "the new client waited")
        hold[0].expect_closed(timeout=2)
    finally:
        for c in hold:
            c.close()
        k.stop()


@case("attacks")
def body_trickled(env):
    """A request body trickled a byte every 250 ms: each byte renews
    stream_timeout (1s here), so it was held without end (issue 23). As
    http1's body_min_rate, the body gets stream_timeout plus a second per
    body_min_rate (1k) bytes from when the handler asks for it: 408 (no
    answer had begun), counted."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    t0 = time.time()
    while time.time() - t0 < 4:
        r = c.responses.get(sid)
        if r is not None and (r.ended or r.reset is not None):
            break
        try:
            c.send(DataFrame(sid, b"x"))
        except OSError:
            break
        end = time.time() + 0.25
        while time.time() < end:
            try:
                c.read_frame(max(0.01, end - time.time()))
            except Fail:
                pass
    took = time.time() - t0
    r = c.responses.get(sid)
    check(r is not None and r.status == 408, f"after {took:.1f} s: "
          f"{'no answer' if r is None else f'status {r.status}, reset {r.reset}'}")
    check(0.9 <= took < 2.5, f"answered after {took:.2f} s")
    c.ping()
    check(c.get("/").status == 200, "the connection did not go on")
    check(metric(env, "h2_limits_total", 'limit="body_min_rate"') >= 1, "not counted")


@case("attacks")
def memory_bounded(env):
    """After every attack above, keel's memory is where it was, give or take."""
    grown = env.k.rss_kib() - env.rss0
    check(grown < 64 * 1024, f"RSS grew by {grown} KiB")
