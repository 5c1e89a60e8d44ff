/* deflate.c — the module: [deflate] config, the service, the HTTP filter.
 *
 * The only part of keel that links zlib. It publishes the compression
 * service (keel/deflate.h) for other modules (websocket's
 * permessage-deflate) and compresses HTTP responses (filter.c).
 */
#include <keel/util.h>

#include <stdlib.h>
#include <string.h>

#include "kd.h"
#include "filter.h"

/* What is worth compressing when the config says nothing: text and the
 * text-based formats of the web. Images, audio, video and archives are
 * compressed already (SVG and the old icon and font formats are not). */
static const char *const default_types[] = {
    "text/*",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/ld+json",
    "application/manifest+json",
    "application/geo+json",
    "application/wasm",
    "image/svg+xml",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "font/ttf",
    "font/otf",
    "application/vnd.ms-fontobject",
};

static void http_free(kd_http *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->ntypes; i++)
        free(h->types[i]);
    free(h->types);
    free(h);
}

static int add_type(kd_http *h, const char *s, size_t n)
{
    char *t = keel_strndup_lower(s, n);
    if (t == NULL || keel_array_add(&h->types, h->ntypes, sizeof *h->types) != 0) {
        free(t);
        return KEEL_ERR_NOMEM;
    }
    h->types[h->ntypes++] = t;
    return KEEL_OK;
}

/* The [deflate] section (keel/config.h). Level 6 is zlib's own default
 * (Z_DEFAULT_COMPRESSION): on text the higher levels gain a percent or two
 * for several times the CPU, the lower ones lose more than that. memLevel 8
 * is zlib's default too: 9 buys almost nothing for 128 KiB more per
 * stream, and a caller short of memory (a WebSocket with many idle peers)
 * asks for less in its params. Brotli quality 4 and zstd level 3 are the
 * on-the-fly settings that beat gzip -6 on text at a like CPU cost (the
 * higher Brotli qualities are for precompressing: 11 is ~50x slower).
 * min_length 256: below that, gzip's 18 bytes
 * of framing and a block's code tables eat most of the gain, and the
 * response fits in one packet either way. compress_files on: a user who
 * loads deflate expects the site's HTML, CSS and scripts compressed, as
 * nginx's `gzip on` and Caddy's `encode` do for files (issue 25); a
 * precompressed sibling, when the mount has one, still wins (it carries
 * its Content-Encoding, and a response with one is left alone). */
typedef struct deflate_conf {
    int64_t level, mem_level, window_bits;
    int http, compress_files, brotli, zstd;
    int64_t brotli_level, zstd_level;
    uint64_t min_length;
    keel_config_list types;
} deflate_conf;

static const keel_config_key deflate_keys[] = {
    KEEL_KEY(deflate_conf, level, "level", KEEL_CONFIG_INT, .def = "6", .min = 1, .max = 9,
             .doc = "zlib's compression level for HTTP responses and the service's default"),
    KEEL_KEY(deflate_conf, mem_level, "mem_level", KEEL_CONFIG_INT, .def = "8", .min = 1, .max = 9,
             .doc = "zlib's memLevel: memory per stream against compression"),
    KEEL_KEY(deflate_conf, window_bits, "window_bits", KEEL_CONFIG_INT, .def = "15", .min = 9,
             .max = 15, .doc = "the LZ77 window of HTTP responses, 2^N bytes"),
    KEEL_KEY(deflate_conf, http, "http", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "compress HTTP responses (off: only offer the service to websocket)"),
    KEEL_KEY(deflate_conf, min_length, "min_length", KEEL_CONFIG_SIZE, .def = "256",
             .doc = "responses of a known length below this stay as they are"),
    KEEL_KEY(deflate_conf, compress_files, "compress_files", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "also compress files (the static module's) of the listed types; off keeps "
                    "sendfile for them"),
    KEEL_KEY(deflate_conf, brotli, "brotli", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "offer br (Brotli) where keel was built with libbrotlienc"),
    KEEL_KEY(deflate_conf, brotli_level, "brotli_level", KEEL_CONFIG_INT, .def = "4", .min = 0,
             .max = 11, .doc = "Brotli's quality for HTTP responses, 0..11"),
    KEEL_KEY(deflate_conf, zstd, "zstd", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "offer zstd (Zstandard) where keel was built with libzstd"),
    KEEL_KEY(deflate_conf, zstd_level, "zstd_level", KEEL_CONFIG_INT, .def = "3", .min = 1,
             .max = 19, .doc = "zstd's level for HTTP responses, 1..19"),
    KEEL_KEY(deflate_conf, types, "types", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .doc = "media types to compress (type/subtype, type/*, *), separated by spaces or "
                    "commas; default: text and the common text-like application types"),
};
KEEL_CONFIG_SCHEMA(deflate_schema, deflate_conf, deflate_keys);

/* `types` may be repeated; each value is a list separated by spaces or
 * commas of "type/subtype", "type/" plus a star, or a lone star. */
static int read_types(keel_module *module, const keel_config_list *list, kd_http *h)
{
    size_t lines = list->count;
    if (lines == 0) {
        for (size_t i = 0; i < sizeof default_types / sizeof *default_types; i++)
            if (add_type(h, default_types[i], strlen(default_types[i])) != KEEL_OK)
                return KEEL_ERR_NOMEM;
        return KEEL_OK;
    }
    for (size_t l = 0; l < lines; l++) {
        for (const char *p = list->items[l]; *p;) {
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
            const char *e = p;
            while (*e && *e != ' ' && *e != '\t' && *e != ',')
                e++;
            if (e == p)
                break;
            size_t n = (size_t)(e - p);
            const char *slash = memchr(p, '/', n);
            int ok =
                (n == 1 && *p == '*') || (slash != NULL && slash > p && slash < e - 1 &&
                                          memchr(slash + 1, '/', (size_t)(e - slash - 1)) == NULL);
            if (!ok)
                return keel_config_error(module, "types",
                                         "'%.*s' is not a media type (type/subtype, type/*, *)",
                                         (int)n, p);
            if (add_type(h, p, n) != KEEL_OK)
                return KEEL_ERR_NOMEM;
            p = e;
        }
    }
    return KEEL_OK;
}

static void register_metrics(keel_module *module, kd_http *h)
{
    /* Optional: without a registry (or on failure) the handles stay NULL
     * and keel_metric_add ignores them. */
    struct {
        const char *name, *help;
        keel_metric **out;
    } m[] = {
        {"deflate_responses_compressed_total", "HTTP responses compressed", &h->m_responses},
        {"deflate_bytes_in_total", "HTTP response body bytes before compression", &h->m_bytes_in},
        {"deflate_bytes_out_total", "HTTP response body bytes after compression", &h->m_bytes_out},
    };
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
        if (keel_metric_new(module, m[i].name, m[i].help, KEEL_METRIC_COUNTER, NULL, m[i].out) !=
            KEEL_OK)
            *m[i].out = NULL;
    }
}

static int deflate_load(keel_module *module)
{
    const deflate_conf *c = keel_module_config(module);
    int rc;
    kd_set_defaults(&(kd_defaults){(int)c->level, (int)c->mem_level});

    kd_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return KEEL_ERR_NOMEM;
    h->module = module;
    h->min_length = c->min_length;
    h->compress_files = c->compress_files;
    h->level = (int)c->level;
    h->mem_level = (int)c->mem_level;
    h->window_bits = (int)c->window_bits;
    h->br_level = (int)c->brotli_level;
    h->zstd_level = (int)c->zstd_level;
    /* br and zstd where built in (codings.c) and not turned off. */
    unsigned built = kd_coder_available();
    h->offered = (1u << KD_GZIP) | (1u << KD_DEFLATE);
    if (c->brotli && (built & (1u << KD_BR)))
        h->offered |= 1u << KD_BR;
    if (c->zstd && (built & (1u << KD_ZSTD)))
        h->offered |= 1u << KD_ZSTD;
    keel_log(module, KEEL_LOG_DEBUG, "HTTP codings: gzip deflate%s%s%s%s",
             (h->offered & (1u << KD_BR)) ? " br" : "",
             (h->offered & (1u << KD_ZSTD)) ? " zstd" : "",
             (built & (1u << KD_BR)) ? "" : " (br: not built in)",
             (built & (1u << KD_ZSTD)) ? "" : " (zstd: not built in)");
    if ((rc = read_types(module, &c->types, h)) != KEEL_OK) {
        http_free(h);
        return rc;
    }
    if ((rc = keel_service_publish(module, KEEL_DEFLATE_SERVICE, KEEL_DEFLATE_API_VERSION,
                                   &kd_api)) != KEEL_OK) {
        http_free(h);
        return rc;
    }
    if (c->http) {
        /* LAST: after the filters that make or change the content, so that
         * what is compressed is the final body, and what the head filter
         * reads (Content-Type, Cache-Control, Content-Encoding) is final. */
        h->filter = (keel_http_filter){
            .size = sizeof(keel_http_filter),
            .name = "deflate",
            .order = KEEL_ORDER_LAST,
            .userdata = h,
            .on_response_head = kd_filter_head,
            .on_response_body = kd_filter_body,
            .on_log = kd_filter_log,
        };
        register_metrics(module, h);
        if ((rc = keel_http_filter_add(module, &h->filter)) != KEEL_OK) {
            http_free(h);
            return rc;
        }
    }
    keel_module_set_data(module, h);
    return KEEL_OK;
}

static void deflate_unload(keel_module *module)
{
    http_free(keel_module_data(module));
    kd_kept_free();
}

KEEL_MODULE(deflate, .version = "1.0.0", .load = deflate_load, .unload = deflate_unload,
            .config = &deflate_schema);
