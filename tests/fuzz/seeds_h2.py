#!/usr/bin/env python3
"""tests/fuzz/seeds_h2.py — writes corpus/h2, corpus/hpack and corpus/h2frame
(stdlib only).

corpus/h2: client byte streams for fuzz_h2, each with its leading byte (the
split seed; bit 7 clear: the harness puts the preface and an empty SETTINGS
in front, bit 7 set: the stream carries its own). Valid requests to the
handlers the harness compiles in (hello, h2test), with CONTINUATION, DATA,
trailers, PING, SETTINGS, WINDOW_UPDATE, RST_STREAM, PRIORITY, GOAWAY.

corpus/hpack: fuzz_hpack inputs: a limit byte, then blocks, each a 2-byte
length and the block: RFC 7541 Appendix C's requests and responses, size
updates, and literals of every kind.

corpus/h2frame: fuzz_h2frame inputs: a frame size byte, then the client
streams of corpus/h2 without the preface, and a frame for each check the
frame codec makes.

    python3 tests/fuzz/seeds_h2.py

Files are named by content, so running it again rewrites the same ones;
regress-* files (inputs that once crashed a harness) are left alone.
"""
import hashlib
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0, 1, 2, 3, 4
PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20


def frame(type_, flags, sid, payload=b""):
    """RFC 9113 4.1: 24-bit length, type, flags, 31-bit stream id."""
    return struct.pack(">I", len(payload))[1:] + bytes([type_, flags]) + \
        struct.pack(">I", sid) + payload


def hint(v, prefix, first=0):
    """RFC 7541 5.1: an integer with an N-bit prefix."""
    top = (1 << prefix) - 1
    if v < top:
        return bytes([first | v])
    out = [first | top]
    v -= top
    while v >= 128:
        out.append(0x80 | (v & 0x7F))
        v >>= 7
    out.append(v)
    return bytes(out)


def hstr(s):
    """RFC 7541 5.2: a string literal without Huffman coding."""
    if isinstance(s, str):
        s = s.encode()
    return hint(len(s), 7) + s


# RFC 7541 Appendix A, the entries a request uses.
STATIC = {(":authority", ""): 1, (":method", "GET"): 2, (":method", "POST"): 3,
          (":path", "/"): 4, (":scheme", "http"): 6, (":scheme", "https"): 7}
STATIC_NAMES = {":authority": 1, ":method": 2, ":path": 4, ":scheme": 6,
                "accept-encoding": 16, "content-length": 28, "content-type": 31,
                "cookie": 32, "user-agent": 58}


def block(fields, index=True):
    """A header block: indexed where the static table has the field, else a
    literal with incremental indexing (6.2.1) or, index=False, without
    (6.2.2)."""
    out = b""
    for name, value in fields:
        if (name, value) in STATIC:
            out += hint(STATIC[(name, value)], 7, 0x80)
            continue
        pattern, prefix = (0x40, 6) if index else (0x00, 4)
        if name in STATIC_NAMES:
            out += hint(STATIC_NAMES[name], prefix, pattern)
        else:
            out += bytes([pattern]) + hstr(name)
        out += hstr(value)
    return out


def request(method, path, extra=()):
    return [(":method", method), (":scheme", "http"), (":path", path),
            (":authority", "localhost")] + list(extra)


def h2_streams():
    """Client frame streams, after the preface (shared by corpus/h2 and
    corpus/h2frame)."""
    s = {}
    get = block(request("GET", "/"))
    s["get"] = frame(HEADERS, END_STREAM | END_HEADERS, 1, get)
    s["get-hello"] = frame(HEADERS, END_STREAM | END_HEADERS, 1,
                           block(request("GET", "/hello/fuzz")))
    # Three streams on one connection: the dynamic table carries over.
    s["three-streams"] = b"".join(
        frame(HEADERS, END_STREAM | END_HEADERS, sid,
              block(request("GET", p, [("user-agent", "fuzz")])))
        for sid, p in ((1, "/"), (3, "/headers"), (5, "/h2test/head")))
    # A block cut in three: HEADERS and two CONTINUATIONs (6.10).
    big = block(request("GET", "/headers", [("x-a", "a" * 40), ("x-b", "b" * 40)]))
    s["continuation"] = (frame(HEADERS, END_STREAM, 1, big[:20]) +
                         frame(CONTINUATION, 0, 1, big[20:60]) +
                         frame(CONTINUATION, END_HEADERS, 1, big[60:]))
    # A POST with a body in two DATA frames, one padded (6.1).
    post = block(request("POST", "/echo", [("content-type", "text/plain"),
                                           ("content-length", "11")]))
    s["post-data"] = (frame(HEADERS, END_HEADERS, 1, post) +
                      frame(DATA, 0, 1, b"hello") +
                      frame(DATA, END_STREAM | PADDED, 1, b"\x03" + b" world" + b"\0\0\0"))
    # A body without content-length, then trailers (8.1).
    s["post-trailers"] = (frame(HEADERS, END_HEADERS, 1,
                                block(request("POST", "/h2test/head"))) +
                          frame(DATA, 0, 1, b"x" * 100) +
                          frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                block([("x-trailer", "t")], index=False)))
    s["slow-late"] = (frame(HEADERS, END_HEADERS, 1,
                            block(request("POST", "/h2test/late?ms=5"))) +
                      frame(DATA, END_STREAM, 1, b"y" * 300))
    s["stream"] = frame(HEADERS, END_STREAM | END_HEADERS, 1,
                        block(request("GET", "/stream?n=3")))
    s["big-window"] = (frame(HEADERS, END_STREAM | END_HEADERS, 1,
                             block(request("GET", "/h2test/big?n=100000"))) +
                       frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)) +
                       frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 20)))
    s["status-304"] = frame(HEADERS, END_STREAM | END_HEADERS, 1,
                            block(request("GET", "/h2test/status?code=304")))
    s["ping"] = frame(PING, 0, 0, b"12345678") + frame(PING, ACK, 0, b"87654321")
    s["settings"] = (frame(SETTINGS, 0, 0,
                           struct.pack(">HI", 1, 0) +        # HEADER_TABLE_SIZE
                           struct.pack(">HI", 2, 0) +        # ENABLE_PUSH
                           struct.pack(">HI", 4, 1 << 20) +  # INITIAL_WINDOW_SIZE
                           struct.pack(">HI", 5, 1 << 15) +  # MAX_FRAME_SIZE
                           struct.pack(">HI", 6, 8192)) +    # MAX_HEADER_LIST_SIZE
                     frame(SETTINGS, ACK, 0) +
                     frame(HEADERS, END_STREAM | END_HEADERS, 1, get))
    s["window-update"] = (frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000)) +
                          frame(HEADERS, END_STREAM | END_HEADERS, 1, get) +
                          frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1000)))
    s["rst-stream"] = (frame(HEADERS, END_HEADERS, 1,
                             block(request("POST", "/h2test/late?ms=50"))) +
                       frame(RST_STREAM, 0, 1, struct.pack(">I", 8)) +      # CANCEL
                       frame(HEADERS, END_STREAM | END_HEADERS, 3, get))
    s["priority"] = (frame(PRIORITY, 0, 3, struct.pack(">IB", 1, 16)) +
                     frame(HEADERS, END_STREAM | END_HEADERS | PRIO, 1,
                           struct.pack(">IB", 0, 255) + get))
    s["goaway"] = (frame(HEADERS, END_STREAM | END_HEADERS, 1, get) +
                   frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0) + b"bye"))
    s["headers-padded"] = frame(HEADERS, END_STREAM | END_HEADERS | PADDED, 1,
                                b"\x04" + get + b"\0\0\0\0")
    s["never-indexed"] = frame(HEADERS, END_STREAM | END_HEADERS, 1,
                               get + b"\x10" + hstr("authorization") + hstr("secret") +
                               hint(32, 4, 0x10) + hstr("a=b"))
    s["size-update"] = frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\x3f\xe1\x01" + get)
    return s


def h2_seeds():
    s = h2_streams()
    get = block(request("GET", "/"))
    out = {}
    for name, data in s.items():
        out[name] = bytes([0]) + data       # whole, preface by the harness
        out[name + "-cut"] = bytes([7]) + data  # in pieces
    # The preface in the input itself (bit 7 of the first byte).
    out["own-preface"] = bytes([0x80]) + PREFACE + frame(SETTINGS, 0, 0) + s["get"]
    out["own-preface-cut"] = bytes([0x83]) + PREFACE + frame(SETTINGS, 0, 0) + s["post-data"]
    out["http1-instead"] = bytes([0x80]) + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    return out


def h2frame_seeds():
    """fuzz_h2frame: the frame size byte (1 + it * 64 bytes for re-encoded
    header blocks), then frames: the client streams, and frames each codec
    check refuses (RFC 9113 6)."""
    bad = {
        "data-stream-0": frame(DATA, 0, 0, b"x"),
        "data-pad-too-long": frame(DATA, PADDED, 1, b"\x05abcd"),
        "data-padded-empty": frame(DATA, PADDED, 1),
        "headers-pad-too-long": frame(HEADERS, END_HEADERS | PADDED, 1, b"\x09\x82"),
        "headers-priority-short": frame(HEADERS, END_HEADERS | PRIO, 1, b"\0\0\0"),
        "priority-length": frame(PRIORITY, 0, 1, b"\0\0\0\0\0\0"),
        "rst-length": frame(RST_STREAM, 0, 1, b"\0\0\0"),
        "settings-values": frame(SETTINGS, 0, 0, struct.pack(">HI", 2, 2) +
                                 struct.pack(">HI", 4, 1 << 31) +
                                 struct.pack(">HI", 5, 1 << 24)),
        "settings-ack-payload": frame(SETTINGS, ACK, 0, b"\0" * 6),
        "settings-stream": frame(SETTINGS, 0, 1),
        "ping-length": frame(PING, 0, 0, b"1234567"),
        "goaway-short": frame(GOAWAY, 0, 0, b"\0" * 7),
        "window-update-zero": frame(WINDOW_UPDATE, 0, 1, b"\x80\0\0\0"),
        "unknown-type": frame(0x20, 0xff, 3, b"??"),
    }
    out = {}
    for name, data in h2_streams().items():
        out[name] = bytes([255]) + data
    out["continuation-1-byte-frames"] = bytes([0]) + h2_streams()["continuation"]
    for name, data in bad.items():
        out[name] = bytes([0]) + data
    return out


def hpack_seeds():
    def blocks(*bs):
        return b"".join(struct.pack(">H", len(b)) + b for b in bs)

    x = bytes.fromhex
    c3 = (x("828684410f7777772e6578616d706c652e636f6d"), x("828684be58086e6f2d6361636865"),
          x("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
    c4 = (x("828684418cf1e3c2e5f23a6ba0ab90f4ff"), x("828684be5886a8eb10649cbf"),
          x("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))
    c5 = (x("3fe101") + x("4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032"
                           "303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d"),
          x("4803333037c1c0bf"),
          x("88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a6970"
            "7738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d61"
            "67653d333630303b2076657273696f6e3d31"))
    c6 = (x("3fe101") + x("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff"
                           "6e919d29ad171863c78f0b97c8e9ae82ae43d3"),
          x("4883640effc1c0bf"),
          x("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2"
            "e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"))
    s = {
        "c3-requests": bytes([64]) + blocks(*c3),
        "c4-requests-huffman": bytes([64]) + blocks(*c4),
        "c5-responses": bytes([4]) + blocks(*c5),
        "c6-responses-huffman": bytes([4]) + blocks(*c6),
        "c2-literals": bytes([64]) + blocks(
            x("400a637573746f6d2d6b65790d637573746f6d2d686561646572"),
            x("040c2f73616d706c652f70617468"),
            x("100870617373776f726406736563726574"), x("82"), x("be")),
        "eviction": bytes([64]) + blocks(x("3f45") + block([("a", "1"), ("b", "2")]),
                                          block([("c", "3")]), x("bebf"), x("20"), x("be")),
        "evicted-name": bytes([64]) + blocks(x("3f27") + block([("name", "1")]), x("7e023232")),
        "size-updates": bytes([1]) + blocks(x("203f21"), x("3f22"), x("82")),
        "long-value": bytes([64]) + blocks(block([("x-long", "v" * 300)], index=False),
                                           block([("x-long", "w" * 5000)])),
    }
    return s


def write(dirname, seeds):
    out = os.path.join(here, "corpus", dirname)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        digest = hashlib.sha1(data).hexdigest()[:12]
        with open(os.path.join(out, name + "-" + digest), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), out), file=sys.stderr)


if __name__ == "__main__":
    write("h2", h2_seeds())
    write("hpack", hpack_seeds())
    write("h2frame", h2frame_seeds())
