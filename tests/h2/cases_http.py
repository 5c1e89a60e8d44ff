"""tests/h2/cases_http.py — RFC 9113 8 and RFC 9110: the exchange (8.1), content-
length (8.1.1), fields (8.2), pseudo-fields (8.3), push (8.4), CONNECT (8.5);
issue 23's checks of each request before anything is routed or forwarded.

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

import time

from h2lib import NO_ERROR, PROTOCOL_ERROR, Conn, DataFrame, Fail, RstStreamFrame, check
from h2cases import (case, raw_frame, lit, GET_ROOT, plain, req_fields, settled, conn_error,
                     stream_error, stream_or_conn_error, open_stream, answered, quiesce)


@case("conformance")
def head_has_no_body(env):
    """RFC 9110 9.3.2: HEADERS with END_STREAM, no DATA."""
    c = Conn(env.k.port())
    r = c.get("/", method="HEAD")
    check(r.status == 200 and r.body == b"" and not r.frames, f"{r.status} {r.body!r}")


@case("conformance")
def authority_stands_for_host(env):
    """8.3.1: :authority is what the handler sees as Host; version 20."""
    c = Conn(env.k.port())
    r = c.get("/h2test/head?x=1", authority="example.test:8443")
    check(b"host=example.test:8443\n" in r.body, r.body)
    check(b"version=20\n" in r.body and b"target=/h2test/head?x=1\n" in r.body, r.body)


@case("conformance")
def cookies_are_joined(env):
    """8.2.3: cookie crumbs in separate fields reach the handler joined."""
    c = Conn(env.k.port())
    r = c.get("/h2test/head", fields=[("cookie", "a=1"), ("x-y", "z"), ("cookie", "b=2")])
    check(b"cookie=a=1; b=2\n" in r.body, r.body)


@case("conformance")
def post_without_length(env):
    """8.1.1: no content-length: the body ends with END_STREAM."""
    c = Conn(env.k.port())
    r = c.response(c.request("/echo", method="POST", body=b"abc" * 1000))
    check(r.status == 200 and r.body == b"abc" * 1000, f"{r.status} {r.body[:20]!r}")


@case("conformance")
def response_trailers(env):
    """8.1: trailers after DATA close the stream."""
    c = Conn(env.k.port())
    r = c.get("/stream?n=3")
    check(r.status == 200 and r.body.count(b"chunk") == 3, r.body)
    check(("x-stream-chunks", "3") in r.trailers, f"trailers {r.trailers}")


@case("conformance")
def request_trailers_accepted(env):
    """8.1: a request may end with a trailer section."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send(c.headers_frame(sid, [("x-trailer", "1")], end_stream=True))
    r = c.response(sid)
    check(r.status == 200 and r.body == b"hello", f"{r.status} {r.body!r}")


@case("conformance")
def request_trailers_reach_the_handler(env):
    """8.1: the trailer section's fields reach the handler once it has read
    the body (ABI 1.5), less those RFC 9110 6.5.1 keeps out of trailers;
    read whole or streamed alike."""
    for route in ("/trailers/read", "/trailers/stream"):
        c = Conn(env.k.port())
        sid = c.request(route, method="POST", end_stream=False)
        c.send_data(sid, b"hello ", end_stream=False)
        c.send_data(sid, b"world", end_stream=False)
        c.send(c.headers_frame(sid, [("x-checksum", "c0ffee"), ("host", "evil"),
                                     ("x-other", "two words")], end_stream=True))
        r = c.response(sid)
        text = r.body.decode()
        check(r.status == 200, f"{route}: {r.status} {text}")
        check("before=0\n" in text and "body=11\n" in text and "count=2\n" in text,
              f"{route}: {text}")
        check("x-checksum: c0ffee\n" in text and "x-other: two words\n" in text
              and "host" not in text, f"{route}: {text}")
        check("lookup=c0ffee\n" in text, f"{route}: {text}")

    # No trailers: none seen.
    c = Conn(env.k.port())
    sid = c.request("/trailers/read", method="POST", end_stream=False)
    c.send_data(sid, b"abc", end_stream=True)
    r = c.response(sid)
    check(r.status == 200 and b"count=0\n" in r.body, r.body)


@case("conformance")
def uppercase_field_name(env):
    """8.2.1: an uppercase field name makes the request malformed."""
    c = Conn(env.k.port())
    c.expect_rst(c.request("/", fields=[("X-Upper", "1")]), PROTOCOL_ERROR)


@case("conformance")
def connection_specific_field(env):
    """8.2.2: Connection in a request: malformed."""
    c = Conn(env.k.port())
    c.expect_rst(c.request("/", fields=[("connection", "close")]), PROTOCOL_ERROR)


@case("conformance")
def missing_path(env):
    """8.3.1: no :path: malformed."""
    c = Conn(env.k.port())
    sid = c.new_id()
    c.send(c.headers_frame(sid, [(":method", "GET"), (":scheme", "http"),
                                 (":authority", "x")]))
    c.expect_rst(sid, PROTOCOL_ERROR)


@case("conformance")
def content_length_mismatch(env):
    """8.1.1: DATA not matching content-length: malformed."""
    c = Conn(env.k.port())
    sid = c.request("/echo", method="POST", fields=[("content-length", "10")], end_stream=False)
    c.send_data(sid, b"12345", end_stream=True)
    c.expect_rst(sid, PROTOCOL_ERROR)


@case("conformance")
def connection_fields_not_sent(env):
    """8.2.2: no connection-specific field in a response."""
    c = Conn(env.k.port())
    r = c.get("/probe/hop")
    names = {k for k, _ in r.headers}
    bad = names & {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
    check(r.status == 200 and not bad, f"{r.status} {bad}")


@case("conformance")
def push_promise_from_client(env):
    """8.4: a client cannot push: PUSH_PROMISE from it is a connection error
    PROTOCOL_ERROR."""
    c = settled(env)
    sid = open_stream(c)
    conn_error(env, raw_frame(0x5, 0x4, sid, (2).to_bytes(4, "big") + GET_ROOT),
               PROTOCOL_ERROR, c)


@case("conformance")
def second_headers_without_end_stream(env):
    """8.1: a second HEADERS (trailers) without END_STREAM: malformed,
    PROTOCOL_ERROR (h2spec 8.1/1; stream or connection error)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send_raw(raw_frame(0x1, 0x4, sid, plain([("x-trailer", "1")])))
    stream_or_conn_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def trailers_with_pseudo_field(env):
    """8.1, 8.3: a pseudo-field in trailers: malformed, RST_STREAM
    PROTOCOL_ERROR (h2spec 8.1.2.1/3)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send_raw(raw_frame(0x1, 0x5, sid, plain([(":method", "POST"), ("x-trailer", "1")])))
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def trailers_with_long_pseudo_field(env):
    """8.1: a pseudo-field in trailers, long enough that keeping it would
    have grown the memory the request's head lives in while the core (and
    the access log, at the reset) still read the head: refused before any
    copy, RST_STREAM PROTOCOL_ERROR (an attack review found the
    use-after-free; make test-asan reports it if it comes back)."""
    c = settled(env)
    sid = c.request("/h2test/late?ms=200", method="POST", end_stream=False)
    c.send_data(sid, b"hello", end_stream=False)
    c.send_raw(raw_frame(0x1, 0x5, sid, plain([(":path", "/" + "a" * 2000)])))
    stream_error(c, sid, PROTOCOL_ERROR)
    time.sleep(0.3)  # the late handler finishes before the suite goes on
    check(env.k.alive(), "keel died")


@case("conformance")
def content_length_exceeded(env):
    """8.1.1: more DATA than content-length, over several frames:
    malformed, RST_STREAM PROTOCOL_ERROR (h2spec 8.1.2.6/2)."""
    c = settled(env)
    sid = c.request("/echo", method="POST", fields=[("content-length", "8")], end_stream=False)
    c.send_data(sid, b"12345", end_stream=False)
    c.send_data(sid, b"67890", end_stream=True)
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def content_length_without_data(env):
    """8.1.1: a content-length above 0 on a HEADERS with END_STREAM (no
    DATA can follow): malformed, RST_STREAM PROTOCOL_ERROR."""
    c = settled(env)
    sid = c.request("/echo", method="POST", fields=[("content-length", "3")], end_stream=True)
    stream_error(c, sid, PROTOCOL_ERROR)


@case("conformance")
def content_length_matching_accepted(env):
    """8.1.1: a content-length matching the DATA over several frames, and
    a content-length of 0 with END_STREAM on the HEADERS, are taken."""
    c = settled(env)
    sid = c.request("/echo", method="POST", fields=[("content-length", "10")], end_stream=False)
    c.send_data(sid, b"12345", end_stream=False)
    c.send_data(sid, b"67890", end_stream=False)
    c.send(DataFrame(sid, b"", flags=["END_STREAM"]))
    r = c.response(sid)
    check(r.status == 200 and r.body == b"1234567890", f"{r.status} {r.reset} {r.body!r}")
    r = c.get("/echo", method="POST", fields=[("content-length", "0")])
    check(r.status == 200 and r.body == b"", f"{r.status} {r.reset} {r.body!r}")


def each_malformed(env, field_lists, what):
    """Each field list on its own stream of one connection: each stream
    reset PROTOCOL_ERROR (8.1.1), the connection going on."""
    c = settled(env)
    for fields in field_lists:
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x5, sid, plain(fields)))
        try:
            stream_error(c, sid, PROTOCOL_ERROR)
        except Fail as e:
            raise Fail(f"{what} {fields}: {e}")
    check(c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def connection_specific_fields(env):
    """8.2.2: keep-alive, proxy-connection, transfer-encoding and upgrade
    in a request, and TE other than "trailers": malformed (h2spec
    8.1.2.2/1, 8.1.2.2/2)."""
    each_malformed(env, [req_fields() + [(n, v)] for n, v in (
        ("keep-alive", "timeout=5"), ("proxy-connection", "keep-alive"),
        ("transfer-encoding", "chunked"), ("upgrade", "h2c"), ("te", "gzip"),
        ("te", "trailers, deflate"))], "connection-specific")


@case("conformance")
def te_trailers_accepted(env):
    """8.2.2: TE: trailers is the one TE a request may carry."""
    c = Conn(env.k.port())
    r = c.get("/", fields=[("te", "trailers")])
    check(r.status == 200, f"{r.status} {r.reset}")


@case("conformance")
def field_value_invalid(env):
    """8.2.1: a field value with NUL, CR or LF, or with whitespace at
    either end: malformed."""
    each_malformed(env, [req_fields() + [("x-v", v)] for v in (
        "a\0b", "a\rb", "a\nb", " lead", "trail ", "\ttab", "tab\t")], "field value")


@case("conformance")
def field_name_invalid(env):
    """8.2.1: a field name with a space, a colon past its start, a
    non-ASCII byte, or empty: malformed (h2spec 8.1.2/1 for uppercase)."""
    each_malformed(env, [req_fields() + [(n, "v")] for n in (
        "x y", "x:y", b"x\xc3\xa9", "")], "field name")


@case("conformance")
def field_value_inner_space_accepted(env):
    """8.2.1: whitespace inside a value, and an empty value, are fine."""
    c = Conn(env.k.port())
    r = c.get("/headers", fields=[("x-inner", "a  b\tc"), ("x-empty", "")])
    check(r.status == 200 and b"x-inner: a  b\tc\n" in r.body and b"x-empty: \n" in r.body,
          f"{r.status} {r.body!r}")


class RawBlocks:
    """Requests as header blocks of our own making, each on a new stream of
    one connection, which nothing else encodes on: the server's dynamic
    table is the case's to track."""

    def __init__(self, env, prefix=b""):
        self.c = settled(env)
        self.prefix = prefix

    def send(self, block):
        sid = self.c.new_id()
        self.c.send_raw(raw_frame(0x1, 0x5, sid, self.prefix + block))
        return sid

    def malformed(self, block, what):
        try:
            stream_error(self.c, self.send(block), PROTOCOL_ERROR)
        except Fail as e:
            raise Fail(f"{what}: {e}")

    def fine(self, block, want, what):
        r = self.c.response(self.send(block))
        check(r.reset is None and r.status == 200 and want in r.body,
              f"{what}: {r.status} {r.reset} {r.body!r}")


@case("conformance")
def indexed_fields_checked_each_time(env):
    """RFC 7541 2.3.2, RFC 9113 8.2.1: a field of a dynamic table entry is
    checked whenever a block refers to it (h2 remembers that an entry was
    valid, never that it was not), and reaches the handler each time; a
    literal value under an entry's name is checked on its own; fields of the
    static table arrive as the table has them."""
    b = RawBlocks(env, plain(req_fields(path="/headers")))
    malformed, fine = b.malformed, b.fine

    # Added with incremental indexing (6.2.1), then referred to (6.1): 62
    # is the newest entry, 63 the one before.
    malformed(b"\x40" + lit("x-bad") + lit("a\rb"), "an invalid value, added")
    malformed(b"\xbe", "the invalid entry again")
    malformed(b"\xbe", "and again")
    fine(b"\x40" + lit("x-good") + lit("fine"), b"x-good: fine\n", "a valid field, added")
    fine(b"\xbe", b"x-good: fine\n", "the valid entry again")
    fine(b"\xbe", b"x-good: fine\n", "and again")
    malformed(b"\xbf", "the invalid entry, now older")
    # Its name by the entry (index 62: 15 + 47), a literal value (6.2.2).
    malformed(b"\x0f\x2f" + lit("nul\0"), "an invalid value under a valid entry's name")
    fine(b"\x0f\x2f" + lit("other"), b"x-good: other\n", "a valid value under its name")
    malformed(b"\x40" + lit("X-Up") + lit("v"), "an invalid name, added")
    malformed(b"\xbe", "the invalid name's entry again")
    # The static table: :method GET (2), :scheme http (6) whole, a
    # user-agent name (58: 15 + 43) with a literal value.
    b.prefix = b""
    fine(b"\x82\x86\x04" + lit("/headers") + b"\x01" + lit("x") + b"\x0f\x2b" + lit("ua"),
         b"user-agent: ua\n", "static")


@case("conformance")
def indexed_pseudo_fields_checked(env):
    """8.3.1 with RFC 7541's tables: a pseudo-field's value from a dynamic
    entry is held to its grammar each time unless it once passed (h2
    remembers a pass, never a failure); from the static table it is the
    table's (GET, http, "/")."""
    b = RawBlocks(env)
    malformed = b.malformed

    def fine(block, what):
        b.fine(block, b"host: example.test\n", what)

    get, http = b"\x82", b"\x86"
    path = b"\x04" + lit("/headers")  # :path by its static name, not added

    # Entries are added at 62 (6.2.1: 0x40 | the name's static index), the
    # older ones moving up by one; the table after each block is noted.
    malformed(get + http + path + b"\x41" + lit("a b"), ":authority not an authority, added")
    malformed(get + http + path + b"\xbe", "the same again")            # 62 "a b"
    fine(get + http + path + b"\x41" + lit("example.test"), "a valid :authority, added")
    fine(get + http + path + b"\xbe", "the valid one again")             # 62 example.test
    fine(get + http + path + b"\xbe", "and again")
    malformed(get + http + path + b"\xbf", "the invalid one, older")    # 63 "a b"
    malformed(b"\x42" + lit("G(T") + http + path + b"\xbf", ":method not a token, added")
    malformed(b"\xbe" + http + path + b"\xbf", "the same again")        # 62 G(T, 63 example.test
    fine(get + http + b"\x44" + lit("/headers") + b"\xc0", "a :path added")
    fine(get + http + b"\xbe" + b"\xc0", "the :path again")             # 62 /headers
    malformed(get + http + b"\x44" + lit("/a#b") + b"\xc1", "a :path with a fragment, added")
    malformed(get + http + b"\xbe" + b"\xc1", "the same again")         # 62 /a#b, 65 example.test
    malformed(get + b"\x47" + lit("1http") + path + b"\xc2", "a :scheme not a scheme, added")
    malformed(get + b"\xbe" + path + b"\xc2", "the same again")         # 62 1http, 66 example.test


@case("conformance")
def long_heads_and_trailers_kept_whole(env):
    """A head and trailers larger than the stream's first memory (512
    bytes): what came before it grew reaches the handler unchanged,
    beside names of the static table (not copied) and long values."""
    c = settled(env)
    fields = [("user-agent", "u" * 100)] + [(f"x-f{i}", chr(97 + i) * 60) for i in range(20)]
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x5, sid, plain(req_fields(path="/headers", authority="a" * 200) +
                                               fields)))
    r = c.response(sid)
    check(r.status == 200, f"{r.status} {r.reset}")
    for n, v in fields:
        check(f"{n}: {v}\n".encode() in r.body, f"{n} missing or changed: {r.body!r}")
    check(b"host: " + b"a" * 200 + b"\n" in r.body, r.body)

    trailers = [(f"x-t{i}", chr(97 + i) * 300) for i in range(4)]
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields(path="/trailers/read", method="POST"))))
    c.send(DataFrame(sid, b"body"))
    c.send_raw(raw_frame(0x1, 0x5, sid, plain(trailers)))
    r = c.response(sid)
    text = r.body.decode()
    check(r.status == 200 and "count=4\n" in text, f"{r.status} {text}")
    for n, v in trailers:
        check(f"{n}: {v}\n" in text, f"trailer {n} missing or changed: {text}")


@case("conformance")
def pseudo_fields_malformed(env):
    """8.3, 8.3.1: missing :method or :scheme, empty :path, a duplicated
    :method, :scheme or :path, an unknown pseudo-field (:foo), a response
    pseudo-field (:status) in a request, a pseudo-field after a regular
    field: malformed (h2spec 8.1.2.1, 8.1.2.3)."""
    base = dict(req_fields())

    def without(name):
        return [(k, v) for k, v in base.items() if k != name]
    each_malformed(env, [
        without(":method"),
        without(":scheme"),
        [(k, "" if k == ":path" else v) for k, v in base.items()],
        req_fields() + [(":method", "GET")],
        req_fields() + [(":scheme", "http")],
        req_fields() + [(":path", "/")],
        req_fields() + [(":foo", "bar")],
        req_fields() + [(":status", "200")],
        req_fields()[:2] + [("x-a", "1")] + req_fields()[2:],
    ], "pseudo-fields")


@case("conformance")
def connect_pseudo_fields(env):
    """8.5: CONNECT without :authority, or with :scheme or :path: malformed;
    a well-formed one is answered (501: no tunnels here)."""
    each_malformed(env, [
        [(":method", "CONNECT")],
        [(":method", "CONNECT"), (":authority", "x:443"), (":path", "/")],
        [(":method", "CONNECT"), (":authority", "x:443"), (":scheme", "http")],
    ], "CONNECT")
    c = settled(env)
    c.send_raw(raw_frame(0x1, 0x5, 1, plain([(":method", "CONNECT"), (":authority", "x:443")])))
    r = c.response(1)
    check(r.status == 501, f"{r.status} {r.reset}")


@case("conformance")
def head_response_of_a_file(env):
    """8.1, RFC 9110 9.3.2: HEAD of a file: its content-length, no DATA
    frame, the stream ended by the HEADERS."""
    c = Conn(env.k.port())
    r = c.get("/files/big.bin", method="HEAD")
    check(r.status == 200 and not r.frames and r.body == b"", f"{r.status} {len(r.frames)} DATA")
    check(r.header("content-length") == "300000", f"{r.headers}")


@case("conformance")
def path_fragment_never_routed(env):
    """8.3.1, RFC 9110 4.2.4: `#` in :path is refused, wherever it is. The
    fragment never travels, and the core resolves the dot segments after
    it: `/admin#/../h2test/head` was routed as /h2test/head while an
    upstream would serve /admin (a route and ACL bypass, issue 23)."""
    c = settled(env)
    r = answered(c, req_fields("/h2test/head"), "the route itself")
    check(r.status == 200, f"/h2test/head: {r.status}")
    each_malformed(env, [req_fields(p) for p in (
        "/admin#/../h2test/head", "/admin%2F#/../h2test/head", "/h2test/head#",
        "/h2test/head?a=1#frag", "/#", "#")], "fragment")


@case("conformance")
def path_origin_form_only(env):
    """8.3.1: :path is the path and query of the target (origin-form), or
    `*` for OPTIONS only: absolute-form, authority-form, a relative path
    or `*` for another method is malformed."""
    each_malformed(env, [req_fields(p, method=m) for m, p in (
        ("GET", "http://x/h2test/head"), ("GET", "https://evil.example/"),
        ("GET", "x:80"), ("GET", "h2test/head"), ("GET", "?a=1"), ("GET", "*"),
        ("POST", "*"), ("OPTIONS", "*x"), ("OPTIONS", "http://x/"))], "form")
    c = settled(env)
    answered(c, req_fields("*", method="OPTIONS"), "OPTIONS *")
    answered(c, req_fields("//x/h2test/head"), "origin-form with an empty segment")


@case("conformance")
def path_characters(env):
    """8.3.1 with http1's request-target set (RFC 3986: VCHAR but `#`): a
    space, a tab, a control byte, DEL or a byte above 0x7e in :path is
    malformed. `GET /admin /public` was forwarded as an HTTP/1.1 request
    line with four words (issue 23)."""
    each_malformed(env, [req_fields(p) for p in (
        "/admin /public", "/a\tb", "/a\x01b", "/a\x1bb", "/a\x7fb", b"/caf\xc3\xa9",
        "/a\x0bb", "/a\x0cb")], "path byte")
    c = settled(env)
    r = answered(c, req_fields("/h2test/head?q=a/b?c&d=%20e!$'()*+,;=:@~-._\"<>{}|\\^`[]"),
                 "every VCHAR but #")
    check(r.status == 200, f"{r.status} {r.body!r}")


@case("conformance")
def method_must_be_token(env):
    """8.3.1, RFC 9110 9.1, 5.6.2: :method is a token (tchar only): a space,
    a tab, a delimiter, a control byte or an empty value is malformed; any
    token is a method (answered 405/501 by the core, not reset)."""
    each_malformed(env, [[(":method", m), (":scheme", "http"), (":path", "/"),
                          (":authority", "x")] for m in (
        "G T", "GET /admin", "G\tT", "GET/", "GE(T", 'G"T', "GE\x01T", b"G\xc3\xa9T", "",
        "GET:")], "method")
    c = settled(env)
    answered(c, req_fields("/", method="X-CUSTOM!~"), "a token method")


@case("conformance")
def scheme_syntax(env):
    """8.3.1, RFC 3986 3.1: :scheme is ALPHA *( ALPHA / DIGIT / + / - / . )."""
    each_malformed(env, [[(":method", "GET"), (":scheme", s), (":path", "/"),
                          (":authority", "x")] for s in (
        "ht tp", "1http", "", "http:", "http://", "ht/tp", "-http", "h\x01")], "scheme")
    c = settled(env)
    for s in ("https", "coap+tcp", "a.b-c"):
        answered(c, [(":method", "GET"), (":scheme", s), (":path", "/"), (":authority", "x")],
                 "scheme")


@case("conformance")
def authority_syntax(env):
    """8.3.1, RFC 3986 3.2.2, RFC 9110 4.2.1: :authority is host [":" port]
    (a reg-name, an IPv4 address or an [IP-literal]; digits for the port),
    without userinfo; an http(s) request needs a non-empty one (or a Host
    field)."""
    each_malformed(env, [req_fields("/h2test/head", authority=a) for a in (
        "user@x", "user:pw@x:80", "x@evil.example", "x y", "x\ty", "x/y", "x?y", "x#y",
        "x:8a", "x:80:80", "[::1", "[::1]x", ":80", "", "x\x01", b"caf\xc3\xa9.example",
        "x%zz", "x\\y")], "authority")
    c = settled(env)
    for a in ("example.test:8443", "127.0.0.1:80", "[::1]:8080", "a-b_c~d.EXAMPLE",
              "%41.example", "x:", "[v1.fe]"):
        r = answered(c, req_fields("/h2test/head", authority=a), "authority")
        check(r.status == 200 and f"host={a}\n".encode() in r.body, f"{a}: {r.body!r}")
    each_malformed(env, [[(":method", "GET"), (":scheme", s), (":path", "/")]
                         for s in ("http", "https")], "no :authority nor host")


@case("conformance")
def host_must_match_authority(env):
    """8.3.1: a Host field that differs from :authority is malformed (the
    two compared normalized, RFC 3986 6.2.2, 6.2.3: the host ignoring case,
    an absent port the scheme's); Host twice, or an invalid Host standing
    for a missing :authority, is malformed too. Without :authority, Host is
    the request's authority as before."""
    each_malformed(env, [
        req_fields("/h2test/head", authority="x") + [("host", "evil.example")],
        req_fields("/h2test/head", authority="x") + [("host", "x:8080")],
        req_fields("/h2test/head", authority="x:80") + [("host", "x:81")],
        req_fields("/h2test/head", authority="x") + [("host", "x"), ("host", "x")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/h2test/head"),
         ("host", "a b")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/h2test/head"),
         ("host", "u@x")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/h2test/head"),
         ("host", "x"), ("host", "y")],
    ], "host")
    c = settled(env)
    for auth, host in (("x", "x"), ("Example.Test", "example.test"), ("x", "x:80"),
                       ("x:80", "X"), ("[::1]", "[::1]:80")):
        r = answered(c, req_fields("/h2test/head", authority=auth) + [("host", host)],
                     "host")
        check(r.status == 200, f"{auth} / {host}: {r.status}")
    r = answered(c, [(":method", "GET"), (":scheme", "https"), (":path", "/h2test/head"),
                     ("host", "example.test")], "Host alone")
    check(b"host=example.test\n" in r.body, r.body)


@case("conformance")
def field_value_control_bytes(env):
    """8.2.1, RFC 9110 5.5: a control byte other than HTAB (or DEL) in any
    field value is malformed: what HTTP/1.1 cannot carry is never handed on
    to a gateway; obs-text (bytes above 0x7f) and inner whitespace are
    fine."""
    each_malformed(env, [req_fields() + [("x-v", v)] for v in (
        "a\x01b", "a\x7fb", "\x1b[31m", "a\x0bb", "a\x0cb", "ab\x08")], "value")
    c = settled(env)
    r = answered(c, req_fields("/headers") + [("x-v", b"caf\xc3\xa9 a\tb")], "obs-text")
    check(r.status == 200, f"{r.status}")


def body_request(c, method, path, length, body, end_stream=True):
    """HEADERS (content-length: length) and DATA (body, END_STREAM) in one
    write: the server reads them in one read."""
    sid = c.new_id()
    hd = plain(req_fields(path, method=method) + [("content-length", str(length))])
    c.send_raw(raw_frame(0x1, 0x4, sid, hd) +
               raw_frame(0x0, 0x1 if end_stream else 0x0, sid, body))
    return sid


@case("conformance")
def unread_body_in_one_read(env):
    """8.1, 8.1.1: a request whose body the handler does not read (405 for
    POST /, 404, hello's GET /) with HEADERS and DATA in one read is
    answered, whole: its DATA still counts toward content-length, so the
    request is not malformed (it was reset PROTOCOL_ERROR and its answer
    dropped: `curl --http2-prior-knowledge -d abc`, issue 23)."""
    c = settled(env)
    for _ in range(3):
        for method, path, status, body in (("POST", "/", 405, None), ("POST", "/nope", 404, None),
                                           ("GET", "/", 200, b"Hello, World!")):
            sid = body_request(c, method, path, 3, b"abc")
            r = c.response(sid)
            check(r.status == status and r.ended and r.reset in (None, NO_ERROR),
                  f"{method} {path}: status {r.status}, reset {r.reset}")
            check(body is None or r.body == body, f"{method} {path}: {r.body!r}")
    quiesce(c)
    for sid, r in c.responses.items():
        check(r.reset in (None, NO_ERROR), f"stream {sid} reset {r.reset}")
    check(c.goaway is None, "GOAWAY")


@case("conformance")
def unread_body_in_separate_reads(env):
    """8.1: the same with the DATA written after the server answered (a
    PING between them). A rest the client may send within its windows is
    awaited and dropped, and the stream ends cleanly, without RST_STREAM
    (curl 7.88 takes a RST_STREAM NO_ERROR in mid-upload for a failure); a
    longer one is stopped with RST_STREAM NO_ERROR after the answer; one
    that never comes, at stream_timeout (1s here), the same. The
    connection goes on."""
    c = settled(env)
    for method, path, status in (("POST", "/", 405), ("GET", "/", 200)):
        sid = c.new_id()
        c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields(path, method=method) +
                                                  [("content-length", "3")])))
        r = c.response(sid)
        quiesce(c)
        check(r.status == status and r.ended and r.reset is None,
              f"{method} {path}: {r.status} reset {r.reset} before the body")
        c.send_raw(raw_frame(0x0, 0x0, sid, b"ab") + raw_frame(0x0, 0x1, sid, b"c"))
        quiesce(c)
        check(r.reset is None, f"{method} {path}: RST_STREAM {r.reset} after the body")
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields("/nope", method="POST") +
                                              [("content-length", "100000")])))
    c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid,
               what="RST_STREAM NO_ERROR for a body beyond the window")
    r = c.responses[sid]
    check(r.status == 404 and r.ended and r.reset == NO_ERROR, f"{r.status} {r.reset}")
    sid = c.new_id()
    c.send_raw(raw_frame(0x1, 0x4, sid, plain(req_fields("/", method="POST") +
                                              [("content-length", "3")])))
    t0 = time.time()
    c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid, timeout=4,
               what="RST_STREAM NO_ERROR at stream_timeout")
    r = c.responses[sid]
    check(r.status == 405 and r.reset == NO_ERROR and time.time() - t0 >= 0.8,
          f"{r.status} {r.reset} after {time.time() - t0:.2f} s")
    check(c.goaway is None and c.get("/").status == 200, "the connection did not go on")


@case("conformance")
def answer_before_reset_of_malformed_body(env):
    """8.1, 8.1.1: DATA that breaks content-length (more, or less with
    END_STREAM) after the handler answered without reading (the answer
    in the same read, not yet written): the answer goes out whole, then
    RST_STREAM PROTOCOL_ERROR (h2spec 8.1.2.6's shape: POST /, length 1,
    DATA "test")."""
    c = settled(env)
    for path, status, length, body, end in (("/", 405, 1, b"test", True),
                                            ("/nope", 404, 3, b"abcdef", True),
                                            ("/nope", 404, 3, b"abcdef", False),
                                            ("/", 405, 10, b"abc", True)):
        sid = body_request(c, "POST", path, length, body, end)
        c.wait_for(lambda f: isinstance(f, RstStreamFrame) and f.stream_id == sid,
                   what=f"RST_STREAM on {path} (length {length}, {len(body)} sent)")
        r = c.responses[sid]
        check(r.reset == PROTOCOL_ERROR, f"{path}: RST_STREAM {r.reset:#x}")
        check(r.status == status and r.ended, f"{path}: the answer did not come whole before "
              f"the reset (status {r.status}, ended {r.ended})")
    quiesce(c)
    check(c.goaway is None, "GOAWAY")
