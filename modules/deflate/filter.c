/* filter.c — HTTP response compression, as a response body filter.
 *
 * on_response_head decides, once per response, from what the handler set
 * and what the client accepts; on_response_body then compresses piece by
 * piece as the body goes out, never holding a whole body; on_log frees
 * what the response held, finished or not.
 *
 * The rules follow nginx's gzip filter (ngx_http_gzip_filter_module.c)
 * where the RFCs leave a choice, so that an operator moving from nginx
 * finds the same behaviour:
 *   - statuses 200, 403 and 404 only (nginx's list): others are short
 *     generated pages, or have no body (204, 304), or describe a part of a
 *     representation (206) that compression would break;
 *   - not for HEAD (nginx's header_only), nor a response that already has
 *     a Content-Encoding (no double compression), nor one marked
 *     Cache-Control: no-transform (RFC 9110 7.7 asks intermediaries to
 *     leave such content alone; an origin honouring it too is what the
 *     sender who wrote it expects);
 *   - only listed media types, and only above min_length when the length
 *     is known;
 *   - Vary: Accept-Encoding on every response that passed those checks,
 *     compressed or not: a cache must not give the identity body to a
 *     client that asked for gzip, nor the reverse (RFC 9110 12.5.5);
 *   - HTTP/1.0 requests get the identity body (nginx's gzip_http_version
 *     1.1): without chunked framing a compressed body could only end by
 *     closing the connection.
 */
#include <stdlib.h>
#include <string.h>

#include "kd.h"
#include "filter.h"

/* What one compressed response holds between its phases. */
typedef struct kd_reply {
    keel_response *res;
    keel_deflate *z; /* gzip, deflate: NULL once the body ended */
    kd_coder *coder; /* br, zstd: NULL once the body ended */
    keel_worker *worker;
    const kd_http *http;
    int known_length; /* the handler declared a Content-Length */
    int failed;
} kd_reply;

static int str_is(keel_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.ptr != NULL && s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* Leaves this response's body alone: the core then skips this filter's
 * on_response_body for it, and if no other body filter wants it, the body
 * goes out as if none were registered (its length kept, a file with
 * sendfile(2)). The only way the filter declines. */
static void decline(keel_response *res)
{
    keel_response_filter_skip_body(res);
}

static int status_compressible(int status)
{
    return status == 200 || status == 403 || status == 404;
}

/* Adds Accept-Encoding to Vary unless a Vary line already lists it or
 * is "*" (every line: several lines are one list, RFC 9110 5.3). The
 * token goes on a line of its own rather than rewriting one, which is
 * the same list and leaves the others as they were. */
static void add_vary(keel_response *res)
{
    size_t n = keel_response_header_count(res);
    keel_header h;
    for (size_t i = 0; i < n; i++) {
        if (keel_response_header_at(res, i, &h) != KEEL_OK || !kd_name_is(h.name, "Vary"))
            continue;
        if (kd_list_has(h.value, "Accept-Encoding") || kd_list_has(h.value, "*"))
            return;
    }
    keel_response_header_add(res, "Vary", "Accept-Encoding");
}

/* RFC 9110 8.8.3.3: a strong validator promises identical bytes, and
 * the compressed bytes differ from the identity ones (and from run to run
 * with another level): the ETag becomes weak, "W/" prepended, as nginx
 * does. A weak one stays as it is. */
static void weaken_etag(keel_response *res)
{
    keel_str etag = keel_response_header(res, "ETag");
    if (etag.ptr == NULL || etag.len == 0 || (etag.len >= 2 && memcmp(etag.ptr, "W/", 2) == 0))
        return;
    char *weak = malloc(etag.len + 3);
    if (weak == NULL) {
        keel_response_header_remove(res, "ETag"); /* better none than a wrong strong one */
        return;
    }
    memcpy(weak, "W/", 2);
    memcpy(weak + 2, etag.ptr, etag.len);
    weak[etag.len + 2] = '\0';
    keel_response_header_set(res, "ETag", weak);
    free(weak);
}

/* The client's choice among the codings offered, from every
 * Accept-Encoding line. */
static int accepted_coding(keel_request *req, unsigned offered)
{
    kd_accept acc;
    kd_accept_init(&acc);
    size_t n = keel_request_header_count(req);
    keel_header h;
    for (size_t i = 0; i < n; i++) {
        if (keel_request_header_at(req, i, &h) != KEEL_OK)
            continue;
        if (kd_name_is(h.name, "Accept-Encoding"))
            kd_accept_add(&acc, h.value.ptr, h.value.len);
    }
    return kd_accept_choose_from(&acc, offered);
}

/* Could this response be compressed for some client? */
static int compressible(const kd_http *http, keel_request *req, keel_response *res, int64_t length)
{
    if (str_is(keel_request_method(req), "HEAD") || !status_compressible(keel_response_status(res)))
        return 0;
    keel_str ce = keel_response_header(res, "Content-Encoding");
    if (ce.ptr != NULL && ce.len > 0)
        return 0;
    if (kd_list_has(keel_response_header(res, "Cache-Control"), "no-transform"))
        return 0;
    if (!kd_type_matches(keel_response_header(res, "Content-Type"),
                         (const char *const *)http->types, http->ntypes))
        return 0;
    /* The body's length as the core will send it (given whole, or a
     * declared Content-Length); a streamed body of unknown length counts
     * as large. */
    if (length >= 0 && (uint64_t)length < http->min_length)
        return 0;
    /* Files are left to sendfile and precompressed siblings unless asked. */
    if (!http->compress_files && keel_response_body_from_file(res))
        return 0;
    return 1;
}

/* nginx's trick: a body known to be small needs no 32 KiB window nor the
 * hash tables that go with it; zlib.h's memory formula halves with each
 * step. 262 is zlib's MIN_LOOKAHEAD. */
static void size_window(int64_t length, int *window_bits, int *mem_level)
{
    if (length <= 0)
        return;
    while (*window_bits > 9 && length < ((int64_t)1 << (*window_bits - 1)) - 262) {
        (*window_bits)--;
        if (*mem_level > 1)
            (*mem_level)--;
    }
}

static void start_reply(keel_request *req, keel_response *res, const kd_http *http, kd_reply *r,
                        int64_t length);

void kd_filter_head(keel_request *req, keel_response *res, void *userdata)
{
    const kd_http *http = userdata;
    int64_t length = keel_response_body_length(res);
    if (!compressible(http, req, res, length)) {
        decline(res);
        return;
    }
    add_vary(res);
    int coding =
        keel_request_version(req) >= 11 ? accepted_coding(req, http->offered) : KD_IDENTITY;
    if (coding == KD_IDENTITY) {
        decline(res);
        return;
    }
    static const char *const names[] = {"identity", "gzip", "deflate", "br", "zstd"};
    if (coding == KD_BR || coding == KD_ZSTD) {
        kd_reply *r = calloc(1, sizeof *r);
        kd_coder *c =
            r != NULL
                ? kd_coder_new(coding, coding == KD_BR ? http->br_level : http->zstd_level, length)
                : NULL;
        if (c == NULL ||
            keel_response_header_set(res, "Content-Encoding", names[coding]) != KEEL_OK) {
            kd_coder_free(c);
            free(r);
            decline(res);
            return;
        }
        r->coder = c;
        start_reply(req, res, http, r, length);
        return;
    }

    int window_bits = http->window_bits, mem_level = http->mem_level;
    size_window(length, &window_bits, &mem_level);
    keel_deflate_params p = {
        .size = sizeof p,
        .format = coding == KD_GZIP ? KEEL_DEFLATE_GZIP : KEEL_DEFLATE_ZLIB,
        .level = http->level,
        .window_bits = window_bits,
        .mem_level = mem_level,
    };
    kd_reply *r = calloc(1, sizeof *r);
    keel_deflate *z = r != NULL ? kd_compressor_new(&p) : NULL;
    if (z == NULL || keel_response_header_set(res, "Content-Encoding",
                                              coding == KD_GZIP ? "gzip" : "deflate") != KEEL_OK) {
        kd_free(z);
        free(r);
        decline(res); /* out of memory: the identity body is still right */
        return;
    }
    r->z = z;
    start_reply(req, res, http, r, length);
}

/* What every compressed response does once its compressor is there. */
static void start_reply(keel_request *req, keel_response *res, const kd_http *http, kd_reply *r,
                        int64_t length)
{
    r->res = res;
    r->http = http;
    r->known_length = length >= 0;
    r->worker = keel_request_worker(req);
    /* The body's length changes: the protocol frames it (chunked). */
    keel_response_header_remove(res, "Content-Length");
    /* Byte ranges would address the compressed bytes, which are made on
     * the fly and differ from run to run: nginx drops the field too. */
    keel_response_header_remove(res, "Accept-Ranges");
    weaken_etag(res);
    keel_request_set_data(req, http->module, r);
    keel_metric_add(r->worker, http->m_responses, 1);
}

static int emit(void *userdata, const void *data, size_t len)
{
    kd_reply *r = userdata;
    keel_buf b = {data, len};
    keel_metric_add(r->worker, r->http->m_bytes_out, (int64_t)len);
    return keel_response_filter_emit(r->res, &b, 1, 0);
}

int kd_filter_body(keel_request *req, keel_response *res, const keel_buf *bufs, size_t nbufs,
                   int last, void *userdata)
{
    const kd_http *http = userdata;
    kd_reply *r = keel_request_data(req, http->module);
    if (r == NULL)
        return keel_response_filter_emit(res, bufs, nbufs, last);
    if ((r->z == NULL && r->coder == NULL) || r->failed)
        return r->failed ? KEEL_ERR_STATE : KEEL_OK;
    /* A streamed body (its length unknown) is flushed after each piece:
     * the handler wrote it now because the client should have it now (a
     * server-sent event, a progress line). A body of known length needs no
     * flush before its end. */
    int between = r->known_length ? KEEL_DEFLATE_NONE : KEEL_DEFLATE_SYNC;
    int rc = KEEL_OK;
    size_t count = 0;
    for (size_t i = 0; i < nbufs; i++)
        if (bufs[i].len > 0)
            count = i + 1;
    for (size_t i = 0; i < count && rc == KEEL_OK; i++) {
        int flush = i + 1 < count ? KEEL_DEFLATE_NONE : last ? KEEL_DEFLATE_FINISH : between;
        keel_metric_add(r->worker, http->m_bytes_in, (int64_t)bufs[i].len);
        rc = r->coder ? kd_coder_compress(r->coder, bufs[i].base, bufs[i].len, flush, emit, r)
                      : kd_compress(r->z, bufs[i].base, bufs[i].len, flush, emit, r);
    }
    if (rc == KEEL_OK && count == 0 && last)
        rc = r->coder ? kd_coder_compress(r->coder, NULL, 0, KEEL_DEFLATE_FINISH, emit, r)
                      : kd_compress(r->z, NULL, 0, KEEL_DEFLATE_FINISH, emit, r);
    if (rc == KEEL_OK && last) {
        /* The stream's 256 KiB go back now, not when the log phase comes
         * (after the last byte has left, for a slow client). */
        kd_free(r->z);
        r->z = NULL;
        kd_coder_free(r->coder);
        r->coder = NULL;
        rc = keel_response_filter_emit(res, NULL, 0, 1);
    }
    if (rc != KEEL_OK) {
        /* The client cannot decode the rest: end the connection with it. */
        r->failed = 1;
        keel_response_close_connection(res);
    }
    return rc;
}

void kd_filter_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                   void *userdata)
{
    (void)res;
    (void)info;
    const kd_http *http = userdata;
    kd_reply *r = keel_request_data(req, http->module);
    if (r == NULL)
        return;
    keel_request_set_data(req, http->module, NULL);
    kd_free(r->z);
    kd_coder_free(r->coder);
    free(r);
}
