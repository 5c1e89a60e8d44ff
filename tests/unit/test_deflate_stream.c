/* The deflate module's compression service (modules/deflate/stream.c),
 * compiled straight into this program: no host, no module loading. Output
 * is checked against zlib used directly, so a bug shared by our compressor
 * and our decompressor cannot hide. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "kd.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct sink {
    unsigned char *data;
    size_t len, cap;
    size_t calls, largest;
    int fail_after; /* > 0: the n-th call returns -42 */
} sink;

static int sink_out(void *userdata, const void *data, size_t len)
{
    sink *k = userdata;
    k->calls++;
    if (k->fail_after > 0 && (int)k->calls >= k->fail_after)
        return -42;
    cr_assert(len > 0, "empty output piece");
    if (len > k->largest)
        k->largest = len;
    if (k->len + len > k->cap) {
        k->cap = (k->len + len) * 2;
        k->data = realloc(k->data, k->cap);
        cr_assert(k->data);
    }
    memcpy(k->data + k->len, data, len);
    k->len += len;
    return KEEL_OK;
}

static void sink_free(sink *k)
{
    free(k->data);
    memset(k, 0, sizeof *k);
}

/* Text that compresses well but not trivially. */
static unsigned char *make_text(size_t n)
{
    static const char *words[] = {"keel ",   "deflate ", "window ", "stream ", "zlib ",
                                  "header ", "gzip ",    "chunk ",  "\n",      "<p>"};
    unsigned char *b = malloc(n);
    cr_assert(b);
    uint32_t x = 2463534242u;
    size_t i = 0;
    while (i < n) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        const char *w = words[x % 10];
        for (size_t j = 0; w[j] && i < n; j++)
            b[i++] = (unsigned char)w[j];
    }
    return b;
}

/* Inflates with zlib itself (windowBits as zlib wants them). */
static unsigned char *zlib_inflate(const unsigned char *in, size_t len, int wbits, size_t *outlen)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert(inflateInit2(&z, wbits) == Z_OK);
    size_t cap = len * 4 + 1024, n = 0;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc;
    do {
        if (cap - n < 65536) {
            cap *= 2;
            out = realloc(out, cap);
        }
        z.next_out = out + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
    } while (rc == Z_OK && (z.avail_in > 0 || z.avail_out == 0));
    cr_assert(rc == Z_STREAM_END || rc == Z_OK || rc == Z_BUF_ERROR, "zlib inflate: %d (%s)", rc,
              z.msg ? z.msg : "");
    inflateEnd(&z);
    *outlen = n;
    return out;
}

static keel_deflate *compressor(int format, int level, int wbits, int mem_level)
{
    keel_deflate_params p = {sizeof p, format, level, wbits, mem_level};
    keel_deflate *s = kd_compressor_new(&p);
    cr_assert(s, "compressor_new(%d, %d, %d, %d)", format, level, wbits, mem_level);
    return s;
}

static keel_deflate *decompressor(int format, int wbits)
{
    keel_deflate_params p = {sizeof p, format, 0, wbits, 0};
    keel_deflate *s = kd_decompressor_new(&p);
    cr_assert(s);
    return s;
}

/* ---- compression, checked with zlib ------------------------------------------- */

static void roundtrip_format(int format, int zlib_wbits)
{
    size_t n = 300000;
    unsigned char *text = make_text(n);
    keel_deflate *c = compressor(format, 0, 0, 0);
    sink k = {0};
    /* In uneven pieces without flushing, then the end. */
    size_t at = 0, step = 777;
    while (at < n) {
        size_t take = n - at < step ? n - at : step;
        cr_assert_eq(kd_compress(c, text + at, take, KEEL_DEFLATE_NONE, sink_out, &k), KEEL_OK);
        at += take;
        step = step * 3 % 50000 + 1;
    }
    cr_assert_eq(kd_compress(c, NULL, 0, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    cr_assert(k.len < n / 2, "%zu bytes compressed to %zu", n, k.len);
    cr_assert(k.largest <= 16384, "a piece of %zu bytes", k.largest);
    if (format == KEEL_DEFLATE_GZIP)
        cr_assert(k.data[0] == 0x1f && k.data[1] == 0x8b, "no gzip magic (RFC 1952 2.3.1)");
    if (format == KEEL_DEFLATE_ZLIB)
        cr_assert((k.data[0] & 0x0f) == 8 && ((k.data[0] << 8) | k.data[1]) % 31 == 0,
                  "no zlib header (RFC 1950 2.2)");
    size_t outlen;
    unsigned char *back = zlib_inflate(k.data, k.len, zlib_wbits, &outlen);
    cr_assert(outlen == n && memcmp(back, text, n) == 0, "zlib decodes %zu of %zu bytes", outlen,
              n);

    /* And our own decompressor, fed in small pieces. */
    keel_deflate *d = decompressor(format, 0);
    sink k2 = {0};
    for (size_t i = 0; i < k.len; i += 1000) {
        size_t take = k.len - i < 1000 ? k.len - i : 1000;
        cr_assert_eq(kd_decompress(d, k.data + i, take, 0, sink_out, &k2), KEEL_OK);
    }
    cr_assert(k2.len == n && memcmp(k2.data, text, n) == 0);
    cr_assert(k2.largest <= 16384);
    kd_free(d);
    free(back);
    sink_free(&k);
    sink_free(&k2);
    kd_free(c);
    free(text);
}

Test(deflate_stream, raw_roundtrip, .timeout = 30)
{
    roundtrip_format(KEEL_DEFLATE_RAW, -15);
}

Test(deflate_stream, zlib_roundtrip, .timeout = 30)
{
    roundtrip_format(KEEL_DEFLATE_ZLIB, 15);
}

Test(deflate_stream, gzip_roundtrip, .timeout = 30)
{
    roundtrip_format(KEEL_DEFLATE_GZIP, 31);
}

Test(deflate_stream, every_level_and_mem_level, .timeout = 60)
{
    unsigned char *text = make_text(20000);
    for (int level = 1; level <= 9; level++) {
        for (int ml = 1; ml <= 9; ml += 4) {
            keel_deflate *c = compressor(KEEL_DEFLATE_ZLIB, level, 0, ml);
            sink k = {0};
            cr_assert_eq(kd_compress(c, text, 20000, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
            size_t outlen;
            unsigned char *back = zlib_inflate(k.data, k.len, 15, &outlen);
            cr_assert(outlen == 20000 && memcmp(back, text, 20000) == 0, "level %d mem_level %d",
                      level, ml);
            free(back);
            sink_free(&k);
            kd_free(c);
        }
    }
    free(text);
}

/* RFC 7692 7.2.1: a sync flush ends on a byte boundary with an empty stored
 * block, 00 00 ff ff, and everything before it decodes without the rest. */
Test(deflate_stream, sync_flush_ends_with_empty_stored_block, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_RAW, 0, 0, 0);
    sink k = {0};
    const char *msg = "Hello, permessage-deflate! Hello, permessage-deflate!";
    cr_assert_eq(kd_compress(c, msg, strlen(msg), KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
    cr_assert(k.len > 4 && memcmp(k.data + k.len - 4, "\x00\x00\xff\xff", 4) == 0,
              "no 00 00 ff ff at the end");
    size_t outlen;
    unsigned char *back = zlib_inflate(k.data, k.len, -15, &outlen);
    cr_assert(outlen == strlen(msg) && memcmp(back, msg, outlen) == 0);
    free(back);
    /* A second SYNC with no new input is not an error. */
    size_t before = k.len;
    cr_assert_eq(kd_compress(c, NULL, 0, KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
    cr_assert(k.len >= before);
    sink_free(&k);
    kd_free(c);
}

/* Context takeover (RFC 7692 7.2.3): the second message refers back to the
 * first, so the receiver must keep its window between them; the sender
 * strips the 00 00 ff ff tail and the receiver puts it back. */
Test(deflate_stream, context_takeover_between_messages, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_RAW, 0, 0, 0);
    keel_deflate *d = decompressor(KEEL_DEFLATE_RAW, 0);
    const char *msgs[] = {"The quick brown fox jumps over the lazy dog",
                          "The quick brown fox jumps over the lazy dog again",
                          "The quick brown fox"};
    size_t sizes[3];
    for (int i = 0; i < 3; i++) {
        sink k = {0}, out = {0};
        cr_assert_eq(kd_compress(c, msgs[i], strlen(msgs[i]), KEEL_DEFLATE_SYNC, sink_out, &k),
                     KEEL_OK);
        cr_assert(memcmp(k.data + k.len - 4, "\x00\x00\xff\xff", 4) == 0);
        k.len -= 4;
        sizes[i] = k.len;
        cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_OK);
        cr_assert_eq(kd_decompress(d, "\x00\x00\xff\xff", 4, 0, sink_out, &out), KEEL_OK);
        cr_assert(out.len == strlen(msgs[i]) && memcmp(out.data, msgs[i], out.len) == 0,
                  "message %d", i);
        sink_free(&k);
        sink_free(&out);
    }
    cr_assert(sizes[2] < 8, "the third message did not use the window (%zu bytes)", sizes[2]);
    kd_free(c);
    kd_free(d);
}

/* No context takeover (RFC 7692 7.1.1): after reset each message stands
 * alone, and a fresh zlib inflater decodes it. */
Test(deflate_stream, reset_forgets_the_window, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_RAW, 0, 0, 0);
    const char *msg = "no context takeover, no context takeover";
    for (int i = 0; i < 2; i++) {
        sink k = {0};
        cr_assert_eq(kd_compress(c, msg, strlen(msg), KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
        size_t outlen;
        unsigned char *back = zlib_inflate(k.data, k.len, -15, &outlen);
        cr_assert(outlen == strlen(msg) && memcmp(back, msg, outlen) == 0, "message %d", i);
        free(back);
        sink_free(&k);
        cr_assert_eq(kd_reset(c), KEEL_OK);
    }
    kd_free(c);
}

Test(deflate_stream, finish_ends_the_stream_until_reset, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_GZIP, 0, 0, 0);
    sink k = {0};
    cr_assert_eq(kd_compress(c, "abc", 3, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    cr_assert_eq(kd_compress(c, "abc", 3, KEEL_DEFLATE_NONE, sink_out, &k), KEEL_ERR_STATE);
    cr_assert_eq(kd_decompress(c, "abc", 3, 0, sink_out, &k), KEEL_ERR_STATE);
    cr_assert_eq(kd_reset(c), KEEL_OK);
    sink_free(&k);
    cr_assert_eq(kd_compress(c, "abc", 3, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    size_t outlen;
    unsigned char *back = zlib_inflate(k.data, k.len, 31, &outlen);
    cr_assert(outlen == 3 && memcmp(back, "abc", 3) == 0);
    free(back);
    sink_free(&k);
    kd_free(c);
}

Test(deflate_stream, invalid_parameters, .timeout = 30)
{
    keel_deflate_params p = {sizeof p, KEEL_DEFLATE_RAW, 0, 0, 0};
    p.format = 3;
    cr_assert_null(kd_compressor_new(&p));
    p.format = KEEL_DEFLATE_RAW;
    p.level = 10;
    cr_assert_null(kd_compressor_new(&p));
    p.level = 0;
    p.window_bits = 7;
    cr_assert_null(kd_compressor_new(&p));
    p.window_bits = 16;
    cr_assert_null(kd_decompressor_new(&p));
    p.window_bits = 0;
    p.mem_level = 10;
    cr_assert_null(kd_compressor_new(&p));
    p.size = 0;
    cr_assert_null(kd_compressor_new(&p));
    /* NULL params: every default, raw deflate. */
    keel_deflate *s = kd_compressor_new(NULL);
    cr_assert_not_null(s);
    sink k = {0};
    cr_assert_eq(kd_compress(s, "x", 1, 7, sink_out, &k), KEEL_ERR_INVAL);
    cr_assert_eq(kd_compress(s, NULL, 1, KEEL_DEFLATE_NONE, sink_out, &k), KEEL_ERR_INVAL);
    kd_free(s);
    kd_free(NULL);
}

/* A struct from a caller built before mem_level existed: size covers the
 * first fields only, and mem_level is the [deflate] default. */
Test(deflate_stream, older_params_struct, .timeout = 30)
{
    kd_set_defaults(&(kd_defaults){1, 2});
    keel_deflate_params p = {offsetof(keel_deflate_params, mem_level), KEEL_DEFLATE_ZLIB, 0, 0, 99};
    keel_deflate *c = kd_compressor_new(&p);
    cr_assert_not_null(c, "mem_level 99 beyond size was read");
    sink k = {0};
    cr_assert_eq(kd_compress(c, "abc", 3, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    /* RFC 1950 2.2: FLEVEL 0 is "fastest", which level 1 writes. */
    cr_assert_eq(k.data[1] >> 6, 0, "level %d, not the default 1", k.data[1] >> 6);
    sink_free(&k);
    kd_free(c);
    kd_set_defaults(&(kd_defaults){6, 8});
}

/* zlib cannot compress with a 256-byte window: 8 means 9 (deflate.h). The
 * decompressor accepts what such a peer sends. */
Test(deflate_stream, window_bits_8_means_9, .timeout = 30)
{
    unsigned char *text = make_text(5000);
    for (int format = 0; format <= 2; format++) {
        keel_deflate *c = compressor(format, 0, 8, 0);
        keel_deflate *d = decompressor(format, 8);
        sink k = {0}, out = {0};
        cr_assert_eq(kd_compress(c, text, 5000, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
        cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_OK);
        cr_assert(out.len == 5000 && memcmp(out.data, text, 5000) == 0, "format %d", format);
        sink_free(&k);
        sink_free(&out);
        kd_free(c);
        kd_free(d);
    }
    free(text);
}

/* ---- decompression ---------------------------------------------------------------- */

/* n zero bytes as one gzip member at `level`, in k. */
static void gzip_zeros(size_t n, int level, sink *k)
{
    unsigned char *zeros = calloc(1, n);
    keel_deflate *c = compressor(KEEL_DEFLATE_GZIP, level, 0, 0);
    cr_assert_eq(kd_compress(c, zeros, n, KEEL_DEFLATE_FINISH, sink_out, k), KEEL_OK);
    kd_free(c);
    free(zeros);
}

/* The zip-bomb guard: 16 MiB of zeros compress to about 16 KiB. */
Test(deflate_stream, max_out_stops_a_bomb, .timeout = 30)
{
    size_t n = 16u << 20;
    sink k = {0};
    gzip_zeros(n, 9, &k);
    cr_assert(k.len < 64 * 1024);

    keel_deflate *d = decompressor(KEEL_DEFLATE_GZIP, 0);
    sink out = {0};
    cr_assert_eq(kd_decompress(d, k.data, k.len, 1u << 20, sink_out, &out), KEEL_ERR_LIMIT);
    cr_assert(out.len <= 1u << 20, "%zu bytes came out past the limit", out.len);
    cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_ERR_STATE,
                 "a stream that failed must stay unusable");
    kd_free(d);

    /* Exactly at the limit is fine. */
    d = decompressor(KEEL_DEFLATE_GZIP, 0);
    sink_free(&out);
    cr_assert_eq(kd_decompress(d, k.data, k.len, n, sink_out, &out), KEEL_OK);
    cr_assert_eq(out.len, n);
    kd_free(d);
    sink_free(&out);
    sink_free(&k);
}

/* A call stopped mid-input (here by the output limit) leaves input zlib did
 * not take. After a reset, or a release and the next use (which may get a
 * kept state), the stream starts from the new input, not from that rest. */
Test(deflate_stream, reset_and_release_drop_the_unread_input, .timeout = 30)
{
    size_t n = 1u << 20;
    sink k = {0};
    gzip_zeros(n, 6, &k);
    keel_deflate *d = decompressor(KEEL_DEFLATE_GZIP, 0);
    for (int round = 0; round < 2; round++) {
        sink out = {0};
        cr_assert_eq(kd_decompress(d, k.data, k.len, 4096, sink_out, &out), KEEL_ERR_LIMIT);
        sink_free(&out);
        if (round == 0)
            cr_assert_eq(kd_reset(d), KEEL_OK);
        else
            kd_release(d);
        cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_OK,
                     "round %d: the old input's rest was inflated first", round);
        cr_assert_eq(out.len, n);
        sink_free(&out);
        kd_reset(d);
    }
    kd_free(d);
    sink_free(&k);
}

Test(deflate_stream, corrupt_input_is_a_protocol_error, .timeout = 30)
{
    sink out = {0};
    keel_deflate *d = decompressor(KEEL_DEFLATE_ZLIB, 0);
    cr_assert_eq(kd_decompress(d, "\x78\x9c\xff\xff\xff\xff\xff", 7, 0, sink_out, &out),
                 KEEL_ERR_PROTOCOL);
    kd_free(d);
    d = decompressor(KEEL_DEFLATE_GZIP, 0);
    cr_assert_eq(kd_decompress(d, "not gzip at all", 15, 0, sink_out, &out), KEEL_ERR_PROTOCOL);
    kd_free(d);
    /* RFC 1951 3.2.3: block type 3 is reserved. */
    d = decompressor(KEEL_DEFLATE_RAW, 0);
    cr_assert_eq(kd_decompress(d, "\x07\x00", 2, 0, sink_out, &out), KEEL_ERR_PROTOCOL);
    kd_free(d);

    /* A corrupted checksum (RFC 1952 2.3.1 CRC32). */
    keel_deflate *c = compressor(KEEL_DEFLATE_GZIP, 0, 0, 0);
    sink k = {0};
    cr_assert_eq(kd_compress(c, "checksum me", 11, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    k.data[k.len - 6] ^= 0x55;
    d = decompressor(KEEL_DEFLATE_GZIP, 0);
    cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_ERR_PROTOCOL);
    kd_free(d);
    kd_free(c);
    sink_free(&k);
    sink_free(&out);
}

Test(deflate_stream, input_split_at_every_byte, .timeout = 30)
{
    unsigned char *text = make_text(3000);
    keel_deflate *c = compressor(KEEL_DEFLATE_GZIP, 0, 0, 0);
    sink k = {0}, out = {0};
    cr_assert_eq(kd_compress(c, text, 3000, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    keel_deflate *d = decompressor(KEEL_DEFLATE_GZIP, 0);
    for (size_t i = 0; i < k.len; i++)
        cr_assert_eq(kd_decompress(d, k.data + i, 1, 0, sink_out, &out), KEEL_OK, "byte %zu", i);
    cr_assert(out.len == 3000 && memcmp(out.data, text, 3000) == 0);
    sink_free(&k);
    sink_free(&out);
    kd_free(c);
    kd_free(d);
    free(text);
}

/* RFC 1952 2.2: a gzip file is a series of members. */
Test(deflate_stream, gzip_members_in_series, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_GZIP, 0, 0, 0);
    sink k = {0}, out = {0};
    cr_assert_eq(kd_compress(c, "first ", 6, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    cr_assert_eq(kd_reset(c), KEEL_OK);
    cr_assert_eq(kd_compress(c, "second", 6, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    keel_deflate *d = decompressor(KEEL_DEFLATE_GZIP, 0);
    cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_OK);
    cr_assert(out.len == 12 && memcmp(out.data, "first second", 12) == 0);
    sink_free(&k);
    sink_free(&out);
    kd_free(c);
    kd_free(d);
}

/* RFC 1950 defines one stream: bytes after its checksum are garbage. */
Test(deflate_stream, zlib_trailing_garbage, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_ZLIB, 0, 0, 0);
    sink k = {0}, out = {0};
    cr_assert_eq(kd_compress(c, "payload", 7, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_OK);
    sink_out(&k, "junk", 4);
    keel_deflate *d = decompressor(KEEL_DEFLATE_ZLIB, 0);
    cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_ERR_PROTOCOL);
    cr_assert(out.len == 7 && memcmp(out.data, "payload", 7) == 0);
    sink_free(&k);
    sink_free(&out);
    kd_free(c);
    kd_free(d);
}

/* A raw stream that ends with a final block (BFINAL) inside a WebSocket
 * connection with context takeover: the next stream may still refer to the
 * previous message's bytes (RFC 7692 7.2.3). */
Test(deflate_stream, raw_final_block_keeps_the_window, .timeout = 30)
{
    const char *m1 = "abcdefghijklmnopqrstuvwxyz0123456789";
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    unsigned char a[256], b[256];
    z.next_in = (Bytef *)m1;
    z.avail_in = (uInt)strlen(m1);
    z.next_out = a;
    z.avail_out = sizeof a;
    cr_assert(deflate(&z, Z_FINISH) == Z_STREAM_END);
    size_t alen = sizeof a - z.avail_out;
    /* The second stream uses the first message as its dictionary: a
     * back-reference into the previous message. */
    cr_assert(deflateReset(&z) == Z_OK);
    cr_assert(deflateSetDictionary(&z, (const Bytef *)m1, (uInt)strlen(m1)) == Z_OK);
    z.next_in = (Bytef *)m1;
    z.avail_in = (uInt)strlen(m1);
    z.next_out = b;
    z.avail_out = sizeof b;
    cr_assert(deflate(&z, Z_SYNC_FLUSH) == Z_OK);
    size_t blen = sizeof b - z.avail_out;
    deflateEnd(&z);

    keel_deflate *d = decompressor(KEEL_DEFLATE_RAW, 0);
    sink out = {0};
    cr_assert_eq(kd_decompress(d, a, alen, 0, sink_out, &out), KEEL_OK);
    cr_assert_eq(kd_decompress(d, b, blen, 0, sink_out, &out), KEEL_OK);
    cr_assert(out.len == 2 * strlen(m1));
    cr_assert(memcmp(out.data + strlen(m1), m1, strlen(m1)) == 0);
    sink_free(&out);
    kd_free(d);
}

Test(deflate_stream, callback_error_stops_and_propagates, .timeout = 30)
{
    unsigned char *text = make_text(200000);
    keel_deflate *c = compressor(KEEL_DEFLATE_RAW, 1, 0, 0);
    sink k = {.fail_after = 1};
    cr_assert_eq(kd_compress(c, text, 200000, KEEL_DEFLATE_FINISH, sink_out, &k), -42);
    cr_assert_eq(k.calls, 1);
    cr_assert_eq(kd_compress(c, "x", 1, KEEL_DEFLATE_FINISH, sink_out, &k), KEEL_ERR_STATE);
    kd_free(c);
    free(text);
}

/* ---- memory ------------------------------------------------------------------------ */

/* zlib.h: deflate needs (1 << (windowBits + 2)) + (1 << (memLevel + 9))
 * bytes, inflate 1 << windowBits plus about 7 KiB; an idle stream none. */
Test(deflate_stream, memory_is_counted_and_released, .timeout = 30)
{
    keel_deflate *c = compressor(KEEL_DEFLATE_RAW, 0, 15, 8);
    size_t idle = kd_memory(c);
    cr_assert(idle <= 48, "a new stream holds %zu bytes", idle);
    sink k = {0};
    cr_assert_eq(kd_compress(c, "hello hello", 11, KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
    size_t live = kd_memory(c);
    cr_assert(live >= (1u << 17) + (1u << 17) && live < 300000, "live compressor: %zu", live);
    kd_release(c);
    cr_assert_eq(kd_memory(c), idle, "released: %zu bytes", kd_memory(c));
    /* Usable again, starting afresh (release resets). */
    sink_free(&k);
    cr_assert_eq(kd_compress(c, "hello", 5, KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
    size_t outlen;
    unsigned char *back = zlib_inflate(k.data, k.len, -15, &outlen);
    cr_assert(outlen == 5 && memcmp(back, "hello", 5) == 0);
    free(back);
    sink_free(&k);

    /* A small window and memLevel, as a WebSocket with many peers asks. */
    keel_deflate *small_c = compressor(KEEL_DEFLATE_RAW, 0, 9, 1);
    cr_assert_eq(kd_compress(small_c, "hi", 2, KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
    cr_assert(kd_memory(small_c) < 16 * 1024, "9/1 compressor: %zu", kd_memory(small_c));
    sink_free(&k);
    kd_free(small_c);

    keel_deflate *d = decompressor(KEEL_DEFLATE_RAW, 15);
    cr_assert_eq(kd_reset(c), KEEL_OK); /* d knows nothing of "hello" */
    cr_assert_eq(kd_compress(c, "hello hello", 11, KEEL_DEFLATE_SYNC, sink_out, &k), KEEL_OK);
    sink out = {0};
    cr_assert_eq(kd_decompress(d, k.data, k.len, 0, sink_out, &out), KEEL_OK);
    cr_assert(kd_memory(d) > 7000 && kd_memory(d) < (1u << 15) + 16000, "inflater: %zu",
              kd_memory(d));
    kd_release(d);
    cr_assert(kd_memory(d) <= 48);
    sink_free(&k);
    sink_free(&out);
    kd_free(c);
    kd_free(d);
}
