/* codings.c — the content codings besides zlib's, for the HTTP filter:
 * Brotli (RFC 7932, "br") with libbrotlienc and Zstandard (RFC 8878,
 * "zstd") with libzstd, each built in only where CMake found its library
 * (KD_HAVE_BROTLI, KD_HAVE_ZSTD): without them the module still builds,
 * and offers gzip and deflate alone.
 *
 * The interface is kd_compress's: pieces in, the coded bytes to `out` in
 * 16 KiB pieces that live for the call only, a flush after a piece of a
 * stream whose length is unknown (server-sent events decode as they come)
 * and a finish at the end.
 *
 * No keel function is called here.
 */
#include <stdlib.h>

#include "kd.h"

#define KD_CHUNK 16384

#ifdef KD_HAVE_BROTLI
#include <brotli/encode.h>
#endif
#ifdef KD_HAVE_ZSTD
#include <zstd.h>
#endif

struct kd_coder {
    int coding;
#ifdef KD_HAVE_BROTLI
    BrotliEncoderState *br;
#endif
#ifdef KD_HAVE_ZSTD
    ZSTD_CStream *zs;
#endif
};

unsigned kd_coder_available(void)
{
    unsigned mask = 0;
#ifdef KD_HAVE_BROTLI
    mask |= 1u << KD_BR;
#endif
#ifdef KD_HAVE_ZSTD
    mask |= 1u << KD_ZSTD;
#endif
    return mask;
}

kd_coder *kd_coder_new(int coding, int level, int64_t length)
{
    if (!(kd_coder_available() & (1u << coding)))
        return NULL;
    kd_coder *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->coding = coding;
#ifdef KD_HAVE_BROTLI
    if (coding == KD_BR) {
        c->br = BrotliEncoderCreateInstance(NULL, NULL, NULL);
        if (c->br == NULL) {
            free(c);
            return NULL;
        }
        BrotliEncoderSetParameter(c->br, BROTLI_PARAM_QUALITY, (uint32_t)level);
        /* A known small length needs no 4 MiB window (the window's bits
         * follow the length, 10 at least: RFC 7932 9.1). */
        uint32_t lgwin = 22;
        while (length > 0 && lgwin > 10 && length < ((int64_t)1 << (lgwin - 1)))
            lgwin--;
        BrotliEncoderSetParameter(c->br, BROTLI_PARAM_LGWIN, lgwin);
        if (length > 0)
            BrotliEncoderSetParameter(c->br, BROTLI_PARAM_SIZE_HINT,
                                      length > (1 << 30) ? (1u << 30) : (uint32_t)length);
    }
#endif
#ifdef KD_HAVE_ZSTD
    if (coding == KD_ZSTD) {
        c->zs = ZSTD_createCStream();
        if (c->zs == NULL) {
            free(c);
            return NULL;
        }
        ZSTD_CCtx_setParameter(c->zs, ZSTD_c_compressionLevel, level);
        /* RFC 8878 3.1.1.1.2: browsers may refuse windows above 8 MiB. */
        ZSTD_CCtx_setParameter(c->zs, ZSTD_c_windowLog, 23);
        if (length >= 0)
            ZSTD_CCtx_setPledgedSrcSize(c->zs, (unsigned long long)length);
    }
#endif
    (void)level;
    (void)length;
    return c;
}

void kd_coder_free(kd_coder *c)
{
    if (c == NULL)
        return;
#ifdef KD_HAVE_BROTLI
    if (c->br != NULL)
        BrotliEncoderDestroyInstance(c->br);
#endif
#ifdef KD_HAVE_ZSTD
    if (c->zs != NULL)
        ZSTD_freeCStream(c->zs);
#endif
    free(c);
}

int kd_coder_compress(kd_coder *c, const void *in, size_t len, int flush, keel_deflate_out_fn out,
                      void *userdata)
{
    unsigned char buf[KD_CHUNK];
#ifdef KD_HAVE_BROTLI
    if (c->coding == KD_BR) {
        BrotliEncoderOperation op = flush == KEEL_DEFLATE_FINISH ? BROTLI_OPERATION_FINISH
                                    : flush == KEEL_DEFLATE_SYNC ? BROTLI_OPERATION_FLUSH
                                                                 : BROTLI_OPERATION_PROCESS;
        size_t avail_in = len;
        const uint8_t *next_in = in;
        for (;;) {
            size_t avail_out = sizeof buf;
            uint8_t *next_out = buf;
            if (!BrotliEncoderCompressStream(c->br, op, &avail_in, &next_in, &avail_out, &next_out,
                                             NULL))
                return KEEL_ERR_STATE;
            size_t produced = sizeof buf - avail_out;
            int rc;
            if (produced > 0 && (rc = out(userdata, buf, produced)) < 0)
                return rc;
            if (avail_in == 0 && !BrotliEncoderHasMoreOutput(c->br) &&
                (op != BROTLI_OPERATION_FINISH || BrotliEncoderIsFinished(c->br)))
                return KEEL_OK;
        }
    }
#endif
#ifdef KD_HAVE_ZSTD
    if (c->coding == KD_ZSTD) {
        ZSTD_EndDirective op = flush == KEEL_DEFLATE_FINISH ? ZSTD_e_end
                               : flush == KEEL_DEFLATE_SYNC ? ZSTD_e_flush
                                                            : ZSTD_e_continue;
        ZSTD_inBuffer ib = {in, len, 0};
        for (;;) {
            ZSTD_outBuffer ob = {buf, sizeof buf, 0};
            size_t left = ZSTD_compressStream2(c->zs, &ob, &ib, op);
            if (ZSTD_isError(left))
                return KEEL_ERR_STATE;
            int rc;
            if (ob.pos > 0 && (rc = out(userdata, buf, ob.pos)) < 0)
                return rc;
            if (op == ZSTD_e_continue ? ib.pos == ib.size : left == 0)
                return KEEL_OK;
        }
    }
#endif
    (void)c;
    (void)buf;
    (void)in;
    (void)len;
    (void)flush;
    (void)out;
    (void)userdata;
    return KEEL_ERR_STATE;
}
