/* multipart.c — several ranges as multipart/byteranges (RFC 9110 14.6).
 *
 *     Content-Type: multipart/byteranges; boundary=B
 *
 *     \r\n--B\r\nContent-Type: T\r\nContent-Range: bytes a-b/size\r\n\r\n<bytes>
 *     ... one such part per range ...
 *     \r\n--B--\r\n
 *
 * (The CRLF before the first delimiter is the preamble's, as nginx sends
 * it; RFC 2046 5.1.1 allows it.) The length is known in advance, so the
 * response carries Content-Length and no chunked framing.
 *
 * The body goes as one call of pieces (keel_response_send_pieces, ABI
 * 1.8): each part's head from memory, then its range of the file, and the
 * closing delimiter, so the core sends the ranges as it sends a whole file
 * (sendfile on plain TCP, its 64 KiB pool reads through TLS or behind a
 * body filter), at the peer's pace, and nothing of the file is held here.
 */
#include "static.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A part's head: "\r\n--" B "\r\nContent-Type: " T "\r\nContent-Range: bytes
 * a-b/size\r\n\r\n" with B 20 hex digits and three 20-digit numbers. */
#define MP_HEAD_MAX 320

typedef struct mp {
    int fd;
    st_range *ranges;
    char *heads; /* the parts' heads and the closing delimiter */
    keel_piece *pieces;
} mp;

static void mp_free(mp *m)
{
    st_close(m->fd);
    free(m->ranges);
    free(m->heads);
    free(m->pieces);
    free(m);
}

/* The core is done with the pieces: they are the file and memory here. */
static void mp_release(void *data, void *userdata)
{
    (void)data;
    mp_free(userdata);
}

static size_t part_head(const char *boundary, const char *type, const st_range *r, uint64_t size,
                        char *out, size_t cap)
{
    int n = snprintf(out, cap,
                     "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %llu-%llu/%llu\r\n\r\n",
                     boundary, type, (unsigned long long)r->first, (unsigned long long)r->last,
                     (unsigned long long)size);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

int st_multipart_send(const st_config *cfg, keel_request *req, keel_response *res, int fd,
                      uint64_t size, const char *type, st_range *ranges, size_t n)
{
    mp *m = calloc(1, sizeof *m);
    if (m != NULL) {
        m->fd = fd;
        m->ranges = ranges;
        m->heads = malloc((n + 1) * MP_HEAD_MAX);
        m->pieces = malloc((2 * n + 1) * sizeof *m->pieces);
    }
    if (m == NULL || m->heads == NULL || m->pieces == NULL) {
        if (m != NULL)
            mp_free(m);
        else {
            st_close(fd);
            free(ranges);
        }
        return KEEL_ERR_NOMEM;
    }
    keel_worker *w = keel_request_worker(req);
    st_worker *ws = keel_worker_state(w, cfg->module);
    /* A boundary that no part's bytes are likely to hold: 20 hex digits
     * from a per-request sequence, the worker, the time and the request's
     * address, mixed (nginx uses a plain counter). */
    static const uint64_t mix = 0x9e3779b97f4a7c15ull;
    uint64_t seq = (ws ? ++ws->boundary_seq : 0) * mix ^ (uint64_t)(uintptr_t)req * mix ^
                   (uint64_t)keel_time_now() * 0xff51afd7ed558ccdull;
    seq ^= seq >> 29;
    char boundary[40];
    snprintf(boundary, sizeof boundary, "%016llx%04x", (unsigned long long)seq,
             keel_worker_id(w) & 0xffffu);

    char *at = m->heads;
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = part_head(boundary, type, &ranges[i], size, at, MP_HEAD_MAX);
        m->pieces[np++] = keel_piece_bytes(at, len);
        m->pieces[np++] =
            keel_piece_file(fd, ranges[i].first, ranges[i].last - ranges[i].first + 1);
        at += len;
    }
    int len = snprintf(at, MP_HEAD_MAX, "\r\n--%s--\r\n", boundary);
    m->pieces[np++] = keel_piece_bytes(at, (size_t)len);

    char ct[200];
    snprintf(ct, sizeof ct, "multipart/byteranges; boundary=%s", boundary);
    keel_response_set_status(res, 206);
    keel_response_header_set(res, "Content-Type", ct);
    /* The length is the pieces' (the core sets it); for HEAD the head alone
     * goes, with the length the GET would have, and no file is read. */
    return keel_response_send_pieces(res, m->pieces, np, mp_release, m);
}
