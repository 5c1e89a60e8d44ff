"""tests/h2/cases_hpack.py — RFC 7541, HPACK: indexes, literals, Huffman strings,
dynamic table size updates and eviction (h2spec's hpack/).

Run by run.py; each case gets `env` (run.py's Env: the keel started for the
suite, and a way to start others).
"""

from h2lib import COMPRESSION_ERROR, Conn, SettingsFrame, check
from h2cases import case, raw_frame, lit, GET_ROOT, settled, conn_error
from hpack.hpack import encode_integer


@case("conformance")
def hpack_bad_index(env):
    """RFC 7541 2.3.3: an index beyond both tables: COMPRESSION_ERROR."""
    c = Conn(env.k.port())
    block = b"\x82\x84\x86" + b"\xff" + bytes(encode_integer(300 - 127, 8))  # index 300
    c.send_raw(raw_frame(0x1, 0x5, 1, block))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_table_size_over_settings(env):
    """RFC 7541 6.3, RFC 9113 4.3: a dynamic table size update above our
    SETTINGS_HEADER_TABLE_SIZE (4096): COMPRESSION_ERROR."""
    c = Conn(env.k.port())
    block = b"\x3f\xe1\x3f" + GET_ROOT  # size update to 8192
    c.send_raw(raw_frame(0x1, 0x5, 1, block))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_index_zero(env):
    """RFC 7541 6.1: an indexed field of index 0: COMPRESSION_ERROR."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x80"), COMPRESSION_ERROR)


@case("conformance")
def hpack_bad_name_index(env):
    """RFC 7541 2.3.3, 6.2.1: a literal whose name index is beyond both
    tables (70, the dynamic table empty): COMPRESSION_ERROR."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x7f\x07" + lit("v")), COMPRESSION_ERROR)


@case("conformance")
def hpack_size_update_after_field(env):
    """RFC 7541 4.2, 6.3: a dynamic table size update after the first field
    of a block: COMPRESSION_ERROR (h2spec hpack 6.3)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x20"), COMPRESSION_ERROR)


@case("conformance")
def hpack_two_size_updates_at_start(env):
    """RFC 7541 4.2: two size updates at a block's start (0, then 4096)
    are allowed, and the table works after them."""
    c = settled(env)
    ins = b"\x40" + lit("x-a") + lit("one")  # entry 62
    c.send_raw(raw_frame(0x1, 0x5, 1, b"\x20\x3f\xe1\x1f" + b"\x82\x04" + lit("/headers") +
                         b"\x86\x01" + lit("x") + ins))
    r = c.response(1)
    check(r.status == 200 and b"x-a: one\n" in r.body, f"{r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 3, b"\x82\x04" + lit("/headers") + b"\x86\x01" +
                         lit("x") + b"\xbe"))
    r = c.response(3)
    check(r.status == 200 and b"x-a: one\n" in r.body, f"{r.status} {r.body!r}")


@case("conformance")
def hpack_huffman_eos(env):
    """RFC 7541 5.2: a Huffman string containing the EOS symbol (30 ones):
    COMPRESSION_ERROR (h2spec hpack 5.2/1)."""
    block = GET_ROOT + b"\x00" + lit("x-h") + b"\x84\xff\xff\xff\xff"
    conn_error(env, raw_frame(0x1, 0x5, 1, block), COMPRESSION_ERROR)


@case("conformance")
def hpack_huffman_padding_too_long(env):
    """RFC 7541 5.2: Huffman padding longer than 7 bits ("a", 00011, then
    11 ones): COMPRESSION_ERROR (h2spec hpack 5.2/2)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x00" + lit("x-h") + b"\x82\x1f\xff"),
               COMPRESSION_ERROR)


@case("conformance")
def hpack_huffman_padding_not_eos(env):
    """RFC 7541 5.2: Huffman padding that is not the EOS code's leading
    ones ("a", 00011, then 000): COMPRESSION_ERROR (h2spec hpack 5.2/3)."""
    conn_error(env, raw_frame(0x1, 0x5, 1, GET_ROOT + b"\x00" + lit("x-h") + b"\x81\x18"),
               COMPRESSION_ERROR)


@case("conformance")
def hpack_huffman_accepted(env):
    """RFC 7541 5.2: Huffman-coded names and values decode (the client's
    encoder codes them when shorter); the value arrives as sent."""
    c = Conn(env.k.port())
    value = "the quick brown fox jumps over the lazy dog 0123456789"
    r = c.get("/headers", fields=[("x-huffman", value), ("cookie", "abc=defghi")])
    check(r.status == 200 and f"x-huffman: {value}\n".encode() in r.body, r.body)


@case("conformance")
def hpack_dynamic_table_across_blocks(env):
    """RFC 7541 2.3, 4.4, RFC 9113 4.3: the dynamic table lives across
    header blocks split over CONTINUATION frames: entries inserted in one
    request are referenced in the next (indices shifting as entries are
    added), never-indexed and without-indexing literals add none."""
    c = settled(env)
    # Stream 1: HEADERS | CONTINUATION | CONTINUATION. Inserts, oldest
    # first: :path /h2test/head, :authority dyn.test, cookie c=1 (so 62 is
    # cookie, 63 :authority, 64 :path).
    c.send_raw(raw_frame(0x1, 0x1, 1, b"\x82\x44" + lit("/h2test/head")) +
               raw_frame(0x9, 0x0, 1, b"\x86\x41" + lit("dyn.test")) +
               raw_frame(0x9, 0x4, 1, b"\x60" + lit("c=1") + b"\x10" + lit("x-never") + lit("n")
                         + b"\x00" + lit("x-plain") + lit("p")))
    r = c.response(1)
    check(r.status == 200, f"stream 1: {r.status} {r.reset}")
    check(b"target=/h2test/head\n" in r.body and b"host=dyn.test\n" in r.body and
          b"cookie=c=1\n" in r.body, f"stream 1: {r.body!r}")
    # Stream 3: every field from the table, split after one byte, and one
    # more cookie inserted (62 cookie d=2, 63 cookie c=1, 64 :authority,
    # 65 :path after it).
    c.send_raw(raw_frame(0x1, 0x1, 3, b"\x82") +
               raw_frame(0x9, 0x0, 3, b"\xc0") +
               raw_frame(0x9, 0x4, 3, b"\x86\xbf\xbe\x60" + lit("d=2")))
    r = c.response(3)
    check(r.status == 200 and b"host=dyn.test\n" in r.body and
          b"cookie=c=1; d=2\n" in r.body, f"stream 3: {r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 5, b"\x82\xc1\x86\xc0\xbe\xbf"))
    r = c.response(5)
    check(r.status == 200 and b"target=/h2test/head\n" in r.body and
          b"host=dyn.test\n" in r.body and b"cookie=d=2; c=1\n" in r.body,
          f"stream 5: {r.status} {r.body!r}")
    # Nothing else was inserted: 66 is beyond the table.
    c.send_raw(raw_frame(0x1, 0x5, 7, b"\x82\xc1\x86\xc0\xc2"))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_eviction(env):
    """RFC 7541 4.3, 4.4: with the table sized to 100 bytes, a second
    78-byte entry evicts the first: index 62 is the newer, 63 is beyond
    the table (COMPRESSION_ERROR)."""
    c = settled(env)
    head = b"\x82\x04" + lit("/h2test/head") + b"\x86\x01" + lit("x")
    c.send_raw(raw_frame(0x1, 0x5, 1, b"\x3f\x45" + head + b"\x60" + lit("a" * 40) +
                         b"\x60" + lit("b" * 40)))
    r = c.response(1)
    check(r.status == 200 and ("cookie=" + "a" * 40 + "; " + "b" * 40).encode() in r.body,
          f"stream 1: {r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 3, head + b"\xbe"))
    r = c.response(3)
    check(r.status == 200 and ("cookie=" + "b" * 40 + "\n").encode() in r.body,
          f"stream 3: {r.status} {r.body!r}")
    c.send_raw(raw_frame(0x1, 0x5, 5, head + b"\xbf"))
    c.expect_goaway(COMPRESSION_ERROR)


@case("conformance")
def hpack_client_table_size_zero(env):
    """RFC 7541 4.2, RFC 9113 6.5.2: a client that sets
    SETTINGS_HEADER_TABLE_SIZE to 0 gets header blocks that leave nothing
    in its dynamic table (the server's encoder signals the size, 0)."""
    c = Conn(env.k.port(), settings={SettingsFrame.HEADER_TABLE_SIZE: 0})
    c.dec.max_allowed_table_size = 0
    for path in ("/", "/h2test/head", "/files/4k.bin", "/", "/h2test/status?code=204"):
        r = c.get(path)
        check(r.status in (200, 204), f"{path}: {r.status}")
        check(len(c.dec.header_table.dynamic_entries) == 0,
              f"{path}: the server's block inserted {len(c.dec.header_table.dynamic_entries)} "
              "entries into a table of size 0")
