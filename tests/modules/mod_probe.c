/* probe — a second HTTP protocol module, in the place an HTTP/2 module
 * would take: it drives the core's HTTP layer and writes, as text, exactly
 * what the core hands it, so that test_http_probe.c can check that the
 * core assumes nothing of HTTP/1 (no Connection field invented or passed
 * on, closing told as a flag, upgrades refused where the sink has none).
 *
 * Protocols (one request per line, "METHOD TARGET\n", no fields, no body,
 * version 20; handlers must answer at once):
 *   probe      a sink of ABI 1.3 without upgrade, as HTTP/2's would be
 *   probe-up   the same with an upgrade: "upgrade STATUS FIELDS\n", then
 *              the connection goes to the protocol asked for
 *   probe-old  a sink as a protocol built for ABI 1.2 has it (smaller, and
 *              unable to ask keel_http_request_keep_alive)
 *   probe-tr   request trailers (ABI 1.5) as an HTTP/2 module passes them:
 *              lower-case names, pseudo-fields among them. Each request
 *              has the body "hi" and the trailer fields ":path: /x",
 *              "host: h", "content-length: 2", "x-checksum: c1",
 *              "grpc-status: 0", given before dispatch; after dispatch a
 *              second keel_http_request_trailers is written down as
 *              "again RC", then the body ends ("body" lines carry the
 *              response's bytes). For the trailers test module's routes.
 * Each sink call becomes a line:
 *   head STATUS keep-alive=K FIELDS   (K: keel_http_request_keep_alive)
 *   body LEN last=L
 *   done keep-alive=K
 * with FIELDS as "Name: value" joined by "; " (or "-").
 *
 * Routes (answered with a two-byte body "ok"):
 *   GET /probe/plain         nothing special
 *   GET /probe/close-field   the handler sets "Connection: close"
 *   GET /probe/close-call    the handler calls keel_response_close_connection
 *   GET /probe/hop           the handler sets the connection-specific fields
 *                            (Connection, Keep-Alive, Proxy-Connection,
 *                            Transfer-Encoding), Upgrade and X-Kept
 *   GET /probe/status        keel_response_send_status(400): the core's own
 *                            error answer
 */
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per connection: the request in flight and where the next line starts. */
struct probe {
    keel_conn *conn;
    keel_http_head head;
    keel_request *req;
    int exchange_open;
    int handed_over;
};

static int say(struct probe *pr, const char *text, size_t len)
{
    return keel_conn_write_copy(pr->conn, text, len);
}

/* "Name: value; Name: value" (or "-") into out. */
static void fields_text(const keel_header *h, size_t n, char *out, size_t size)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && o < size; i++) {
        int w = snprintf(out + o, size - o, "%s%.*s: %.*s", i ? "; " : "", (int)h[i].name.len,
                         h[i].name.ptr, (int)h[i].value.len, h[i].value.ptr);
        o += w > 0 ? (size_t)w : 0;
    }
    if (n == 0)
        snprintf(out, size, "-");
}

/* ---- the sink --------------------------------------------------------------- */

static int probe_send_head(void *exchange, int status, const keel_header *headers, size_t nheaders,
                           int64_t content_length)
{
    struct probe *pr = exchange;
    char fields[1024], line[1200];
    (void)content_length;
    fields_text(headers, nheaders, fields, sizeof fields);
    int n = snprintf(line, sizeof line, "head %d keep-alive=%d %s\n", status,
                     keel_http_request_keep_alive(pr->req), fields);
    return say(pr, line, (size_t)n);
}

static int probe_send_body(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                           const keel_header *trailers, size_t ntrailers, keel_write_cb cb,
                           void *userdata)
{
    struct probe *pr = exchange;
    (void)trailers, (void)ntrailers;
    size_t total = 0;
    for (size_t i = 0; i < nbufs; i++)
        total += bufs[i].len;
    char line[64];
    int n = snprintf(line, sizeof line, "body %zu last=%d\n", total, last);
    int rc = say(pr, line, (size_t)n);
    if (rc == KEEL_OK && cb != NULL)
        cb(pr->conn, KEEL_OK, userdata); /* nothing of the bytes is kept */
    return rc;
}

static void probe_done(void *exchange, int keep_alive)
{
    struct probe *pr = exchange;
    char line[32];
    int n = snprintf(line, sizeof line, "done keep-alive=%d\n", keep_alive);
    say(pr, line, (size_t)n);
    pr->exchange_open = 0;
    pr->req = NULL;
}

static int probe_upgrade(void *exchange, int status, const keel_header *headers, size_t nheaders,
                         const char *protocol, void *arg)
{
    struct probe *pr = exchange;
    char fields[1024], line[1200];
    fields_text(headers, nheaders, fields, sizeof fields);
    int n = snprintf(line, sizeof line, "upgrade %d %s\n", status, fields);
    int rc = say(pr, line, (size_t)n);
    if (rc != KEEL_OK)
        return KEEL_ERR_CLOSED;
    /* From on_data (the handlers answer at once): probe_data reports the
     * line consumed, and the core gives the rest to the new protocol. */
    pr->exchange_open = 0;
    pr->req = NULL;
    rc = keel_conn_set_protocol(pr->conn, protocol, arg);
    if (rc == KEEL_ERR_NOTFOUND || rc == KEEL_ERR_CLOSED)
        return KEEL_ERR_CLOSED; /* the "upgrade" line went out: no way back */
    pr->handed_over = 1;
    return KEEL_OK;
}

/* probe-tr: the response's bytes too (what the handler saw). */
static int probe_tr_send_body(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                              const keel_header *trailers, size_t ntrailers, keel_write_cb cb,
                              void *userdata)
{
    struct probe *pr = exchange;
    (void)trailers, (void)ntrailers;
    char line[64];
    int n = snprintf(line, sizeof line, "body last=%d\n", last);
    int rc = say(pr, line, (size_t)n);
    for (size_t i = 0; rc == KEEL_OK && i < nbufs; i++)
        rc = say(pr, bufs[i].base, bufs[i].len);
    if (rc == KEEL_OK && cb != NULL)
        cb(pr->conn, KEEL_OK, userdata);
    return rc;
}

/* Without upgrade: what an HTTP/2 module's sink looks like to the core. */
static const keel_http_sink probe_sink = {
    .size = sizeof(keel_http_sink),
    .send_head = probe_send_head,
    .send_body = probe_send_body,
    .done = probe_done,
};

/* A sink from before ABI 1.3 ends where upgrade begins. */
static const keel_http_sink probe_old_sink = {
    .size = offsetof(keel_http_sink, upgrade),
    .send_head = probe_send_head,
    .send_body = probe_send_body,
    .done = probe_done,
};

static const keel_http_sink probe_tr_sink = {
    .size = sizeof(keel_http_sink),
    .send_head = probe_send_head,
    .send_body = probe_tr_send_body,
    .done = probe_done,
};

static const keel_http_sink probe_up_sink = {
    .size = sizeof(keel_http_sink),
    .send_head = probe_send_head,
    .send_body = probe_send_body,
    .done = probe_done,
    .upgrade = probe_upgrade,
};

/* ---- the protocols ------------------------------------------------------------- */

static int probe_open(keel_conn *conn, void *arg)
{
    (void)arg;
    struct probe *pr = calloc(1, sizeof *pr);
    if (pr == NULL)
        return KEEL_ERR_NOMEM;
    pr->conn = conn;
    keel_conn_set_data(conn, pr);
    return KEEL_OK;
}

/* One line, one exchange, over before this returns. */
static int run_line(struct probe *pr, const keel_http_sink *sink, const char *line, size_t len)
{
    const char *sp = memchr(line, ' ', len);
    if (sp == NULL)
        return say(pr, "bad line\n", 9);
    pr->head = (keel_http_head){
        .size = sizeof(keel_http_head),
        .method = {line, (size_t)(sp - line)},
        .target = {sp + 1, len - (size_t)(sp + 1 - line)},
        .version = 20,
        .content_length = 0,
    };
    pr->exchange_open = 1;
    pr->req = keel_http_request_start(pr->conn, sink, pr, &pr->head);
    if (pr->req == NULL)
        return KEEL_ERR_NOMEM;
    keel_http_request_dispatch(pr->req);
    if (pr->exchange_open) {
        /* A handler that did not answer at once: not for this probe. */
        keel_http_request_abort(pr->req);
        return say(pr, "not answered at once\n", 21);
    }
    return KEEL_OK;
}

/* probe-tr: one request with a body and trailers, the way a protocol that
 * has them at hand before the handler runs (HTTP/2, all frames in one
 * read) would pass them. */
static int run_tr_line(struct probe *pr, const char *line, size_t len)
{
    static const keel_header fields[] = {
        {{":path", 5}, {"/x", 2}},          {{"host", 4}, {"h", 1}},
        {{"content-length", 14}, {"2", 1}}, {{"x-checksum", 10}, {"c1", 2}},
        {{"grpc-status", 11}, {"0", 1}},
    };
    const char *sp = memchr(line, ' ', len);
    if (sp == NULL)
        return say(pr, "bad line\n", 9);
    pr->head = (keel_http_head){
        .size = sizeof(keel_http_head),
        .method = {line, (size_t)(sp - line)},
        .target = {sp + 1, len - (size_t)(sp + 1 - line)},
        .version = 20,
        .content_length = -1,
    };
    pr->exchange_open = 1;
    pr->req = keel_http_request_start(pr->conn, &probe_tr_sink, pr, &pr->head);
    if (pr->req == NULL)
        return KEEL_ERR_NOMEM;
    int rc = keel_http_request_trailers(pr->req, fields, sizeof fields / sizeof fields[0]);
    char text[64];
    int n = snprintf(text, sizeof text, "trailers %s\n", keel_strerror(rc));
    say(pr, text, (size_t)n);
    keel_http_request_dispatch(pr->req);
    if (pr->exchange_open) {
        rc = keel_http_request_trailers(pr->req, fields, 1);
        n = snprintf(text, sizeof text, "again %s\n", keel_strerror(rc));
        say(pr, text, (size_t)n);
        keel_http_request_body(pr->req, "hi", 2, 1);
    }
    if (pr->exchange_open) {
        keel_http_request_abort(pr->req);
        return say(pr, "not answered at the body's end\n", 31);
    }
    return KEEL_OK;
}

static int run_lines(keel_conn *conn, const keel_http_sink *sink, const char *data, size_t len,
                     size_t *consumed)
{
    struct probe *pr = keel_conn_data(conn);
    size_t at = 0;
    const char *nl;
    while ((nl = memchr(data + at, '\n', len - at)) != NULL) {
        size_t n = (size_t)(nl - (data + at));
        int rc = sink == &probe_tr_sink ? run_tr_line(pr, data + at, n)
                                        : run_line(pr, sink, data + at, n);
        at += n + 1;
        if (pr->handed_over) {
            /* The connection is another protocol's: its data is not ours. */
            free(pr);
            *consumed = at;
            return KEEL_OK;
        }
        if (rc != KEEL_OK)
            return rc;
    }
    *consumed = at;
    return KEEL_OK;
}

static int probe_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    return run_lines(conn, &probe_sink, data, len, consumed);
}

static int probe_up_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    return run_lines(conn, &probe_up_sink, data, len, consumed);
}

static int probe_old_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    return run_lines(conn, &probe_old_sink, data, len, consumed);
}

static int probe_tr_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    return run_lines(conn, &probe_tr_sink, data, len, consumed);
}

static void probe_close(keel_conn *conn, int status)
{
    (void)status;
    struct probe *pr = keel_conn_data(conn);
    if (pr != NULL && pr->exchange_open)
        keel_http_request_abort(pr->req);
    free(pr);
}

static const keel_protocol probe = {
    .size = sizeof(keel_protocol),
    .name = "probe",
    .on_open = probe_open,
    .on_data = probe_data,
    .on_close = probe_close,
};

static const keel_protocol probe_up = {
    .size = sizeof(keel_protocol),
    .name = "probe-up",
    .on_open = probe_open,
    .on_data = probe_up_data,
    .on_close = probe_close,
};

static const keel_protocol probe_old = {
    .size = sizeof(keel_protocol),
    .name = "probe-old",
    .on_open = probe_open,
    .on_data = probe_old_data,
    .on_close = probe_close,
};

static const keel_protocol probe_tr = {
    .size = sizeof(keel_protocol),
    .name = "probe-tr",
    .on_open = probe_open,
    .on_data = probe_tr_data,
    .on_close = probe_close,
};

/* ---- the routes ----------------------------------------------------------------- */

static int answer_ok(keel_response *res)
{
    keel_response_header_set(res, "Content-Type", "text/plain");
    return keel_response_send(res, "ok", 2, NULL, NULL);
}

static int route_plain(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    return answer_ok(res);
}

static int route_close_field(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    keel_response_header_set(res, "Connection", "keep-alive, close");
    return answer_ok(res);
}

static int route_close_call(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    keel_response_close_connection(res);
    return answer_ok(res);
}

static int route_hop(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    keel_response_header_set(res, "Connection", "X-Kept");
    keel_response_header_set(res, "Keep-Alive", "timeout=5");
    keel_response_header_set(res, "Proxy-Connection", "keep-alive");
    keel_response_header_set(res, "Transfer-Encoding", "chunked");
    keel_response_header_set(res, "Upgrade", "example/1");
    keel_response_header_set(res, "X-Kept", "1");
    return answer_ok(res);
}

static int route_status(keel_request *req, keel_response *res, void *userdata)
{
    (void)req, (void)userdata;
    return keel_response_send_status(res, 400);
}

static int probe_load(keel_module *module)
{
    int rc;
    if ((rc = keel_protocol_register(module, &probe)) < 0 ||
        (rc = keel_protocol_register(module, &probe_up)) < 0 ||
        (rc = keel_protocol_register(module, &probe_old)) < 0 ||
        (rc = keel_protocol_register(module, &probe_tr)) < 0 ||
        (rc = keel_route_add(module, "GET", "/probe/plain", route_plain, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/probe/close-field", route_close_field, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/probe/close-call", route_close_call, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/probe/hop", route_hop, NULL)) < 0 ||
        (rc = keel_route_add(module, "GET", "/probe/status", route_status, NULL)) < 0)
        return rc;
    return KEEL_OK;
}

KEEL_MODULE(probe, .version = "1.0.0", .load = probe_load);
