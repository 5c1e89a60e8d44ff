/* keel/deflate.h — the compression service of the `deflate` module.
 *
 * The deflate module links zlib and publishes this table as the service
 * "deflate"; other modules (websocket's permessage-deflate, a third party's
 * protocol) use it without linking zlib themselves. It is also the pattern
 * for any module that offers an API to others: a versioned table of
 * function pointers, looked up once in load, behind call wrappers.
 *
 * Use, from a module that lists "deflate" among its dependencies (or that
 * treats it as optional, as websocket does):
 *
 *     #include <keel/keel.h>
 *     #include <keel/deflate.h>
 *
 *     KEEL_DEFLATE_DEFINE   // once per module, at file scope
 *
 *     static int my_load(keel_module *m)
 *     {
 *         if (keel_deflate_bind(m) != KEEL_OK)
 *             ...   // no deflate module loaded: go without compression
 *     }
 *
 * and then keel_deflate_compressor_new(), keel_deflate_compress(), ...
 * Streams belong to the thread that uses them (one at a time; typically a
 * connection's worker); the service itself keeps no lock.
 */
#ifndef KEEL_DEFLATE_H
#define KEEL_DEFLATE_H

#include "keel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KEEL_DEFLATE_SERVICE     "deflate"
#define KEEL_DEFLATE_API_VERSION 1

/* One compression or decompression stream (opaque). */
typedef struct keel_deflate keel_deflate;

/* The stream's framing. */
enum keel_deflate_format {
    KEEL_DEFLATE_RAW = 0,  /* RFC 1951 alone (permessage-deflate, RFC 7692) */
    KEEL_DEFLATE_ZLIB = 1, /* RFC 1950 (HTTP "deflate", RFC 9110 8.4.1.2) */
    KEEL_DEFLATE_GZIP = 2  /* RFC 1952 (HTTP "gzip") */
};

/* How far compress() flushes. */
enum keel_deflate_flush {
    KEEL_DEFLATE_NONE = 0,  /* keep what compresses better with more input */
    KEEL_DEFLATE_SYNC = 1,  /* everything so far, ending on a byte boundary with an
                               empty stored block (00 00 ff ff, RFC 7692 7.2.1) */
    KEEL_DEFLATE_FINISH = 2 /* end the stream (its trailer for zlib and gzip) */
};

/* Parameters of a new stream. Set size to sizeof(keel_deflate_params);
 * grows at the end; a zero field means "the [deflate] section's setting". */
typedef struct keel_deflate_params {
    size_t size;
    int format; /* enum keel_deflate_format */
    int level;  /* 1..9 (compression only); 0: [deflate] level */
    /* 8..15: the LZ77 window is 2^window_bits bytes; 0: 15. zlib cannot
     * compress with 8 (256 bytes; refused since zlib 1.2.9), so 8 means 9
     * for a compressor, and for a decompressor too, which then also takes
     * what a peer whose zlib made the same change sends. A WebSocket
     * server therefore declines an offer of server_max_window_bits=8
     * (RFC 7692 7.1.2.1): its compressor cannot keep that promise. */
    int window_bits;
    int mem_level; /* 1..9 (compression only): zlib's memLevel; 0: [deflate] mem_level */
} keel_deflate_params;

/* Where output goes: called zero or more times per compress/decompress
 * call, with bytes valid during the call only. A negative return stops the
 * operation, which then returns that status. */
typedef int (*keel_deflate_out_fn)(void *userdata, const void *data, size_t len);

/* The service table, published as KEEL_DEFLATE_SERVICE. Grows at the end
 * with KEEL_DEFLATE_API_VERSION bumped; `size` says how much of it the
 * publishing module has. */
typedef struct keel_deflate_api {
    size_t size;

    /* New streams. NULL for invalid parameters or out of memory. A stream
     * may take its large buffers lazily (on first use) and give them back
     * in release(). Any thread; the stream then belongs to the caller. */
    keel_deflate *(*compressor_new)(const keel_deflate_params *params);
    keel_deflate *(*decompressor_new)(const keel_deflate_params *params);

    /* Compresses len bytes of in (len may be 0 to just flush) and hands
     * the output to out, in pieces of at most 16 KiB. KEEL_OK,
     * KEEL_ERR_NOMEM, KEEL_ERR_STATE (after FINISH until reset, after an
     * error, or on a decompressor), KEEL_ERR_INVAL (a bad flush, in NULL
     * with len > 0), or out's negative status (the stream is then
     * unusable: what out refused is lost). */
    int (*compress)(keel_deflate *stream, const void *in, size_t len, int flush,
                    keel_deflate_out_fn out, void *userdata);

    /* Decompresses len bytes of in, handing the output to out. Stops with
     * KEEL_ERR_LIMIT once more than max_out bytes would have come out of
     * this call (0: no limit): the guard against a small input that
     * inflates without end. KEEL_ERR_PROTOCOL for corrupt input,
     * KEEL_ERR_NOMEM, KEEL_ERR_STATE (after an error, or on a
     * compressor), or out's negative status. The stream is unusable
     * after an error (until reset or release). Input may end anywhere: a
     * later call continues. After the end of a stream, more input is a
     * new gzip member (RFC 1952 2.2), a new raw stream on the same window
     * (a final block inside a permessage-deflate connection), or, for
     * zlib framing, KEEL_ERR_PROTOCOL. */
    int (*decompress)(keel_deflate *stream, const void *in, size_t len, uint64_t max_out,
                      keel_deflate_out_fn out, void *userdata);

    /* Forgets the history (the window), as if the stream were new, but
     * keeps its settings: "no context takeover" (RFC 7692 7.1.1) between
     * messages. Also makes a stream usable again after FINISH or an
     * error. KEEL_OK, or KEEL_ERR_INVAL for NULL. */
    int (*reset)(keel_deflate *stream);

    /* Gives back the stream's large buffers (the window, the hash chains)
     * while it sits idle between messages, and resets it: what an idle
     * connection with no context takeover should hold is nothing. The next
     * call takes them again. A released stream holds 24 bytes (64-bit); a
     * compressor at work (1 << (window_bits + 2)) + (1 << (mem_level + 9))
     * bytes plus 6 KiB (256 KiB with 15 and 8), a decompressor
     * (1 << window_bits) plus 7 KiB. */
    void (*release)(keel_deflate *stream);

    /* Frees the stream (NULL is fine). */
    void (*free)(keel_deflate *stream);

    /* Bytes the stream holds now, for memory accounting. */
    size_t (*memory)(const keel_deflate *stream);
} keel_deflate_api;

/* ---- Call wrappers ---------------------------------------------------------
 * KEEL_DEFLATE_DEFINE defines the module's private pointer to the table
 * (once per module, in one source file); keel_deflate_bind() fills it from
 * the service registry in load. The wrappers then read like keel/api.h's. */

#ifdef __cplusplus
#define KEEL_DEFLATE_DEFINE                                                                        \
    extern "C" {                                                                                   \
    KEEL_HIDDEN const keel_deflate_api *keel__deflate = 0;                                         \
    }
#else
#define KEEL_DEFLATE_DEFINE KEEL_HIDDEN const keel_deflate_api *keel__deflate = 0;
#endif

extern KEEL_HIDDEN const keel_deflate_api *keel__deflate;

/* Looks the service up (main thread, from load). KEEL_ERR_NOTFOUND if no
 * deflate module is loaded (or it loads after the caller: name it in the
 * descriptor's dependencies, or load it first in the config), KEEL_ERR_ABI
 * if it is older than this header. */
static inline int keel_deflate_bind(keel_module *module)
{
    const void *table = 0;
    int rc = keel_service_lookup(module, KEEL_DEFLATE_SERVICE, KEEL_DEFLATE_API_VERSION, &table, 0);
    if (rc == KEEL_OK)
        keel__deflate = (const keel_deflate_api *)table;
    return rc;
}

/* 1 once keel_deflate_bind succeeded. */
static inline int keel_deflate_available(void)
{
    return keel__deflate != 0;
}

static inline keel_deflate *keel_deflate_compressor_new(const keel_deflate_params *params)
{
    return keel__deflate->compressor_new(params);
}
static inline keel_deflate *keel_deflate_decompressor_new(const keel_deflate_params *params)
{
    return keel__deflate->decompressor_new(params);
}
static inline int keel_deflate_compress(keel_deflate *s, const void *in, size_t len, int flush,
                                        keel_deflate_out_fn out, void *userdata)
{
    return keel__deflate->compress(s, in, len, flush, out, userdata);
}
static inline int keel_deflate_decompress(keel_deflate *s, const void *in, size_t len,
                                          uint64_t max_out, keel_deflate_out_fn out, void *userdata)
{
    return keel__deflate->decompress(s, in, len, max_out, out, userdata);
}
static inline int keel_deflate_reset(keel_deflate *s)
{
    return keel__deflate->reset(s);
}
static inline void keel_deflate_release(keel_deflate *s)
{
    keel__deflate->release(s);
}
static inline void keel_deflate_free(keel_deflate *s)
{
    keel__deflate->free(s);
}
static inline size_t keel_deflate_memory(const keel_deflate *s)
{
    return keel__deflate->memory(s);
}

#ifdef __cplusplus
}
#endif

#endif
