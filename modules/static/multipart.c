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
 * The response API sends one file range as a whole body
 * (keel_response_send_file), not a file range inside a streamed one, so
 * the parts' bytes are read here: 64 KiB at a time with pread on the
 * thread pool (keel_offload), each piece written with keel_response_write
 * and the next read started only once the previous piece was taken by the
 * peer (its free callback), so no file is ever held in memory beyond one
 * piece and a slow reader paces the reads. A sendfile per part would need
 * the core to offer "a file range inside a streamed body" (see
 * docs/static.md).
 */
#include "static.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MP_PIECE (64 * 1024)

enum { MP_HEAD, MP_DATA, MP_TAIL, MP_END };

typedef struct mp {
    keel_request *req;
    keel_response *res;
    int fd;
    uint64_t size;
    const char *type;
    st_range *ranges;
    size_t n, i;
    uint64_t pos; /* next byte of ranges[i] to send */
    int phase;
    int busy, again, dead;
    long got; /* the pool's read */
    char boundary[40];
    char head[320];
    char *buf;
} mp;

static void mp_free(mp *m)
{
    st_close(m->fd);
    free(m->ranges);
    free(m->buf);
    free(m);
}

static size_t part_head(const mp *m, size_t i, char *out, size_t cap)
{
    int n = snprintf(out, cap,
                     "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %llu-%llu/%llu\r\n\r\n",
                     m->boundary, m->type, (unsigned long long)m->ranges[i].first,
                     (unsigned long long)m->ranges[i].last, (unsigned long long)m->size);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static void pump(mp *m);

static void on_taken(void *data, void *userdata)
{
    (void)data;
    pump(userdata);
}

static void read_work(void *userdata)
{
    mp *m = userdata;
    const st_range *r = &m->ranges[m->i];
    uint64_t left = r->last - m->pos + 1;
    size_t want = left < MP_PIECE ? (size_t)left : MP_PIECE;
    m->got = st_pread(m->fd, m->buf, want, m->pos);
}

static void read_done(keel_request *req, int status, void *userdata)
{
    mp *m = userdata;
    (void)req;
    if (status != KEEL_OK) { /* the client left: the request is gone */
        mp_free(m);
        return;
    }
    if (m->got <= 0) {
        /* The file shrank under us: the promised length cannot be kept,
         * so the connection must not carry another response. */
        keel_response_close_connection(m->res);
        keel_response_end(m->res);
        mp_free(m);
        return;
    }
    m->busy = 1;
    size_t got = (size_t)m->got;
    m->pos += got;
    int rc = keel_response_write(m->res, m->buf, got, on_taken, m);
    m->busy = 0;
    if (rc != KEEL_OK)
        m->dead = 1;
    if (m->dead) {
        mp_free(m);
        return;
    }
    if (m->again) {
        m->again = 0;
        pump(m);
    }
}

/* One step: a write (its free callback, perhaps inside the call, asks for
 * the next), a read on the pool, or the end. */
static void step(mp *m)
{
    int rc;
    switch (m->phase) {
    case MP_HEAD: {
        size_t len = part_head(m, m->i, m->head, sizeof m->head);
        m->pos = m->ranges[m->i].first;
        m->phase = MP_DATA;
        rc = keel_response_write(m->res, m->head, len, on_taken, m);
        break;
    }
    case MP_DATA:
        if (m->pos > m->ranges[m->i].last) {
            m->phase = ++m->i < m->n ? MP_HEAD : MP_TAIL;
            m->again = 1;
            return;
        }
        rc = keel_offload(m->req, read_work, read_done, m);
        if (rc != KEEL_OK) {
            keel_response_close_connection(m->res);
            keel_response_end(m->res);
            m->dead = 1;
        }
        return;
    case MP_TAIL: {
        int n = snprintf(m->head, sizeof m->head, "\r\n--%s--\r\n", m->boundary);
        m->phase = MP_END;
        rc = keel_response_write(m->res, m->head, (size_t)n, on_taken, m);
        break;
    }
    default:
        keel_response_end(m->res);
        m->dead = 1;
        return;
    }
    if (rc != KEEL_OK)
        m->dead = 1;
}

/* Runs steps until one waits. on_taken may come inside a write: it then
 * only asks for another turn here (no recursion, however many parts). */
static void pump(mp *m)
{
    if (m->busy) {
        m->again = 1;
        return;
    }
    m->busy = 1;
    do {
        m->again = 0;
        step(m);
    } while (m->again && !m->dead);
    m->busy = 0;
    if (m->dead)
        mp_free(m);
}

int st_multipart_send(const st_config *cfg, keel_request *req, keel_response *res, int fd,
                      uint64_t size, const char *type, st_range *ranges, size_t n)
{
    mp *m = calloc(1, sizeof *m);
    if (m == NULL) {
        st_close(fd);
        free(ranges);
        return KEEL_ERR_NOMEM;
    }
    m->req = req;
    m->res = res;
    m->fd = fd;
    m->size = size;
    m->type = type;
    m->ranges = ranges;
    m->n = n;
    keel_worker *w = keel_request_worker(req);
    st_worker *ws = keel_worker_state(w, cfg->module);
    /* A boundary that no part's bytes are likely to hold: 20 hex digits
     * from a per-request sequence, the worker, the time and the request's
     * address, mixed (nginx uses a plain counter). */
    static const uint64_t mix = 0x9e3779b97f4a7c15ull;
    uint64_t seq = (ws ? ++ws->boundary_seq : 0) * mix ^ (uint64_t)(uintptr_t)req * mix ^
                   (uint64_t)keel_time_now() * 0xff51afd7ed558ccdull;
    seq ^= seq >> 29;
    snprintf(m->boundary, sizeof m->boundary, "%016llx%04x", (unsigned long long)seq,
             keel_worker_id(w) & 0xffffu);

    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += part_head(m, i, m->head, sizeof m->head) + (ranges[i].last - ranges[i].first + 1);
    total += strlen(m->boundary) + 8; /* "\r\n--" B "--\r\n" */

    char ct[200], cl[32];
    snprintf(ct, sizeof ct, "multipart/byteranges; boundary=%s", m->boundary);
    snprintf(cl, sizeof cl, "%llu", (unsigned long long)total);
    keel_response_set_status(res, 206);
    keel_response_header_set(res, "Content-Type", ct);
    keel_response_header_set(res, "Content-Length", cl);

    keel_str method = keel_request_method(req);
    if (method.len == 4 && memcmp(method.ptr, "HEAD", 4) == 0) {
        /* The head alone, with the length the GET would have: the core
         * sends no body for HEAD and never reads the file. */
        m->fd = -1;
        mp_free(m);
        return keel_response_send_file(res, fd, 0, total, 1);
    }
    m->buf = malloc(MP_PIECE);
    if (m->buf == NULL) {
        mp_free(m);
        return KEEL_ERR_NOMEM;
    }
    m->phase = MP_HEAD;
    pump(m);
    return KEEL_OK;
}
