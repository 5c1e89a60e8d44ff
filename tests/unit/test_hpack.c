/* The h2 module's HPACK codec (RFC 7541), compiled straight in (hpack.c and
 * hpack_huffman.c call no keel function): the examples of Appendix C
 * (integers, single representations, three requests and three responses
 * with and without Huffman coding, the dynamic table checked after each),
 * the Huffman code on every byte value and on random strings, the errors a
 * decoder must detect (COMPRESSION_ERROR, RFC 9113 4.3), eviction (4.4),
 * and what the encoder writes (literals, :status) decoded back. */
#include <criterion/criterion.h>

#include "hpack.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------ */

#define MAX_FIELDS 16

/* The fields one h2_hpack_decode call emitted, copied (they are valid
 * during the call only). */
typedef struct fields {
    size_t n;
    char name[MAX_FIELDS][128];
    char value[MAX_FIELDS][512];
    size_t nlen[MAX_FIELDS], vlen[MAX_FIELDS];
    unsigned name_index[MAX_FIELDS];
} fields;

static int collect(void *ud, const char *name, size_t nlen, unsigned name_index, const char *value,
                   size_t vlen)
{
    fields *f = ud;
    cr_assert_lt(f->n, MAX_FIELDS, "more fields than the test expects");
    cr_assert_lt(nlen, sizeof f->name[0]);
    cr_assert_lt(vlen, sizeof f->value[0]);
    memcpy(f->name[f->n], name, nlen);
    f->name[f->n][nlen] = '\0';
    memcpy(f->value[f->n], value, vlen);
    f->value[f->n][vlen] = '\0';
    f->nlen[f->n] = nlen;
    f->vlen[f->n] = vlen;
    f->name_index[f->n] = name_index;
    f->n++;
    return 0;
}

typedef struct field {
    const char *name, *value;
} field;

static int decode(h2_hpack *d, h2_scratch *s, const uint8_t *block, size_t len, fields *out)
{
    memset(out, 0, sizeof *out);
    return h2_hpack_decode(d, block, len, s, collect, out);
}

static void expect_fields(const fields *got, const field *want, size_t n)
{
    cr_assert_eq(got->n, n, "%zu fields decoded, %zu expected", got->n, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(got->nlen[i], strlen(want[i].name), "field %zu: name length", i);
        cr_assert_str_eq(got->name[i], want[i].name, "field %zu: name '%s', expected '%s'", i,
                         got->name[i], want[i].name);
        cr_assert_eq(got->vlen[i], strlen(want[i].value), "field %zu (%s): value length", i,
                     want[i].name);
        cr_assert_str_eq(got->value[i], want[i].value, "field %zu (%s): '%s', expected '%s'", i,
                         want[i].name, got->value[i], want[i].value);
    }
}

/* The dynamic table, newest first, as a decoder sees it: each entry read
 * back through an indexed field (6.1; index 62 is the newest, 2.3.3),
 * which does not change the table. Then its size (4.1) and count. */
static void expect_table(h2_hpack *d, h2_scratch *s, const field *want, size_t n, size_t size)
{
    cr_assert_eq(d->count, n, "%u entries in the table, %zu expected", d->count, n);
    cr_assert_eq(d->size, size, "table size %zu, %zu expected", d->size, size);
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t block[4];
        size_t len = h2_hpack_int(block, 0x80, 7, 62 + i);
        fields f;
        cr_assert_eq(decode(d, s, block, len, &f), 0, "index %zu", 62 + i);
        expect_fields(&f, &want[i], 1);
        sum += strlen(want[i].name) + strlen(want[i].value) + 32;
    }
    cr_assert_eq(sum, size, "the expected size is not the sum of the expected entries");
}

/* "8286 8441 ..." as in the RFC's hex dumps, spaces ignored. */
static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int half = -1;
    for (const char *p = hex; *p != '\0'; p++) {
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else
            continue;
        if (half < 0) {
            half = v;
        } else {
            cr_assert_lt(n, cap);
            out[n++] = (uint8_t)(half << 4 | v);
            half = -1;
        }
    }
    cr_assert_eq(half, -1, "odd number of hex digits");
    return n;
}

static int decode_hex(h2_hpack *d, h2_scratch *s, const char *hex, fields *out)
{
    uint8_t block[512];
    size_t len = unhex(hex, block, sizeof block);
    return decode(d, s, block, len, out);
}

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

/* ---- C.1: integers -------------------------------------------------------------- */

Test(hpack_int, rfc7541_c1_encoding, .timeout = 60)
{
    uint8_t out[16];
    /* C.1.1: 10 with a 5-bit prefix fits in it. */
    cr_assert_eq(h2_hpack_int(out, 0x00, 5, 10), 1);
    cr_assert_eq(out[0], 0x0a);
    /* C.1.2: 1337 with a 5-bit prefix: 31, then 1306 in 7-bit groups. */
    cr_assert_eq(h2_hpack_int(out, 0x00, 5, 1337), 3);
    cr_assert_eq(out[0], 0x1f);
    cr_assert_eq(out[1], 0x9a);
    cr_assert_eq(out[2], 0x0a);
    /* C.1.3: 42 at an octet boundary (an 8-bit prefix). */
    cr_assert_eq(h2_hpack_int(out, 0x00, 8, 42), 1);
    cr_assert_eq(out[0], 42);
    /* The bits above the prefix are kept (the representation's pattern). */
    cr_assert_eq(h2_hpack_int(out, 0xe0, 5, 10), 1);
    cr_assert_eq(out[0], 0xea);
    /* 5.1: a value equal to 2^N - 1 needs a continuation byte of 0. */
    cr_assert_eq(h2_hpack_int(out, 0x00, 5, 31), 2);
    cr_assert_eq(out[0], 0x1f);
    cr_assert_eq(out[1], 0x00);
    /* Up to 2^63: at most 10 bytes (hpack.h), whatever the prefix. */
    cr_assert_eq(h2_hpack_int(out, 0x00, 1, (UINT64_C(1) << 63) - 1), 10);
}

/* 5.1's decoding, on 64 bits: the reference the encoder is checked by. */
static uint64_t ref_int(const uint8_t *p, size_t n, unsigned prefix, size_t *used)
{
    uint64_t max = (1u << prefix) - 1, v = p[0] & max;
    size_t i = 1;
    if (v == max) {
        unsigned shift = 0;
        do {
            cr_assert_lt(i, n, "the integer runs past what was written");
            v += (uint64_t)(p[i] & 0x7f) << shift;
            shift += 7;
        } while (p[i++] & 0x80);
    }
    *used = i;
    return v;
}

Test(hpack_int, encoding_round_trip, .timeout = 60)
{
    uint64_t seed = 88172645463325252u;
    for (unsigned prefix = 1; prefix <= 8; prefix++) {
        uint8_t first = (uint8_t)(prefix == 8 ? 0 : 0xff << prefix);
        for (int round = 0; round < 20000; round++) {
            uint64_t v;
            if (round < 300) {
                v = (uint64_t)round; /* around the prefix's own maximum */
            } else {
                seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                v = seed >> (seed % 64); /* every magnitude */
            }
            if (v >= UINT64_C(1) << 63)
                v >>= 1;
            uint8_t out[16];
            memset(out, 0xee, sizeof out);
            size_t n = h2_hpack_int(out, first, prefix, v), used;
            cr_assert_leq(n, 10, "%llu with %u-bit prefix: %zu bytes", (unsigned long long)v,
                          prefix, n);
            cr_assert_eq(out[0] & first, first, "the pattern bits were changed");
            cr_assert_eq(ref_int(out, n, prefix, &used), v, "%llu with a %u-bit prefix",
                         (unsigned long long)v, prefix);
            cr_assert_eq(used, n);
            cr_assert_eq(out[n], 0xee, "written past the returned length");
        }
    }
}

/* Decoding goes through a dynamic table size update (6.3), whose value
 * has a 5-bit prefix like C.1.1 and C.1.2 and lands in d->max. */
Test(hpack_int, rfc7541_c1_decoding, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "2a", &f), 0); /* 001 01010: 10 */
    cr_assert_eq(d.max, 10);
    cr_assert_eq(decode_hex(&d, &s, "3f 9a 0a", &f), 0); /* 001 11111, 154, 10: 1337 */
    cr_assert_eq(d.max, 1337);
    cr_assert_eq(f.n, 0);
    /* Every value through 4096, as the encoder writes it. */
    for (uint64_t v = 0; v <= 4096; v++) {
        uint8_t block[8];
        size_t len = h2_hpack_int(block, 0x20, 5, v);
        cr_assert_eq(decode(&d, &s, block, len, &f), 0, "%llu", (unsigned long long)v);
        cr_assert_eq(d.max, v);
    }
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* The decoder takes integers up to 2^32 - 1 and refuses the next one
 * (hpack.c: no field or index needs more); with no limit on the table
 * size, only the integer's own bound decides. */
Test(hpack_int, largest_value, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, SIZE_MAX);
    /* 31 + 0x60 + 0x7f << 7 + 0x7f << 14 + 0x7f << 21 + 0x0f << 28 = 2^32 - 1 */
    cr_assert_eq(decode_hex(&d, &s, "3f e0 ff ff ff 0f", &f), 0);
    cr_assert_eq(d.max, 0xffffffffu);
    h2_hpack_free(&d);
    h2_hpack_init(&d, SIZE_MAX);
    cr_assert_eq(decode_hex(&d, &s, "3f e1 ff ff ff 0f", &f), H2_HPACK_ERROR, "2^32");
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- C.2: single representations -------------------------------------------------- */

Test(hpack_rfc, c2_1_literal_with_indexing, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(
        decode_hex(&d, &s, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", &f),
        0);
    static const field want[] = {{"custom-key", "custom-header"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, want, 1, 55);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c2_2_literal_without_indexing, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "040c 2f73 616d 706c 652f 7061 7468", &f), 0);
    static const field want[] = {{":path", "/sample/path"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c2_3_literal_never_indexed, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "1008 7061 7373 776f 7264 0673 6563 7265 74", &f), 0);
    static const field want[] = {{"password", "secret"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c2_4_indexed, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "82", &f), 0);
    static const field want[] = {{":method", "GET"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- C.3 / C.4: three requests on one connection ------------------------------------ */

static const field req1[] = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
static const field req2[] = {{":method", "GET"},
                             {":scheme", "http"},
                             {":path", "/"},
                             {":authority", "www.example.com"},
                             {"cache-control", "no-cache"}};
static const field req3[] = {{":method", "GET"},
                             {":scheme", "https"},
                             {":path", "/index.html"},
                             {":authority", "www.example.com"},
                             {"custom-key", "custom-value"}};
static const field req_table1[] = {{":authority", "www.example.com"}};
static const field req_table2[] = {{"cache-control", "no-cache"},
                                   {":authority", "www.example.com"}};
static const field req_table3[] = {{"custom-key", "custom-value"},
                                   {"cache-control", "no-cache"},
                                   {":authority", "www.example.com"}};

static void three_requests(const char *hex1, const char *hex2, const char *hex3)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, hex1, &f), 0);
    expect_fields(&f, req1, 4);
    expect_table(&d, &s, req_table1, 1, 57);
    cr_assert_eq(decode_hex(&d, &s, hex2, &f), 0);
    expect_fields(&f, req2, 5);
    expect_table(&d, &s, req_table2, 2, 110);
    cr_assert_eq(decode_hex(&d, &s, hex3, &f), 0);
    expect_fields(&f, req3, 5);
    expect_table(&d, &s, req_table3, 3, 164);
    /* Past the newest three entries there is none (2.3.3). */
    cr_assert_eq(decode_hex(&d, &s, "c1", &f), H2_HPACK_ERROR);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c3_requests_without_huffman, .timeout = 60)
{
    three_requests("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                   "8286 84be 5808 6e6f 2d63 6163 6865",
                   "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65");
}

Test(hpack_rfc, c4_requests_with_huffman, .timeout = 60)
{
    three_requests("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", "8286 84be 5886 a8eb 1064 9cbf",
                   "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
}

/* ---- C.5 / C.6: three responses, a 256-byte table ------------------------------------ */

static const field resp1[] = {{":status", "302"},
                              {"cache-control", "private"},
                              {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                              {"location", "https://www.example.com"}};
static const field resp2[] = {{":status", "307"},
                              {"cache-control", "private"},
                              {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                              {"location", "https://www.example.com"}};
static const field resp3[] = {
    {":status", "200"},
    {"cache-control", "private"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
    {"location", "https://www.example.com"},
    {"content-encoding", "gzip"},
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};
static const field resp_table1[] = {{"location", "https://www.example.com"},
                                    {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                    {"cache-control", "private"},
                                    {":status", "302"}};
static const field resp_table2[] = {{":status", "307"},
                                    {"location", "https://www.example.com"},
                                    {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                    {"cache-control", "private"}};
static const field resp_table3[] = {
    {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
    {"content-encoding", "gzip"},
    {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}};

/* The decoder is the same for responses. The examples assume
 * SETTINGS_HEADER_TABLE_SIZE = 256; an encoder says so with a size update
 * at the start of its first block (4.2, 6.3: 001 11111, 225), which is
 * prepended here: without it the table would hold 4,096 bytes and nothing
 * would be evicted. */
static void three_responses(const char *hex1, const char *hex2, const char *hex3)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    char first[1024];
    snprintf(first, sizeof first, "3fe101 %s", hex1);
    h2_hpack_init(&d, 256);
    cr_assert_eq(decode_hex(&d, &s, first, &f), 0);
    cr_assert_eq(d.max, 256);
    expect_fields(&f, resp1, 4);
    expect_table(&d, &s, resp_table1, 4, 222);
    /* :status: 302 is evicted to make room for :status: 307. */
    cr_assert_eq(decode_hex(&d, &s, hex2, &f), 0);
    expect_fields(&f, resp2, 4);
    expect_table(&d, &s, resp_table2, 4, 222);
    /* Several entries are evicted while this block is decoded. */
    cr_assert_eq(decode_hex(&d, &s, hex3, &f), 0);
    expect_fields(&f, resp3, 6);
    expect_table(&d, &s, resp_table3, 3, 215);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_rfc, c5_responses_without_huffman, .timeout = 60)
{
    three_responses("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 "
                    "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 "
                    "7861 6d70 6c65 2e63 6f6d",
                    "4803 3330 37c1 c0bf",
                    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 "
                    "474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 "
                    "454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 "
                    "6572 7369 6f6e 3d31");
}

Test(hpack_rfc, c6_responses_with_huffman, .timeout = 60)
{
    three_responses("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 "
                    "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                    "4883 640e ffc1 c0bf",
                    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b "
                    "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 "
                    "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07");
}

/* ---- Huffman (5.2, Appendix B) --------------------------------------------------------- */

/* Encodes n bytes, checks h2_huff_len agrees, decodes them back. */
static void huff_round_trip(const char *in, size_t n)
{
    size_t elen = h2_huff_len(in, n);
    uint8_t *enc = malloc(elen + 1);
    char *dec = malloc(elen * 8 / 5 + 1);
    cr_assert(enc != NULL && dec != NULL);
    enc[elen] = 0xa5; /* a byte past the end, which must stay */
    cr_assert_eq(h2_huff_encode(in, n, enc), elen, "%zu bytes: encoded length", n);
    cr_assert_eq(enc[elen], 0xa5, "h2_huff_encode wrote past h2_huff_len");
    long got = h2_huff_decode(enc, elen, dec);
    cr_assert_eq(got, (long)n, "%zu bytes decoded to %ld", n, got);
    cr_assert(memcmp(dec, in, n) == 0, "%zu bytes: not the same after the round trip", n);
    free(enc);
    free(dec);
}

Test(hpack_huffman, rfc7541_c4_strings, .timeout = 60)
{
    static const struct {
        const char *text, *hex;
    } v[] = {
        {"www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"},
        {"no-cache", "a8eb 1064 9cbf"},
        {"custom-key", "25a8 49e9 5ba9 7d7f"},
        {"custom-value", "25a8 49e9 5bb8 e8b4 bf"},
        {"302", "6402"},
        {"private", "aec3 771a 4b"},
        {"Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"},
        {"https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"},
        {"gzip", "9bd9 ab"},
        {"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
         "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 "
         "65c0 03ed 4ee5 b106 3d50 07"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t want[64], got[64];
        char dec[128];
        size_t n = strlen(v[i].text), wlen = unhex(v[i].hex, want, sizeof want);
        cr_assert_eq(h2_huff_len(v[i].text, n), wlen, "%s", v[i].text);
        cr_assert_eq(h2_huff_encode(v[i].text, n, got), wlen, "%s", v[i].text);
        cr_assert(memcmp(got, want, wlen) == 0, "%s: not the RFC's code", v[i].text);
        cr_assert_eq(h2_huff_decode(want, wlen, dec), (long)n, "%s", v[i].text);
        cr_assert(memcmp(dec, v[i].text, n) == 0, "%s: decoded differently", v[i].text);
    }
}

Test(hpack_huffman, every_byte_value, .timeout = 60)
{
    char all[256];
    for (int i = 0; i < 256; i++) {
        all[i] = (char)i;
        /* Alone: every code's length, with every amount of padding. */
        huff_round_trip(&all[i], 1);
    }
    huff_round_trip(all, 256);
    /* Each symbol once more after a 5-bit one: the codes at every bit offset. */
    for (int i = 0; i < 256; i++) {
        char two[3] = {'a', (char)i, 'a'};
        huff_round_trip(two, 3);
    }
    huff_round_trip("", 0);
}

Test(hpack_huffman, random_strings, .timeout = 60)
{
    uint32_t seed = 7411;
    char buf[512];
    for (int round = 0; round < 5000; round++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 8) % sizeof buf;
        /* Half of the strings in printable ASCII (the short codes), half
         * anything (the long ones). */
        int printable = round & 1;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned b = seed >> 16;
            buf[i] = (char)(printable ? ' ' + b % 95 : b & 0xff);
        }
        huff_round_trip(buf, n);
    }
}

/* 5.2: the padding is the EOS code's first bits (all ones), at most 7. */
Test(hpack_huffman, invalid_codes, .timeout = 60)
{
    char out[64];
    /* 'a' is 00011: 0x1f is 'a' and 3 bits of padding. */
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0x1f}, 1, out), 1);
    cr_assert_eq(out[0], 'a');
    /* 'a' and 11 bits of ones: padding longer than 7 bits. */
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0x1f, 0xff}, 2, out), -1);
    /* 'a' and 000: padding not all ones. */
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0x18}, 1, out), -1);
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0x1e}, 1, out), -1);
    /* 8 bits of ones and nothing else: a whole byte of padding. */
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0xff}, 1, out), -1);
    /* 30 ones: the EOS code itself. */
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0xff, 0xff, 0xff, 0xfc}, 4, out), -1);
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0xff, 0xff, 0xff, 0xff}, 4, out), -1);
    /* EOS after a symbol, padded: "a" EOS = 00011 + 30 ones + 5 ones. */
    cr_assert_eq(h2_huff_decode((const uint8_t[]){0x1f, 0xff, 0xff, 0xff, 0xff}, 5, out), -1);
}

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

/* ---- the dynamic table (4.1 - 4.4) ------------------------------------------------------ */

/* 33 bytes of "x" */
#define X33 "787878787878787878787878787878787878787878787878787878787878787878"

Test(hpack_table, eviction, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    /* Max 100 (31 + 69); three entries of 34 (1 + 1 + 32) bytes. */
    cr_assert_eq(decode_hex(&d, &s, "3f45 4001 6101 31 4001 6201 32", &f), 0);
    static const field two[] = {{"b", "2"}, {"a", "1"}};
    expect_table(&d, &s, two, 2, 68);
    /* 4.4: the third would make 102 > 100: the oldest goes first. */
    cr_assert_eq(decode_hex(&d, &s, "4001 6301 33", &f), 0);
    static const field evicted[] = {{"c", "3"}, {"b", "2"}};
    expect_table(&d, &s, evicted, 2, 68);
    /* One of 66 (1 + 33 + 32): evicting "b" is enough, 66 + 34 = 100 is
     * at the maximum, not over it (4.4). */
    cr_assert_eq(decode_hex(&d, &s, "4001 6421" X33, &f), 0);
    static const field full[] = {{"d", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}, {"c", "3"}};
    expect_table(&d, &s, full, 2, 100);
    /* One of 67 evicts both. */
    cr_assert_eq(decode_hex(&d, &s, "4001 6622 78" X33, &f), 0);
    static const field big[] = {{"f", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}};
    expect_table(&d, &s, big, 1, 67);
    /* 4.3: a smaller maximum evicts down to it; 0 empties the table. */
    cr_assert_eq(decode_hex(&d, &s, "3f03", &f), 0);
    expect_table(&d, &s, NULL, 0, 0);
    cr_assert_eq(decode_hex(&d, &s, "4001 6501 35", &f), 0);
    static const field e[] = {{"e", "5"}};
    expect_table(&d, &s, e, 1, 34);
    cr_assert_eq(decode_hex(&d, &s, "20", &f), 0);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* 4.4: an entry larger than the maximum empties the table and is not
 * added; the field itself is still emitted. */
Test(hpack_table, entry_larger_than_table, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode_hex(&d, &s, "3f45 4001 6101 31 4001 6201 32", &f), 0);
    /* 1 + 68 + 32 = 101 > 100 */
    char hex[512];
    int n = snprintf(hex, sizeof hex, "4001 6344");
    for (int i = 0; i < 68; i++)
        n += snprintf(hex + n, sizeof hex - (size_t)n, "79");
    cr_assert_eq(decode_hex(&d, &s, hex, &f), 0);
    cr_assert_eq(f.n, 1);
    cr_assert_str_eq(f.name[0], "c");
    cr_assert_eq(f.vlen[0], 68);
    expect_table(&d, &s, NULL, 0, 0);
    /* The table works after: the next entry goes in. */
    cr_assert_eq(decode_hex(&d, &s, "4001 6401 34", &f), 0);
    static const field after[] = {{"d", "4"}};
    expect_table(&d, &s, after, 1, 34);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* 4.4: "A new entry can reference the name of an entry in the dynamic
 * table that will be evicted when adding this new entry": the name must
 * survive the eviction, in the new entry and in what is emitted. */
Test(hpack_table, name_of_an_evicted_entry, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    /* Max 70 (31 + 39); "name": "1" is 37 bytes. */
    cr_assert_eq(decode_hex(&d, &s, "3f27 4004 6e61 6d65 0131", &f), 0);
    /* Literal with indexing, name 62 ("name"), value "22": 38 bytes, and
     * 37 + 38 > 70 evicts the entry the name comes from. */
    cr_assert_eq(decode_hex(&d, &s, "7e02 3232", &f), 0);
    static const field want[] = {{"name", "22"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, want, 1, 38);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* The same, when the new entry is larger than the whole table (4.4): the
 * table is emptied, the field still emitted with the name it referenced. */
Test(hpack_table, name_of_an_evicted_entry_too_large, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    /* Max 37; "name": "1" is 37 bytes; "name": "22" would be 38. */
    cr_assert_eq(decode_hex(&d, &s, "3f06 4004 6e61 6d65 0131", &f), 0);
    cr_assert_eq(d.count, 1);
    cr_assert_eq(decode_hex(&d, &s, "7e02 3232", &f), 0);
    static const field want[] = {{"name", "22"}};
    expect_fields(&f, want, 1);
    expect_table(&d, &s, NULL, 0, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* Many entries through a table that keeps a few, so that the ring's head
 * wraps; then a larger table, so that it grows while wrapped. The
 * newest-first order (2.3.3) holds throughout. */
static void add_entry(h2_hpack *d, h2_scratch *s, const char *name)
{
    uint8_t block[16];
    size_t n = 0;
    block[n++] = 0x40; /* 6.2.1, new name */
    block[n++] = 3;
    memcpy(block + n, name, 3);
    n += 3;
    block[n++] = 1;
    block[n++] = 'v';
    fields f;
    cr_assert_eq(decode(d, s, block, n, &f), 0, "%s", name);
}

Test(hpack_table, ring_wraps_and_grows, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    char names[100][4];
    field want[100];
    h2_hpack_init(&d, 4096);
    /* 144 = 31 + 113: four entries of 36 (3 + 1 + 32) bytes. */
    cr_assert_eq(decode_hex(&d, &s, "3f71", &f), 0);
    int i = 0;
    for (; i < 30; i++) {
        snprintf(names[i], sizeof names[i], "k%02d", i);
        add_entry(&d, &s, names[i]);
        int kept = i + 1 < 4 ? i + 1 : 4;
        for (int k = 0; k < kept; k++)
            want[k] = (field){names[i - k], "v"};
        expect_table(&d, &s, want, (size_t)kept, (size_t)kept * 36);
    }
    /* Back to 4,096 (113 entries): 4 grow to 70 through several regrowths. */
    cr_assert_eq(decode_hex(&d, &s, "3fe11f", &f), 0);
    for (; i < 96; i++) {
        snprintf(names[i], sizeof names[i], "k%02d", i);
        add_entry(&d, &s, names[i]);
    }
    for (int k = 0; k < 70; k++)
        want[k] = (field){names[95 - k], "v"};
    expect_table(&d, &s, want, 70, 70 * 36);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- the encoder ------------------------------------------------------------------------- */

/* RFC 7541 Appendix A, the names from 15 on (those a response may name). */
static const char *const static_names[62] = {
    [15] = "accept-charset",
    [16] = "accept-encoding",
    [17] = "accept-language",
    [18] = "accept-ranges",
    [19] = "accept",
    [20] = "access-control-allow-origin",
    [21] = "age",
    [22] = "allow",
    [23] = "authorization",
    [24] = "cache-control",
    [25] = "content-disposition",
    [26] = "content-encoding",
    [27] = "content-language",
    [28] = "content-length",
    [29] = "content-location",
    [30] = "content-range",
    [31] = "content-type",
    [32] = "cookie",
    [33] = "date",
    [34] = "etag",
    [35] = "expect",
    [36] = "expires",
    [37] = "from",
    [38] = "host",
    [39] = "if-match",
    [40] = "if-modified-since",
    [41] = "if-none-match",
    [42] = "if-range",
    [43] = "if-unmodified-since",
    [44] = "last-modified",
    [45] = "link",
    [46] = "location",
    [47] = "max-forwards",
    [48] = "proxy-authenticate",
    [49] = "proxy-authorization",
    [50] = "range",
    [51] = "referer",
    [52] = "refresh",
    [53] = "retry-after",
    [54] = "server",
    [55] = "set-cookie",
    [56] = "strict-transport-security",
    [57] = "transfer-encoding",
    [58] = "user-agent",
    [59] = "vary",
    [60] = "via",
    [61] = "www-authenticate",
};

Test(hpack_encode, static_name, .timeout = 60)
{
    for (unsigned i = 15; i <= 61; i++)
        cr_assert_eq(h2_hpack_static_name(static_names[i], strlen(static_names[i])), i, "%s",
                     static_names[i]);
    static const char *const absent[] = {"x-custom",
                                         "content",
                                         "content-typ",
                                         "content-types",
                                         "accepts",
                                         "b",
                                         "z",
                                         "zz",
                                         "wwwx",
                                         "Content-Type",
                                         "ACCEPT",
                                         "-",
                                         "",
                                         "set-cookie2",
                                         "ag",
                                         "cookie ",
                                         "strict-transport-security-extra-long-name"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_assert_eq(h2_hpack_static_name(absent[i], strlen(absent[i])), 0, "%s", absent[i]);
    /* The request pseudo-fields and :status are not response field names. */
    cr_assert_eq(h2_hpack_static_name(":status", 7), 0);
    cr_assert_eq(h2_hpack_static_name(":path", 5), 0);
    /* Only len bytes are read: a longer buffer with a static name in front. */
    cr_assert_eq(h2_hpack_static_name("dateXYZ", 4), 33);
}

static void literal_round_trip(unsigned name_index, const char *name, const char *value,
                               size_t vlen)
{
    size_t nlen = name_index > 0 ? 0 : strlen(name);
    size_t max = H2_HPACK_LITERAL_MAX(nlen, vlen);
    uint8_t *out = malloc(max + 1);
    cr_assert(out != NULL);
    out[max] = 0x5a;
    size_t n = h2_hpack_literal(out, name_index, name, nlen, value, vlen);
    cr_assert_leq(n, max, "%s: %zu bytes, more than H2_HPACK_LITERAL_MAX", name, n);
    cr_assert_eq(out[max], 0x5a);
    /* 6.2.2: without indexing: 0000 and a 4-bit index. */
    cr_assert_eq(out[0] & 0xf0, 0x00);
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    fields *f = malloc(sizeof *f);
    cr_assert(f != NULL);
    cr_assert_eq(decode(&d, &s, out, n, f), 0, "%s", name);
    cr_assert_eq(f->n, 1);
    cr_assert_str_eq(f->name[0], name_index > 0 ? static_names[name_index] : name);
    cr_assert_eq(f->vlen[0], vlen);
    cr_assert(memcmp(f->value[0], value, vlen) == 0);
    cr_assert_eq(d.count, 0, "a literal without indexing went into the table");
    free(f);
    free(out);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

Test(hpack_encode, literal_round_trip, .timeout = 60)
{
    char value[500];
    for (size_t i = 0; i < sizeof value; i++)
        value[i] = (char)('a' + i % 26);
    literal_round_trip(31, NULL, "text/plain", 10);
    literal_round_trip(15, NULL, "", 0);
    literal_round_trip(61, NULL, "Basic", 5);
    literal_round_trip(0, "x-custom", "v", 1);
    literal_round_trip(0, "x-empty", "", 0);
    /* Lengths at and around the 7-bit prefix's 127 (5.1). */
    static const size_t lens[] = {126, 127, 128, 255, 256, 499};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        literal_round_trip(54, NULL, value, lens[i]);
        literal_round_trip(0, "x-long", value, lens[i]);
    }
    /* A name of 127 bytes and more (its length takes two bytes too). */
    char name[128];
    memset(name, 'n', 127);
    name[127] = '\0';
    literal_round_trip(0, name, "v", 1);
    /* Every static name by index. */
    for (unsigned i = 15; i <= 61; i++)
        literal_round_trip(i, NULL, "x", 1);
}

Test(hpack_encode, status, .timeout = 60)
{
    h2_hpack d;
    h2_scratch s = {0};
    h2_hpack_init(&d, 4096);
    for (int status = 100; status <= 599; status++) {
        uint8_t out[16];
        size_t n = h2_hpack_status(out, status);
        cr_assert_leq(n, H2_HPACK_LITERAL_MAX(0, 3));
        /* Appendix A: 8..14 are :status 200 204 206 304 400 404 500. */
        int indexed = status == 200 || status == 204 || status == 206 || status == 304 ||
                      status == 400 || status == 404 || status == 500;
        cr_assert_eq(n == 1, indexed, "%d: %zu bytes", status, n);
        fields f;
        cr_assert_eq(decode(&d, &s, out, n, &f), 0, "%d", status);
        char want[4];
        snprintf(want, sizeof want, "%d", status);
        cr_assert_eq(f.n, 1);
        cr_assert_str_eq(f.name[0], ":status", "%d", status);
        cr_assert_str_eq(f.value[0], want);
    }
    /* Nothing the encoder writes is indexed into the table (hpack.h). */
    cr_assert_eq(d.count, 0);
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* A whole response head as sink.c would build it, in one block. */
Test(hpack_encode, response_head, .timeout = 60)
{
    uint8_t block[512];
    size_t n = h2_hpack_status(block, 404);
    static const field head[] = {{"content-type", "text/html; charset=utf-8"},
                                 {"content-length", "1234"},
                                 {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                 {"server", "keel"},
                                 {"x-request-id", "abc"}};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) {
        size_t nlen = strlen(head[i].name), vlen = strlen(head[i].value);
        unsigned idx = h2_hpack_static_name(head[i].name, nlen);
        n += h2_hpack_literal(block + n, idx, head[i].name, nlen, head[i].value, vlen);
    }
    h2_hpack d;
    h2_scratch s = {0};
    fields f;
    h2_hpack_init(&d, 4096);
    cr_assert_eq(decode(&d, &s, block, n, &f), 0);
    cr_assert_eq(f.n, 6);
    cr_assert_str_eq(f.name[0], ":status");
    cr_assert_str_eq(f.value[0], "404");
    for (size_t i = 0; i < 5; i++) {
        cr_assert_str_eq(f.name[i + 1], head[i].name);
        cr_assert_str_eq(f.value[i + 1], head[i].value);
    }
    h2_hpack_free(&d);
    h2_scratch_free(&s);
}

/* ---- the emit callback and the scratch ---------------------------------------------------- */

static int stop_at_second(void *ud, const char *name, size_t nlen, unsigned name_index,
                          const char *value, size_t vlen)
{
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

static int check_long_value(void *ud, const char *name, size_t nlen, unsigned name_index,
                            const char *value, size_t vlen)
{
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
