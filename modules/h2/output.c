/* output.c — batching the frames writer.c and send.c write into writes on the
 * connection.
 *
 * Control frames, frame headers and header blocks are copied into the
 * batch; DATA payloads are borrowed (they are the core's response pieces,
 * released once written) unless small enough to copy. Everything
 * produced within one on_data, or one asynchronous event, accumulates in a
 * batch and leaves in one keel_conn_write, so 100 responses answered in one
 * read cost one system call, not 200.
 *
 * A batch in flight is owned by its write; its completion releases the
 * pieces whose bytes it carried and lets output go on if it had stopped at
 * H2_INFLIGHT_MAX (the peer's reading paces us).
 */
#include "writer.h"

#include <stdlib.h>
#include <string.h>

/* A new batch's room, and the most a pooled one keeps. Small to start: a
 * burst of new connections each takes a fresh batch (their SETTINGS) at
 * once, and what malloc hands back later stays in the process (8 KiB each
 * would be most of an idle connection's memory). A busy connection's
 * batch grows to 100 small responses (~8 KiB) once and is reused. */
#define BATCH_BYTES_NEW 1024
#define BATCH_BYTES     8192
#define BATCH_SEGS      16
#define BATCH_PIECES    8

static h2_batch *batch_get(h2_conn *c)
{
    h2_worker *w = c->w;
    h2_batch *b;
    KEEL_FREELIST_TAKE(b, w->free_batches, w->nfree_batches, next);
    if (b == NULL) {
        b = calloc(1, sizeof *b);
        if (b == NULL)
            return NULL;
        b->bytes = malloc(BATCH_BYTES_NEW);
        b->segs = malloc(BATCH_SEGS * sizeof *b->segs);
        b->pieces = malloc(BATCH_PIECES * sizeof *b->pieces);
        if (b->bytes == NULL || b->segs == NULL || b->pieces == NULL) {
            free(b->bytes);
            free(b->segs);
            free(b->pieces);
            free(b);
            return NULL;
        }
        b->cap = BATCH_BYTES_NEW;
        b->segs_cap = BATCH_SEGS;
        b->pieces_cap = BATCH_PIECES;
    }
    b->next = NULL;
    b->c = c;
    b->len = b->nsegs = b->npieces = b->total = 0;
    return b;
}

static void batch_free(h2_batch *b)
{
    free(b->bytes);
    free(b->segs);
    free(b->pieces);
    free(b);
}

static void batch_put(h2_worker *w, h2_batch *b)
{
    /* One that grew for an unusual burst is not kept at its size. */
    if (w->nfree_batches >= H2_POOL_MAX || b->cap > BATCH_BYTES || b->segs_cap > 4 * BATCH_SEGS ||
        b->pieces_cap > 4 * BATCH_PIECES) {
        batch_free(b);
        return;
    }
    KEEL_FREELIST_GIVE(b, w->free_batches, w->nfree_batches, next);
}

void h2_batch_pool_free(h2_worker *w)
{
    KEEL_FREELIST_DRAIN(w->free_batches, w->nfree_batches, next, batch_free);
}

static h2_batch *current(h2_conn *c)
{
    if (c->out == NULL)
        c->out = batch_get(c);
    return c->out;
}

static int grow(void **p, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap * 2;
    while (n < want)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* len bytes more of the batch's own, after the last copied ones. */
static inline uint8_t *room(h2_batch *b, size_t len)
{
    if (grow((void **)&b->bytes, &b->cap, b->len + len, 1) != 0)
        return NULL;
    /* Consecutive copies are one segment. */
    if (b->nsegs > 0 && b->segs[b->nsegs - 1].base == NULL &&
        b->segs[b->nsegs - 1].off + b->segs[b->nsegs - 1].len == b->len) {
        b->segs[b->nsegs - 1].len += len;
    } else {
        if (grow((void **)&b->segs, &b->segs_cap, b->nsegs + 1, sizeof *b->segs) != 0)
            return NULL;
        b->segs[b->nsegs++] = (h2_seg){NULL, b->len, len};
    }
    uint8_t *at = (uint8_t *)b->bytes + b->len;
    b->len += len;
    b->total += len;
    return at;
}

uint8_t *h2_out_room(h2_conn *c, size_t len)
{
    h2_batch *b = current(c);
    return b != NULL ? room(b, len) : NULL;
}

int h2_out_copy(h2_conn *c, const void *data, size_t len)
{
    h2_batch *b = current(c);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    if (len == 0)
        return KEEL_OK;
    uint8_t *at = room(b, len);
    if (at == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(at, data, len);
    return KEEL_OK;
}

int h2_out_borrow(h2_conn *c, const void *data, size_t len)
{
    h2_batch *b = current(c);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    if (len == 0)
        return KEEL_OK;
    if (grow((void **)&b->segs, &b->segs_cap, b->nsegs + 1, sizeof *b->segs) != 0)
        return KEEL_ERR_NOMEM;
    b->segs[b->nsegs++] = (h2_seg){data, 0, len};
    b->total += len;
    return KEEL_OK;
}

int h2_out_hold(h2_conn *c, h2_piece *p)
{
    h2_batch *b = current(c);
    if (b == NULL ||
        grow((void **)&b->pieces, &b->pieces_cap, b->npieces + 1, sizeof *b->pieces) != 0)
        return KEEL_ERR_NOMEM;
    p->refs++;
    b->pieces[b->npieces++] = p;
    return KEEL_OK;
}

size_t h2_out_pending(h2_conn *c)
{
    return c->out != NULL ? c->out->total : 0;
}

static void batch_release(h2_batch *b, keel_conn *conn, int status)
{
    for (size_t i = 0; i < b->npieces; i++) {
        h2_piece *p = b->pieces[i];
        if (p->conn == NULL)
            p->conn = conn;
        h2_piece_unref(p, status);
    }
    b->npieces = 0;
}

void h2_out_orphan(h2_conn *c)
{
    for (h2_batch *b = c->flying; b != NULL; b = b->next)
        b->c = NULL;
    c->flying = NULL;
}

static void on_written(keel_conn *conn, int status, void *userdata)
{
    h2_batch *b = userdata;
    h2_conn *c = b->c; /* NULL once the connection's state is gone */
    if (c == NULL) {
        /* The worker's pools may be gone too: the pieces go to free(). */
        for (size_t i = 0; i < b->npieces; i++)
            b->pieces[i]->w = NULL;
        batch_release(b, conn, status);
        batch_free(b);
        return;
    }
    KEEL_LIST_REMOVE(c->flying, b);
    b->next = b->prev = NULL;
    c->inflight -= b->total;
    batch_release(b, conn, status);
    batch_put(c->w, b);
    if (c->blocked && !c->closing) {
        c->blocked = 0;
        c->ev->output(c);
    }
}

int h2_out_flush(h2_conn *c)
{
    h2_batch *b = c->out;
    if (b == NULL)
        return KEEL_OK;
    if (b->total == 0 && b->npieces == 0) {
        /* Keep it for the next turn only while the connection is busy. */
        c->out = NULL;
        batch_put(c->w, b);
        return KEEL_OK;
    }
    c->out = NULL;
    keel_buf stack[64];
    keel_buf *iov = b->nsegs <= 64 ? stack : malloc(b->nsegs * sizeof *iov);
    if (iov == NULL) {
        batch_release(b, c->conn, KEEL_ERR_NOMEM);
        batch_put(c->w, b);
        return KEEL_ERR_NOMEM;
    }
    for (size_t i = 0; i < b->nsegs; i++)
        iov[i] = (keel_buf){b->segs[i].base ? b->segs[i].base : b->bytes + b->segs[i].off,
                            b->segs[i].len};
    int rc;
    if (c->closing && b->total > 0) {
        rc = KEEL_ERR_CLOSED;
    } else if (b->total == 0) {
        /* Only pieces to release (dropped bodies): an empty write keeps
         * the order and runs the callback from the loop, never from here. */
        static const char none[1] = {0};
        keel_buf empty = {none, 0};
        rc = keel_conn_write(c->conn, &empty, 1, on_written, b);
    } else {
        rc = keel_conn_write(c->conn, iov, b->nsegs, on_written, b);
    }
    if (iov != stack)
        free(iov);
    if (rc != KEEL_OK) {
        batch_release(b, c->conn, rc);
        batch_put(c->w, b);
        return rc;
    }
    c->inflight += b->total;
    KEEL_LIST_PUSH(c->flying, b);
    return KEEL_OK;
}

int h2_out_file(h2_conn *c, const uint8_t *hd, size_t hdlen, h2_piece *p, size_t len)
{
    /* Order: what is batched (earlier frames) leaves first. */
    int rc = h2_out_flush(c);
    if (rc != KEEL_OK)
        return rc;
    /* A batch without bytes stands for the write: it carries the
     * accounting (in flight, the piece's reference, orphaning) that
     * on_written settles. */
    h2_batch *b = batch_get(c);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    if (grow((void **)&b->pieces, &b->pieces_cap, 1, sizeof *b->pieces) != 0) {
        batch_put(c->w, b);
        return KEEL_ERR_NOMEM;
    }
    p->refs++;
    b->pieces[b->npieces++] = p;
    b->total = hdlen + len;
    keel_buf prefix = {hd, hdlen};
    rc = keel_conn_write_file_after(c->conn, &prefix, 1, p->fd, p->foff, len, on_written, b);
    if (rc != KEEL_OK) {
        p->refs--;
        b->npieces = 0;
        batch_put(c->w, b);
        return rc;
    }
    c->inflight += b->total;
    KEEL_LIST_PUSH(c->flying, b);
    return KEEL_OK;
}

void h2_out_discard(h2_conn *c)
{
    if (c->out != NULL) {
        batch_release(c->out, c->conn, KEEL_ERR_CLOSED);
        batch_put(c->w, c->out);
        c->out = NULL;
    }
}

/* ---- response body pieces ----------------------------------------------------------- */

/* A piece is released (its callback runs) when the last reference goes:
 * the stream's queue holds one until every byte is in a batch, each batch
 * holding some of its bytes one more. */
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
    if (w != NULL && w->nfree_pieces < H2_POOL_MAX)
        KEEL_FREELIST_GIVE(p, w->free_pieces, w->nfree_pieces, next);
    else
        free(p);
}

void h2_piece_pool_free(h2_worker *w)
{
    KEEL_FREELIST_DRAIN(w->free_pieces, w->nfree_pieces, next, free);
}

void h2_slab_unref(h2_slab *slab)
{
    if (slab != NULL && --slab->refs == 0)
        free(slab);
}
