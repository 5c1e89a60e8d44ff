/* stream.c — the compression service (keel/deflate.h) on zlib.
 *
 * One keel_deflate is one zlib stream, compressing or decompressing, in
 * one of three framings: raw deflate (RFC 1951; permessage-deflate, RFC
 * 7692), zlib (RFC 1950; HTTP's "deflate", RFC 9110 8.4.1.2) or gzip (RFC
 * 1952). Memory is the point of the design:
 *
 *   - zlib's state (the z_stream, the window, the hash chains: about 256
 *     KiB to compress with the defaults, 40 KiB to inflate) is taken on
 *     first use and given back by release(), so a stream sitting idle
 *     between WebSocket messages holds only the small struct below;
 *   - every byte zlib allocates goes through kd_zalloc/kd_zfree, which
 *     count it, so memory() is exact rather than a formula;
 *   - output leaves through the caller's callback in pieces of at most
 *     KD_CHUNK bytes from a buffer on the stack: nothing grows with the
 *     size of the input.
 *
 * No keel function is called here (only keel's types), so the unit test
 * compiles this file into a plain program.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "kd.h"

#include <keel/util.h>

/* Output is handed over in pieces of this size: big enough that the
 * callback's cost (an HTTP body piece, a WebSocket frame fragment) is
 * amortised, small enough for any worker's stack. */
#define KD_CHUNK 16384

/* uInt is 32 bits: larger inputs are fed in slices. */
#define KD_SLICE (1u << 30)

/* What is left of a call's input. */
typedef struct kd_input {
    const unsigned char *next;
    size_t left;
} kd_input;

/* Once zlib has taken all it was given, gives it the next slice. */
static void feed(z_stream *z, kd_input *src)
{
    if (z->avail_in == 0 && src->left > 0) {
        uInt take = src->left > KD_SLICE ? KD_SLICE : (uInt)src->left;
        z->next_in = (Bytef *)src->next; /* zlib's API is not const-clean */
        z->avail_in = take;
        src->next += take;
        src->left -= take;
    }
}

enum { KD_COMPRESS = 0, KD_DECOMPRESS = 1 };

enum {
    KD_FRESH = 0, /* no zlib state (new, or released) */
    KD_LIVE = 1,  /* zlib state allocated and usable */
    KD_ENDED = 2, /* compressor: FINISH done; decompressor: the stream's end was read */
    KD_BROKEN = 3 /* an error: unusable until reset or release */
};

/* Kept small on purpose: this is all an idle (released) stream costs. */
struct keel_deflate {
    z_stream *z; /* NULL while FRESH */
    size_t mem;  /* bytes zlib holds through kd_zalloc, the z_stream included */
    unsigned char kind, state, format, level, window_bits, mem_level;
};

static kd_defaults defaults = {6, 8};

void kd_set_defaults(const kd_defaults *d)
{
    defaults = *d;
}

/* ---- counted allocation -------------------------------------------------
 * zfree is not told the size, so each block carries it in a header as large
 * as the strictest alignment, keeping zlib's structures aligned. */

typedef union kd_header {
    size_t size;
    max_align_t align;
} kd_header;

static void *kd_alloc(keel_deflate *s, size_t size)
{
    if (size > SIZE_MAX - sizeof(kd_header))
        return NULL;
    kd_header *h = malloc(sizeof *h + size);
    if (h == NULL)
        return NULL;
    h->size = sizeof *h + size;
    s->mem += h->size;
    return h + 1;
}

static void kd_dealloc(keel_deflate *s, void *p)
{
    if (p == NULL)
        return;
    kd_header *h = (kd_header *)p - 1;
    if (s != NULL) /* NULL: a kept state ended (kd_kept_free) */
        s->mem -= h->size;
    free(h);
}

static voidpf kd_zalloc(voidpf opaque, uInt items, uInt size)
{
    if (size != 0 && items > SIZE_MAX / size)
        return Z_NULL;
    return kd_alloc(opaque, (size_t)items * size);
}

static void kd_zfree(voidpf opaque, voidpf address)
{
    kd_dealloc(opaque, address);
}

/* ---- creating ------------------------------------------------------------- */

/* A field of params, or 0 if the caller's struct is too old to have it. */
#define KD_PARAM(p, field)                                                                         \
    ((p) != NULL && (p)->size >= offsetof(keel_deflate_params, field) + sizeof((p)->field)         \
         ? (p)->field                                                                              \
         : 0)

static keel_deflate *kd_new(const keel_deflate_params *p, int kind)
{
    int format = KD_PARAM(p, format);
    int level = KD_PARAM(p, level);
    int window_bits = KD_PARAM(p, window_bits);
    int mem_level = KD_PARAM(p, mem_level);
    if (p != NULL && p->size < sizeof p->size)
        return NULL;
    if (format != KEEL_DEFLATE_RAW && format != KEEL_DEFLATE_ZLIB && format != KEEL_DEFLATE_GZIP)
        return NULL;
    if (level == 0)
        level = defaults.level;
    if (mem_level == 0)
        mem_level = defaults.mem_level;
    if (window_bits == 0)
        window_bits = 15;
    if (level < 1 || level > 9 || mem_level < 1 || mem_level > 9 || window_bits < 8 ||
        window_bits > 15)
        return NULL;
    /* zlib (since 1.2.9) refuses a 256-byte window for raw deflate and
     * gzip and silently widens it to 512 for zlib framing; deflate.h says
     * 8 means 9. The inflater widens it too: a peer's zlib that was asked
     * for 8 compresses with 9, and a 256-byte window would reject its
     * back-references ("invalid distance too far back"). */
    if (window_bits == 8)
        window_bits = 9;
    keel_deflate *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->kind = (unsigned char)kind;
    s->state = KD_FRESH;
    s->format = (unsigned char)format;
    s->level = (unsigned char)level;
    s->window_bits = (unsigned char)window_bits;
    s->mem_level = (unsigned char)mem_level;
    return s;
}

keel_deflate *kd_compressor_new(const keel_deflate_params *params)
{
    return kd_new(params, KD_COMPRESS);
}

keel_deflate *kd_decompressor_new(const keel_deflate_params *params)
{
    return kd_new(params, KD_DECOMPRESS);
}

/* zlib's windowBits argument: negative for raw, +16 for gzip (zlib.h). */
static int zlib_window_bits(const keel_deflate *s)
{
    switch (s->format) {
    case KEEL_DEFLATE_RAW:
        return -(int)s->window_bits;
    case KEEL_DEFLATE_GZIP:
        return s->window_bits + 16;
    default:
        return s->window_bits;
    }
}

/* ---- released states kept for the next stream ------------------------------
 * A WebSocket connection without context takeover releases its streams
 * after every message, and the next message takes them again. Ended and
 * allocated anew each time, zlib's ~300 KiB went back to malloc per
 * message: glibc then trimmed the worker thread's arena (madvise, a TLB
 * shootdown across cores) and the next deflateInit2 faulted the pages in
 * again, half of the CPU of 4 KiB compressed echo. A few released states
 * are kept instead, reset, for the next stream with the same parameters;
 * the rest are ended as before. Streams belong to any thread, hence the
 * lock: two uncontended lock pairs a message. */
#define KD_KEPT_MAX 16

typedef struct kd_kept {
    z_stream *z;
    size_t mem;
    unsigned char kind, format, level, window_bits, mem_level;
} kd_kept;

static keel_mutex kept_lock = KEEL_MUTEX_INIT;
static kd_kept kept[KD_KEPT_MAX];
static size_t nkept;

static int same_params(const kd_kept *k, const keel_deflate *s)
{
    return k->kind == s->kind && k->format == s->format && k->level == s->level &&
           k->window_bits == s->window_bits && k->mem_level == s->mem_level;
}

/* Gives s a kept state with its parameters; 0 if there is none. */
static int kd_take_kept(keel_deflate *s)
{
    z_stream *z = NULL;
    size_t mem = 0;
    keel_mutex_lock(&kept_lock);
    for (size_t i = nkept; i-- > 0;) {
        if (same_params(&kept[i], s)) {
            z = kept[i].z;
            mem = kept[i].mem;
            kept[i] = kept[--nkept];
            break;
        }
    }
    keel_mutex_unlock(&kept_lock);
    if (z == NULL)
        return 0;
    z->opaque = s;
    s->mem += mem;
    s->z = z;
    s->state = KD_LIVE;
    return 1;
}

/* Resets zlib's stream. zlib leaves next_in/avail_in as the caller's: a
 * call that stopped mid-input (an error, the output limit) would have the
 * next one go on with the rest of that old input. */
static int kd_zreset(keel_deflate *s)
{
    s->z->next_in = Z_NULL;
    s->z->avail_in = 0;
    s->z->next_out = Z_NULL;
    s->z->avail_out = 0;
    return (s->kind == KD_COMPRESS ? deflateReset(s->z) : inflateReset(s->z)) == Z_OK;
}

/* Keeps s's state, reset, for a later stream; 0 if there is no room. */
static int kd_keep(keel_deflate *s)
{
    if (!kd_zreset(s))
        return 0;
    int kept_it = 0;
    keel_mutex_lock(&kept_lock);
    if (nkept < KD_KEPT_MAX) {
        s->z->opaque = NULL; /* no stream's count: s may be freed before reuse */
        kept[nkept++] =
            (kd_kept){s->z, s->mem, s->kind, s->format, s->level, s->window_bits, s->mem_level};
        kept_it = 1;
    }
    keel_mutex_unlock(&kept_lock);
    if (kept_it) {
        s->mem = 0;
        s->z = NULL;
        s->state = KD_FRESH;
    }
    return kept_it;
}

void kd_kept_free(void)
{
    keel_mutex_lock(&kept_lock);
    while (nkept > 0) {
        kd_kept *k = &kept[--nkept];
        if (k->kind == KD_COMPRESS)
            deflateEnd(k->z);
        else
            inflateEnd(k->z);
        kd_dealloc(NULL, k->z);
    }
    keel_mutex_unlock(&kept_lock);
}

/* Takes zlib's state if the stream has none (new or released). */
static int kd_wake(keel_deflate *s)
{
    if (s->z != NULL)
        return KEEL_OK;
    if (kd_take_kept(s))
        return KEEL_OK;
    z_stream *z = kd_alloc(s, sizeof *z);
    if (z == NULL)
        return KEEL_ERR_NOMEM;
    memset(z, 0, sizeof *z);
    z->zalloc = kd_zalloc;
    z->zfree = kd_zfree;
    z->opaque = s;
    int rc = s->kind == KD_COMPRESS ? deflateInit2(z, s->level, Z_DEFLATED, zlib_window_bits(s),
                                                   s->mem_level, Z_DEFAULT_STRATEGY)
                                    : inflateInit2(z, zlib_window_bits(s));
    if (rc != Z_OK) {
        kd_dealloc(s, z);
        return rc == Z_MEM_ERROR ? KEEL_ERR_NOMEM : KEEL_ERR_INVAL;
    }
    s->z = z;
    s->state = KD_LIVE;
    return KEEL_OK;
}

/* ---- compressing ------------------------------------------------------------ */

int kd_compress(keel_deflate *s, const void *in, size_t len, int flush, keel_deflate_out_fn out,
                void *userdata)
{
    if (s == NULL || out == NULL || (in == NULL && len > 0))
        return KEEL_ERR_INVAL;
    if (s->kind != KD_COMPRESS || s->state == KD_ENDED || s->state == KD_BROKEN)
        return KEEL_ERR_STATE;
    int zflush = flush == KEEL_DEFLATE_SYNC     ? Z_SYNC_FLUSH
                 : flush == KEEL_DEFLATE_FINISH ? Z_FINISH
                 : flush == KEEL_DEFLATE_NONE   ? Z_NO_FLUSH
                                                : -1;
    if (zflush < 0)
        return KEEL_ERR_INVAL;
    if (len == 0 && zflush == Z_NO_FLUSH)
        return KEEL_OK; /* nothing to do: do not even wake a released stream */
    int rc = kd_wake(s);
    if (rc != KEEL_OK)
        return rc;

    z_stream *z = s->z;
    kd_input src = {in, len};
    unsigned char buf[KD_CHUNK];
    for (;;) {
        feed(z, &src);
        z->next_out = buf;
        z->avail_out = sizeof buf;
        /* Flush only with the last slice: a flush per slice would cut the
         * deflate blocks short for nothing. */
        int zrc = deflate(z, src.left > 0 ? Z_NO_FLUSH : zflush);
        if (zrc == Z_STREAM_ERROR) {
            s->state = KD_BROKEN;
            return KEEL_ERR_STATE;
        }
        size_t produced = sizeof buf - z->avail_out;
        if (produced > 0 && (rc = out(userdata, buf, produced)) < 0) {
            /* The output is lost: the peer could not decode what follows. */
            s->state = KD_BROKEN;
            return rc;
        }
        if (zrc == Z_STREAM_END) {
            s->state = KD_ENDED;
            return KEEL_OK;
        }
        /* With room left in buf, zlib has taken all the input it was given
         * and flushed as asked (zlib.h, deflate()); Z_BUF_ERROR only says
         * there was nothing to do, as for a second SYNC in a row. */
        if (z->avail_out != 0 && z->avail_in == 0 && src.left == 0)
            return KEEL_OK;
    }
}

/* ---- decompressing ----------------------------------------------------------- */

/* The end of a raw stream (a final block, BFINAL) inside a WebSocket
 * connection with context takeover: the next message goes on with the
 * same window (RFC 7692 7.2.3), which inflateReset would drop. */
static int restart_keeping_window(keel_deflate *s)
{
    z_stream *z = s->z;
    uInt n = 0;
    unsigned char *dict = kd_alloc(s, (size_t)1 << s->window_bits);
    if (dict == NULL)
        return KEEL_ERR_NOMEM;
    int rc = inflateGetDictionary(z, dict, &n) == Z_OK && inflateReset(z) == Z_OK &&
                     (n == 0 || inflateSetDictionary(z, dict, n) == Z_OK)
                 ? KEEL_OK
                 : KEEL_ERR_PROTOCOL;
    kd_dealloc(s, dict);
    return rc;
}

int kd_decompress(keel_deflate *s, const void *in, size_t len, uint64_t max_out,
                  keel_deflate_out_fn out, void *userdata)
{
    if (s == NULL || out == NULL || (in == NULL && len > 0))
        return KEEL_ERR_INVAL;
    if (s->kind != KD_DECOMPRESS || s->state == KD_BROKEN)
        return KEEL_ERR_STATE;
    if (len == 0)
        return KEEL_OK;
    int rc = kd_wake(s);
    if (rc != KEEL_OK)
        return rc;

    z_stream *z = s->z;
    kd_input src = {in, len};
    uint64_t total = 0;
    int pending = 0; /* the last call filled buf: inflate may have more without input */
    unsigned char buf[KD_CHUNK];
    for (;;) {
        feed(z, &src);
        if (z->avail_in == 0 && !pending)
            return KEEL_OK;
        if (s->state == KD_ENDED) {
            /* Bytes after the end: a new gzip member (RFC 1952 2.2 allows a
             * series), a new raw stream on the same window, or, after a
             * zlib stream (RFC 1950 has no series), garbage. */
            if (s->format == KEEL_DEFLATE_ZLIB)
                goto corrupt;
            rc = s->format == KEEL_DEFLATE_GZIP
                     ? (inflateReset(z) == Z_OK ? KEEL_OK : KEEL_ERR_PROTOCOL)
                     : restart_keeping_window(s);
            if (rc != KEEL_OK) {
                s->state = KD_BROKEN;
                return rc;
            }
            s->state = KD_LIVE;
        }
        /* Never inflate more than one byte past the limit: a few bytes of
         * input can stand for gigabytes of output (a "zip bomb"). */
        size_t room = sizeof buf;
        if (max_out > 0 && max_out - total < room - 1)
            room = (size_t)(max_out - total) + 1;
        z->next_out = buf;
        z->avail_out = (uInt)room;
        int zrc = inflate(z, Z_NO_FLUSH);
        size_t produced = room - z->avail_out;
        pending = z->avail_out == 0;
        if (max_out > 0 && produced > max_out - total) {
            s->state = KD_BROKEN;
            return KEEL_ERR_LIMIT;
        }
        total += produced;
        if (produced > 0 && (rc = out(userdata, buf, produced)) < 0) {
            s->state = KD_BROKEN;
            return rc;
        }
        switch (zrc) {
        case Z_OK:
            break;
        case Z_STREAM_END:
            s->state = KD_ENDED;
            pending = 0;
            break;
        case Z_BUF_ERROR:
            /* No progress: all input taken (the rest comes in a later call)
             * or no room. With both input and room left, zlib is stuck. */
            if (z->avail_in != 0 && z->avail_out != 0)
                goto corrupt;
            break;
        case Z_MEM_ERROR:
            s->state = KD_BROKEN;
            return KEEL_ERR_NOMEM;
        default: /* Z_DATA_ERROR, Z_NEED_DICT (no preset dictionaries here) */
            goto corrupt;
        }
    }
corrupt:
    s->state = KD_BROKEN;
    return KEEL_ERR_PROTOCOL;
}

/* ---- life cycle ----------------------------------------------------------------- */

int kd_reset(keel_deflate *s)
{
    if (s == NULL)
        return KEEL_ERR_INVAL;
    if (s->z == NULL) {
        s->state = KD_FRESH;
        return KEEL_OK;
    }
    if (!kd_zreset(s)) {
        /* Cannot happen with a valid stream; start from scratch anyway. */
        kd_release(s);
        return KEEL_OK;
    }
    s->state = KD_LIVE;
    return KEEL_OK;
}

void kd_release(keel_deflate *s)
{
    if (s == NULL || s->z == NULL || kd_keep(s))
        return;
    if (s->kind == KD_COMPRESS)
        deflateEnd(s->z); /* Z_DATA_ERROR if ended mid-stream: expected here */
    else
        inflateEnd(s->z);
    kd_dealloc(s, s->z);
    s->z = NULL;
    s->state = KD_FRESH;
}

void kd_free(keel_deflate *s)
{
    if (s == NULL)
        return;
    kd_release(s);
    free(s);
}

size_t kd_memory(const keel_deflate *s)
{
    return s == NULL ? 0 : sizeof *s + s->mem;
}

const keel_deflate_api kd_api = {
    .size = sizeof(keel_deflate_api),
    .compressor_new = kd_compressor_new,
    .decompressor_new = kd_decompressor_new,
    .compress = kd_compress,
    .decompress = kd_decompress,
    .reset = kd_reset,
    .release = kd_release,
    .free = kd_free,
    .memory = kd_memory,
};
