/* fuzz_inflate — the deflate module's decompressor (modules/deflate/stream.c,
 * the "deflate" service's decompress) with its output cap, and its
 * compressor by round trip.
 *
 * stream.c calls no keel function, so it is compiled straight in (as
 * unit_deflate_stream does). The input's first byte picks the mode and the
 * stream's parameters:
 *
 *   bits 0-1  format (raw, zlib, gzip; 3: raw)
 *   bits 2-4  window bits 8..15
 *   bit  5    round trip instead of decompression
 *   bit  6    release() between pieces (what an idle connection does)
 *   bit  7    reset() once the stream ended or failed
 *
 * Decompression: the next two bytes give max_out (1..65536, 0 now and then:
 * no cap) and a seed for cutting the rest into pieces, each handed to
 * decompress() with that cap. Checked: no call ever hands out more than
 * max_out bytes (the guard against a "zip bomb"), a call that would have
 * is KEEL_ERR_LIMIT, every status is one of the documented ones, and a
 * stream that failed stays failed until reset.
 *
 * Round trip: the rest is compressed (cut into pieces with NONE and SYNC
 * flushes, then FINISH) and decompressed again; the output must be the
 * input, byte for byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kd.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_inflate: " __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Output of one decompress() call: counted against the cap, and kept (up
 * to a bound) for the round trip. */
typedef struct sink {
    uint64_t call_total; /* bytes handed out by the current call */
    uint64_t max_out;
    unsigned char *keep;
    size_t kept, cap;
} sink;

static int take(void *ud, const void *data, size_t len)
{
    sink *s = ud;
    CHECK(len > 0, "an empty piece of output");
    CHECK(len <= 16384 + 1, "a piece of %zu bytes (at most 16 KiB)", len);
    s->call_total += len;
    if (s->max_out > 0)
        CHECK(s->call_total <= s->max_out, "%llu bytes out of one call past max_out %llu",
              (unsigned long long)s->call_total, (unsigned long long)s->max_out);
    if (s->keep != NULL) {
        if (s->kept + len > s->cap)
            return KEEL_ERR_LIMIT; /* cannot happen in a round trip; bounded anyway */
        memcpy(s->keep + s->kept, data, len);
        s->kept += len;
    }
    return KEEL_OK;
}

static int status_known(int rc)
{
    return rc == KEEL_OK || rc == KEEL_ERR_LIMIT || rc == KEEL_ERR_PROTOCOL ||
           rc == KEEL_ERR_NOMEM || rc == KEEL_ERR_STATE;
}

static uint32_t next_seed(uint32_t *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

static void decompress_pieces(const keel_deflate_params *params, int flags, const uint8_t *data,
                              size_t size)
{
    if (size < 2)
        return;
    uint64_t max_out = ((uint64_t)data[0] << 8 | data[1]);
    max_out = max_out == 0 ? 0 : max_out + 1; /* 0: no cap (the output is still bounded below) */
    uint32_t seed = (uint32_t)data[0] * 31u + data[1];
    data += 2;
    size -= 2;

    keel_deflate *s = kd_decompressor_new(params);
    CHECK(s != NULL, "decompressor_new failed");
    sink out = {.max_out = max_out};
    size_t off = 0;
    int broken = 0;
    uint64_t grand_total = 0;
    while (off < size) {
        size_t piece = 1 + next_seed(&seed) % (size - off);
        out.call_total = 0;
        int rc = kd_decompress(s, data + off, piece, max_out, take, &out);
        CHECK(status_known(rc), "decompress returned %d", rc);
        if (broken)
            CHECK(rc == KEEL_ERR_STATE, "a failed stream went on (%d)", rc);
        grand_total += out.call_total;
        off += piece;
        if (rc != KEEL_OK) {
            broken = 1;
            if (flags & 0x80) {
                CHECK(kd_reset(s) == KEEL_OK, "reset failed");
                broken = 0;
            }
        } else if (flags & 0x40) {
            kd_release(s);
        }
        /* Without a cap, bound the work (a few bytes may stand for GBs). */
        if (max_out == 0 && grand_total > (16u << 20))
            break;
    }
    kd_free(s);
}

static void round_trip(const keel_deflate_params *params, const uint8_t *data, size_t size)
{
    keel_deflate *c = kd_compressor_new(params);
    keel_deflate *d = kd_decompressor_new(params);
    CHECK(c != NULL && d != NULL, "stream_new failed");
    /* The compressed bytes, then their decompression. */
    sink z = {.cap = size + size / 8 + 1024};
    z.keep = malloc(z.cap);
    CHECK(z.keep != NULL, "malloc");
    uint32_t seed = size > 0 ? data[0] : 7;
    size_t off = 0;
    while (off < size) {
        size_t piece = 1 + next_seed(&seed) % (size - off);
        int flush = (seed & 3) == 0 ? KEEL_DEFLATE_SYNC : KEEL_DEFLATE_NONE;
        int rc = kd_compress(c, data + off, piece, flush, take, &z);
        CHECK(rc == KEEL_OK, "compress returned %d", rc);
        off += piece;
    }
    int rc = kd_compress(c, NULL, 0, KEEL_DEFLATE_FINISH, take, &z);
    CHECK(rc == KEEL_OK, "compress(FINISH) returned %d", rc);

    sink back = {.cap = size + 1};
    back.keep = malloc(back.cap);
    CHECK(back.keep != NULL, "malloc");
    rc = kd_decompress(d, z.keep, z.kept, size + 1, take, &back);
    CHECK(rc == KEEL_OK, "decompressing our own output returned %d", rc);
    CHECK(back.kept == size && (size == 0 || memcmp(back.keep, data, size) == 0),
          "the round trip changed the data (%zu bytes in, %zu out)", size, back.kept);
    free(z.keep);
    free(back.keep);
    kd_free(c);
    kd_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int flags = data[0];
    keel_deflate_params params = {
        .size = sizeof params,
        .format = (flags & 3) == 3 ? KEEL_DEFLATE_RAW : (flags & 3),
        .level = 1 + (int)(size % 9),
        .window_bits = 8 + ((flags >> 2) & 7),
        .mem_level = 1 + (int)(size % 9),
    };
    if (flags & 0x20)
        round_trip(&params, data + 1, size - 1);
    else
        decompress_pieces(&params, flags, data + 1, size - 1);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kd_set_defaults(&(kd_defaults){.level = 6, .mem_level = 8});
    return 0;
}
