/* The h2 module's HPACK codec (RFC 7541), its two codings: integers with
 * an N-bit prefix (5.1; Appendix C.1, and the encoder checked against a
 * 64-bit reference decoding) and the Huffman code (5.2, Appendix B) on the
 * strings of C.4, every byte value and random strings, with the codes a
 * decoder must refuse. */
#include <criterion/criterion.h>

#include "hpack_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The same errors past the first bytes: the decoder takes eight bytes at
 * a time while there are eight, and each error is found wherever it falls
 * in them. */
Test(hpack_huffman, invalid_codes_in_long_strings, .timeout = 60)
{
    char text[40], out[80];
    memset(text, 'a', sizeof text); /* 5 bits each: 200 bits, 25 bytes */
    for (size_t n = 8; n <= sizeof text; n++) {
        uint8_t enc[64];
        size_t len = h2_huff_encode(text, n, enc);
        cr_assert_eq(h2_huff_decode(enc, len, out), (long)n);
        unsigned pad = (unsigned)(len * 8 - n * 5);
        if (pad > 0) {
            /* A zero in the padding. */
            enc[len - 1] &= (uint8_t)~1u;
            cr_assert_eq(h2_huff_decode(enc, len, out), -1, "%zu: padding with a zero", n);
            enc[len - 1] |= 1u;
        }
        /* A whole byte of ones more: padding longer than 7 bits. */
        enc[len] = 0xff;
        cr_assert_eq(h2_huff_decode(enc, len + 1, out), -1, "%zu: a byte of padding", n);
        /* EOS (30 ones) after the symbols, then the padding. */
        memset(enc + len, 0xff, 4);
        cr_assert_eq(h2_huff_decode(enc, len + 4, out), -1, "%zu: EOS", n);
    }
}
