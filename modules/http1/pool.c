/* pool.c — per-worker free lists of message state and output buffers.
 *
 * A connection takes an h1_exch when a request begins and gives it back
 * when it is idle again; keep-alive and pipelined traffic thus reuse the
 * same few blocks and allocate nothing per request. The lists are per
 * worker (no locks) and bounded, so a burst does not pin memory forever.
 */
#include "h1.h"

#include <stdlib.h>

h1_exch *h1_exch_get(h1_worker *w)
{
    h1_exch *x = w->free_exch;
    if (x != NULL) {
        w->free_exch = x->next;
        w->nfree_exch--;
        return x;
    }
    if ((x = malloc(sizeof *x)) == NULL)
        return NULL;
    x->next = NULL;
    x->spans = x->inline_spans;
    x->headers = x->inline_headers;
    x->headers_cap = H1_INLINE_HEADERS;
    x->copy = NULL;
    x->copy_cap = 0;
    x->tr_buf = NULL;
    x->tr_spans = NULL;
    x->tr_fields = NULL;
    x->tr_len = x->tr_cap = x->ntr = x->tr_fields_cap = 0;
    return x;
}

static void exch_shrink(h1_exch *x)
{
    if (x->spans != x->inline_spans) {
        free(x->spans);
        free(x->headers);
        x->spans = x->inline_spans;
        x->headers = x->inline_headers;
        x->headers_cap = H1_INLINE_HEADERS;
    }
    /* Trailer sections are rare: a message that had one gives it back. */
    h1_body_trailers_free(x);
    /* A copy buffer fit for usual heads is kept; a large one is not. */
    if (x->copy_cap > 4096) {
        free(x->copy);
        x->copy = NULL;
        x->copy_cap = 0;
    }
}

static void exch_free(h1_exch *x)
{
    exch_shrink(x);
    free(x->copy);
    free(x);
}

void h1_exch_put(h1_worker *w, h1_exch *x)
{
    if (w->nfree_exch >= H1_POOL_MAX) {
        exch_free(x);
        return;
    }
    exch_shrink(x);
    x->next = w->free_exch;
    w->free_exch = x;
    w->nfree_exch++;
}

/* Requests with more fields than the inline arrays hold are rare; only they
 * pay for an allocation, growing geometrically. */
int h1_exch_grow(h1_exch *x, size_t want)
{
    if (want <= x->headers_cap)
        return KEEL_OK;
    size_t cap = x->headers_cap * 2;
    if (cap < want)
        cap = want;
    h1_span *spans = malloc(cap * sizeof *spans);
    keel_header *headers = malloc(cap * sizeof *headers);
    if (spans == NULL || headers == NULL) {
        free(spans);
        free(headers);
        return KEEL_ERR_NOMEM;
    }
    for (size_t i = 0; i < x->headers_cap; i++) {
        spans[i] = x->spans[i];
        headers[i] = x->headers[i];
    }
    if (x->spans != x->inline_spans) {
        free(x->spans);
        free(x->headers);
    }
    x->spans = spans;
    x->headers = headers;
    x->headers_cap = cap;
    return KEEL_OK;
}

void h1_pool_free(h1_worker *w)
{
    while (w->free_exch != NULL) {
        h1_exch *x = w->free_exch;
        w->free_exch = x->next;
        exch_free(x);
    }
    w->nfree_exch = 0;
    while (w->free_obuf != NULL) {
        h1_obuf *b = w->free_obuf;
        w->free_obuf = b->next;
        free(b);
    }
    w->nfree_obuf = 0;
}
