/* The h2 module's HPACK decoder: the blocks it must refuse
 * (COMPRESSION_ERROR, RFC 9113 4.3: bad indexes and integers, strings past
 * the block, bad Huffman strings, misplaced size updates), the emit
 * callback stopping a block, the scratch growing for long Huffman strings,
 * and the static indexes it reports with a name. */
#include <criterion/criterion.h>

#include "hpack_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Expects H2_HPACK_ERROR for a block on a fresh decoder (limit 4096). */
static void expect_error(const uint8_t *block, size_t len, const char *what)
{
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    fields f;
    int rc = decode(&d, &s, block, len, &f);
    cr_assert_eq(rc, H2_HPACK_ERROR, "%s: %d, not H2_HPACK_ERROR", what, rc);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

#define EXPECT_ERROR(what, ...)                                                                    \
    do {                                                                                           \
        static const uint8_t block_[] = {__VA_ARGS__};                                             \
        expect_error(block_, sizeof block_, what);                                                 \
    } while (0)

/* ---- invalid blocks: COMPRESSION_ERROR (RFC 9113 4.3) ------------------------------------ */

Test(hpack_errors, bad_indexes, .timeout = 60)
{
    /* 6.1: index 0 is not used. */
    EXPECT_ERROR("indexed field 0", 0x80);
    /* 2.3.3: past the static table, with an empty dynamic table. */
    EXPECT_ERROR("indexed field 62", 0xbe);
    EXPECT_ERROR("indexed field 127", 0xff, 0x00);
    /* A literal's name index past the table. */
    EXPECT_ERROR("literal with indexing, name 62", 0x7e, 0x01, 'x');
    EXPECT_ERROR("literal without indexing, name 62", 0x0f, 0x2f, 0x01, 'x');
    EXPECT_ERROR("literal never indexed, name 62", 0x1f, 0x2f, 0x01, 'x');
    /* 61 is the last static entry and is fine. */
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "bd", &f), 0);
    cr_assert_str_eq(f.name[0], "www-authenticate");
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_errors, bad_integers, .timeout = 60)
{
    EXPECT_ERROR("truncated index", 0xff);
    EXPECT_ERROR("truncated index continuation", 0xff, 0x80);
    EXPECT_ERROR("truncated size update", 0x3f, 0x9a);
    EXPECT_ERROR("truncated string length", 0x40, 0x7f);
    EXPECT_ERROR("truncated value length", 0x04, 0xff, 0x81);
    /* Past 2^32 (hpack.c's bound), and past any shift a 32-bit value takes. */
    EXPECT_ERROR("index overflow", 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f);
    EXPECT_ERROR("too many continuation bytes", 0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00);
    EXPECT_ERROR("string length overflow", 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f);
}

Test(hpack_errors, strings_past_the_block, .timeout = 60)
{
    EXPECT_ERROR("name length past the block", 0x40, 0x05, 'a', 'b');
    EXPECT_ERROR("value length past the block", 0x40, 0x01, 'a', 0x03, 'b', 'c');
    EXPECT_ERROR("Huffman value length past the block", 0x04, 0x82, 0x1f);
    EXPECT_ERROR("no value", 0x40, 0x01, 'a');
    EXPECT_ERROR("no name", 0x40);
    EXPECT_ERROR("indexed name, no value", 0x04);
}

Test(hpack_errors, bad_huffman_strings, .timeout = 60)
{
    EXPECT_ERROR("EOS inside", 0x04, 0x84, 0xff, 0xff, 0xff, 0xfc);
    EXPECT_ERROR("padding over 7 bits", 0x04, 0x82, 0x1f, 0xff);
    EXPECT_ERROR("padding not ones", 0x04, 0x81, 0x18);
    EXPECT_ERROR("bad Huffman name", 0x00, 0x81, 0x18, 0x01, 'v');
    /* The same block with valid padding decodes: path "a". */
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "0481 1f", &f), 0);
    static const field want[] = {{":path", "a"}};
    expect_fields(&f, want, 1);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* 4.2: the new size must not exceed the limit (our SETTINGS); 6.3 / 4.2:
 * an update comes only at the start of a block. */
Test(hpack_errors, size_updates, .timeout = 60)
{
    /* 4097 = 31 + 0x62 + 0x1f << 7 */
    EXPECT_ERROR("size update above the limit", 0x3f, 0xe2, 0x1f);
    EXPECT_ERROR("size update after a field", 0x82, 0x20);
    EXPECT_ERROR("size update after a literal", 0x04, 0x01, '/', 0x3f, 0x01);

    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(d.max, 4096, "4.2: the table starts at 4,096 bytes");
    cr_assert_eq(decode_hex(&d, &s, "3fe11f", &f), 0, "4096 is within the limit");
    cr_assert_eq(d.max, 4096);
    /* Two updates at the start of one block (4.2: the smallest, then the final). */
    cr_assert_eq(decode_hex(&d, &s, "20 3f45 82", &f), 0);
    cr_assert_eq(d.max, 100);
    cr_assert_eq(f.n, 1);
    h2_hpack_free(&d);
    /* A decoder whose limit is below 4,096 still starts at 4,096 (RFC
     * 9113 6.5.2) until the encoder lowers it, and cannot raise it past. */
    h2_hpack_init(&d, 256);
    cr_assert_eq(d.max, 4096);
    cr_assert_eq(decode_hex(&d, &s, "3fe201", &f), H2_HPACK_ERROR, "257 > 256");
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- the emit callback and the scratch ---------------------------------------------------- */

static int stop_at_second(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    (void)name;
    (void)nlen;
    (void)name_index;
    (void)value;
    (void)vlen;
    return ++*(int *)ud == 2 ? 42 : 0;
}

Test(hpack_decode, emit_stops_decoding, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    static const uint8_t block[] = {0x82, 0x86, 0x84};
    int calls = 0;
    cr_assert_eq(h2_hpack_decode(&d, block, sizeof block, &s, stop_at_second, &calls), 42);
    cr_assert_eq(calls, 2);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* Huffman strings decode into the scratch, which grows with the block:
 * a long value of the densest code (5-bit symbols, 8/5 growth). */
typedef struct long_value {
    const char *want;
    size_t wlen, calls;
} long_value;

static int check_long_value(void *ud, const h2_hpack_field *hf)
{
    const char *name = hf->name, *value = hf->value;
    size_t nlen = hf->nlen, vlen = hf->vlen;
    unsigned name_index = hf->name_index;
    long_value *lv = ud;
    (void)name_index;
    lv->calls++;
    cr_assert_eq(nlen, 1);
    cr_assert_eq(name[0], 'a');
    cr_assert_eq(vlen, lv->wlen);
    cr_assert(memcmp(value, lv->want, vlen) == 0);
    return 0;
}

Test(hpack_decode, scratch_grows, .timeout = 60)
{
    static char text[3000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "012aceiost"[i % 10]; /* the ten 5-bit codes */
    size_t hlen = h2_huff_len(text, sizeof text);
    cr_assert_eq(hlen, (sizeof text * 5 + 7) / 8);
    uint8_t *block = malloc(hlen + 16);
    cr_assert(block != NULL);
    size_t n = 0;
    block[n++] = 0x00; /* literal without indexing, new name */
    block[n++] = 0x81; /* Huffman, 1 byte: "a" */
    block[n++] = 0x1f;
    n += h2_hpack_int(block + n, 0x80, 7, hlen);
    n += h2_huff_encode(text, sizeof text, block + n);
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    /* A small block first, so the scratch has to grow for the large one. */
    fields f;
    cr_assert_eq(decode_hex(&d, &s, "0481 1f", &f), 0);
    long_value lv = {text, sizeof text, 0};
    for (int twice = 0; twice < 2; twice++)
        cr_assert_eq(h2_hpack_decode(&d, block, n, &s, check_long_value, &lv), 0);
    cr_assert_eq(lv.calls, 2);
    free(block);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- the names' static indexes --------------------------------------------------------- */

/* A name the decoder knows by a static index comes with it (h2 maps it to
 * its token without looking at the bytes): named by index, or a dynamic
 * entry whose name is a static one (looked up once, when it is added). */
Test(hpack_decode, name_index, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    static const char block[] = "\x82" /* :method GET */
                                "\x5f\x01"
                                "a" /* content-type: a, added */
                                "\x40\x0a"
                                "user-agent\x01"
                                "b" /* user-agent: b, added */
                                "\x40\x01"
                                "x\x01"
                                "c" /* x: c, added */
                                "\x00\x04"
                                "host\x01"
                                "d"             /* host: d, not added */
                                "\xbe\xbf\xc0"; /* the three entries again, newest first */
    fields f;
    cr_assert_eq(decode(&d, &s, (const uint8_t *)block, sizeof block - 1, &f), 0);
    static const unsigned want[] = {2, 31, 58, 0, 0, 0, 58, 31};
    cr_assert_eq(f.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < f.n; i++)
        cr_assert_eq(f.name_index[i], want[i], "field %zu (%s): %u", i, f.name[i], f.name_index[i]);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- where a field came from: the static table, a dynamic entry ------------------------- */

/* What the decoder says of each field's origin, and the entry's memo. */
typedef struct origin {
    size_t n;
    unsigned flags[8];
    uint32_t *memo[8];
    uint32_t memo_seen[8];
    const char *value[8];
} origin;

static int note_origin(void *ud, const h2_hpack_field *f)
{
    origin *o = ud;
    cr_assert_lt(o->n, 8);
    o->flags[o->n] = f->flags;
    o->memo[o->n] = f->memo;
    o->memo_seen[o->n] = f->memo != NULL ? *f->memo : 0;
    o->value[o->n] = f->value;
    if ((f->flags & H2_HPACK_ENTRY_VALUE) && f->memo != NULL && *f->memo == 0)
        *f->memo = 0x100u + (uint32_t)o->n; /* what a caller concluded */
    o->n++;
    return 0;
}

/* h2 checks a field once per dynamic entry and copies nothing of the
 * static table's (request.c): a whole static field says so; a field of a
 * dynamic entry carries the entry's memo, zero when the entry is made and
 * kept as the caller left it while the entry lives; a literal value named
 * by a dynamic entry gets that entry's memo without H2_HPACK_ENTRY_VALUE;
 * a field of no dynamic entry gets none. */
Test(hpack_decode, field_origin, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    static const char first[] = "\x82" /* :method GET, static */
                                "\x44\x01"
                                "/" /* :path /, name static, added */
                                "\x40\x01"
                                "x\x01"
                                "c" /* x: c, added */
                                "\x04\x01"
                                "/"; /* :path /, not added */
    origin o = {0};
    cr_assert_eq(h2_hpack_decode(&d, (const uint8_t *)first, sizeof first - 1, &s, note_origin, &o),
                 0);
    cr_assert_eq(o.n, 4);
    cr_assert_eq(o.flags[0], H2_HPACK_STATIC_VALUE);
    cr_assert_null(o.memo[0]);
    cr_assert_str_eq(o.value[0], "GET"); /* the table's own string */
    cr_assert_eq(o.flags[1], H2_HPACK_ENTRY_VALUE);
    cr_assert_not_null(o.memo[1]);
    cr_assert_eq(o.memo_seen[1], 0, "a new entry's memo is zero");
    cr_assert_eq(o.flags[2], H2_HPACK_ENTRY_VALUE);
    cr_assert_eq(o.memo_seen[2], 0);
    cr_assert_eq(o.flags[3], 0);
    cr_assert_null(o.memo[3], "a static name and a literal value: no entry");

    static const char second[] = "\xbe" /* x: c, the newest entry */
                                 "\xbf" /* :path /, the one before */
                                 "\x0f\x2f\x01"
                                 "d"; /* x (entry 62) named, value d, not added */
    origin p = {0};
    cr_assert_eq(
        h2_hpack_decode(&d, (const uint8_t *)second, sizeof second - 1, &s, note_origin, &p), 0);
    cr_assert_eq(p.n, 3);
    cr_assert_eq(p.flags[0], H2_HPACK_ENTRY_VALUE);
    cr_assert_eq(p.memo[0], o.memo[2], "the same entry, the same memo");
    cr_assert_eq(p.memo_seen[0], 0x102u, "the memo as the caller left it");
    cr_assert_eq(p.flags[1], H2_HPACK_ENTRY_VALUE);
    cr_assert_eq(p.memo_seen[1], 0x101u);
    cr_assert_eq(p.flags[2], 0, "a literal value is no entry's");
    cr_assert_eq(p.memo[2], o.memo[2], "the memo of the entry that named it");
    cr_assert_eq(p.memo_seen[2], 0x102u);

    /* A size update to 0 empties the table (another gives the room
     * back); an entry made again starts with a zero memo. */
    static const char third[] = "\x20\x3f\xe1\x1f"
                                "\x40\x01"
                                "x\x01"
                                "c";
    origin q = {0};
    cr_assert_eq(h2_hpack_decode(&d, (const uint8_t *)third, sizeof third - 1, &s, note_origin, &q),
                 0);
    cr_assert_eq(q.n, 1);
    cr_assert_eq(q.flags[0], H2_HPACK_ENTRY_VALUE);
    cr_assert_eq(q.memo_seen[0], 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}
