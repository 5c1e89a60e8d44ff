/* stream.c — one HTTP/2 stream as one exchange of the core's HTTP layer:
 * its life cycle, how it ends (RST_STREAM, the module's own answers), and
 * the pieces its response body is queued in. The request side is
 * request.c, the sink through which the core answers is sink.c.
 *
 * Response: send_head submits HEADERS with a data provider; each body
 * piece is queued, borrowed, and nghttp2 takes from the queue as the
 * peer's windows allow (NGHTTP2_ERR_DEFERRED while it is empty). A piece
 * is released once the write that carried its last byte completed, which
 * is what paces a streaming handler or the core's file reader.
 */
#include "h2.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- life cycle ------------------------------------------------------------ */

h2_stream *h2_stream_new(h2_conn *c, int32_t id)
{
    h2_worker *w = c->w;
    h2_stream *s = w->free_streams;
    if (s != NULL) {
        w->free_streams = s->next;
        w->nfree_streams--;
    } else if ((s = malloc(sizeof *s)) == NULL) {
        return NULL;
    }
    /* The inline arrays are written before they are read: not cleared. */
    memset(s, 0, offsetof(h2_stream, inline_fields));
    memset(&s->method, 0, sizeof *s - offsetof(h2_stream, method));
    s->c = c;
    s->id = id;
    s->fields = s->inline_fields;
    s->refs = s->inline_refs;
    s->cap = H2_INLINE_FIELDS;
    s->content_length = -1;
    s->resp_left = -1;
    s->progress_ms = keel_worker_now_ms(w->worker);
    c->nopen++;
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    h2_tick_start(c);
    return s;
}

static void release_queue(h2_stream *s, int status)
{
    h2_piece *p = s->queue;
    s->queue = s->queue_tail = NULL;
    s->queued = 0;
    s->nfiles = 0;
    while (p != NULL) {
        h2_piece *next = p->next;
        h2_piece_unref(p, status);
        p = next;
    }
}

/* Body bytes nobody will read: their windows go back. */
void h2_stream_drop_body(h2_stream *s)
{
    h2_conn *c = s->c;
    if (s->body_len > 0 || s->conn_held > 0) {
        c->body_buffered -= s->body_len;
        if (s->conn_held > 0 && c->ng != NULL)
            nghttp2_session_consume_connection(c->ng, s->conn_held);
        s->conn_held = 0;
        s->body_len = 0;
    }
    free(s->body);
    s->body = NULL;
    s->body_cap = 0;
}

void h2_stream_maybe_free(h2_stream *s)
{
    if (!s->closed || s->exchange || s->busy > 0)
        return;
    h2_conn *c = s->c;
    if (c->hot == s)
        c->hot = NULL;
    h2_stream_unhold(s);
    release_queue(s, KEEL_ERR_CLOSED);
    h2_stream_drop_body(s);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    for (size_t i = 0; i < 2 * s->nfields; i++)
        nghttp2_rcbuf_decref(s->refs[i]);
    for (size_t i = 0; i < s->npseudo; i++)
        nghttp2_rcbuf_decref(s->pseudo_refs[i]);
    if (s->fields != s->inline_fields) {
        free(s->fields);
        free(s->refs);
    }
    for (size_t i = 0; i < 2 * s->ntr; i++)
        nghttp2_rcbuf_decref(s->tr_refs[i]);
    free(s->tr_fields);
    free(s->tr_refs);
    free(s->cookie);
    free(s->trailer_mem);
    free(s->head_heap);
    h2_worker *w = c->w;
    if (w->nfree_streams < H2_POOL_MAX) {
        s->next = w->free_streams;
        w->free_streams = s;
        w->nfree_streams++;
    } else {
        free(s);
    }
}

/* ---- ending streams -------------------------------------------------------------- */

void h2_stream_on_close(h2_stream *s, uint32_t error_code)
{
    h2_conn *c = s->c;
    (void)error_code;
    s->closed = 1;
    c->nopen--;
    /* Releasing the queue calls the core, which may end the exchange
     * (sink done) from inside: the stream stays until the end of this. */
    s->busy++;
    if (s->counted) {
        s->counted = 0;
        c->nactive--;
        keel_metric_add(c->w->worker, c->w->mod->m.open_streams, -1);
    }
    h2_stream_drop_body(s);
    int complete = s->resp_ended && s->queue == NULL;
    release_queue(s, KEEL_ERR_CLOSED);
    if (s->exchange && !complete) {
        /* Reset, by the peer or by us: the core finishes the exchange
         * without the sink (RFC 9113 8.1: nothing more is sent). */
        keel_request *req = s->req;
        s->exchange = 0;
        s->req = NULL;
        keel_http_request_abort(req);
    }
    s->busy--;
    h2_stream_maybe_free(s);
}

void h2_stream_reset(h2_stream *s, uint32_t code)
{
    h2_conn *c = s->c;
    h2_stream_unhold(s); /* RST_STREAM instead */
    if (!s->closed && c->ng != NULL)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, code);
    h2_pump(c);
}

/* The fields every response carries besides the handler's: date and
 * server (RFC 9110 6.6.1, 10.2.4). */
static size_t common_fields(h2_stream *s, nghttp2_nv *nv)
{
    h2_worker *w = s->c->w;
    size_t n = 0, len;
    const char *date = h2_date(w, &len);
    nv[n++] = (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date, 4, len, NGHTTP2_NV_FLAG_NONE};
    if (w->cfg->server_len > 0)
        nv[n++] = (nghttp2_nv){(uint8_t *)"server", (uint8_t *)w->cfg->server, 6,
                               w->cfg->server_len, NGHTTP2_NV_FLAG_NONE};
    return n;
}

/* :status is always three digits (RFC 9113 8.3.2, RFC 9110 15). */
void h2_stream_put_status(h2_stream *s, int status)
{
    unsigned v = status >= 100 && status <= 999 ? (unsigned)status : 500;
    s->status[0] = (char)('0' + v / 100);
    s->status[1] = (char)('0' + v / 10 % 10);
    s->status[2] = (char)('0' + v % 10);
    s->status[3] = '\0';
}

void h2_stream_answer(h2_stream *s, int status)
{
    h2_conn *c = s->c;
    s->bad = 1;
    if (s->exchange) {
        keel_request *req = s->req;
        s->exchange = 0;
        s->req = NULL;
        keel_http_request_abort(req);
    }
    h2_stream_drop_body(s);
    if (s->closed || c->ng == NULL)
        return;
    if (s->final_sent) {
        h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    s->final_sent = s->head_sent = s->resp_ended = 1;
    h2_stream_put_status(s, status);
    nghttp2_nv nv[4];
    nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)s->status, 7, 3, NGHTTP2_NV_FLAG_NONE};
    size_t n = 1 + common_fields(s, nv + 1);
    nv[n++] =
        (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)"0", 14, 1, NGHTTP2_NV_FLAG_NONE};
    if (nghttp2_submit_response(c->ng, s->id, nv, n, NULL) != 0)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    h2_pump(c);
}

/* ---- response pieces ---------------------------------------------------------------- */

void h2_piece_unref(h2_piece *p, int status)
{
    if (status != KEEL_OK && p->status == KEEL_OK)
        p->status = status;
    if (--p->refs > 0)
        return;
    if (p->cb != NULL)
        p->cb(p->conn, p->status, p->ud);
    if (p->bufs != p->inline_bufs)
        free(p->bufs);
    h2_slab_unref(p->slab);
    h2_worker *w = p->w;
    if (w != NULL && w->nfree_pieces < H2_POOL_MAX) {
        p->next = w->free_pieces;
        w->free_pieces = p;
        w->nfree_pieces++;
    } else {
        free(p);
    }
}

h2_piece *h2_piece_new(h2_conn *c)
{
    h2_worker *w = c->w;
    h2_piece *p = w->free_pieces;
    if (p != NULL) {
        w->free_pieces = p->next;
        w->nfree_pieces--;
    } else if ((p = malloc(sizeof *p)) == NULL) {
        return NULL;
    }
    return p;
}

void h2_piece_pool_free(h2_worker *w)
{
    while (w->free_pieces != NULL) {
        h2_piece *p = w->free_pieces;
        w->free_pieces = p->next;
        free(p);
    }
    w->nfree_pieces = 0;
}

ssize_t h2_stream_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)buf;
    (void)ud;
    h2_stream *s = src->ptr;
    size_t n = s->queued < length ? (size_t)s->queued : length;
    /* A DATA frame's payload comes from one file piece or from memory
     * pieces, never both (a file goes out with sendfile, memory with
     * writev): stop at the boundary. */
    if (s->nfiles > 0) {
        size_t mem = 0;
        for (h2_piece *p = s->queue; p != NULL; p = p->next) {
            if (p->fd >= 0) {
                if (p == s->queue)
                    mem = p->left;
                break;
            }
            mem += p->left;
        }
        if (n > mem)
            n = mem;
    }
    if (s->queue != NULL && s->queue->loading)
        n = 0; /* its bytes are still being read (fileload.c) */
    if (n == 0 && (s->queued > 0 || !s->resp_ended)) {
        s->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (s->resp_ended && n == s->queued) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        /* RFC 9113 8.1: trailers close the stream instead of this DATA. */
        if (s->ntrailers > 0 && nghttp2_submit_trailer(ng, id, s->trailer_nv, s->ntrailers) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

int h2_stream_take_file(h2_stream *s, const uint8_t *framehd, size_t length)
{
    h2_piece *p = s->queue;
    if (p == NULL || p->fd < 0 || length > p->left)
        return -1;
    if (h2_out_file(s->c, framehd, 9, p, length) != KEEL_OK)
        return -1;
    p->foff += length;
    p->left -= length;
    s->queued -= length;
    if (p->left == 0) {
        s->queue = p->next;
        if (s->queue == NULL)
            s->queue_tail = NULL;
        s->nfiles--;
        h2_piece_unref(p, KEEL_OK); /* the queue's reference */
    }
    return 0;
}

int h2_stream_take(h2_stream *s, size_t length)
{
    h2_conn *c = s->c;
    while (length > 0) {
        h2_piece *p = s->queue;
        if (p == NULL)
            return -1;
        const keel_buf *b = &p->bufs[p->idx];
        size_t k = b->len - p->off < length ? b->len - p->off : length;
        /* A few bytes are copied after their frame header instead of
         * borrowed: as an iovec of their own they cost the kernel more
         * than the copy (a small response was two iovecs of a 200-iovec
         * writev). The piece is still held until the write completes. */
        const char *at = (const char *)b->base + p->off;
        int rc = k <= H2_COPY_MAX ? h2_out_copy(c, at, k) : h2_out_borrow(c, at, k);
        if (rc != KEEL_OK || h2_out_hold(c, p) != KEEL_OK)
            return -1;
        p->off += k;
        p->left -= k;
        s->queued -= k;
        length -= k;
        if (p->off == b->len) {
            p->idx++;
            p->off = 0;
        }
        if (p->left == 0) {
            s->queue = p->next;
            if (s->queue == NULL)
                s->queue_tail = NULL;
            h2_piece_unref(p, KEEL_OK); /* the queue's reference */
        }
    }
    return 0;
}
