/* forward.c — a request on its way to an upstream: the route's handler,
 * choosing a server and a connection (kept-alive or new), the request
 * head, the body streamed as it arrives with back-pressure, 100-continue,
 * retries on another server, and the error answers:
 *
 *   503  no server of the group is usable (all out after failures or
 *        failed checks): the service is unavailable, not broken (RFC 9110
 *        15.6.4);
 *   502  an upstream refused, reset, or answered something that is not
 *        HTTP (RFC 9110 15.6.3: "an invalid response from an inbound
 *        server");
 *   504  an upstream did not connect or answer in time (RFC 9110 15.6.5).
 *
 * Retries (nginx's proxy_next_upstream error timeout): while nothing of
 * the response went to the client and no byte of a request body was taken
 * from the client (it is streamed, never stored, so it cannot be sent
 * twice), for a method that is idempotent (RFC 9110 9.2.2), or for any
 * method when the request never left for the failed server (nginx's
 * non_idempotent rule: a refused connect is safe to retry).
 */
#include "px.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int method_is(keel_str m, const char *s)
{
    return m.len == strlen(s) && memcmp(m.ptr, s, m.len) == 0;
}

/* RFC 9110 9.2.2: PUT, DELETE and the safe methods. */
static int idempotent(keel_str m)
{
    return method_is(m, "GET") || method_is(m, "HEAD") || method_is(m, "OPTIONS") ||
           method_is(m, "TRACE") || method_is(m, "PUT") || method_is(m, "DELETE");
}

/* ---- the access log line ------------------------------------------------------------ */

/* "S.mmm", nginx's form for times (snprintf costs a proxied request
 * some hundreds of instructions for this). out has room for 24 bytes. */
static size_t format_seconds(char *out, uint64_t ms)
{
    char digits[20];
    size_t n = 0, len = 0;
    uint64_t s = ms / 1000;
    do
        digits[n++] = (char)('0' + s % 10);
    while ((s /= 10) != 0);
    while (n > 0)
        out[len++] = digits[--n];
    out[len++] = '.';
    out[len++] = (char)('0' + ms / 100 % 10);
    out[len++] = (char)('0' + ms / 10 % 10);
    out[len++] = (char)('0' + ms % 10);
    return len;
}

/* nginx's $upstream_addr, $upstream_status and $upstream_response_time
 * (of the last attempt's server; the time from the first attempt, as the
 * client waited it), for the access log and any other logger. */
static void set_log_fields(px_ex *ex, uint64_t ms)
{
    const px_config *c = ex->route->cfg;
    char text[24];
    if (ex->peer != NULL)
        keel_request_set_log_field_named(ex->req, c->log_addr, ex->peer->srv->authority,
                                         strlen(ex->peer->srv->authority));
    if (ex->status >= 100 && ex->status <= 999) {
        text[0] = (char)('0' + ex->status / 100);
        text[1] = (char)('0' + ex->status / 10 % 10);
        text[2] = (char)('0' + ex->status % 10);
        keel_request_set_log_field_named(ex->req, c->log_status, text, 3);
    }
    keel_request_set_log_field_named(ex->req, c->log_time, text, format_seconds(text, ms));
}

void px_log_exchange(px_ex *ex, int status)
{
    px_config *c = ex->route->cfg;
    if (ex->req == NULL)
        return;
    uint64_t ms = keel_worker_now_ms(ex->pw->worker) - ex->start_ms;
    set_log_fields(ex, ms);
    if (c->log == NULL)
        return;
    keel_str m = keel_request_method(ex->req), t = keel_request_target(ex->req);
    char when[40];
    keel_time_format(keel_time_now(), KEEL_TIME_CLF, when, sizeof when);
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "%s [%s] \"%.*s %.*s\" %d upstream=%s upstream_status=%d "
                     "upstream_time=%llu.%03llu tries=%u bytes=%llu\n",
                     ex->client_ip, when, (int)(m.len > 32 ? 32 : m.len), m.ptr,
                     (int)(t.len > 512 ? 512 : t.len), t.ptr, status,
                     ex->peer ? ex->peer->srv->authority : "-", ex->status,
                     (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000), ex->attempts,
                     (unsigned long long)ex->bytes_out);
    if (n > 0)
        keel_appender_write(c->log, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* ---- back-pressure towards the client ------------------------------------------------ */

/* The request body is paused, not the client's connection: over HTTP/2
 * that connection carries every stream of the client (a CDN's, many
 * users'), and pausing it would stall them all, PINGs included, behind one
 * upload to an upstream that does not read; its one pause flag would also
 * be undone by any other exchange's resume. */
void px_resume_client(px_ex *ex)
{
    if (ex->client_paused && ex->req != NULL) {
        ex->client_paused = 0;
        keel_request_body_pause(ex->req, 0);
    }
}

static void upstream_written(keel_conn *conn, int status, void *userdata)
{
    px_block *b = userdata;
    px_ex *ex = b->ex;
    (void)conn, (void)status;
    ex->up_out -= b->len;
    keel_metric_add(ex->pw->worker, ex->route->cfg->m_buffered, -(int64_t)b->len);
    if (ex->client_paused && ex->up_out <= ex->route->cfg->buffer / 2)
        px_resume_client(ex);
    if (ex->spool != NULL && ex->up_out <= ex->route->cfg->buffer / 2)
        px_spool_send(ex); /* the held body's next pieces */
    px_worker *pw = ex->pw;
    if (b->cap == PX_HEAD_BLOCK - offsetof(px_block, data) && pw->nfree_heads < 64 &&
        !pw->blocks_closed)
        KEEL_FREELIST_GIVE(b, pw->free_heads, pw->nfree_heads, next_free);
    else
        free(b);
    px_ex_unref(ex);
}

void px_heads_free(px_worker *pw)
{
    KEEL_FREELIST_DRAIN(pw->free_heads, pw->nfree_heads, next_free, free);
}

/* Up to three spans copied into one block and queued to the upstream. */
int px_ex_write_upstream(px_ex *ex, const char *a, size_t alen, const char *b, size_t blen,
                         const char *c, size_t clen)
{
    if (ex->up == NULL || ex->up->conn == NULL)
        return KEEL_ERR_CLOSED;
    size_t len = alen + blen + clen;
    px_block *blk = malloc(sizeof *blk + len);
    if (blk == NULL)
        return KEEL_ERR_NOMEM;
    blk->ex = ex;
    blk->len = len;
    blk->cap = 0;
    if (alen)
        memcpy(blk->data, a, alen);
    if (blen)
        memcpy(blk->data + alen, b, blen);
    if (clen)
        memcpy(blk->data + alen + blen, c, clen);
    keel_buf buf = {blk->data, len};
    int rc = keel_conn_write(ex->up->conn, &buf, 1, upstream_written, blk);
    if (rc != KEEL_OK) {
        free(blk);
        return rc;
    }
    px_ex_ref(ex);
    ex->up_out += len;
    keel_metric_add(ex->pw->worker, ex->route->cfg->m_buffered, (int64_t)len);
    return KEEL_OK;
}

/* ---- the request body ------------------------------------------------------------------ */

/* The last chunk with the client's trailer fields (RFC 9112 7.1.2), after
 * the CRLF that ends a data chunk if one came with it; NULL when there
 * are none (or no memory: they are then dropped, as a proxy may, RFC 9110
 * 6.5.1). The core has removed the fields a trailer must not carry; one
 * HTTP/1.1 cannot carry (from HTTP/2: RFC 9110 5.5) is left out. */
static char *trailer_section(keel_request *req, int after_data)
{
    size_t n = keel_request_trailer_count(req), size = 16;
    if (n == 0)
        return NULL;
    keel_header h;
    for (size_t i = 0; i < n; i++)
        if (keel_request_trailer_at(req, i, &h) == KEEL_OK)
            size += h.name.len + h.value.len + 4;
    char *out = malloc(size);
    if (out == NULL)
        return NULL;
    size_t at = 0;
    if (after_data) {
        memcpy(out, "\r\n", 2);
        at = 2;
    }
    memcpy(out + at, "0\r\n", 3);
    at += 3;
    for (size_t i = 0; i < n; i++) {
        if (keel_request_trailer_at(req, i, &h) != KEEL_OK || !px_field_ok(h.name, h.value))
            continue;
        memcpy(out + at, h.name.ptr, h.name.len);
        at += h.name.len;
        memcpy(out + at, ": ", 2);
        memcpy(out + at + 2, h.value.ptr, h.value.len);
        at += 2 + h.value.len;
        memcpy(out + at, "\r\n", 2);
        at += 2;
    }
    memcpy(out + at, "\r\n", 3); /* the section's end, and a NUL */
    return out;
}

void px_body_chunk(keel_request *req, const char *data, size_t len, int last, void *userdata)
{
    px_ex *ex = userdata;
    if (ex->up == NULL || ex->up->conn == NULL)
        return; /* the attempt failed: the rest is dropped (the client gets the error) */
    px_config *c = ex->route->cfg;
    if (ex->route->group->fastcgi) {
        px_fcgi_body(ex, data, len, last);
    } else if (ex->body_kind == PX_BODY_CHUNKED) {
        /* Re-framed, one chunk per piece (RFC 9112 7.1). */
        char size[24];
        int n = len ? snprintf(size, sizeof size, "%zx\r\n", len) : 0;
        char *trailers = last ? trailer_section(req, len > 0) : NULL;
        const char *tail = trailers ? trailers
                           : last   ? (len ? "\r\n0\r\n\r\n" : "0\r\n\r\n")
                                    : "\r\n";
        if (len || last)
            px_ex_write_upstream(ex, size, (size_t)n, data, len, tail, strlen(tail));
        free(trailers);
    } else if (len) {
        px_ex_write_upstream(ex, data, len, NULL, 0, NULL, 0);
    }
    if (last) {
        ex->body_done = 1;
        if (ex->up != NULL && ex->up->conn != NULL)
            keel_conn_set_timeout(ex->up->conn, ex->route->read_timeout_ms);
    }
    /* A slow upstream: stop taking this body until the queue drains, so
     * an upload is never held whole (nginx buffers it to a file instead;
     * proxy_request_buffering off streams it, as here). */
    if (!last && ex->up_out > c->buffer && !ex->client_paused &&
        keel_request_body_pause(req, 1) == KEEL_OK)
        ex->client_paused = 1;
}

static void start_body(px_ex *ex)
{
    if (ex->body_started || ex->req == NULL)
        return;
    int timer_ref = ex->continue_timer != NULL;
    if (timer_ref) {
        keel_timer_stop(ex->continue_timer);
        ex->continue_timer = NULL;
    }
    ex->body_started = 1;
    /* Asking for the body is what makes http1 send its own 100 Continue
     * to a client that waits for one. */
    keel_request_stream_body(ex->req, px_body_chunk, ex);
    if (timer_ref)
        px_ex_unref(ex); /* the timer's, dropped last: ex lives through the call */
}

/* The upstream said 100 Continue: now the client may send. */
void px_continue(px_ex *ex)
{
    if (ex->expect_continue && !ex->body_started)
        start_body(ex);
}

static void continue_waited(keel_timer *t, void *userdata)
{
    px_ex *ex = userdata;
    (void)t;
    /* RFC 9110 10.1.1: a client that sent 100-continue need not wait
     * forever; neither does a proxy. curl waits one second too. */
    if (ex->continue_timer != NULL) {
        keel_timer_stop(ex->continue_timer);
        ex->continue_timer = NULL;
        if (!ex->body_started && ex->up != NULL)
            start_body(ex);
        px_ex_unref(ex);
    }
}

/* ---- attempts ------------------------------------------------------------------------------ */

static void release_peer(px_ex *ex)
{
    if (ex->peer != NULL && ex->peer_held) {
        ex->peer->active--;
        ex->peer_held = 0;
    }
}

/* The client's request is over for us: answered, or gone. Drops the
 * request's reference. */
static void request_over(px_ex *ex)
{
    ex->req = NULL;
    ex->res = NULL;
    px_ex_unref(ex);
}

static void respond_error(px_ex *ex, int status)
{
    if (ex->req == NULL)
        return;
    px_resume_client(ex);
    px_log_exchange(ex, status);
    keel_log(ex->route->cfg->module, KEEL_LOG_INFO, "%s %s: %d after %u attempt(s)",
             ex->route->group->name, ex->peer ? ex->peer->srv->authority : "-", status,
             ex->attempts);
    keel_response_send_status(ex->res, status);
    request_over(ex);
}

/* keel could not make the attempt itself (out of descriptors or memory):
 * no server is to blame and none would do better now. 503 with
 * Retry-After (RFC 9110 15.6.4, 10.2.3), as static answers for the same
 * shortage. */
static void respond_unavailable(px_ex *ex)
{
    if (ex->req == NULL)
        return;
    static const char body[] = "Service Unavailable\n";
    px_resume_client(ex);
    px_log_exchange(ex, 503);
    keel_log(ex->route->cfg->module, KEEL_LOG_WARN,
             "%s: no upstream connection could be made (out of descriptors or memory): 503",
             ex->route->group->name);
    keel_response_set_status(ex->res, 503);
    keel_response_header_set(ex->res, "Retry-After", "1");
    keel_response_header_set(ex->res, "Content-Type", "text/plain");
    keel_response_send(ex->res, body, sizeof body - 1, NULL, NULL);
    request_over(ex);
}

static void try_next(px_ex *ex, int last_failure);

void px_up_ready(px_ex *ex, px_up *up)
{
    px_upstream_unhold(ex); /* a pause was the previous attempt's */
    if (ex->spool != NULL)
        px_spool_rewind(ex); /* a held body goes whole to each attempt */
    /* A pooled connection keeps the size its last exchange set. The first
     * read takes no more than a buffer of the core's pool holds: a small
     * response then costs no buffer of its own (a read of read_buffer is
     * one malloc and free). Reads grow to read_buffer once a response goes
     * on past the first (response.c). */
    size_t read_size = px_ex_read_size(ex);
    keel_conn_set_read_size(up->conn, read_size < PX_FIRST_READ ? read_size : PX_FIRST_READ);
    ex->read_grown = read_size <= PX_FIRST_READ;
    size_t len = 0;
    char *head = ex->route->group->fastcgi ? px_fcgi_request_head(ex, &len)
                                           : px_build_request_head(ex, &len);
    if (head == NULL) {
        up->ex = NULL;
        ex->up = NULL;
        keel_conn_close(up->conn);
        release_peer(ex);
        respond_error(ex, 500);
        return;
    }
    px_block *blk = (px_block *)(void *)head;
    blk->ex = ex;
    blk->len = len;
    if (ex->route->group->fastcgi)
        blk->cap = 0; /* px_build_request_head sets it */
    keel_buf buf = {blk->data, len};
    int rc = keel_conn_write(up->conn, &buf, 1, upstream_written, blk);
    if (rc == KEEL_OK) {
        px_ex_ref(ex);
        ex->up_out += len;
        keel_metric_add(ex->pw->worker, ex->route->cfg->m_buffered, (int64_t)len);
    } else {
        free(blk);
    }
    ex->sent = rc == KEEL_OK;
    if (rc != KEEL_OK) {
        up->ex = NULL;
        ex->up = NULL;
        keel_conn_abort(up->conn);
        px_attempt_failed(ex, PX_FAIL_RESET);
        return;
    }
    int sending = ex->body_kind != PX_BODY_NONE && !ex->body_done;
    keel_conn_set_timeout(up->conn,
                          sending ? ex->route->send_timeout_ms : ex->route->read_timeout_ms);
    /* The client's connection holds its whole budget already (an HTTP/2
     * client that shut its windows): the answer waits in the kernel. */
    px_upstream_hold(ex);
    if (!sending)
        return;
    if (ex->spool != NULL) {
        px_spool_send(ex);
        return;
    }
    if (ex->expect_continue) {
        /* Wait for the upstream's 100 (or its final answer). */
        ex->continue_timer = keel_timer_start(ex->pw->worker, 1000, 0, continue_waited, ex);
        if (ex->continue_timer != NULL) {
            px_ex_ref(ex);
            return;
        }
    }
    start_body(ex);
}

static void try_next(px_ex *ex, int last_failure)
{
    px_route *r = ex->route;
    unsigned limit = r->tries ? r->tries : (unsigned)r->group->nservers;
    px_peer *p = NULL;
    if (ex->attempts < limit)
        p = px_pick(ex->pw, r->group, ex->tried, ex->client_ip);
    if (p == NULL) {
        respond_error(ex, ex->attempts == 0 ? 503 : last_failure == PX_FAIL_TIMEOUT ? 504 : 502);
        return;
    }
    ex->peer = p;
    ex->peer_held = 1;
    p->active++;
    ex->tried |= 1ull << (size_t)(p->srv - r->group->servers);
    ex->attempts++;
    ex->interim = 0;
    ex->sent = 0;
    px_up *up = px_pool_take(p);
    ex->up_was_reused = up != NULL;
    if (up != NULL) {
        up->ex = ex;
        up->reused = 1;
        ex->up = up;
        keel_metric_add(ex->pw->worker, r->cfg->m_reused, 1);
        px_up_ready(ex, up);
        return;
    }
    int rc = px_up_connect(ex->pw, p, ex, r->connect_timeout_ms);
    if (rc != KEEL_OK) {
        release_peer(ex);
        if (rc == KEEL_ERR_NOMEM)
            respond_unavailable(ex);
        else
            respond_error(ex, rc == KEEL_ERR_SHUTDOWN ? 503 : 502);
    }
}

void px_attempt_failed(px_ex *ex, int why)
{
    px_config *c = ex->route->cfg;
    px_ex_ref(ex);
    if (ex->continue_timer != NULL) {
        keel_timer_stop(ex->continue_timer);
        ex->continue_timer = NULL;
        px_ex_unref(ex);
    }
    if (why != PX_FAIL_CLIENT && why != PX_FAIL_LOCAL) {
        keel_metric_add(ex->pw->worker, c->m_failures, 1);
        /* A kept-alive connection that the upstream closed before
         * answering says nothing about the server's health (it may just
         * have timed it out). */
        int stale = why == PX_FAIL_RESET && ex->up_was_reused && ex->status == 0;
        if (ex->peer != NULL && !stale)
            px_peer_failed(ex->pw, ex->peer);
    }
    release_peer(ex);
    if (ex->req == NULL) {
        /* the client is gone already */
    } else if (ex->head_relayed) {
        /* The head (and maybe part of the body) went out: the client
         * must not take what it got for the whole response. Closing the
         * connection without the last chunk (or short of the
         * Content-Length) tells it (RFC 9112 8). Before any body byte was
         * handed over the head has not left either (the core sends it with
         * the first), and the answer is still a 502, which the core turns
         * into that cut if it had (keel_response_send_status). */
        px_resume_client(ex);
        px_log_exchange(ex, ex->bytes_out == 0 ? 502 : ex->status);
        if (ex->bytes_out == 0)
            keel_response_send_status(ex->res, why == PX_FAIL_TIMEOUT ? 504 : 502);
        else
            keel_response_abort(ex->res);
        request_over(ex);
    } else if (why == PX_FAIL_LOCAL) {
        respond_unavailable(ex);
    } else if (why != PX_FAIL_CLIENT && !ex->body_started && (ex->idempotent || !ex->sent)) {
        /* nginx's rule for non-idempotent requests: passed to the next
         * server only if nothing was sent to this one (a refused or
         * timed-out connect, a pooled connection found closed). */
        ex->nfields = ex->hlen = ex->hdropped = 0;
        ex->status = 0;
        if (ex->attempts < (ex->route->tries ? ex->route->tries : ex->route->group->nservers))
            keel_metric_add(ex->pw->worker, c->m_retries, 1);
        try_next(ex, why);
    } else {
        respond_error(ex, why == PX_FAIL_TIMEOUT ? 504 : 502);
    }
    px_ex_unref(ex);
}

/* The upstream's response was relayed whole (response.c ended it). */
void px_ex_finish(px_ex *ex)
{
    release_peer(ex);
    if (ex->continue_timer != NULL) {
        /* answered before it said 100: the body is not wanted */
        keel_timer_stop(ex->continue_timer);
        ex->continue_timer = NULL;
        px_ex_unref(ex);
    }
    if (ex->req != NULL)
        request_over(ex);
}

/* The client left before its response ended (keel_request_on_abort): the
 * request and its connection are gone; the upstream attempt goes too,
 * whatever stage it is at. Blocks in flight keep the exchange until
 * their callbacks. */
static void client_aborted(keel_request *req, void *userdata)
{
    px_ex *ex = userdata;
    (void)req;
    ex->req = NULL;
    ex->res = NULL;
    ex->client_paused = 0;
    if (ex->continue_timer != NULL) {
        keel_timer_stop(ex->continue_timer);
        ex->continue_timer = NULL;
        px_ex_unref(ex); /* the timer's */
    }
    release_peer(ex);
    px_up *up = ex->up;
    if (up != NULL) {
        ex->up = NULL;
        px_up_abandon(up);
    }
    px_ex_unref(ex); /* the request's */
}

/* The exchange's first attempt, once its body's kind is known. */
void px_ex_start(px_ex *ex)
{
    keel_metric_add(ex->pw->worker, ex->route->cfg->m_requests, 1);
    try_next(ex, 0);
}

void px_ex_client_gone(px_ex *ex)
{
    /* keel_response_* said KEEL_ERR_CLOSED: the request is gone. */
    ex->req = NULL;
    ex->res = NULL;
    px_ex_unref(ex);
}

/* ---- the handler ------------------------------------------------------------------------------
 */

int px_handler(keel_request *req, keel_response *res, void *userdata)
{
    px_route *r = userdata;
    /* Nothing an HTTP/1.1 request cannot carry goes upstream (headers.c). */
    int refusal = px_request_refusal(req);
    if (refusal != 0) {
        keel_response_send_status(res, refusal);
        return KEEL_OK;
    }
    px_ex *ex = px_ex_new(px_worker_of(keel_request_worker(req), r->cfg->module));
    if (ex == NULL)
        return KEEL_ERR_NOMEM;
    ex->refs = 1; /* the request's, dropped when its response is over */
    ex->req = req;
    ex->res = res;
    ex->route = r;
    ex->start_ms = keel_worker_now_ms(ex->pw->worker);
    if (keel_request_peer_ip(req, ex->client_ip, sizeof ex->client_ip) != KEEL_OK)
        snprintf(ex->client_ip, sizeof ex->client_ip, "unknown");
    /* What FastCGI's parameters name of the connection, asked now: the
     * request may be sent after the handler returned, when the core no
     * longer answers (keel_request_local_name). */
    if (r->group->fastcgi)
        px_fcgi_names(ex, req);
    /* An HTTP/2 connection's streams share one budget (share.c). */
    if (keel_request_version(req) == 20)
        ex->share = px_client_join(ex->pw, keel_request_conn_id(req));
    ex->scheme = keel_request_scheme(req);
    /* The upstream may connect after the client left: the exchange must
     * hear of it rather than find its request recycled (issue 23). */
    keel_request_on_abort(req, client_aborted, ex);
    keel_str method = keel_request_method(req);
    ex->idempotent = idempotent(method);
    ex->is_head = method_is(method, "HEAD");

    /* A body of unknown length: HTTP/1.1 chunked (the only coding http1
     * accepts), or an HTTP/2 body without content-length, framed by
     * END_STREAM (RFC 9113 8.1.1): chunked to the upstream, as nginx
     * sends it. */
    keel_str te = keel_request_header_token(req, KEEL_HDR_TRANSFER_ENCODING);
    keel_str cl = keel_request_header_token(req, KEEL_HDR_CONTENT_LENGTH);
    if (te.ptr != NULL || (cl.ptr == NULL && keel_request_body_length(req) < 0)) {
        ex->body_kind = PX_BODY_CHUNKED;
    } else if (cl.ptr != NULL) {
        ex->body_kind = PX_BODY_LENGTH;
        ex->body_done = cl.len == 1 && cl.ptr[0] == '0';
    }
    keel_str expect = keel_request_header_token(req, KEEL_HDR_EXPECT);
    ex->expect_continue = expect.ptr != NULL && px_token_in_list(expect, "100-continue") &&
                          ex->body_kind != PX_BODY_NONE && !ex->body_done;
    ex->upgrade =
        ex->body_kind == PX_BODY_NONE && !r->group->fastcgi && px_upgrade_requested(r, req);
    /* A FastCGI application sends no 100: the body goes at once (http1
     * answers the client's Expect when the body is asked for). */
    if (r->group->fastcgi)
        ex->expect_continue = 0;
    /* CONTENT_LENGTH is how a CGI application knows its body's size (RFC
     * 3875 4.1.2; PHP reads none without it): a body of unknown length is
     * held whole first, as nginx's fastcgi_pass does (spool.c), and the
     * exchange starts when it is. */
    if (r->group->fastcgi && ex->body_kind == PX_BODY_CHUNKED) {
        if (px_spool_begin(ex) != KEEL_OK) {
            px_log_exchange(ex, 500);
            keel_response_send_status(res, 500);
            px_ex_client_gone(ex);
        }
        return KEEL_OK;
    }
    px_ex_start(ex);
    return KEEL_OK;
}
