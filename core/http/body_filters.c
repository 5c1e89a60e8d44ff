/* Response body filters (keel_http_filter.on_response_body, and
 * on_response_pieces from ABI 1.9): which filters a response's body goes
 * through, the chain from a position to the protocol, and the emits
 * filters pass their output on with. The chain's end is response.c's
 * kl_response_to_sink for bytes and response_pieces.c's
 * kl_response_pieces_to_sink for pieces. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "http/http.h"
#include "net/output.h"

int kl_response_pieces_filtered(const keel_response *res)
{
    const kl_http *http = res->req->http;
    const keel_http_sink *sink = res->req->sink;
    return kl_response_body_filtered(res) && (http->bytes_filter_mask & ~res->body_skipped) == 0 &&
           sink->size >= offsetof(keel_http_sink, send_pieces) + sizeof sink->send_pieces &&
           sink->send_pieces != NULL;
}

/* The next filter from position `from` that takes this body, or nfilters. */
static size_t next_body_filter(const keel_response *res, size_t from)
{
    const kl_http *http = res->req->http;
    for (size_t i = from; i < http->nfilters; i++) {
        const keel_http_filter *f = &http->filters[i].cb;
        if ((f->on_response_body != NULL || f->on_response_pieces != NULL) &&
            !(i < 64 && (res->body_skipped >> i) & 1))
            return i;
    }
    return http->nfilters;
}

/* Calls filter i with filter_pos set for its emits: its pieces hook with
 * n keel_piece items, else its bytes hook with n keel_buf items. */
static int call_filter(keel_response *res, size_t i, int pieces, const void *items, size_t n,
                       int last)
{
    const keel_http_filter *f = &res->req->http->filters[i].cb;
    size_t saved = res->filter_pos;
    res->filter_pos = i + 1;
    int rc = pieces ? f->on_response_pieces(res->req, res, items, n, last, f->userdata)
                    : f->on_response_body(res->req, res, items, n, last, f->userdata);
    res->filter_pos = saved;
    return rc;
}

/* Bytes handed on as bytes pieces: to filter `at` alone, or to the
 * pieces chain from position `at`. */
static int bufs_as_pieces(keel_response *res, size_t at, const keel_buf *bufs, size_t nbufs,
                          int last, int chain)
{
    keel_piece stack[16];
    keel_piece *p = nbufs <= 16 ? stack : malloc(nbufs * sizeof *p);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t k = 0; k < nbufs; k++)
        p[k] = keel_piece_bytes(bufs[k].base, bufs[k].len);
    int rc = chain ? kl_response_run_piece_filters(res, at, p, nbufs, last)
                   : call_filter(res, at, 1, p, nbufs, last);
    if (p != stack)
        free(p);
    return rc;
}

/* Runs the body filters from position `from`, on bytes: the chain of a
 * body some filter needs the bytes of. A pieces-only filter gets them as
 * bytes pieces. */
int kl_response_run_body_filters(keel_response *res, size_t from, const keel_buf *bufs,
                                 size_t nbufs, int last)
{
    const kl_http *http = res->req->http;
    size_t i = next_body_filter(res, from);
    if (i == http->nfilters)
        return kl_response_to_sink(res, bufs, nbufs, last, NULL);
    if (http->filters[i].cb.on_response_body == NULL)
        return bufs_as_pieces(res, i, bufs, nbufs, last, 0);
    return call_filter(res, i, 0, bufs, nbufs, last);
}

/* Runs the body filters from position `from` on pieces: the chain of a
 * body whose filters all take pieces (kl_response_pieces_filtered). */
int kl_response_run_piece_filters(keel_response *res, size_t from, const keel_piece *pieces,
                                  size_t npieces, int last)
{
    const kl_http *http = res->req->http;
    size_t i = next_body_filter(res, from);
    if (i == http->nfilters)
        return kl_response_pieces_to_sink(res, pieces, npieces, last);
    return call_filter(res, i, 1, pieces, npieces, last);
}

int keel_response_filter_emit(keel_response *res, const keel_buf *bufs, size_t nbufs, int last)
{
    if (res->req->aborted)
        return KEEL_ERR_CLOSED;
    if (!kl_response_pieces_filtered(res))
        return kl_response_run_body_filters(res, res->filter_pos, bufs, nbufs, last);
    return bufs_as_pieces(res, res->filter_pos, bufs, nbufs, last, 1);
}

int keel_response_filter_emit_pieces(keel_response *res, const keel_piece *pieces, size_t npieces,
                                     int last)
{
    uint64_t total;
    int files;
    int rc = kl_pieces_check(pieces, npieces, &total, &files);
    if (rc != KEEL_OK)
        return rc;
    if (res->req->aborted)
        return KEEL_ERR_CLOSED;
    if (kl_response_pieces_filtered(res))
        return kl_response_run_piece_filters(res, res->filter_pos, pieces, npieces, last);
    if (files)
        return KEEL_ERR_UNSUPPORTED; /* a later filter needs the bytes */
    keel_buf stack[16];
    keel_buf *b = npieces <= 16 ? stack : malloc(npieces * sizeof *b);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t k = 0; k < npieces; k++)
        b[k] = (keel_buf){pieces[k].base, (size_t)pieces[k].len};
    rc = kl_response_run_body_filters(res, res->filter_pos, b, npieces, last);
    if (b != stack)
        free(b);
    return rc;
}
