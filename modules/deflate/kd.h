/* kd.h — what the deflate module's files share (kd_ prefix, never
 * exported: the module's only public symbol is its descriptor).
 *
 * stream.c and accept.c use no keel function, only keel's types, so the
 * unit tests compile them straight into a test program without a host. */
#ifndef KEEL_DEFLATE_KD_H
#define KEEL_DEFLATE_KD_H

#include <keel/keel.h>
#include <keel/deflate.h>

/* ---- The service (stream.c) ------------------------------------------- */

/* What a zero field of keel_deflate_params means ([deflate] level and
 * mem_level). Written once by load on the main thread before any worker
 * runs, read-only afterwards: the service's functions take no module
 * argument, so this is the one piece of module-wide state they read. */
typedef struct kd_defaults {
    int level;
    int mem_level;
} kd_defaults;

void kd_set_defaults(const kd_defaults *d);

/* The table published as KEEL_DEFLATE_SERVICE. */
extern const keel_deflate_api kd_api;

/* The same functions, called directly by the HTTP filter. */
keel_deflate *kd_compressor_new(const keel_deflate_params *params);
keel_deflate *kd_decompressor_new(const keel_deflate_params *params);
int kd_compress(keel_deflate *s, const void *in, size_t len, int flush, keel_deflate_out_fn out,
                void *userdata);
int kd_decompress(keel_deflate *s, const void *in, size_t len, uint64_t max_out,
                  keel_deflate_out_fn out, void *userdata);
int kd_reset(keel_deflate *s);
void kd_release(keel_deflate *s);
/* Ends the released zlib states kept for reuse (release keeps up to 16,
 * reset, for the next stream with the same parameters). Unload. */
void kd_kept_free(void);
void kd_free(keel_deflate *s);
size_t kd_memory(const keel_deflate *s);

/* ---- Accept-Encoding (accept.c) ---------------------------------------- */

enum kd_coding { KD_IDENTITY = 0, KD_GZIP = 1, KD_DEFLATE = 2, KD_BR = 3, KD_ZSTD = 4 };

/* Folds one Accept-Encoding field value into *acc (call once per field
 * line, after kd_accept_init); kd_accept_choose then picks the coding. */
typedef struct kd_accept {
    int seen;      /* some Accept-Encoding field was present */
    int q_gzip;    /* qvalues in thousandths; -1: not listed */
    int q_deflate; /* "deflate" */
    int q_star;    /* "*" */
    int q_ident;   /* "identity" */
    int q_br;      /* "br" */
    int q_zstd;    /* "zstd" */
} kd_accept;

void kd_accept_init(kd_accept *acc);
void kd_accept_add(kd_accept *acc, const char *value, size_t len);
/* Among gzip and deflate. */
int kd_accept_choose(const kd_accept *acc); /* enum kd_coding */
/* Among the codings in `offered` (bits 1 << KD_*): the highest q-value,
 * ties to zstd, br, gzip, deflate in that order. */
int kd_accept_choose_from(const kd_accept *acc, unsigned offered);

/* ---- Brotli and zstd (codings.c) ------------------------------------------ */

typedef struct kd_coder kd_coder;
/* The codings built in (bits 1 << KD_BR, 1 << KD_ZSTD). */
unsigned kd_coder_available(void);
/* A compressor for KD_BR or KD_ZSTD at level; length the body's, or -1.
 * NULL when the coding is not built in, or out of memory. */
kd_coder *kd_coder_new(int coding, int level, int64_t length);
/* As kd_compress. */
int kd_coder_compress(kd_coder *c, const void *in, size_t len, int flush, keel_deflate_out_fn out,
                      void *userdata);
void kd_coder_free(kd_coder *c);

/* ---- Response fields (fields.c) ---------------------------------------- */

/* Is the media type of a Content-Type value (parameters ignored) in the
 * list? Patterns are "type/subtype", "type/" followed by a star, or a star
 * alone (lower case). */
int kd_type_matches(keel_str content_type, const char *const *patterns, size_t n);

/* Is a field name this one (case-insensitive)? */
int kd_name_is(keel_str name, const char *lit);

/* Does a comma-separated field value hold this token (case-insensitive)? */
int kd_list_has(keel_str value, const char *token);

#endif
