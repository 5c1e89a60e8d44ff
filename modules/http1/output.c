/* output.c — the connection's output buffer and how it is written.
 *
 * Everything a response needs besides a large borrowed body (its head, a
 * small body copied behind it, chunk framing) is appended to c->out. Inside
 * one on_data call the outputs of pipelined requests accumulate there and
 * leave in one write at its end, so 16 pipelined requests cost one system
 * call. A flush uses keel_conn_write_copy: the core writes at once when it
 * can and copies only what the socket did not take, so the buffer is free
 * again immediately and nothing is allocated in the common case.
 *
 * A large body leaves as one scatter-gather write [head, body, framing]
 * without copying the body; c->out is then lent to that write and a fresh
 * buffer is taken for what comes next.
 */
#include "h1.h"

#include <stdlib.h>
#include <string.h>

static h1_obuf *obuf_get(h1_worker *w)
{
    h1_obuf *b;
    KEEL_FREELIST_TAKE(b, w->free_obuf, w->nfree_obuf, next);
    if (b == NULL) {
        if ((b = malloc(sizeof *b + H1_OBUF_SIZE)) == NULL)
            return NULL;
        b->cap = H1_OBUF_SIZE;
        b->w = w;
    }
    b->next = NULL;
    b->len = 0;
    b->cb = NULL;
    b->cb_ud = NULL;
    return b;
}

void h1_obuf_free(h1_worker *w, h1_obuf *b)
{
    if (b->cap == H1_OBUF_SIZE && w->nfree_obuf < H1_POOL_MAX)
        KEEL_FREELIST_GIVE(b, w->free_obuf, w->nfree_obuf, next);
    else
        free(b);
}

char *h1_out_reserve(h1_conn *c, size_t n)
{
    h1_obuf *b = c->out;
    if (b == NULL) {
        if ((b = obuf_get(c->w)) == NULL)
            return NULL;
        c->out = b;
    }
    if (b->cap - b->len < n && b->len > 0) {
        /* Full: what waits leaves now (a batch of pipelined responses
         * thus goes out in writes of up to a buffer's size). */
        int rc = h1_out_flush(c);
        if (rc != KEEL_OK && rc != KEEL_ERR_CLOSED)
            return NULL;
        if ((b = c->out) == NULL)
            return h1_out_reserve(c, n);
    }
    if (b->cap - b->len < n) {
        size_t cap = b->cap * 2;
        if (cap < b->len + n)
            cap = b->len + n;
        h1_obuf *grown = realloc(b, sizeof *b + cap);
        if (grown == NULL)
            return NULL;
        grown->cap = cap;
        c->out = b = grown;
    }
    return b->data + b->len;
}

void h1_out_commit(h1_conn *c, size_t n)
{
    c->out->len += n;
}

int h1_out_append(h1_conn *c, const void *data, size_t len)
{
    char *p = h1_out_reserve(c, len);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    memcpy(p, data, len);
    c->out->len += len;
    return KEEL_OK;
}

int h1_out_flush(h1_conn *c)
{
    h1_obuf *b = c->out;
    if (b == NULL || b->len == 0)
        return KEEL_OK;
    int rc = keel_conn_write_copy(c->conn, b->data, b->len);
    b->len = 0;
    if (b->cap != H1_OBUF_SIZE) {
        /* Grown for an unusual response: do not keep it. */
        c->out = NULL;
        free(b);
    }
    return rc;
}

void h1_out_release(h1_conn *c)
{
    if (c->out != NULL && c->out->len == 0) {
        h1_obuf_free(c->w, c->out);
        c->out = NULL;
    }
}

/* The write that borrowed an output buffer is done: tell the sink's caller
 * (its body may be released now) and take the buffer back. */
static void on_lent_written(keel_conn *conn, int status, void *userdata)
{
    h1_obuf *b = userdata;
    if (b->cb != NULL)
        b->cb(conn, status, b->cb_ud);
    h1_obuf_free(b->w, b);
}

/* Lends c->out to a write that ends in on_lent_written, which tells cb. */
static h1_obuf *lend(h1_conn *c, keel_write_cb cb, void *ud)
{
    h1_obuf *b = c->out;
    b->cb = cb;
    b->cb_ud = ud;
    c->out = NULL;
    return b;
}

/* The core did not take the write and will not call back; the caller's
 * callback is the caller's to run (it gets the error). */
static void lend_refused(h1_conn *c, h1_obuf *b)
{
    b->len = 0;
    h1_obuf_free(c->w, b);
}

int h1_out_write_pieces(h1_conn *c, const keel_piece *pieces, size_t npieces, keel_write_cb cb,
                        void *ud)
{
    h1_obuf *b = c->out;
    if (b == NULL || b->len == 0)
        return keel_conn_write_pieces(c->conn, pieces, npieces, cb, ud);
    keel_piece stack[17];
    keel_piece *all =
        npieces + 1 <= sizeof stack / sizeof stack[0] ? stack : malloc((npieces + 1) * sizeof *all);
    if (all == NULL)
        return KEEL_ERR_NOMEM;
    all[0] = keel_piece_bytes(b->data, b->len);
    memcpy(all + 1, pieces, npieces * sizeof *pieces);
    lend(c, cb, ud);
    int rc = keel_conn_write_pieces(c->conn, all, npieces + 1, on_lent_written, b);
    if (rc != KEEL_OK)
        lend_refused(c, b);
    if (all != stack)
        free(all);
    return rc;
}

int h1_out_write_with(h1_conn *c, size_t prefix, const keel_buf *bufs, size_t nbufs,
                      keel_write_cb cb, void *ud)
{
    h1_obuf *b = c->out;
    if (b == NULL || b->len == 0) {
        /* Nothing of ours to send along: the caller's buffers go as they
         * are, with the caller's callback. */
        return keel_conn_write(c->conn, bufs, nbufs, cb, ud);
    }
    keel_buf stack[18];
    keel_buf *iov =
        nbufs + 2 <= sizeof stack / sizeof stack[0] ? stack : malloc((nbufs + 2) * sizeof *iov);
    if (iov == NULL)
        return KEEL_ERR_NOMEM;
    size_t n = 0;
    if (prefix > 0)
        iov[n++] = (keel_buf){b->data, prefix};
    for (size_t i = 0; i < nbufs; i++)
        if (bufs[i].len > 0)
            iov[n++] = bufs[i];
    if (b->len > prefix)
        iov[n++] = (keel_buf){b->data + prefix, b->len - prefix};
    lend(c, cb, ud);
    int rc = keel_conn_write(c->conn, iov, n, on_lent_written, b);
    if (rc != KEEL_OK)
        lend_refused(c, b);
    if (iov != stack)
        free(iov);
    return rc;
}
