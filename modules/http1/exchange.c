/* exchange.c — one request/response exchange with the core, and the sink
 * through which the core hands the response back.
 *
 * The sink's calls can come in two situations:
 *   - inside h1_process (a handler answering synchronously from dispatch,
 *     or from a body callback): they only record what happened and append
 *     to the output buffer; h1_process moves on and flushes once at the end;
 *   - later, from the loop (an asynchronous handler): they flush at once
 *     and restart reading where needed (h1_after_exchange).
 */
#include "h1.h"

#include <stdlib.h>
#include <string.h>

/* ---- starting ------------------------------------------------------------ */

void h1_exchange_start(h1_conn *c)
{
    h1_exch *exch = c->exch;
    const char *head = c->data + c->head_base;
    if (exch->has_body) {
        /* The body is consumed from the connection's buffer while the core
         * still holds the head, and reading must resume meanwhile (which
         * may move the buffer), so such a head gets its own copy. Heads of
         * requests without a body stay zero-copy views. */
        if (exch->copy_cap < exch->head_len) {
            char *copy = realloc(exch->copy, exch->head_len);
            if (copy == NULL) {
                h1_fail(c, 500);
                return;
            }
            exch->copy = copy;
            exch->copy_cap = exch->head_len;
        }
        memcpy(exch->copy, head, exch->head_len);
        head = exch->copy;
    }
    c->head_copied = exch->has_body;
    h1_head_build(c, head);

    if (c->nrequests < UINT32_MAX)
        c->nrequests++;
    c->had_request = 1;
    c->is_head = exch->method == HTTP_HEAD;
    c->version10 = exch->head.version == 10;
    c->client_keepalive = exch->keep_alive;
    c->expect_continue = exch->expect_continue;
    c->exch->head_deadline_ms = 0;
    /* RFC 9112 9.3: persistence as the client asked, and the limits on it. */
    if (!c->client_keepalive || c->shutdown || c->w->cfg->keepalive_timeout_ms == 0 ||
        (c->w->cfg->max_requests != 0 && c->nrequests >= c->w->cfg->max_requests))
        c->close_after = 1;

    c->read_state = exch->has_body ? H1_READ_HOLD : H1_READ_DONE;
    if (exch->has_body)
        h1_body_init(c);
    c->exch_state = H1_EXCH_ACTIVE;
    c->exch->req = keel_http_request_start(c->conn, &h1_sink, c, &exch->head);
    if (c->exch->req == NULL) {
        c->exch_state = H1_EXCH_NONE;
        h1_fail(c, 500);
        return;
    }
    keel_http_request_dispatch(c->exch->req);
}

void h1_exchange_abort(h1_conn *c)
{
    if (c->exch_state == H1_EXCH_ACTIVE) {
        keel_request *req = c->exch->req;
        c->exch_state = H1_EXCH_FINISHED;
        c->exch->req = NULL;
        keel_http_request_abort(req);
    }
}

/* The exchange is over and its message fully read: get ready for the next
 * request on this connection. */
int h1_exchange_next(h1_conn *c)
{
    if (c->close_after || c->closing) {
        h1_close(c);
        return -1;
    }
    c->read_state = H1_READ_HEAD;
    c->exch_state = H1_EXCH_NONE;
    c->exch->req = NULL;
    c->framing = H1_BODY_NONE;
    c->exch->resp_left = 0;
    c->exch->body_seen = c->exch->overhead = c->exch->body_start_ms = 0;
    c->exch->head_deadline_ms = 0;
    c->want_body = c->expect_continue = c->continue_sent = 0;
    c->body_paused = c->end_owed = 0;
    c->head_sent = c->resp_ended = c->is_head = c->version10 = 0;
    c->head_copied = c->head_started = 0;
    return 0;
}

/* The response is over but the body was not (all) read. Returns -1 if the
 * connection is closing instead of reading it. */
int h1_body_unwanted(h1_conn *c)
{
    /* RFC 9110 10.1.1: a client that sent 100-continue and got a final
     * status instead may never send the body; waiting for it to discard it
     * could read the next request as body. Close instead. */
    if (c->close_after || (c->expect_continue && !c->continue_sent)) {
        c->close_after = 1;
        h1_close(c);
        return -1;
    }
    c->read_state = H1_READ_DISCARD; /* bounded by max_body, as any body */
    h1_body_clock_start(c);
    return 0;
}

/* ---- the sink -------------------------------------------------------------- */

static int sink_send_head_fields(void *exchange, int status, const keel_field *fields,
                                 size_t nfields, int64_t content_length)
{
    h1_conn *c = exchange;
    if (c->exch_state != H1_EXCH_ACTIVE || c->head_sent)
        return KEEL_ERR_STATE;
    if (c->closing)
        return KEEL_ERR_CLOSED;
    if (status == 101)
        return KEEL_ERR_INVAL; /* only through sink_upgrade */
    if (status >= 200) {
        /* The core's wish (the handler's "Connection: close", say) comes
         * as a flag: connection fields are ours to write. */
        if (!keel_http_request_keep_alive(c->exch->req) || c->shutdown)
            c->close_after = 1;
        /* A final answer before the body was read: if the client waits
         * for 100 Continue it will not send it, so the connection cannot
         * stay. */
        if (c->read_state == H1_READ_HOLD && c->expect_continue && !c->continue_sent)
            c->close_after = 1;
        /* RFC 9110 15.5.9: a 408 says the server closes rather than wait
         * on; 15.5.14: after a 413 it may close, which spares reading a
         * body nobody wants (HTTP/1.1 cannot cancel it otherwise). */
        if (status == 408 || status == 413)
            c->close_after = 1;
    }
    /* The head waits in the output buffer for the first body piece (or the
     * end of on_data), so head and small body leave in one write. */
    return h1_head_serialize(c, status, fields, nfields, content_length);
}

/* keel_header views as keel_fields without line or token (classified by
 * name, written in pieces): in `room` when they fit, else allocated. */
static keel_field *fields_of(const keel_header *h, size_t n, keel_field *room, size_t nroom)
{
    keel_field *f = n <= nroom ? room : malloc(n * sizeof *f);
    for (size_t i = 0; f != NULL && i < n; i++)
        f[i] = (keel_field){h[i].name, h[i].value, NULL, 0, 0};
    return f;
}

/* What a host without send_head_fields (older than ABI 1.11) calls. */
static int sink_send_head(void *exchange, int status, const keel_header *headers, size_t nheaders,
                          int64_t content_length)
{
    keel_field room[16] = {0}; /* zeroed: the compiler cannot see n bound what is read */
    keel_field *f = fields_of(headers, nheaders, room, sizeof room / sizeof room[0]);
    if (f == NULL)
        return KEEL_ERR_NOMEM;
    int rc = sink_send_head_fields(exchange, status, f, nheaders, content_length);
    if (f != room)
        free(f);
    return rc;
}

/* Bytes dropped (HEAD, 204, 304): release them. A final piece is released
 * at once; an intermediate one after the writes before it, so a handler
 * that writes its next piece from the callback neither recurses nor outruns
 * the client. */
static int release_later(h1_conn *c, int last, keel_write_cb cb, void *ud)
{
    if (cb == NULL)
        return KEEL_OK;
    if (last) {
        cb(c->conn, KEEL_OK, ud);
        return KEEL_OK;
    }
    keel_buf none = {"", 0};
    return h1_out_write_with(c, c->out ? c->out->len : 0, &none, 1, cb, ud);
}

static int sink_send_body(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                          const keel_header *trailers, size_t ntrailers, keel_write_cb cb, void *ud)
{
    h1_conn *c = exchange;
    if (c->exch_state != H1_EXCH_ACTIVE || !c->head_sent || c->resp_ended)
        return KEEL_ERR_STATE;
    if (c->closing)
        return KEEL_ERR_CLOSED;
    size_t total = 0;
    for (size_t i = 0; i < nbufs; i++)
        total += bufs[i].len;
    if (last)
        c->resp_ended = 1;

    int rc = KEEL_OK;
    if (c->framing == H1_BODY_NONE) {
        rc = release_later(c, last, cb, ud);
        goto out;
    }
    if (c->framing == H1_BODY_LENGTH) {
        if (total > c->exch->resp_left) {
            /* More than the declared length: the excess would be read as
             * the next response. Refuse it and end the connection. */
            c->close_after = 1;
            c->resp_ended = 1;
            return KEEL_ERR_INVAL;
        }
        c->exch->resp_left -= total;
        if (last && c->exch->resp_left > 0)
            c->close_after = 1; /* short body: only a close can tell */
    }
    int chunked = c->framing == H1_BODY_CHUNKED;
    if (total == 0 && !(chunked && last)) {
        rc = release_later(c, last, cb, ud);
        goto out;
    }

    /* Framing around the data: "SIZE\r\n" before, "\r\n" after, and the
     * last chunk with the trailer section at the end (RFC 9112 7.1). */
    size_t trailer_need = chunked && last ? 5 + h1_trailers_size(trailers, ntrailers) : 0;
    size_t need = (chunked ? 16 + 2 + 2 : 0) + trailer_need;
    int copy = last && total <= H1_COPY_MAX;
    if (need == 0 && !copy) {
        /* Length-framed or close-delimited: the bytes go as they are,
         * together with whatever waits in the output buffer. */
        rc = h1_out_write_with(c, c->out ? c->out->len : 0, bufs, nbufs, cb, ud);
        goto out;
    }
    char *p = h1_out_reserve(c, need + (copy ? total : 0));
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    char *start = p;
    if (chunked && total > 0) {
        p += h1_u64_hex(p, total);
        *p++ = '\r';
        *p++ = '\n';
    }
    size_t prefix = c->out->len + (size_t)(p - start);
    if (copy) {
        for (size_t i = 0; i < nbufs; i++) {
            memcpy(p, bufs[i].base, bufs[i].len);
            p += bufs[i].len;
        }
    }
    if (chunked && total > 0) {
        *p++ = '\r';
        *p++ = '\n';
    }
    if (chunked && last) {
        memcpy(p, "0\r\n", 3);
        p += 3;
        p = h1_trailers_put(p, trailers, ntrailers);
        *p++ = '\r';
        *p++ = '\n';
    }
    h1_out_commit(c, (size_t)(p - start));

    if (copy) {
        /* Copied: the caller's bytes are free now. */
        if (cb != NULL)
            cb(c->conn, KEEL_OK, ud);
    } else {
        rc = h1_out_write_with(c, prefix, bufs, nbufs, cb, ud);
    }
out:
    if (rc == KEEL_OK && !c->in_process)
        h1_out_flush(c);
    return rc;
}

/* What a body handed to the connection's queue (send_file, send_pieces)
 * must pass, and its length accounted: 1 when its `length` bytes are to be
 * written now (chunked: after the size line this puts in the output
 * buffer; the caller adds the chunk's end, as nginx's chunked filter
 * frames in-file buffers); 0 when *rc says what happened instead (a
 * refusal, or a body that sends nothing: released). */
static int take_queued_body(h1_conn *c, uint64_t length, int last, keel_write_cb cb, void *ud,
                            int *rc)
{
    *rc = KEEL_OK;
    if (c->exch_state != H1_EXCH_ACTIVE || !c->head_sent || c->resp_ended)
        *rc = KEEL_ERR_STATE;
    else if (c->closing)
        *rc = KEEL_ERR_CLOSED;
    else if (c->framing == H1_BODY_LENGTH && length > c->exch->resp_left) {
        /* As in send_body: the excess would be read as the next response. */
        c->close_after = 1;
        c->resp_ended = 1;
        *rc = KEEL_ERR_INVAL;
    }
    if (*rc != KEEL_OK)
        return 0;
    if (last)
        c->resp_ended = 1;
    int chunked = c->framing == H1_BODY_CHUNKED;
    if (chunked && (length > 0 || last)) {
        /* The size line, or the last chunk alone (RFC 9112 7.1). */
        char line[24] = "0\r\n\r\n";
        size_t n = 5;
        if (length > 0) {
            n = h1_u64_hex(line, length);
            line[n++] = '\r';
            line[n++] = '\n';
        }
        if ((*rc = h1_out_append(c, line, n)) != KEEL_OK)
            return 0;
    }
    if (c->framing == H1_BODY_NONE || length == 0) {
        /* HEAD, 204, 304: the head alone (RFC 9110 6.4.1). */
        *rc = release_later(c, last, cb, ud);
        if (*rc == KEEL_OK && !c->in_process)
            h1_out_flush(c);
        return 0;
    }
    if (c->framing == H1_BODY_LENGTH) {
        c->exch->resp_left -= length;
        if (last && c->exch->resp_left > 0)
            c->close_after = 1; /* short body: only a close can tell */
    }
    return 1;
}

/* The body from a file: whatever output is batched (this head, earlier
 * pipelined responses) leaves first, then the file goes to the connection
 * (sendfile on plain TCP). */
static int send_body_pieces(h1_conn *c, const keel_piece *pieces, size_t npieces, int last,
                            keel_write_cb cb, void *ud);

static int sink_send_file(void *exchange, int fd, uint64_t offset, uint64_t length, int last,
                          keel_write_cb cb, void *ud)
{
    h1_conn *c = exchange;
    if (c->framing == H1_BODY_CHUNKED) {
        keel_piece range = keel_piece_file(fd, offset, length);
        return send_body_pieces(c, &range, 1, last, cb, ud);
    }
    int rc;
    if (!take_queued_body(c, length, last, cb, ud, &rc))
        return rc;
    /* What is batched (this head, earlier pipelined responses) goes with
     * the file, so that a small file's response leaves in one segment. */
    h1_obuf *b = c->out;
    if (b != NULL && b->len > 0) {
        keel_buf batched = {b->data, b->len};
        rc = keel_conn_write_file_after(c->conn, &batched, 1, fd, offset, length, cb, ud);
        b->len = 0; /* copied */
    } else {
        rc = keel_conn_write_file(c->conn, fd, offset, length, cb, ud);
    }
    if (rc != KEEL_OK)
        c->close_after = 1; /* the head may be out without its body */
    return rc;
}

/* The body as pieces (ABI 1.8): what is batched, then the pieces, in one
 * write of the connection's ordered queue. */
static int send_body_pieces(h1_conn *c, const keel_piece *pieces, size_t npieces, int last,
                            keel_write_cb cb, void *ud)
{
    uint64_t total = 0;
    for (size_t i = 0; i < npieces; i++)
        total += pieces[i].len;
    int rc;
    if (!take_queued_body(c, total, last, cb, ud, &rc))
        return rc;
    if (c->framing != H1_BODY_CHUNKED) {
        rc = h1_out_write_pieces(c, pieces, npieces, cb, ud);
    } else {
        /* The chunk's size line is in the output buffer; its end (and the
         * last chunk) follows the pieces. */
        static const char end[] = "\r\n", end_last[] = "\r\n0\r\n\r\n";
        keel_piece stack[16];
        keel_piece *all = npieces + 1 <= 16 ? stack : malloc((npieces + 1) * sizeof *all);
        if (all == NULL) {
            rc = KEEL_ERR_NOMEM;
        } else {
            memcpy(all, pieces, npieces * sizeof *pieces);
            all[npieces] = last ? keel_piece_bytes(end_last, sizeof end_last - 1)
                                : keel_piece_bytes(end, sizeof end - 1);
            rc = h1_out_write_pieces(c, all, npieces + 1, cb, ud);
            if (all != stack)
                free(all);
        }
    }
    if (rc != KEEL_OK)
        c->close_after = 1; /* the head may be out without its body */
    return rc;
}

static int sink_send_pieces(void *exchange, const keel_piece *pieces, size_t npieces, int last,
                            keel_write_cb cb, void *ud)
{
    return send_body_pieces(exchange, pieces, npieces, last, cb, ud);
}

static void sink_want_body(void *exchange)
{
    h1_conn *c = exchange;
    if (c->exch_state != H1_EXCH_ACTIVE || c->want_body)
        return;
    c->want_body = 1;
    if (c->read_state != H1_READ_HOLD)
        return;
    /* RFC 9110 10.1.1: 100 Continue only now that the handler will read
     * the body, and only if no final status went out. */
    if (c->expect_continue && !c->continue_sent && !c->head_sent) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (h1_out_append(c, cont, sizeof cont - 1) == KEEL_OK)
            c->continue_sent = 1;
    }
    c->read_state = H1_READ_BODY;
    h1_body_clock_start(c);
    if (!c->in_process) {
        h1_out_flush(c);
        h1_set_timeout(c, h1_body_timeout(c));
        h1_resume(c);
    }
}

/* keel_request_body_pause: one exchange at a time on the connection, so
 * holding the body is not reading the connection (h1_body_held): the
 * bytes that came stay unconsumed in its buffer, which bounds them, and
 * the client's TCP window closes behind them. The body's clocks
 * (body_timeout, body_min_rate) stop meanwhile: the wait is the
 * handler's, and a proxy whose upstream reads slowly must not get its
 * client a 408 after body_timeout. */
static int sink_body_pause(void *exchange, int paused)
{
    h1_conn *c = exchange;
    if (c->exch_state != H1_EXCH_ACTIVE)
        return KEEL_ERR_STATE;
    uint64_t now = keel_worker_now_ms(c->w->worker);
    if (paused) {
        if (c->body_paused)
            return KEEL_OK;
        c->body_paused = 1;
        c->exch->paused_ms = now;
        /* From inside h1_process, settle pauses on its way out. */
        if (!c->in_process && c->read_state == H1_READ_BODY) {
            h1_set_timeout(c, 0);
            h1_pause(c);
        }
        return KEEL_OK;
    }
    if (!c->body_paused)
        return KEEL_OK;
    c->body_paused = 0;
    if (c->exch->body_start_ms != 0)
        c->exch->body_start_ms += now - c->exch->paused_ms;
    if (c->end_owed) {
        /* The whole body was read: its end is all that waited (from the
         * loop, the core's promise; the handler may answer inside). */
        c->end_owed = 0;
        h1_body_end(c);
        return KEEL_OK;
    }
    if (c->read_state == H1_READ_BODY && !c->in_process) {
        h1_set_timeout(c, h1_body_timeout(c));
        h1_resume(c); /* the bytes held are delivered again from the loop */
    }
    return KEEL_OK;
}

static void sink_done(void *exchange, int keep_alive)
{
    h1_conn *c = exchange;
    if (c->exch_state != H1_EXCH_ACTIVE)
        return;
    c->exch_state = H1_EXCH_FINISHED;
    c->body_paused = c->end_owed = 0; /* the pause ends with the exchange */
    c->exch->req = NULL;
    if (!keep_alive)
        c->close_after = 1;
    if (!c->head_sent) {
        /* The core gave up without an answer: the client still gets one. */
        h1_fail(c, 500);
        return;
    }
    if (!c->resp_ended || c->framing == H1_BODY_EOF ||
        (c->framing == H1_BODY_LENGTH && c->exch->resp_left > 0))
        c->close_after = 1;
    if (!c->in_process)
        h1_after_exchange(c);
}

/* RFC 9110 7.8: the request asked to switch, the handler agreed. The 101
 * and the hand-over (http1.c) happen at once, synchronously or not: from
 * inside h1_process (the handler decided at once) h1_on_data reports the
 * request's bytes consumed; from outside it (a timer, an offload) they
 * still wait in the connection's buffer and h1_hand_over drops them first.
 * Either way the new protocol's first delivery starts right after the
 * request, with whatever the client sent behind it. */
static int sink_upgrade(void *exchange, int status, const keel_header *headers, size_t nheaders,
                        const char *protocol, void *arg)
{
    h1_conn *c = exchange;
    if (c->exch_state != H1_EXCH_ACTIVE || c->head_sent)
        return KEEL_ERR_STATE;
    if (c->closing)
        return KEEL_ERR_CLOSED;
    /* RFC 9110 7.8: a server MUST ignore Upgrade in an HTTP/1.0 request,
     * and MUST NOT switch to a protocol the client did not offer. Which
     * protocol the Upgrade field names is the handler's to match. */
    if (c->version10 || !c->exch->upgrade_asked)
        return KEEL_ERR_UNSUPPORTED;
    if (status != 101 || protocol == NULL)
        return KEEL_ERR_INVAL;
    /* The request must be read whole: its body would otherwise sit
     * between the 101 and the new protocol's bytes. (With "Expect:
     * 100-continue" the 100 went out when the body was asked for, as RFC
     * 9110 7.8 wants it before the 101; a request without content gets
     * none, 10.1.1.) */
    if (c->read_state != H1_READ_DONE)
        return KEEL_ERR_STATE;
    keel_field room[16] = {0}; /* zeroed: the compiler cannot see n bound what is read */
    keel_field *f = fields_of(headers, nheaders, room, sizeof room / sizeof room[0]);
    if (f == NULL)
        return KEEL_ERR_NOMEM;
    int rc = h1_upgrade_serialize(c, f, nheaders);
    if (f != room)
        free(f);
    if (rc != KEEL_OK)
        return rc;
    /* The exchange is over for us (c may be freed by the hand-over). */
    keel_request *req = c->exch->req;
    c->exch_state = H1_EXCH_FINISHED;
    c->exch->req = NULL;
    /* The 101, behind whatever earlier pipelined responses still wait in
     * the buffer, leaves before the new protocol can write a byte. */
    if (h1_out_flush(c) == KEEL_OK && h1_hand_over(c, protocol, arg) == KEEL_OK)
        return KEEL_OK;
    /* The connection broke (or closed) with the 101 possibly out: nothing
     * can follow on it. The exchange is still the core's to end. */
    c->exch_state = H1_EXCH_ACTIVE;
    c->exch->req = req;
    c->close_after = 1;
    h1_close(c);
    return KEEL_ERR_CLOSED;
}

const keel_http_sink h1_sink = {
    .size = sizeof(keel_http_sink),
    .send_head = sink_send_head,
    .send_body = sink_send_body,
    .want_body = sink_want_body,
    .done = sink_done,
    .send_file = sink_send_file,
    .send_pieces = sink_send_pieces,
    .upgrade = sink_upgrade,
    .body_pause = sink_body_pause,
    /* every head was checked against the core's grammars (keel_http_valid) */
    .flags = KEEL_HTTP_SINK_CHECKED,
    .send_head_fields = sink_send_head_fields,
};
