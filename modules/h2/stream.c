/* stream.c — one HTTP/2 stream as one exchange of the core's HTTP layer:
 * its life cycle, how it ends (RST_STREAM, the module's own answers), and
 * the pieces its response body is queued in. The request side is
 * request.c, the sink through which the core answers is sink.c.
 *
 * Response: send_head encodes the head, which leaves at the next h2_pump
 * (sink.c); each body piece is queued, borrowed, and send.c takes from
 * the queue as the peer's windows allow. A piece is released once the
 * write that carried its last byte completed, which is what paces a
 * streaming handler or the core's file reader.
 */
#include "h2.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- life cycle ------------------------------------------------------------ */

/* ---- the table of open streams by id ---------------------------------------- */

static uint32_t slot_of(const h2_conn *c, int32_t id)
{
    return ((uint32_t)id >> 1) & c->table_mask; /* client ids are odd */
}

static int table_grow(h2_conn *c)
{
    uint32_t size = c->table ? 2 * (c->table_mask + 1) : 16;
    h2_stream **t = calloc(size, sizeof *t);
    if (t == NULL)
        return -1;
    uint32_t old = c->table ? c->table_mask + 1 : 0;
    c->table_mask = size - 1;
    for (uint32_t i = 0; i < old; i++) {
        for (h2_stream *s = c->table[i], *next; s != NULL; s = next) {
            next = s->hnext;
            uint32_t k = slot_of(c, s->id);
            s->hnext = t[k];
            t[k] = s;
        }
    }
    free(c->table);
    c->table = t;
    return 0;
}

h2_stream *h2_stream_find(h2_conn *c, int32_t id)
{
    /* Consecutive frames are mostly about one stream. */
    if (c->hot != NULL && c->hot->id == id)
        return c->hot;
    if (c->table == NULL || id <= 0)
        return NULL;
    for (h2_stream *s = c->table[slot_of(c, id)]; s != NULL; s = s->hnext) {
        if (s->id == id) {
            c->hot = s;
            return s;
        }
    }
    return NULL;
}

static void table_remove(h2_conn *c, h2_stream *s)
{
    for (h2_stream **pp = &c->table[slot_of(c, s->id)]; *pp != NULL; pp = &(*pp)->hnext) {
        if (*pp == s) {
            *pp = s->hnext;
            break;
        }
    }
    if (c->hot == s)
        c->hot = NULL;
}

int h2_closed_lookup(h2_conn *c, int32_t id)
{
    for (unsigned i = 0; i < H2_CLOSED_RING; i++) {
        uint32_t v = c->closed_ids[i];
        if (v != 0 && (int32_t)(v & ~H2_CLOSED_IGNORE) == id)
            return (v & H2_CLOSED_IGNORE) != 0;
    }
    return -1;
}

/* ---- life cycle ------------------------------------------------------------ */

h2_stream *h2_stream_new(h2_conn *c, int32_t id)
{
    h2_worker *w = c->w;
    if ((c->table == NULL || c->nopen + 1 > c->table_mask + 1) && table_grow(c) != 0)
        return NULL;
    h2_stream *s = w->free_streams;
    if (s != NULL) {
        w->free_streams = s->next;
        w->nfree_streams--;
    } else if ((s = malloc(sizeof *s)) == NULL) {
        return NULL;
    } else {
        s->hmem = NULL;
        s->hcap = 0;
    }
    /* The inline arrays are written before they are read: not cleared;
     * hmem is kept from the stream's last use. */
    char *hmem = s->hmem;
    size_t hcap = s->hcap;
    memset(s, 0, offsetof(h2_stream, inline_fields));
    memset(&s->method, 0, offsetof(h2_stream, head_inline) - offsetof(h2_stream, method));
    memset(&s->head_block, 0, sizeof *s - offsetof(h2_stream, head_block));
    s->hmem = hmem;
    s->hcap = hcap;
    s->hlen = 0;
    s->c = c;
    s->id = id;
    s->fields = s->inline_fields;
    s->cap = H2_INLINE_FIELDS;
    s->content_length = -1;
    s->resp_left = -1;
    s->progress_ms = keel_worker_now_ms(w->worker);
    s->send_window = c->peer_initial_window;
    h2_window_stream_init(s);
    c->nopen++;
    uint32_t k = slot_of(c, id);
    s->hnext = c->table[k];
    c->table[k] = s;
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    h2_tick_start(c);
    return s;
}

static void ready_remove(h2_conn *c, h2_stream *s)
{
    h2_stream *prev = NULL;
    for (h2_stream *it = c->ready; it != NULL; prev = it, it = it->ready_next) {
        if (it != s)
            continue;
        *(prev != NULL ? &prev->ready_next : &c->ready) = s->ready_next;
        if (c->ready_tail == s)
            c->ready_tail = prev;
        break;
    }
    s->ready = 0;
}

void h2_stream_close(h2_stream *s, uint32_t error_code, int ignore)
{
    if (s->closed)
        return;
    h2_conn *c = s->c;
    table_remove(c, s);
    c->closed_ids[c->closed_at++ % H2_CLOSED_RING] =
        (uint32_t)s->id | (ignore ? H2_CLOSED_IGNORE : 0);
    if (s->ready)
        ready_remove(c, s);
    c->nopen--;
    h2_stream_on_close(s, error_code);
}

void h2_stream_local_end(h2_stream *s)
{
    if (s->rst_after) {
        /* A stream error found once the response was complete (RFC 9113
         * 8.1: the response is never discarded for it): the reset follows
         * the response's last frame, in the same write. Were the request
         * ended too, the stream is closed on both sides by now, and a
         * client ignores a RST_STREAM that arrives just after (5.1,
         * "closed"); h2spec's 8.1.2.6 cases look for it. */
        h2_send_rst(s->c, (uint32_t)s->id, s->rst_code);
        h2_stream_close(s, s->rst_code, 1);
        return;
    }
    if (s->remote_ended) {
        h2_stream_close(s, H2_NO_ERROR, 0);
        return;
    }
    /* RFC 9113 8.1: the response is complete before the request. While
     * the client can still send without a WINDOW_UPDATE (the stream's
     * window is not given back for the bytes dropped), the stream stays
     * half-closed (local) and the rest is awaited, for at most
     * stream_timeout (h2.c): the stream then ends cleanly, and what the
     * client sends meanwhile is answered as on any open stream (5.1: its
     * RST_STREAM closes it; 8.1.1: a malformed end is reset), where after
     * our RST_STREAM it would be ignored. Some clients take a RST_STREAM
     * NO_ERROR in the middle of an upload for a failure (curl 7.88:
     * "Stream error in the HTTP/2 framing layer"). A declared rest the
     * windows cannot carry, a window spent (input.c) or our GOAWAY: the
     * client is asked to stop with RST_STREAM NO_ERROR (8.1), as nginx
     * does. */
    h2_conn *c = s->c;
    int64_t left = s->content_length >= 0 ? s->content_length - (int64_t)s->body_seen : 1;
    if (!c->goaway && h2_window_can_carry(s, left)) {
        s->local_ended = 1;
        s->progress_ms = keel_worker_now_ms(c->w->worker);
        h2_stream_drop_body(s);
        return;
    }
    h2_send_rst(c, (uint32_t)s->id, H2_NO_ERROR);
    h2_stream_close(s, H2_NO_ERROR, 1);
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
    h2_window_drop(s);
    s->body_len = 0;
    free(s->body);
    s->body = NULL;
    s->body_cap = 0;
}

void h2_stream_maybe_free(h2_stream *s)
{
    if (!s->closed || s->exchange || s->busy > 0 || s->reset_pending)
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
    if (s->fields != s->inline_fields)
        free(s->fields);
    free(s->tr_fields);
    free(s->tmem);
    free(s->cookie);
    free(s->trailer_block);
    free(s->head_heap);
    /* The head's memory is kept for the stream's next use, unless it grew
     * past what a usual request needs. */
    if (s->hcap > 4096) {
        free(s->hmem);
        s->hmem = NULL;
        s->hcap = 0;
    }
    h2_worker *w = c->w;
    if (w->nfree_streams < H2_POOL_MAX) {
        s->next = w->free_streams;
        w->free_streams = s;
        w->nfree_streams++;
    } else {
        free(s->hmem);
        free(s);
    }
}

/* ---- ending streams -------------------------------------------------------------- */

void h2_stream_on_close(h2_stream *s, uint32_t error_code)
{
    h2_conn *c = s->c;
    (void)error_code;
    s->closed = 1;
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
    if (!s->closed && !s->reset_pending) {
        s->reset_pending = 1;
        s->rst_code = code;
        s->reset_next = c->resets;
        c->resets = s;
    }
    h2_pump(c);
}

void h2_stream_error(h2_stream *s, uint32_t code)
{
    if (s->closed || s->reset_pending || s->rst_after)
        return;
    if (!s->final_sent || !s->resp_ended || s->local_ended) {
        h2_stream_reset(s, code); /* local_ended: the response has gone already */
        return;
    }
    /* The response is complete (the handler answered without waiting for
     * the rest of the request): it goes out first, then RST_STREAM code
     * (h2_stream_local_end), as RFC 9113 8.1 has a server that answered
     * early send RST_STREAM after its complete response. What the client
     * still sends on the stream is dropped meanwhile. */
    s->rst_after = 1;
    s->rst_code = code;
    h2_stream_drop_body(s);
    h2_pump(s->c);
}

void h2_stream_send_resets(h2_conn *c)
{
    while (c->resets != NULL) {
        h2_stream *s = c->resets;
        c->resets = s->reset_next;
        s->reset_pending = 0;
        if (!s->closed) {
            h2_send_rst(c, (uint32_t)s->id, s->rst_code);
            h2_stream_close(s, s->rst_code, 1);
        } else {
            h2_stream_maybe_free(s);
        }
    }
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
    if (s->closed || c->closing)
        return;
    if (s->final_sent) {
        h2_stream_reset(s, H2_INTERNAL_ERROR);
        return;
    }
    size_t len;
    if (h2_encode_head(s, status, NULL, 0, 0, NULL, 0, &len) == NULL) {
        h2_stream_reset(s, H2_INTERNAL_ERROR);
        return;
    }
    s->final_sent = s->head_sent = s->resp_ended = 1;
    s->has_data = 0;
    h2_stream_hold(s);
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

size_t h2_stream_sendable(const h2_stream *s)
{
    const h2_piece *head = s->queue;
    if (head == NULL || head->loading)
        return 0; /* a small file's bytes are still being read (fileload.c) */
    /* A DATA frame's payload comes from one file piece or from memory
     * pieces, never both (a file goes out with sendfile, memory with
     * writev): stop at the boundary. */
    if (head->fd >= 0)
        return head->left;
    uint64_t n = 0;
    for (const h2_piece *p = head; p != NULL && p->fd < 0 && !p->loading; p = p->next) {
        n += p->left;
        if (n >= H2_BATCH_MAX || s->nfiles == 0)
            break;
    }
    if (s->nfiles == 0)
        n = s->queued;
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
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
