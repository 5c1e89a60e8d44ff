/* The websocket module's codecs, compiled straight in (no host): the UTF-8
 * DFA against an arithmetic decoder on every sequence of up to three bytes
 * and on four-byte ones around every boundary, incremental runs split
 * anywhere, the tail of a split character; SHA-1 (FIPS 180 vectors) and
 * base64 (RFC 4648 vectors, the RFC 6455 key). */
#include <criterion/criterion.h>

#include "ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reference: 1 if s[0,n) is well-formed UTF-8 (Unicode 3.9 D92), decoding
 * code points arithmetically rather than with byte-range tables. */
static int ref_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t len;
        uint32_t cp, min;
        if (b < 0x80)
            len = 1, cp = b, min = 0;
        else if ((b & 0xE0) == 0xC0)
            len = 2, cp = b & 0x1F, min = 0x80;
        else if ((b & 0xF0) == 0xE0)
            len = 3, cp = b & 0x0F, min = 0x800;
        else if ((b & 0xF8) == 0xF0)
            len = 4, cp = b & 0x07, min = 0x10000;
        else
            return 0;
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static void check(const uint8_t *s, size_t n)
{
    uint8_t st = ws_utf8_run(WS_UTF8_ACCEPT, s, n);
    int valid = ref_valid(s, n);
    cr_assert_eq(st == WS_UTF8_ACCEPT, valid, "%02x %02x %02x %02x (%zu): dfa %d ref %d", s[0],
                 n > 1 ? s[1] : 0, n > 2 ? s[2] : 0, n > 3 ? s[3] : 0, n, st, valid);
    if (valid) /* a prefix of valid text is never rejected (no false fail-fast) */
        for (size_t k = 1; k < n; k++)
            cr_assert_neq(ws_utf8_run(WS_UTF8_ACCEPT, s, k), WS_UTF8_REJECT);
}

Test(ws_utf8, every_sequence_up_to_three_bytes, .timeout = 60)
{
    uint8_t s[3];
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (uint8_t)a;
        check(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (uint8_t)b;
            check(s, 2);
            for (unsigned c = 0; c < 256; c++) {
                s[2] = (uint8_t)c;
                uint8_t st = ws_utf8_run(WS_UTF8_ACCEPT, s, 3);
                if ((st == WS_UTF8_ACCEPT) != ref_valid(s, 3))
                    check(s, 3); /* fails with the details */
            }
        }
    }
}

Test(ws_utf8, four_bytes_around_every_boundary, .timeout = 60)
{
    static const uint8_t edges[] = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
    uint8_t s[4];
    for (unsigned a = 0xE0; a < 256; a++)
        for (unsigned b = 0; b < 256; b++)
            for (size_t c = 0; c < sizeof edges; c++)
                for (size_t d = 0; d < sizeof edges; d++) {
                    s[0] = (uint8_t)a, s[1] = (uint8_t)b, s[2] = edges[c], s[3] = edges[d];
                    check(s, 4);
                }
}

Test(ws_utf8, split_anywhere_and_tails, .timeout = 60)
{
    static const char *chars[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "~"};
    srand(7);
    for (int round = 0; round < 2000; round++) {
        uint8_t s[256];
        size_t n = 0;
        while (n < 200) {
            const char *ch = chars[rand() % 5];
            memcpy(s + n, ch, strlen(ch));
            n += strlen(ch);
        }
        int corrupt = rand() % 3 == 0;
        if (corrupt)
            s[rand() % n] = (uint8_t)rand();
        size_t cut = (size_t)rand() % (n + 1);
        uint8_t st = ws_utf8_run(WS_UTF8_ACCEPT, s, cut);
        if (st != WS_UTF8_REJECT) {
            /* What the tail says is unfinished is exactly what makes the
             * prefix not ACCEPT. */
            size_t tail = ws_utf8_tail(s, cut);
            cr_assert_eq(tail == 0, st == WS_UTF8_ACCEPT, "cut %zu tail %zu state %d", cut, tail,
                         st);
            cr_assert_eq(ws_utf8_run(WS_UTF8_ACCEPT, s, cut - tail), WS_UTF8_ACCEPT);
        }
        st = ws_utf8_run(st, s + cut, n - cut);
        cr_assert_eq(st == WS_UTF8_ACCEPT, ref_valid(s, n), "split at %zu", cut);
    }
    /* Fail fast: the first impossible byte rejects, whatever follows. */
    cr_assert_eq(ws_utf8_run(WS_UTF8_ACCEPT, (const uint8_t *)"ok\xc0", 3), WS_UTF8_REJECT);
    cr_assert_eq(ws_utf8_run(WS_UTF8_ACCEPT, (const uint8_t *)"\xed\xa0", 2), WS_UTF8_REJECT);
    cr_assert_eq(ws_utf8_run(WS_UTF8_ACCEPT, (const uint8_t *)"\xf4\x90", 2), WS_UTF8_REJECT);
}

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

Test(ws_sha1, fips_vectors)
{
    uint8_t d[20];
    char h[41];
    ws_sha1("abc", 3, d);
    hex(d, 20, h);
    cr_assert_str_eq(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
    ws_sha1("", 0, d);
    hex(d, 20, h);
    cr_assert_str_eq(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    ws_sha1(two, strlen(two), d);
    hex(d, 20, h);
    cr_assert_str_eq(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    char *million = malloc(1000000);
    cr_assert(million);
    memset(million, 'a', 1000000);
    ws_sha1(million, 1000000, d);
    free(million);
    hex(d, 20, h);
    cr_assert_str_eq(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    /* Lengths around the padding boundary (55, 56, 63, 64 bytes). */
    static const char *want[] = {
        "c1c8bbdc22796e28c0e15163d20899b65621d65a", "c2db330f6083854c99d4b5bfb6e8f29f201be699",
        "03f09f5b158a7a8cdad920bddc29b81c18a551f5", "0098ba824b5c16427bd7a1122a5a442a25ec644d"};
    static const size_t lens[] = {55, 56, 63, 64};
    char buf[64];
    memset(buf, 'a', sizeof buf);
    for (int i = 0; i < 4; i++) {
        ws_sha1(buf, lens[i], d);
        hex(d, 20, h);
        cr_assert_str_eq(h, want[i], "%zu bytes", lens[i]);
    }
}

Test(ws_base64, vectors_and_the_rfc6455_key)
{
    static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char enc[16];
    uint8_t dec[16];
    for (int i = 0; i < 7; i++) {
        ws_base64_encode((const uint8_t *)in[i], strlen(in[i]), enc);
        cr_assert_str_eq(enc, out[i]);
        long n = ws_base64_decode(out[i], strlen(out[i]), dec, sizeof dec);
        cr_assert_eq(n, (long)strlen(in[i]));
        cr_assert(memcmp(dec, in[i], (size_t)n) == 0);
    }
    /* RFC 6455 1.3: the key decodes to 16 bytes; its accept value. */
    uint8_t key[18];
    cr_assert_eq(ws_base64_decode("dGhlIHNhbXBsZSBub25jZQ==", 24, key, sizeof key), 16);
    char buf[64] = "dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t d[20];
    char acc[29];
    ws_sha1(buf, strlen(buf), d);
    ws_base64_encode(d, 20, acc);
    cr_assert_str_eq(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    /* Refused: bad length, bad characters, data after '=', non-zero pad bits. */
    static const char *bad[] = {"Zg=", "Zm9v!A==", "Zg==Zg==", "Z===", "Zh==", "Zm9=", "===="};
    for (int i = 0; i < 7; i++)
        cr_assert_eq(ws_base64_decode(bad[i], strlen(bad[i]), dec, sizeof dec), -1, "%s", bad[i]);
}
