/* h2test — handlers that show what an HTTP/2 exchange looks like from a
 * handler's side, for tests/h2/ (the h2 module's conformance and attack
 * tests). Protocol-neutral: they would answer the same over HTTP/1.1.
 *
 *   GET  /h2test/head         the request as the core hands it: version,
 *                             method, target, host, cookie, field count
 *   POST /h2test/late?ms=N    reads the body only after N ms (a slow
 *                             handler: its stream's window stays closed
 *                             meanwhile), answers "len=BYTES"
 *   GET  /h2test/status?code=N  status N (204, 304, ...) with no body
 *   GET  /h2test/close        asks for the connection to close
 *   GET  /h2test/big?n=BYTES  streams BYTES bytes in 16 KiB pieces, each
 *                             after the previous one was taken
 */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t query_u64(keel_request *req, const char *name, uint64_t def)
{
    keel_str v;
    if (keel_request_query_param(req, name, &v) != KEEL_OK || v.len == 0 || v.len > 18)
        return def;
    uint64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return def;
        n = n * 10 + (uint64_t)(v.ptr[i] - '0');
    }
    return n;
}

static int route_head(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    keel_str m = keel_request_method(req), t = keel_request_target(req);
    keel_str host = keel_request_header(req, "Host"), cookie = keel_request_header(req, "Cookie");
    char buf[4096];
    int n = snprintf(buf, sizeof buf,
                     "version=%d\nmethod=%.*s\ntarget=%.*s\nhost=%.*s\n"
                     "cookie=%.*s\nfields=%zu\n",
                     keel_request_version(req), (int)m.len, m.ptr, (int)t.len, t.ptr,
                     host.ptr ? (int)host.len : 1, host.ptr ? host.ptr : "-",
                     cookie.ptr ? (int)cookie.len : 1, cookie.ptr ? cookie.ptr : "-",
                     keel_request_header_count(req));
    /* ?field=NAME: keel_request_header's answer for NAME as given (the
     * core finds a well-known name by its token, others by their bytes). */
    keel_str want, field;
    if (n >= 0 && (size_t)n < sizeof buf &&
        keel_request_query_param(req, "field", &want) == KEEL_OK) {
        field = keel_request_header(req, want.ptr);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "field=%.*s\n",
                      field.ptr ? (int)field.len : 1, field.ptr ? field.ptr : "-");
    }
    /* ?token=N: keel_request_header_token's answer for the id N (ABI 1.10). */
    if (n >= 0 && (size_t)n < sizeof buf &&
        keel_request_query_param(req, "token", &want) == KEEL_OK) {
        field = keel_request_header_token(req, (unsigned)query_u64(req, "token", 0));
        n += snprintf(buf + n, sizeof buf - (size_t)n, "token=%.*s\n",
                      field.ptr ? (int)field.len : 1, field.ptr ? field.ptr : "-");
    }
    if (n < 0 || (size_t)n >= sizeof buf)
        return keel_response_send_status(res, 500);
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send_copy(res, buf, (size_t)n);
}

struct late {
    keel_request *req;
    keel_response *res;
    keel_timer *timer;
};

static void late_read(keel_request *req, int status, void *userdata)
{
    struct late *l = userdata;
    if (status == KEEL_OK) {
        char buf[64];
        int n = snprintf(buf, sizeof buf, "len=%zu", keel_request_body(req).len);
        keel_response_send_copy(l->res, buf, (size_t)n);
    }
    free(l);
}

/* The client left (the stream was reset) before the timer fired. */
static void late_abandoned(keel_request *req, void *userdata)
{
    struct late *l = userdata;
    (void)req;
    keel_timer_stop(l->timer);
    free(l);
}

static void late_fire(keel_timer *timer, void *userdata)
{
    struct late *l = userdata;
    keel_timer_stop(timer);
    keel_request_on_abort(l->req, NULL, NULL); /* from here the body callback hears of it */
    if (keel_request_read_body(l->req, 0, late_read, l) != KEEL_OK) {
        keel_response_end(l->res);
        free(l);
    }
}

static int route_late(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct late *l = calloc(1, sizeof *l);
    if (l == NULL)
        return KEEL_ERR_NOMEM;
    l->req = req;
    l->res = res;
    l->timer =
        keel_timer_start(keel_request_worker(req), query_u64(req, "ms", 500), 0, late_fire, l);
    if (l->timer == NULL) {
        free(l);
        return KEEL_ERR_NOMEM;
    }
    keel_request_on_abort(req, late_abandoned, l);
    return KEEL_OK;
}

static int route_status(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    keel_response_set_status(res, (int)query_u64(req, "code", 204));
    keel_response_header_set(res, "ETag", "\"x\"");
    return keel_response_send(res, "", 0, NULL, NULL);
}

static int route_close(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    keel_response_close_connection(res);
    return keel_response_send(res, "bye", 3, NULL, NULL);
}

struct big {
    keel_response *res;
    uint64_t left;
    int in_write, released;
    char piece[16384];
};

static void big_step(struct big *b);

static void big_released(void *data, void *userdata)
{
    (void)data;
    struct big *b = userdata;
    if (b->in_write)
        b->released = 1; /* big_step carries on when the write returns */
    else
        big_step(b);
}

static void big_step(struct big *b)
{
    for (;;) {
        if (b->left == 0) {
            keel_response_end(b->res);
            free(b);
            return;
        }
        size_t n = b->left < sizeof b->piece ? (size_t)b->left : sizeof b->piece;
        b->left -= n;
        b->released = 0;
        b->in_write = 1;
        int rc = keel_response_write(b->res, b->piece, n, big_released, b);
        b->in_write = 0;
        if (rc < 0) { /* the client left (the piece was released already) */
            free(b);
            return;
        }
        if (!b->released)
            return;
    }
}

static int route_big(keel_request *req, keel_response *res, void *userdata)
{
    (void)userdata;
    struct big *b = malloc(sizeof *b);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    b->res = res;
    b->left = query_u64(req, "n", 1 << 20);
    memset(b->piece, 'x', sizeof b->piece);
    big_step(b);
    return KEEL_OK;
}

static int h2test_load(keel_module *module)
{
    int rc;
    if ((rc = keel_route_add(module, "GET", "/h2test/head", route_head, NULL)) < 0 ||
        (rc = keel_route_add(module, "POST", "/h2test/head", route_head, NULL)) < 0 ||
        (rc = keel_route_add(module, "POST", "/h2test/late", route_late, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/h2test/status", route_status, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/h2test/close", route_close, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/h2test/big", route_big, NULL)) < 0)
        return rc;
    return KEEL_OK;
}

KEEL_MODULE(h2test, .version = "1.0.0", .load = h2test_load);
