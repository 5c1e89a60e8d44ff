/* sink.c — the sink through which the core answers a stream (send_head,
 * send_body, send_file, want_body, done; no upgrade): response heads held
 * until their body can follow and handed to nghttp2 uncopied, trailers,
 * the body queued as pieces (stream.c).
 */
#include "h2.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the sink ----------------------------------------------------------------------- */

/* name equals lit (lowercase, same length) ignoring ASCII case. */
static int same_ci(const char *name, const char *lit, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((name[i] | 0x20) != lit[i])
            return 0;
    return 1;
}

/* RFC 9113 8.2.2: connection-specific fields never go into HTTP/2 (the
 * core already leaves out Connection, Keep-Alive, Proxy-Connection and
 * Transfer-Encoding); Upgrade neither. Content-Length is ours to write. */
static int dropped(keel_str name)
{
    /* By length: most names match none, and each length has one or two
     * candidates ('-' | 0x20 is '-', so the case folding holds). */
    const char *p = name.ptr;
    switch (name.len) {
    case 2:
        return same_ci(p, "te", 2);
    case 4:
        return same_ci(p, "host", 4);
    case 7:
        return same_ci(p, "upgrade", 7);
    case 10:
        return same_ci(p, "connection", 10) || same_ci(p, "keep-alive", 10);
    case 14:
        return same_ci(p, "content-length", 14) || same_ci(p, "http2-settings", 14);
    case 16:
        return same_ci(p, "proxy-connection", 16);
    case 17:
        return same_ci(p, "transfer-encoding", 17);
    default:
        return 0;
    }
}

/* n bytes of src lowercased into dst, eight at a time: a field name is
 * ASCII (a token, RFC 9110 5.1), and for bytes below 0x80 bit 7 of
 * (b + 0x3f) ^ (b + 0x25) is set exactly for 'A'..'Z' (0x41..0x5a), whose
 * bit 5 then is set. Bytes of 0x80 and above are copied as they are. A
 * byte at a time cost ~7 instructions a character (callgrind). */
static void lower_copy(char *dst, const char *src, size_t n)
{
    const uint64_t ones = 0x0101010101010101u;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, src + i, 8);
        uint64_t ascii = ~x & (ones * 0x80);
        uint64_t low = x & (ones * 0x7f);
        uint64_t upper = ((low + ones * 0x3f) ^ (low + ones * 0x25)) & ascii;
        x |= (upper >> 2) & (ones * 0x20);
        memcpy(dst + i, &x, 8);
    }
    for (; i < n; i++) {
        char ch = src[i];
        dst[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
}

/* Field names go lowercase (RFC 9113 8.2.1) into mem; fills nv. With
 * keep, values are copied into mem too and nghttp2 is told to copy
 * neither (mem then lives as long as nghttp2 may read it). Returns the
 * number of entries, or -1 if mem (len bytes) is too small. */
static long to_nv(const keel_header *h, size_t n, nghttp2_nv *nv, char *mem, size_t len, int keep)
{
    size_t at = 0, out = 0;
    uint8_t flags =
        keep ? NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE : NGHTTP2_NV_FLAG_NONE;
    for (size_t i = 0; i < n; i++) {
        if (h[i].name.len == 0 || dropped(h[i].name))
            continue;
        size_t need = h[i].name.len + (keep ? h[i].value.len : 0);
        if (len - at < need)
            return -1;
        char *name = mem + at;
        lower_copy(name, h[i].name.ptr, h[i].name.len);
        const char *value = h[i].value.ptr;
        if (keep) {
            memcpy(name + h[i].name.len, value, h[i].value.len);
            value = name + h[i].name.len;
        }
        at += need;
        nv[out++] =
            (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, h[i].name.len, h[i].value.len, flags};
    }
    return (long)out;
}

/* The decimal digits of v at p (snprintf was a visible cost per response). */
static size_t u64_dec(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static size_t names_len(const keel_header *h, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += h[i].name.len;
    return total;
}

/* len bytes that live as long as the stream: a final head's fields. */
static char *head_mem(h2_stream *s, size_t len)
{
    if (len <= sizeof s->head_inline)
        return s->head_inline;
    free(s->head_heap);
    s->head_heap = malloc(len);
    return s->head_heap;
}

static int sink_send_head(void *exchange, int status, const keel_header *headers, size_t nheaders,
                          int64_t content_length)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    if (!s->exchange || s->final_sent)
        return KEEL_ERR_STATE;
    if (c->closing || s->closed || c->ng == NULL)
        return KEEL_ERR_CLOSED;
    if (status == 101 || status < 100 || status > 999)
        return KEEL_ERR_INVAL;
    int informational = status < 200;
    if (!informational) {
        /* The core's wish to end the connection: HTTP/2 finishes this
         * stream and says GOAWAY (RFC 9113 6.8), other streams finish. */
        if (!keel_http_request_keep_alive(s->req))
            h2_goaway(c);
        /* RFC 9110 9.3.2, 15.3.5, 15.4.5: HEAD, 204 and 304 carry no body. */
        s->no_body = h2_str_is(s->method, "HEAD") || status == 204 || status == 304;
        s->resp_left = s->no_body ? 0 : content_length;
    }
    h2_stream_put_status(s, status);

    /* A final head's names and values are kept in the stream (head_mem)
     * until it is freed, and nghttp2 copies none of them
     * (NGHTTP2_NV_FLAG_NO_COPY_NAME/_VALUE): nghttp2_nv_array_copy would
     * copy and lowercase each again, ~600 instructions per response with
     * a file's head (callgrind). nghttp2 reads them when it serialises the
     * HEADERS frame, before it closes the stream (the END_STREAM comes
     * after); a HEADERS item whose stream was reset first is dropped
     * without being read (session_prep_frame). A 1xx head is copied: a
     * stream may send several. */
    nghttp2_nv stack_nv[40];
    char stack_mem[2048];
    size_t want_nv = nheaders + 4;
    size_t want_mem = names_len(headers, nheaders);
    size_t date_len = 0;
    const char *date = h2_date(c->w, &date_len);
    nghttp2_nv *nv;
    char *mem;
    if (informational) {
        nv = want_nv <= 40 ? stack_nv : malloc(want_nv * sizeof *nv);
        mem = want_mem <= sizeof stack_mem ? stack_mem : malloc(want_mem);
    } else {
        /* One block in the stream: the nv array, then the bytes. */
        for (size_t i = 0; i < nheaders; i++)
            want_mem += headers[i].value.len;
        want_mem += date_len + 20; /* the date, content-length's digits */
        nv = (nghttp2_nv *)(void *)head_mem(s, want_nv * sizeof *nv + want_mem);
        mem = nv != NULL ? (char *)(nv + want_nv) : NULL;
    }
    int rc = KEEL_OK;
    if (nv == NULL || mem == NULL) {
        rc = KEEL_ERR_NOMEM;
        goto out;
    }
    uint8_t kept = informational ? NGHTTP2_NV_FLAG_NONE
                                 : NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    size_t n = 0, at = 0;
    /* :status lives in the stream, server in the configuration. */
    nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)s->status, 7, 3, kept};
    if (!informational) {
        memcpy(mem, date, date_len); /* the worker's copy changes every second */
        date = mem;
        at = date_len;
    }
    nv[n++] = (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date, 4, date_len, kept};
    const h2_config *cfg = c->w->cfg;
    if (cfg->server_len > 0)
        nv[n++] =
            (nghttp2_nv){(uint8_t *)"server", (uint8_t *)cfg->server, 6, cfg->server_len, kept};
    if (!informational && content_length >= 0 && status != 204 && status != 304) {
        char *cl = mem + at;
        size_t len = u64_dec(cl, (uint64_t)content_length);
        at += len;
        nv[n++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)cl, 14, len, kept};
    }
    long m = to_nv(headers, nheaders, nv + n, mem + at, want_mem - at, !informational);
    if (m < 0) {
        rc = KEEL_ERR_INVAL;
        goto out;
    }
    n += (size_t)m;
    s->head_sent = 1;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    if (informational) {
        if (nghttp2_submit_headers(c->ng, NGHTTP2_FLAG_NONE, s->id, NULL, nv, n, NULL) != 0)
            rc = KEEL_ERR_CLOSED;
    } else {
        /* Submitted by h2_pump, once the body's first bytes are there. */
        s->has_data = !s->no_body && content_length != 0;
        s->final_sent = 1;
        s->head_nv = nv;
        s->head_n = n;
        /* In the order the heads came (nghttp2 then sends them so). */
        s->held = 1;
        s->held_next = NULL;
        *(c->held != NULL ? &c->held_tail->held_next : &c->held) = s;
        c->held_tail = s;
    }
    if (rc == KEEL_OK)
        h2_pump(c);
out:
    if (informational && nv != stack_nv)
        free(nv);
    if (informational && mem != stack_mem)
        free(mem);
    return rc;
}

/* Takes s off the connection's list of held heads. */
void h2_stream_unhold(h2_stream *s)
{
    if (!s->held)
        return;
    s->held = 0;
    h2_conn *c = s->c;
    h2_stream *prev = NULL;
    for (h2_stream **pp = &c->held; *pp != NULL; prev = *pp, pp = &(*pp)->held_next) {
        if (*pp == s) {
            *pp = s->held_next;
            if (c->held_tail == s)
                c->held_tail = prev;
            break;
        }
    }
}

void h2_stream_submit_held(h2_conn *c)
{
    h2_stream **pp = &c->held;
    h2_stream *prev = NULL;
    while (*pp != NULL) {
        h2_stream *s = *pp;
        /* A small file still being read (fileload.c): its HEADERS wait to
         * leave with its DATA. Submitted now, nghttp2 would send HEADERS
         * in this turn's write, ask for DATA, be deferred
         * (NGHTTP2_ERR_DEFERRED), and schedule the stream again once
         * resumed: ~700 instructions and a second write per turn's
         * responses. */
        if (!s->closed && s->queue != NULL && s->queue->loading) {
            prev = s;
            pp = &s->held_next;
            continue;
        }
        *pp = s->held_next;
        if (c->held_tail == s)
            c->held_tail = prev;
        s->held = 0;
        if (s->closed)
            continue;
        nghttp2_data_provider prd = {.source.ptr = s, .read_callback = h2_stream_read};
        if (nghttp2_submit_response(c->ng, s->id, s->head_nv, s->head_n,
                                    s->has_data ? &prd : NULL) != 0)
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    }
}

/* Trailers (RFC 9113 8.1) are copied: the core's views die with the call. */
static int keep_trailers(h2_stream *s, const keel_header *t, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += t[i].name.len + t[i].value.len;
    char *mem = malloc(bytes + n * sizeof(nghttp2_nv) + 1);
    if (mem == NULL)
        return KEEL_ERR_NOMEM;
    nghttp2_nv *nv = (nghttp2_nv *)(void *)mem;
    char *names = mem + n * sizeof(nghttp2_nv);
    long m = to_nv(t, n, nv, names, bytes, 0);
    if (m < 0) {
        free(mem);
        return KEEL_ERR_INVAL;
    }
    /* Values too: after the names. */
    char *values = names + names_len(t, n);
    for (long i = 0; i < m; i++) {
        memcpy(values, nv[i].value, nv[i].valuelen);
        nv[i].value = (uint8_t *)values;
        values += nv[i].valuelen;
    }
    free(s->trailer_mem);
    s->trailer_mem = mem;
    s->trailer_nv = nv;
    s->ntrailers = (size_t)m;
    return KEEL_OK;
}

static int sink_send_body(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                          const keel_header *trailers, size_t ntrailers, keel_write_cb cb, void *ud)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    if (!s->exchange || !s->final_sent || s->resp_ended)
        return KEEL_ERR_STATE;
    if (c->closing || s->closed || c->ng == NULL)
        return KEEL_ERR_CLOSED;
    size_t total = 0, nonempty = 0;
    for (size_t i = 0; i < nbufs; i++) {
        total += bufs[i].len;
        nonempty += bufs[i].len > 0;
    }
    int short_body = 0;
    if (s->has_data && s->resp_left >= 0) {
        if (total > (uint64_t)s->resp_left) {
            /* More than declared: the peer would count it against the
             * next... there is no next in HTTP/2, but a client must treat
             * the mismatch as malformed (RFC 9113 8.1.1). */
            s->resp_ended = 1;
            h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
            return KEEL_ERR_INVAL;
        }
        s->resp_left -= (int64_t)total;
        short_body = last && s->resp_left > 0;
    }
    if (last) {
        s->resp_ended = 1;
        if (ntrailers > 0 && s->has_data && keep_trailers(s, trailers, ntrailers) != KEEL_OK)
            ntrailers = 0;
    }
    h2_piece *p = h2_piece_new(c);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    *p = (h2_piece){.cb = cb, .ud = ud, .conn = c->conn, .w = c->w, .status = KEEL_OK, .fd = -1};
    p->bufs = p->inline_bufs;
    if (!s->has_data || total == 0) {
        /* Nothing to send (HEAD, 204, 304, an empty piece): released by
         * the next write, in order with what came before, never inside
         * this call (a streaming handler writes its next piece from it). */
        if (h2_out_hold(c, p) != KEEL_OK) {
            free(p);
            return KEEL_ERR_NOMEM;
        }
    } else {
        if (nonempty > 2 && (p->bufs = malloc(nonempty * sizeof *p->bufs)) == NULL) {
            free(p);
            return KEEL_ERR_NOMEM;
        }
        for (size_t i = 0; i < nbufs; i++)
            if (bufs[i].len > 0)
                p->bufs[p->nbufs++] = bufs[i];
        p->left = total;
        p->refs = 1; /* the queue's */
        if (s->queue == NULL)
            s->progress_ms = keel_worker_now_ms(c->w->worker); /* the stall clock starts */
        if (s->queue_tail != NULL)
            s->queue_tail->next = p;
        else
            s->queue = p;
        s->queue_tail = p;
        s->queued += total;
    }
    if (s->deferred && s->has_data) {
        s->deferred = 0;
        nghttp2_session_resume_data(c->ng, s->id);
    }
    if (short_body)
        h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR); /* only a reset can tell */
    h2_pump(c);
    return KEEL_OK;
}

/* A file body: HTTP/2 frames it, but a DATA frame is only a 9-byte header
 * before its payload, so the payload can still come from the file with
 * sendfile, one write per frame (as nginx does), instead of the core
 * reading it on the thread pool. The file piece is queued like a memory
 * piece and nghttp2 takes from it as the windows allow; cb runs once its
 * last byte has left. */
static int sink_send_file(void *exchange, int fd, uint64_t offset, uint64_t length, int last,
                          keel_write_cb cb, void *ud)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    if (!s->exchange || !s->final_sent || s->resp_ended)
        return KEEL_ERR_STATE;
    if (c->closing || s->closed || c->ng == NULL)
        return KEEL_ERR_CLOSED;
    if (s->has_data && s->resp_left >= 0 && length != (uint64_t)s->resp_left)
        return KEEL_ERR_UNSUPPORTED; /* not the whole declared body: the read loop copes */
    h2_piece *p = h2_piece_new(c);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    *p = (h2_piece){.cb = cb, .ud = ud, .conn = c->conn, .w = c->w, .status = KEEL_OK, .fd = -1};
    p->bufs = p->inline_bufs;
    if (last)
        s->resp_ended = 1;
    if (!s->has_data || length == 0) {
        /* HEAD, 204, 304: nothing to send; released by the next write. */
        if (h2_out_hold(c, p) != KEEL_OK) {
            free(p);
            return KEEL_ERR_NOMEM;
        }
    } else {
        if (s->resp_left >= 0)
            s->resp_left -= (int64_t)length;
        p->fd = fd;
        p->foff = offset;
        p->left = (size_t)length;
        p->refs = 1;
        if (s->queue == NULL)
            s->progress_ms = keel_worker_now_ms(c->w->worker);
        if (s->queue_tail != NULL)
            s->queue_tail->next = p;
        else
            s->queue = p;
        s->queue_tail = p;
        s->queued += length;
        s->nfiles++;
        /* Small: read with the others of this turn, then sent from memory. */
        if (length <= H2_LOAD_MAX && h2_load_supported() && h2_load_add(c, s, p) != KEEL_OK)
            return KEEL_ERR_NOMEM; /* queued: released with the stream */
    }
    if (s->deferred && s->has_data) {
        s->deferred = 0;
        nghttp2_session_resume_data(c->ng, s->id);
    }
    h2_pump(c);
    return KEEL_OK;
}

static void sink_want_body(void *exchange)
{
    h2_stream *s = exchange;
    if (!s->exchange || s->want_body)
        return;
    s->want_body = 1;
    s->progress_ms = keel_worker_now_ms(s->c->w->worker);
    h2_stream_pump_body(s);
}

static void sink_done(void *exchange, int keep_alive)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    (void)keep_alive; /* a wish to close came through keel_http_request_keep_alive */
    if (!s->exchange)
        return;
    s->exchange = 0;
    s->req = NULL;
    s->busy++; /* what follows may close the stream: free it only at the end */
    if (!s->closed && c->ng != NULL && !c->closing) {
        if (!s->final_sent) {
            h2_stream_answer(s, 500); /* the core gave up without an answer */
        } else if (!s->resp_ended) {
            h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR); /* cut short */
        } else if (!s->has_data) {
            /* HEADERS carried END_STREAM: nothing else to send. */
        }
    }
    h2_stream_drop_body(s);
    h2_pump(c);
    s->busy--;
    h2_stream_maybe_free(s);
}

const keel_http_sink h2_sink = {
    .size = sizeof(keel_http_sink),
    .send_head = sink_send_head,
    .send_body = sink_send_body,
    .want_body = sink_want_body,
    .done = sink_done,
    .send_file = sink_send_file,
    .upgrade = NULL, /* RFC 9113 8.6: no 101 in HTTP/2 */
};
