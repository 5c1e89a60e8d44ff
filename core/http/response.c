/* Responses: the status, the head filters, and handing the head and body
 * to the protocol's sink (whole, streamed, or from a file). The field
 * list is response_fields.c's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/util.h>

#include "http/http.h"
#include "net/output.h"
#include "net/worker.h"

/* ---- status ------------------------------------------------------------- */

int keel_response_set_status(keel_response *res, int status)
{
    /* An upgrade's head filters see 101 and cannot turn it into something
     * else: the protocol switch is decided by then. */
    if (res->head_sent || res->ended || res->upgrading)
        return KEEL_ERR_STATE;
    /* 101 ends the exchange in a different way (keel_response_upgrade),
     * and a final response cannot carry it. RFC 9110 15: every valid
     * status code is within 100..599. */
    if (status < 100 || status > 599 || status == 101)
        return KEEL_ERR_INVAL;
    res->status = status;
    return KEEL_OK;
}

int keel_response_status(keel_response *res)
{
    return res->status;
}

void keel_response_close_connection(keel_response *res)
{
    res->close_connection = 1;
}

/* ---- sending ----------------------------------------------------------- */

void kl_response_head_filters(keel_response *res)
{
    keel_request *req = res->req;
    const kl_pipeline *p = kl_request_pipeline(req);
    for (size_t k = 0; k < p->nhead; k++) {
        res->head_filter = p->head[k].filter + 1;
        p->head[k].on_response_head(req, res, p->head[k].userdata);
    }
    res->head_filter = 0;
}

int keel_response_filter_skip_body(keel_response *res)
{
    size_t i = res->head_filter;
    if (i == 0 || res->head_sent)
        return KEEL_ERR_STATE;
    if (i <= 64)
        res->body_skipped |= (uint64_t)1 << (i - 1);
    return KEEL_OK;
}

int kl_views_make(kl_views *v, const keel_response *res, size_t room)
{
    size_t n = res->nheaders;
    v->h = n + room <= sizeof v->inline_views / sizeof v->inline_views[0]
               ? v->inline_views
               : malloc((n + room) * sizeof *v->h);
    if (v->h == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        v->h[i] = (keel_header){res->headers[i].name, res->headers[i].value};
    v->n = n;
    return KEEL_OK;
}

void kl_views_free(kl_views *v)
{
    if (v->h != v->inline_views)
        free(v->h);
    v->h = NULL;
}

/* A protocol built before ABI 1.3 cannot ask keel_http_request_keep_alive:
 * it learned that a response ends its connection from a "Connection:
 * close" field the core added, and still does. Such a sink is one without
 * the upgrade member, appended in 1.3. */
static int legacy_close_field(const keel_request *req)
{
    return req->res.close_connection &&
           req->sink->size < offsetof(keel_http_sink, upgrade) + sizeof req->sink->upgrade;
}

/* Runs the head filters and sends the head (once). content_length: the
 * body's size if the caller knows it, else -1. Whether the connection
 * stays open is not a field here: the protocol asks
 * keel_http_request_keep_alive. */
int kl_response_send_head(keel_response *res, int64_t content_length)
{
    keel_request *req = res->req;
    if (res->head_sent)
        return KEEL_OK;
    res->head_length = content_length;
    if (res->forced_status != 0 && res->status >= 200 && res->status < 300)
        res->status = res->forced_status; /* an error page answers with its error's status */
    kl_response_head_filters(res);
    int64_t declared = kl_response_take_framing(res);
    if (content_length < 0)
        content_length = declared;
    /* A body filter may change the length (compression): then it is not
     * known in advance unless a filter set it again. */
    if (kl_response_body_filtered(res) && declared < 0)
        content_length = -1;
    res->content_length = content_length;
    res->head_sent = 1;
    if (req->aborted)
        return KEEL_ERR_CLOSED;
    if (req->sink->send_head_fields != NULL)
        return req->sink->send_head_fields(req->exchange, res->status, res->headers, res->nheaders,
                                           content_length);
    kl_views views;
    int legacy = legacy_close_field(req);
    int rc = kl_views_make(&views, res, (size_t)legacy);
    if (rc != KEEL_OK)
        return rc;
    if (legacy)
        views.h[views.n++] = (keel_header){{"Connection", 10}, {"close", 5}};
    rc = req->sink->send_head(req->exchange, res->status, views.h, views.n, content_length);
    kl_views_free(&views);
    return rc;
}

static void free_block(void *data, void *userdata)
{
    (void)userdata;
    free(data);
}

static void on_chunk_sent(void *data, void *userdata);

static kl_body_piece *piece_new(keel_request *req)
{
    if (!req->res.piece_busy) {
        req->res.piece_busy = 1;
        return &req->res.piece;
    }
    return malloc(sizeof(kl_body_piece));
}

/* Releases the streamed piece whose filtered bytes have now left. */
static void release_held(keel_response *res)
{
    keel_free_fn fn = res->held_free;
    if (fn == NULL)
        return;
    res->held_free = NULL;
    fn(res->held_data, res->held_userdata);
}

void kl_response_piece_left(keel_request *req)
{
    req->res.pieces_in_flight--;
    if (req->res.pieces_in_flight == 0)
        release_held(&req->res);
    if (req->res.file_paused && req->res.pieces_in_flight == 0) {
        req->res.file_paused = 0;
        on_chunk_sent(NULL, &req->res);
    }
}

static void on_piece_written(keel_conn *conn, int status, void *userdata)
{
    kl_body_piece *piece = userdata;
    keel_request *req = piece->req;
    (void)conn;
    (void)status;
    if (piece->free_fn != NULL)
        piece->free_fn(piece->data, piece->userdata);
    if (piece == &req->res.piece)
        req->res.piece_busy = 0;
    else
        free(piece);
    kl_response_piece_left(req);
    kl_request_unref(req);
}

static void trailers_view(keel_response *res, keel_header *out)
{
    for (size_t i = 0; i < res->ntrailers; i++)
        out[i] = (keel_header){res->trailers[i].name, res->trailers[i].value};
}

/* The end of the filter chain: hands bytes to the protocol. With `owned`
 * the caller's bytes outlive the write (borrowed, released by piece);
 * otherwise they are copied here. */
int kl_response_to_sink(keel_response *res, const keel_buf *bufs, size_t nbufs, int last,
                        kl_body_piece *piece)
{
    keel_request *req = res->req;
    keel_header trailers[32];
    size_t ntrailers = 0;
    if (last && res->ntrailers > 0) {
        ntrailers = res->ntrailers < 32 ? res->ntrailers : 32;
        trailers_view(res, trailers);
    }
    for (size_t i = 0; i < nbufs; i++)
        res->body_bytes += bufs[i].len;
    keel_buf one;
    if (piece == NULL) {
        /* Copy: the bytes come from a filter and die when it returns. */
        size_t total = 0;
        for (size_t i = 0; i < nbufs; i++)
            total += bufs[i].len;
        if (total == 0)
            return req->sink->send_body(req->exchange, NULL, 0, last, trailers, ntrailers, NULL,
                                        NULL);
        char *copy = malloc(total);
        piece = copy != NULL ? piece_new(req) : NULL;
        if (piece == NULL) {
            free(copy);
            return KEEL_ERR_NOMEM;
        }
        size_t at = 0;
        for (size_t i = 0; i < nbufs; i++) {
            memcpy(copy + at, bufs[i].base, bufs[i].len);
            at += bufs[i].len;
        }
        *piece = (kl_body_piece){req, free_block, copy, NULL};
        one = (keel_buf){copy, total};
        bufs = &one;
        nbufs = 1;
    }
    kl_request_ref(req);
    res->pieces_in_flight++;
    int rc = req->sink->send_body(req->exchange, bufs, nbufs, last, trailers, ntrailers,
                                  on_piece_written, piece);
    if (rc != KEEL_OK)
        on_piece_written(NULL, rc, piece);
    return rc;
}

/* Sends one body piece: straight to the protocol without copying when no
 * filter wants the body, else through the filters (which copy). */
int kl_response_send_piece(keel_response *res, const void *data, size_t len, int last,
                           keel_free_fn free_fn, void *userdata)
{
    keel_buf buf = {data, len};
    if (kl_response_body_filtered(res)) {
        keel_piece one = keel_piece_bytes(data, len);
        int rc = kl_response_pieces_filtered(res)
                     ? kl_response_run_piece_filters(res, 0, &one, len ? 1 : 0, last)
                     : kl_response_run_body_filters(res, 0, &buf, len ? 1 : 0, last);
        if (free_fn == NULL)
            return rc;
        /* The filters copied the bytes, but a streamer paces itself by
         * their release: it comes once what the filters made of them has
         * left, as it would without filters. A caller that did not wait
         * for the previous release gets that one now. */
        release_held(res);
        if (rc == KEEL_OK && res->pieces_in_flight > 0) {
            res->held_free = free_fn;
            res->held_data = (void *)data;
            res->held_userdata = userdata;
        } else {
            free_fn((void *)data, userdata);
        }
        return rc;
    }
    return kl_response_send_direct(res, data, len, last, free_fn, userdata);
}

/* One piece to the protocol without copying, released once it is done. */
int kl_response_send_direct(keel_response *res, const void *data, size_t len, int last,
                            keel_free_fn free_fn, void *userdata)
{
    keel_request *req = res->req;
    keel_buf buf = {data, len};
    kl_body_piece *piece = NULL;
    if (free_fn != NULL || len > 0) {
        if ((piece = piece_new(req)) == NULL) {
            if (free_fn != NULL)
                free_fn((void *)data, userdata);
            return KEEL_ERR_NOMEM;
        }
        *piece = (kl_body_piece){req, free_fn, (void *)data, userdata};
    }
    if (piece == NULL)
        return kl_response_to_sink(res, NULL, 0, last, NULL);
    return kl_response_to_sink(res, &buf, len ? 1 : 0, last, piece);
}

/* The response is complete: the log phase, then the protocol may go on. */
void kl_response_finish(keel_response *res)
{
    keel_request *req = res->req;
    res->ended = 1;
    req->abort_cb = NULL; /* over: nothing left to be told */
    kl_request_finish(req);
    kl_request_unref(req); /* the response's reference */
}

void kl_response_end(keel_response *res)
{
    kl_response_finish(res);
}

void kl_response_release_if_aborted(keel_response *res)
{
    if (res->req->aborted && !res->ended)
        kl_response_end(res);
}

/* Common refusal: the response cannot take this (ended, or the client
 * went away); borrowed bytes are released at once either way. */
int kl_response_refuse(keel_response *res, const void *data, keel_free_fn free_fn, void *userdata)
{
    if (free_fn != NULL)
        free_fn((void *)data, userdata);
    if (res->ended)
        return KEEL_ERR_STATE;
    kl_response_end(res);
    return KEEL_ERR_CLOSED;
}

int keel_response_send(keel_response *res, const void *data, size_t len, keel_free_fn free_fn,
                       void *userdata)
{
    if (res->ended || res->req->aborted)
        return kl_response_refuse(res, data, free_fn, userdata);
    if (res->head_sent) {
        if (free_fn != NULL)
            free_fn((void *)data, userdata);
        return KEEL_ERR_STATE;
    }
    int rc = kl_response_send_head(res, (int64_t)len);
    if (rc == KEEL_OK)
        rc = kl_response_send_piece(res, data, len, 1, free_fn, userdata);
    else if (free_fn != NULL)
        free_fn((void *)data, userdata);
    kl_response_end(res);
    return rc;
}

int keel_response_send_file_bytes(keel_response *res, const void *data, size_t len,
                                  keel_free_fn free_fn, void *userdata)
{
    if (!res->ended && !res->head_sent)
        res->from_file = 1;
    return keel_response_send(res, data, len, free_fn, userdata);
}

int keel_response_send_copy(keel_response *res, const void *data, size_t len)
{
    if (res->ended || res->req->aborted)
        return kl_response_refuse(res, NULL, NULL, NULL);
    void *copy = malloc(len ? len : 1);
    if (copy == NULL) {
        /* "The same" as keel_response_send, which ends the response on
         * every error: left open, it hung the client of every caller that
         * ignores the status (hello's, found by tests/failalloc). */
        if (!res->head_sent && !res->in_status)
            kl_response_send_status(res, 500);
        else if (!res->ended)
            keel_response_abort(res); /* no memory for the 500's text either: the
                                         protocol answers on its own, or closes */
        return KEEL_ERR_NOMEM;
    }
    memcpy(copy, data, len);
    return keel_response_send(res, copy, len, free_block, NULL);
}

int kl_response_send_status(keel_response *res, int status)
{
    if (res->ended)
        return KEEL_ERR_STATE;
    if (res->head_sent) {
        /* Too late for a status: cut the response short, so that a
         * truncated body cannot pass for a whole one. */
        keel_response_abort(res);
        return KEEL_OK;
    }
    keel_request *req = res->req;
    if (res->error_status != 0) {
        /* The error page failed too (nginx without recursive_error_pages):
         * the short text of the error it stood for. */
        status = res->error_status;
    } else if (status >= 400 && status != 405 && req->http->error_fn != NULL && !req->aborted &&
               (req->body_mode != KL_BODY_STREAM || req->body_ended || status == 413)) {
        /* A streamed body's reader still expects its pieces (a 413 tells
         * it through its callback), so a page does not take its place. A
         * 405 keeps its text: it must carry Allow (RFC 9110 15.5.6), which
         * only this answer knows. */
        res->error_status = status;
        kl_request_ref(req); /* the handler may end the response and free it */
        int rc = req->http->error_fn(req, res, status, req->http->error_ud);
        int answered = rc == KEEL_HTTP_DONE || res->ended || res->head_sent;
        kl_request_unref(req);
        if (answered)
            return KEEL_OK;
    }
    res->status = status;
    res->nheaders = 0;
    const char *reason = keel_http_reason(status);
    char text[96];
    int n = snprintf(text, sizeof text, "%d %s\n", status, reason);
    keel_response_header_set(res, "Content-Type", "text/plain; charset=utf-8");
    if (status == 405 && res->req->route.allow[0] != '\0')
        keel_response_header_set(res, "Allow", res->req->route.allow);
    /* Whether a status ends the connection is the protocol's call (an
     * HTTP/1.1 server closes after 408, RFC 9110 15.5.9; HTTP/2 only ends
     * the stream), so none is made here. */
    /* Set for good: the call ends the response (and may free the request),
     * so nothing touches res after it; a new request starts zeroed. */
    res->in_status = 1;
    return keel_response_send_copy(res, text, (size_t)n);
}

int keel_response_send_status(keel_response *res, int status)
{
    if (status < 100 || status > 599 || status == 101)
        return KEEL_ERR_INVAL;
    return kl_response_send_status(res, status);
}

int keel_response_write(keel_response *res, const void *data, size_t len, keel_free_fn free_fn,
                        void *userdata)
{
    if (res->ended || res->req->aborted)
        return kl_response_refuse(res, data, free_fn, userdata);
    int rc = kl_response_send_head(res, -1);
    if (rc != KEEL_OK) {
        if (free_fn != NULL)
            free_fn((void *)data, userdata);
        if (!res->ended)
            kl_response_end(res);
        return rc;
    }
    if (len == 0) {
        if (free_fn != NULL)
            free_fn((void *)data, userdata);
        return KEEL_OK;
    }
    int rc2 = kl_response_send_piece(res, data, len, 0, free_fn, userdata);
    /* The protocol refused the bytes (the connection is closing): this
     * response cannot go on, and the handler learns it from the status,
     * so it is over here — the request must not be touched after this. */
    if (rc2 != KEEL_OK && !res->ended)
        kl_response_end(res);
    return rc2;
}

int keel_response_end(keel_response *res)
{
    if (res->ended)
        return KEEL_ERR_STATE;
    if (res->req->aborted)
        return kl_response_refuse(res, NULL, NULL, NULL);
    /* Nothing was written: an empty body, unless trailers must follow
     * (which needs chunked framing, so the length stays open). */
    int rc = kl_response_send_head(res, res->head_sent || res->ntrailers > 0 ? -1 : 0);
    if (rc == KEEL_OK)
        rc = kl_response_send_piece(res, NULL, 0, 1, NULL, NULL);
    kl_response_end(res);
    return rc;
}

/* ---- files ------------------------------------------------------------- */

static void read_next(keel_response *res);

static void file_done(keel_response *res)
{
    if (res->file_close && res->file_fd >= 0) {
        uv_fs_t req;
        uv_fs_close(NULL, &req, res->file_fd, NULL);
        uv_fs_req_cleanup(&req);
    }
    res->file_fd = -1;
}

/* keel_response_send_file's range went through filters as a piece. */
static void file_released(void *data, void *userdata)
{
    (void)data;
    file_done(userdata);
}

static void on_chunk_sent(void *data, void *userdata)
{
    keel_response *res = userdata;
    (void)data;
    if (res->req->aborted || res->file_reader.left == 0) {
        if (!res->ended)
            kl_response_end(res);
        file_done(res);
        kl_request_unref(res->req); /* the transfer's reference */
        return;
    }
    if (res->pieces_in_flight > 0) {
        /* A body filter copied the piece and its output is still on its
         * way: read on once the peer has taken it, not at the disk's
         * pace (the file would pile up in memory for a slow peer). */
        res->file_paused = 1;
        return;
    }
    read_next(res);
}

/* The transfer cannot go on: a short file breaks the promised length, so
 * the connection must close (the client sees a truncated body). */
static void file_failed(keel_response *res)
{
    res->close_connection = 1;
    if (!res->ended) {
        if (!res->req->aborted)
            kl_response_send_piece(res, NULL, 0, 1, NULL, NULL);
        kl_response_end(res);
    }
    file_done(res);
    kl_request_unref(res->req);
}

static void on_file_piece(kl_file_reader *r, int status, char *data, size_t len)
{
    keel_response *res = r->owner;
    if (res->req->aborted || status != KEEL_OK) {
        file_failed(res);
        return;
    }
    int last = r->left == 0;
    /* on_chunk_sent may run inside send_piece (a body filter copies the
     * piece; a small last piece is copied by the protocol) and end the
     * response and drop the transfer's reference there. */
    keel_request *req = res->req;
    kl_request_ref(req);
    kl_response_send_piece(res, data, len, last, on_chunk_sent, res);
    if (last && !res->ended)
        kl_response_end(res);
    kl_request_unref(req);
}

static void read_next(keel_response *res)
{
    if (kl_file_reader_next(&res->file_reader, &res->req->worker->loop) != KEEL_OK)
        file_failed(res);
}

/* The protocol sent the file itself (sink->send_file) or gave up: the
 * response ends only now, so that the exchange (and with it the log's
 * duration, and the next pipelined request) follows the last byte. */
static void on_file_sent(keel_conn *conn, int status, void *userdata)
{
    keel_response *res = userdata;
    keel_request *req = res->req;
    (void)conn;
    /* A short file or a lost connection: the promised length was not
     * kept, so the connection must not carry another response. */
    if (status != KEEL_OK)
        res->close_connection = 1;
    else if (res->ntrailers > 0 && !req->aborted && !res->ended)
        kl_response_send_direct(res, NULL, 0, 1, NULL, NULL); /* the trailer section */
    file_done(res);
    if (!res->ended)
        kl_response_end(res);
    kl_request_unref(req); /* the transfer's reference */
}

/* Hands the whole file to the protocol in one call. KEEL_ERR_UNSUPPORTED
 * (nothing happened) when the read loop must do it instead. */
static int send_file_whole(keel_response *res, uint64_t offset, uint64_t length)
{
    keel_request *req = res->req;
    if (kl_response_body_filtered(res) || req->sink->send_file == NULL)
        return KEEL_ERR_UNSUPPORTED;
    /* One reference for the transfer (until on_file_sent), one for this
     * call: the protocol may call back at once (a 304 sends no body) and
     * the response then ends inside send_file. */
    kl_request_ref(req);
    kl_request_ref(req);
    res->body_bytes += length;      /* counted before the log phase can run */
    int last = res->ntrailers == 0; /* else the trailer section follows, from on_file_sent */
    int rc =
        req->sink->send_file(req->exchange, res->file_fd, offset, length, last, on_file_sent, res);
    if (rc != KEEL_OK) {
        res->body_bytes -= length;
        kl_request_unref(req); /* no callback will come */
    }
    kl_request_unref(req);
    return rc;
}

int keel_response_send_file(keel_response *res, int fd, uint64_t offset, uint64_t length,
                            int close_fd)
{
    keel_request *req = res->req;
    res->file_fd = fd;
    res->file_close = close_fd;
    res->from_file = 1;
    if (res->ended || res->head_sent || req->aborted) {
        file_done(res);
        return res->ended || res->head_sent ? KEEL_ERR_STATE
                                            : kl_response_refuse(res, NULL, NULL, NULL);
    }
    int rc = kl_response_send_head(res, (int64_t)length);
    keel_str method = req->head.method;
    int head_only = method.len == 4 && memcmp(method.ptr, "HEAD", 4) == 0;
    if (rc != KEEL_OK || length == 0 || head_only) {
        if (rc == KEEL_OK)
            rc = kl_response_send_piece(res, NULL, 0, 1, NULL, NULL);
        file_done(res);
        kl_response_end(res);
        return rc;
    }
    rc = send_file_whole(res, offset, length);
    if (rc != KEEL_ERR_UNSUPPORTED) {
        if (rc != KEEL_OK) {
            /* Refused (the connection is closing): the response is over. */
            res->close_connection = 1;
            file_done(res);
            kl_response_end(res);
        }
        return rc;
    }
    if (kl_response_pieces_filtered(res)) {
        /* Every filter takes pieces: the range goes through them unread. */
        keel_piece range = keel_piece_file(fd, offset, length);
        return kl_response_send_pieces_body(res, &range, 1, length, file_released, res);
    }
    /* Filters need the bytes, or the protocol frames them: read the file
     * in pieces, each after the previous one has gone. */
    if (res->file_reading)
        kl_file_reader_free(&res->file_reader);
    kl_file_reader_init(&res->file_reader, fd, offset, length, on_file_piece, res);
    res->file_reading = 1;
    if (kl_file_reader_next(&res->file_reader, &req->worker->loop) != KEEL_OK) {
        file_done(res);
        return KEEL_ERR_NOMEM;
    }
    kl_request_ref(req); /* the transfer's, until its end */
    return KEEL_OK;
}

/* ---- what filters ask (ABI 1.4) ------------------------------------------ */

int64_t keel_response_body_length(keel_response *res)
{
    if (res->head_length >= 0 && (res->head_filter != 0 || res->head_sent))
        return res->head_length;
    /* A handler's own Content-Length (a streamed body it announced). */
    keel_str v = keel_response_header(res, "Content-Length");
    int64_t n = 0;
    if (v.ptr == NULL || v.len == 0 || v.len > 18)
        return -1;
    for (size_t i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return -1;
        n = n * 10 + (v.ptr[i] - '0');
    }
    return n;
}

int keel_response_body_from_file(keel_response *res)
{
    return res->from_file;
}

int keel_response_abort(keel_response *res)
{
    if (res->ended)
        return KEEL_ERR_STATE;
    /* No last piece: the protocol's done sees a response that did not
     * end, which HTTP/1.1 answers by closing without the last chunk (or
     * short of the Content-Length) and HTTP/2 by resetting the stream. */
    res->close_connection = 1;
    res->cut = 1;
    release_held(res);
    kl_response_end(res);
    return KEEL_OK;
}
