/* stream.c — one HTTP/2 stream: its life cycle (pooled per worker), the
 * table of open streams by id and the ring of recently closed ids (RFC
 * 9113 5.1), and how it ends: closed, reset (RST_STREAM), or half-closed
 * (local) while the rest of its request is awaited.
 *
 * The connection's state, below the scheduler and the module: what they
 * do when a stream opens or closes (its exchange, its queue, a held head)
 * is theirs, reached through the connection's events (writer.h:
 * h2_events), not called by name. The request side is request.c, the sink
 * through which the core answers is sink.c, the queue its response body
 * waits in is queue.c.
 */
#include "state.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

/* A stream the worker's free list does not keep (full, or stop). */
static void stream_free(h2_stream *s)
{
    free(s->hmem);
    free(s);
}

h2_stream *h2_stream_new(h2_conn *c, int32_t id)
{
    h2_worker *w = c->w;
    if ((c->table == NULL || c->nopen + 1 > c->table_mask + 1) && table_grow(c) != 0)
        return NULL;
    h2_stream *s;
    KEEL_FREELIST_TAKE(s, w->free_streams, w->nfree_streams, next);
    if (s == NULL) {
        if ((s = malloc(sizeof *s)) == NULL)
            return NULL;
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
    s->tokens = s->inline_tokens;
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
    KEEL_LIST_PUSH(c->streams, s);
    c->ev->timer(c); /* stream_timeout */
    return s;
}

void h2_stream_close(h2_stream *s, uint32_t error_code, int ignore)
{
    if (s->closed)
        return;
    h2_conn *c = s->c;
    table_remove(c, s);
    c->closed_ids[c->closed_at++ % H2_CLOSED_RING] =
        (uint32_t)s->id | (ignore ? H2_CLOSED_IGNORE : 0);
    c->nopen--;
    s->closed = 1;
    /* What the layers above do now may call the core, which may end the
     * exchange (sink done) from inside: the stream stays until the end of
     * this. */
    s->busy++;
    h2_stream_drop_body(s);
    c->ev->closed(s, error_code);
    s->busy--;
    h2_stream_maybe_free(s);
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
    if (s->held || s->ready || s->queue != NULL)
        c->ev->release(s); /* the connection ended under it (h2.c) */
    h2_stream_drop_body(s);
    KEEL_LIST_REMOVE(c->streams, s);
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
    if (w->nfree_streams < H2_POOL_MAX)
        KEEL_FREELIST_GIVE(s, w->free_streams, w->nfree_streams, next);
    else
        stream_free(s);
}

void h2_stream_pool_free(h2_worker *w)
{
    KEEL_FREELIST_DRAIN(w->free_streams, w->nfree_streams, next, stream_free);
}

/* ---- ending streams -------------------------------------------------------------- */

void h2_stream_reset(h2_stream *s, uint32_t code)
{
    h2_conn *c = s->c;
    if (!s->closed && !s->reset_pending) {
        s->reset_pending = 1;
        s->rst_code = code;
        s->reset_next = c->resets;
        c->resets = s;
    }
    c->ev->output(c);
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
    s->c->ev->output(s->c);
}

/* RFC 9113 8.1.1: a malformed request is a stream error PROTOCOL_ERROR,
 * counted; the core never sees it (or, found in its body, sees no more). */
void h2_stream_malformed(h2_stream *s)
{
    h2_count(s->c, s->c->w->mod->m.malformed);
    h2_stream_error(s, H2_PROTOCOL_ERROR);
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
