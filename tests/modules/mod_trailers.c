/* trailers — what a handler sees of a request's trailer fields (ABI 1.5),
 * for the http1 cases (tests/http/cases/trailers-*.txt) and
 * test_http_trailers.c. Every route answers 200 with a text body:
 *
 *   before=N      keel_request_trailer_count when the handler ran, before
 *                 the body was read (always 0: not visible yet)
 *   during=N      (stream only) the most any non-last piece saw (0)
 *   body=LEN      the body's length
 *   count=N       keel_request_trailer_count once the body was read
 *   Name: value   each trailer field, in order (keel_request_trailer_at)
 *   lookup=V      keel_request_trailer(req, "x-checksum") ("-" if absent),
 *                 through a name in another case than sent
 *   late=RC       keel_request_trailers called once the body has ended: a
 *                 protocol's too-late call, refused (KEEL_ERR_STATE)
 *
 * Routes:
 *   POST /trailers/read     keel_request_read_body, answered from its callback
 *   POST /trailers/stream   keel_request_stream_body, answered from the
 *                           last piece
 */
#include <keel/keel.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
    keel_response *res;
    size_t before, during, body;
    char text[8192];
    size_t len;
};

static KEEL_PRINTF(2, 3) void put(struct seen *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->text + s->len, sizeof s->text - s->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        s->len += (size_t)n < sizeof s->text - s->len ? (size_t)n : sizeof s->text - s->len - 1;
}

/* Writes what the request's trailers look like now, and answers with it. */
static void answer(keel_request *req, struct seen *s, int streamed)
{
    keel_response *res = s->res;
    put(s, "before=%zu\n", s->before);
    if (streamed)
        put(s, "during=%zu\n", s->during);
    put(s, "body=%zu\n", s->body);
    size_t n = keel_request_trailer_count(req);
    put(s, "count=%zu\n", n);
    for (size_t i = 0; i < n; i++) {
        keel_header h;
        if (keel_request_trailer_at(req, i, &h) == KEEL_OK)
            put(s, "%.*s: %.*s\n", (int)h.name.len, h.name.ptr, (int)h.value.len, h.value.ptr);
    }
    keel_header past;
    if (keel_request_trailer_at(req, n, &past) != KEEL_ERR_NOTFOUND)
        put(s, "past-end-found\n");
    keel_str v = keel_request_trailer(req, "X-CHECKSUM");
    put(s, "lookup=%.*s\n", v.ptr ? (int)v.len : 1, v.ptr ? v.ptr : "-");
    keel_header extra = {{"X-Late", 6}, {"1", 1}};
    put(s, "late=%s\n", keel_strerror(keel_http_request_trailers(req, &extra, 1)));
    keel_response_header_set(res, "Content-Type", "text/plain");
    keel_response_send_copy(res, s->text, s->len);
    free(s);
}

static void read_done(keel_request *req, int status, void *userdata)
{
    struct seen *s = userdata;
    if (status != KEEL_OK) {
        free(s); /* 413 or the client gone: the core answered */
        return;
    }
    s->body = keel_request_body(req).len;
    answer(req, s, 0);
}

static int route_read(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct seen *s = calloc(1, sizeof *s);
    if (s == NULL)
        return KEEL_ERR_NOMEM;
    s->res = res;
    s->before = keel_request_trailer_count(req);
    int rc = keel_request_read_body(req, 0, read_done, s);
    if (rc != KEEL_OK)
        free(s);
    return rc;
}

static void stream_piece(keel_request *req, const char *data, size_t len, int last, void *userdata)
{
    struct seen *s = userdata;
    (void)data;
    s->body += len;
    if (!last) {
        size_t n = keel_request_trailer_count(req);
        if (n > s->during)
            s->during = n;
        return;
    }
    answer(req, s, 1);
}

static int route_stream(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct seen *s = calloc(1, sizeof *s);
    if (s == NULL)
        return KEEL_ERR_NOMEM;
    s->res = res;
    s->before = keel_request_trailer_count(req);
    int rc = keel_request_stream_body(req, stream_piece, s);
    if (rc != KEEL_OK)
        free(s);
    return rc;
}

static int trailers_load(keel_module *module)
{
    int rc;
    if ((rc = keel_route_add(module, "POST", "/trailers/read", route_read, NULL)) < 0 ||
        (rc = keel_route_add(module, "POST", "/trailers/stream", route_stream, NULL)) < 0)
        return rc;
    return KEEL_OK;
}

KEEL_MODULE(trailers, .version = "1.0.0", .load = trailers_load);
