/* pool.c — per-worker free lists of message state and output buffers.
 *
 * A connection takes an h1_exch when a request begins and gives it back
 * when it is idle again; keep-alive and pipelined traffic thus reuse the
 * same few blocks and allocate nothing per request. The lists are per
 * worker (no locks) and bounded, so a burst does not pin memory forever
 * (keel/util.h's KEEL_FREELIST_* take, give and drain them).
 */
#include "h1.h"

#include <stdlib.h>
#include <string.h>

h1_exch *h1_exch_get(h1_worker *w)
{
    h1_exch *exch;
    KEEL_FREELIST_TAKE(exch, w->free_exch, w->nfree_exch, next);
    if (exch != NULL)
        return exch;
    if ((exch = malloc(sizeof *exch)) == NULL)
        return NULL;
    exch->next = NULL;
    exch->spans = exch->inline_spans;
    exch->headers = exch->inline_headers;
    exch->tokens = exch->inline_tokens;
    exch->headers_cap = H1_INLINE_HEADERS;
    exch->copy = NULL;
    exch->copy_cap = 0;
    exch->tr_buf = NULL;
    exch->tr_spans = NULL;
    exch->tr_fields = NULL;
    exch->tr_len = exch->tr_cap = exch->ntr = exch->tr_fields_cap = 0;
    return exch;
}

static void exch_shrink(h1_exch *exch)
{
    if (exch->spans != exch->inline_spans) {
        free(exch->spans);
        free(exch->headers);
        exch->spans = exch->inline_spans;
        exch->headers = exch->inline_headers;
        exch->tokens = exch->inline_tokens;
        exch->headers_cap = H1_INLINE_HEADERS;
    }
    /* Trailer sections are rare: a message that had one gives it back
     * (and one that had none costs no call). */
    if (exch->tr_buf != NULL || exch->tr_spans != NULL || exch->tr_fields != NULL)
        h1_body_trailers_free(exch);
    /* A copy buffer fit for usual heads is kept; a large one is not. */
    if (exch->copy_cap > 4096) {
        free(exch->copy);
        exch->copy = NULL;
        exch->copy_cap = 0;
    }
}

static void exch_free(h1_exch *exch)
{
    exch_shrink(exch);
    free(exch->copy);
    free(exch);
}

void h1_exch_put(h1_worker *w, h1_exch *exch)
{
    if (w->nfree_exch >= H1_POOL_MAX) {
        exch_free(exch);
        return;
    }
    exch_shrink(exch);
    KEEL_FREELIST_GIVE(exch, w->free_exch, w->nfree_exch, next);
}

/* A free h1_conn keeps the list's link in its first bytes. */
struct h1_free_conn {
    struct h1_free_conn *next;
};

h1_conn *h1_conn_get(h1_worker *w)
{
    struct h1_free_conn *f;
    KEEL_FREELIST_TAKE(f, w->free_conn, w->nfree_conn, next);
    if (f == NULL)
        return calloc(1, sizeof(h1_conn));
    h1_conn *c = (h1_conn *)(void *)f;
    memset(c, 0, sizeof *c);
    return c;
}

void h1_conn_put(h1_worker *w, h1_conn *c)
{
#if KEEL_ADDRESS_SANITIZED
    /* ASan reports a use after free only of memory not handed out again
     * at once: sanitized builds give every h1_conn back to malloc, so that
     * a parked connection's state used after it parked (park.c) is caught. */
    (void)w;
    free(c);
#else
    if (w->nfree_conn >= H1_POOL_MAX) {
        free(c);
        return;
    }
    struct h1_free_conn *f = (struct h1_free_conn *)(void *)c;
    KEEL_FREELIST_GIVE(f, w->free_conn, w->nfree_conn, next);
#endif
}

/* Requests with more fields than the inline arrays hold are rare; only they
 * pay for an allocation, growing geometrically. */
int h1_exch_grow(h1_exch *exch, size_t want)
{
    if (want <= exch->headers_cap)
        return KEEL_OK;
    size_t cap = exch->headers_cap * 2;
    if (cap < want)
        cap = want;
    h1_span *spans = malloc(cap * sizeof *spans);
    /* The tokens after the views, in one block (keel_header's alignment
     * covers uint16_t's). */
    keel_header *headers = malloc(cap * (sizeof *headers + sizeof *exch->tokens));
    if (spans == NULL || headers == NULL) {
        free(spans);
        free(headers);
        return KEEL_ERR_NOMEM;
    }
    uint16_t *tokens = (uint16_t *)(void *)(headers + cap);
    for (size_t i = 0; i < exch->headers_cap; i++) {
        spans[i] = exch->spans[i];
        headers[i] = exch->headers[i];
        tokens[i] = exch->tokens[i];
    }
    if (exch->spans != exch->inline_spans) {
        free(exch->spans);
        free(exch->headers);
    }
    exch->spans = spans;
    exch->headers = headers;
    exch->tokens = tokens;
    exch->headers_cap = cap;
    return KEEL_OK;
}

void h1_pool_free(h1_worker *w)
{
    KEEL_FREELIST_DRAIN(w->free_exch, w->nfree_exch, next, exch_free);
    KEEL_FREELIST_DRAIN(w->free_obuf, w->nfree_obuf, next, free);
    KEEL_FREELIST_DRAIN(w->free_conn, w->nfree_conn, next, free);
}
