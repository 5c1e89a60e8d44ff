/* sink.c — the sink through which the core answers a stream (send_head,
 * send_body, send_file, send_pieces, want_body, done; upgrade is
 * tunnel.c's): response heads encoded at once and held until their body
 * can follow (send.c), trailers, the body queued as pieces (queue.c).
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

/* The most encode_fields writes for h[0..n). */
static size_t fields_max(const keel_header *h, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += H2_HPACK_LITERAL_MAX(h[i].name.len, h[i].value.len);
    return total;
}

/* The fields as HPACK literals without indexing (hpack.h), names
 * lowercased (RFC 9113 8.2.1), connection-specific ones left out (8.2.2). */
static size_t encode_fields(uint8_t *out, const keel_header *h, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nlen = h[i].name.len;
        if (nlen == 0 || dropped(h[i].name))
            continue;
        /* Lowercased once, where a literal name goes (6.2.2: 0x00, the
         * length, the name); if the static table has it, the index takes
         * its place. */
        size_t name_at = at + 1 + h2_hpack_int(out + at + 1, 0x00, 7, nlen);
        char *name = (char *)out + name_at;
        lower_copy(name, h[i].name.ptr, nlen);
        unsigned index = nlen <= 27 ? h2_hpack_static_name(name, nlen) : 0;
        if (index > 0) {
            at += h2_hpack_literal(out + at, index, NULL, 0, h[i].value.ptr, h[i].value.len);
            continue;
        }
        out[at] = 0x00;
        at = name_at + nlen;
        at += h2_hpack_int(out + at, 0x00, 7, h[i].value.len);
        memcpy(out + at, h[i].value.ptr, h[i].value.len);
        at += h[i].value.len;
    }
    return at;
}

/* RFC 7541 Appendix A: the static table's indexes of the names every
 * response carries. */
enum { SI_CONTENT_LENGTH = 28, SI_DATE = 33, SI_SERVER = 54 };

uint8_t *h2_encode_head(h2_stream *s, int status, const keel_header *h, size_t n,
                        int64_t content_length, uint8_t *out, size_t cap, size_t *len)
{
    h2_worker *w = s->c->w;
    const h2_config *cfg = w->cfg;
    size_t date_len;
    const char *date = h2_date(w, &date_len);
    status = status >= 100 && status <= 999 ? status : 500;
    if (out == NULL) {
        /* The same head as the connection's last: its block as it is. */
        size_t cached_len;
        const uint8_t *cached =
            h2_headcache_find(s->c, status, h, n, content_length, w->date.sec, &cached_len);
        if (cached != NULL) {
            uint8_t *block = s->head_inline;
            if (cached_len > sizeof s->head_inline) {
                free(s->head_heap);
                if ((block = s->head_heap = malloc(cached_len)) == NULL)
                    return NULL;
            }
            memcpy(block, cached, cached_len);
            s->head_block = block;
            s->head_len = *len = cached_len;
            return block;
        }
    }
    size_t want = 16 + H2_HPACK_LITERAL_MAX(0, date_len) +
                  H2_HPACK_LITERAL_MAX(0, cfg->server_len) + H2_HPACK_LITERAL_MAX(0, 20) +
                  fields_max(h, n);
    uint8_t *block;
    if (out != NULL) {
        block = want <= cap ? out : malloc(want);
    } else if (want <= sizeof s->head_inline) {
        block = s->head_inline;
    } else {
        free(s->head_heap);
        block = s->head_heap = malloc(want);
    }
    if (block == NULL)
        return NULL;
    size_t at = h2_hpack_status(block, status);
    /* RFC 9110 6.6.1, 10.2.4: date and server on every response. */
    at += h2_hpack_literal(block + at, SI_DATE, NULL, 0, date, date_len);
    if (cfg->server_len > 0)
        at += h2_hpack_literal(block + at, SI_SERVER, NULL, 0, cfg->server, cfg->server_len);
    if (content_length >= 0 && status >= 200 && status != 204 && status != 304) {
        char digits[20];
        size_t k = u64_dec(digits, (uint64_t)content_length);
        at += h2_hpack_literal(block + at, SI_CONTENT_LENGTH, NULL, 0, digits, k);
    }
    at += encode_fields(block + at, h, n);
    *len = at;
    if (out == NULL) {
        s->head_block = block;
        s->head_len = at;
        h2_headcache_store(s->c, status, h, n, content_length, w->date.sec, block, at);
    }
    return block;
}

static int sink_send_head(void *exchange, int status, const keel_header *headers, size_t nheaders,
                          int64_t content_length)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    if (!s->exchange || s->final_sent)
        return KEEL_ERR_STATE;
    if (c->closing || s->closed)
        return KEEL_ERR_CLOSED;
    if (status == 101 || status < 100 || status > 999)
        return KEEL_ERR_INVAL;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    size_t len;
    if (status < 200) {
        /* 1xx (RFC 9113 8.1): HEADERS without END_STREAM, at once, any
         * number of them before the final head. */
        uint8_t stack[2048];
        uint8_t *block =
            h2_encode_head(s, status, headers, nheaders, -1, stack, sizeof stack, &len);
        if (block == NULL)
            return KEEL_ERR_NOMEM;
        h2_send_headers(c, (uint32_t)s->id, block, len, 0);
        if (block != stack)
            free(block);
        s->head_sent = 1;
        h2_pump(c);
        return KEEL_OK;
    }
    /* The core's wish to end the connection: HTTP/2 finishes this stream
     * and says GOAWAY (RFC 9113 6.8), other streams finish. */
    if (!keel_http_request_keep_alive(s->req))
        h2_goaway(c);
    /* RFC 9110 9.3.2, 15.3.5, 15.4.5: HEAD, 204 and 304 carry no body. */
    s->no_body = h2_str_is(s->method, "HEAD") || status == 204 || status == 304;
    s->resp_left = s->no_body ? 0 : content_length;
    if (h2_encode_head(s, status, headers, nheaders, content_length, NULL, 0, &len) == NULL)
        return KEEL_ERR_NOMEM;
    /* Sent by h2_pump, once the body's first bytes are there. */
    s->head_sent = 1;
    s->final_sent = 1;
    s->has_data = !s->no_body && content_length != 0;
    h2_stream_hold(s);
    h2_pump(c);
    return KEEL_OK;
}

/* Trailers (RFC 9113 8.1) are encoded now: the core's views die with the
 * call. */
static int keep_trailers(h2_stream *s, const keel_header *t, size_t n)
{
    uint8_t *block = malloc(fields_max(t, n) + 1);
    if (block == NULL)
        return KEEL_ERR_NOMEM;
    size_t len = encode_fields(block, t, n);
    free(s->trailer_block);
    s->trailer_block = block;
    s->trailer_len = len;
    return KEEL_OK;
}

/* Whether the core may hand over (more of) s's response body now. */
static int body_state(const h2_stream *s)
{
    if (!s->exchange || !s->final_sent || s->resp_ended)
        return KEEL_ERR_STATE;
    if (s->c->closing || s->closed)
        return KEEL_ERR_CLOSED;
    return KEEL_OK;
}

/* body_state for send_file and send_pieces, which take the whole declared
 * body (`total` bytes) or nothing: KEEL_ERR_UNSUPPORTED otherwise, and the
 * core hands the body over piece by piece (its read loop copes). */
static int whole_body_state(const h2_stream *s, uint64_t total)
{
    int rc = body_state(s);
    if (rc == KEEL_OK && s->has_data && s->resp_left >= 0 && total != (uint64_t)s->resp_left)
        rc = KEEL_ERR_UNSUPPORTED;
    return rc;
}

static int sink_send_body(void *exchange, const keel_buf *bufs, size_t nbufs, int last,
                          const keel_header *trailers, size_t ntrailers, keel_write_cb cb, void *ud)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    int rc = body_state(s);
    if (rc != KEEL_OK)
        return rc;
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
            h2_stream_reset(s, H2_INTERNAL_ERROR);
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
    h2_piece *p = h2_piece_new(c, cb, ud);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
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
        h2_stream_queue(s, p, total);
    }
    h2_ready(s);
    if (short_body)
        h2_stream_reset(s, H2_INTERNAL_ERROR); /* only a reset can tell */
    h2_pump(c);
    return KEEL_OK;
}

/* Queues the file piece p (its callback set) of length bytes of fd from
 * offset; `ahead`: bytes the same call queued before it. A small one is
 * read with the others of this turn, then sent from memory, if the peer's
 * windows let it all go now (and what is ahead of it) and this turn's
 * reads stay under the in-flight bound. Otherwise it goes frame by frame
 * from the file as the windows open, holding no copy: a client that keeps
 * its windows shut must not make us read files into memory for it (a
 * hundred streams of 64 KiB each per connection). */
static inline void queue_file(h2_stream *s, h2_piece *p, int fd, uint64_t offset, uint64_t length,
                              uint64_t ahead)
{
    h2_conn *c = s->c;
    p->fd = fd;
    p->foff = offset;
    h2_stream_queue(s, p, (size_t)length);
    s->nfiles++;
    int64_t win = s->send_window < c->send_window ? s->send_window : c->send_window;
    if (length <= H2_LOAD_MAX && h2_load_supported() && (int64_t)(ahead + length) <= win &&
        c->pending_bytes + length <= H2_INFLIGHT_MAX)
        (void)h2_load_add(c, s, p); /* out of memory: frame by frame instead */
}

/* A body with nothing to send (HEAD, 204, 304, empty): cb is released by
 * the next write, in order with what came before, never inside the call
 * (a streaming handler writes its next piece from it). */
static int hold_empty(h2_conn *c, keel_write_cb cb, void *ud)
{
    h2_piece *p = h2_piece_new(c, cb, ud);
    if (p == NULL)
        return KEEL_ERR_NOMEM;
    if (h2_out_hold(c, p) != KEEL_OK) {
        free(p);
        return KEEL_ERR_NOMEM;
    }
    return KEEL_OK;
}

/* A file body: HTTP/2 frames it, but a DATA frame is only a 9-byte header
 * before its payload, so the payload can still come from the file with
 * sendfile, one write per frame (as nginx does), instead of the core
 * reading it on the thread pool. The file piece is queued like a memory
 * piece and send.c takes from it as the windows allow; cb runs once its
 * last byte has left. */
static int sink_send_file(void *exchange, int fd, uint64_t offset, uint64_t length, int last,
                          keel_write_cb cb, void *ud)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    int rc = whole_body_state(s, length);
    if (rc != KEEL_OK)
        return rc;
    if (!s->has_data || length == 0) {
        rc = hold_empty(c, cb, ud);
        if (rc != KEEL_OK)
            return rc;
        if (last)
            s->resp_ended = 1;
    } else {
        h2_piece *p = h2_piece_new(c, cb, ud);
        if (p == NULL)
            return KEEL_ERR_NOMEM;
        if (last)
            s->resp_ended = 1;
        if (s->resp_left >= 0)
            s->resp_left -= (int64_t)length;
        queue_file(s, p, fd, offset, length, 0);
    }
    h2_ready(s);
    h2_pump(c);
    return KEEL_OK;
}

/* One callback for the pieces of one send_pieces call: it runs once the
 * last of them is released (the bytes of each are borrowed until then),
 * with the worst status any of them saw. */
typedef struct piece_group {
    keel_write_cb cb;
    void *ud;
    size_t refs;
    int status;
} piece_group;

static void group_piece_done(keel_conn *conn, int status, void *ud)
{
    piece_group *g = ud;
    if (status != KEEL_OK && g->status == KEEL_OK)
        g->status = status;
    if (--g->refs > 0)
        return;
    keel_write_cb cb = g->cb;
    void *cb_ud = g->ud;
    status = g->status;
    free(g);
    if (cb != NULL)
        cb(conn, status, cb_ud);
}

/* A body of pieces (ABI 1.8: static's multipart parts, say): bytes and
 * file ranges queued in order as the stream's pieces, so that the ranges
 * go as send_file's do (sendfile frame by frame, or read with the turn's
 * small files) instead of the core reading them. Only a whole declared
 * body; anything else the core hands over one by one. */
static int sink_send_pieces(void *exchange, const keel_piece *pieces, size_t npieces, int last,
                            keel_write_cb cb, void *ud)
{
    h2_stream *s = exchange;
    h2_conn *c = s->c;
    uint64_t total = 0;
    size_t n = 0;
    for (size_t i = 0; i < npieces; i++) {
        total += pieces[i].len;
        n += pieces[i].len > 0;
    }
    int rc = whole_body_state(s, total);
    if (rc != KEEL_OK)
        return rc;
    if (!last)
        return KEEL_ERR_UNSUPPORTED; /* nothing done: the core sends them one by one */
    if (!s->has_data || n == 0) {
        rc = hold_empty(c, cb, ud);
        if (rc != KEEL_OK)
            return rc;
        s->resp_ended = 1;
        h2_pump(c);
        return KEEL_OK;
    }
    /* Everything allocated first: a refusal must leave nothing queued. */
    piece_group *g = malloc(sizeof *g);
    h2_piece *first = NULL, **link = &first;
    size_t made = 0;
    while (g != NULL && made < n) {
        h2_piece *p = h2_piece_new(c, group_piece_done, g);
        if (p == NULL)
            break;
        *link = p;
        link = &p->next;
        made++;
    }
    if (made < n) {
        while (first != NULL) {
            h2_piece *next = first->next;
            free(first);
            first = next;
        }
        free(g);
        return KEEL_ERR_NOMEM;
    }
    *g = (piece_group){.cb = cb, .ud = ud, .refs = n, .status = KEEL_OK};
    s->resp_ended = 1;
    if (s->resp_left >= 0)
        s->resp_left -= (int64_t)total;
    uint64_t ahead = 0;
    h2_piece *p = first;
    for (size_t i = 0; i < npieces; i++) {
        const keel_piece *kp = &pieces[i];
        if (kp->len == 0)
            continue;
        h2_piece *next = p->next;
        if (kp->kind == KEEL_PIECE_FILE) {
            queue_file(s, p, kp->fd, kp->offset, kp->len, ahead);
        } else {
            p->bufs[0] = (keel_buf){kp->base, (size_t)kp->len};
            p->nbufs = 1;
            h2_stream_queue(s, p, (size_t)kp->len);
        }
        ahead += kp->len;
        p = next;
    }
    h2_ready(s);
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
    s->body_start_ms = s->progress_ms | 1; /* body_min_rate's clock; never 0 */
    h2_stream_pump_body(s);
}

/* keel_request_body_pause: the stream's DATA is held (h2_stream_data)
 * and its window with it, so the client sends at most that window more
 * (RFC 9113 5.2: flow control keeps the streams of a connection from
 * blocking each other); the connection's window goes back as for a body
 * not asked for yet. The time the handler holds the body is not the
 * client's: stream_timeout and body_min_rate do not count it (h2.c). */
static int sink_body_pause(void *exchange, int paused)
{
    h2_stream *s = exchange;
    if (!s->exchange)
        return KEEL_ERR_STATE;
    uint64_t now = keel_worker_now_ms(s->c->w->worker);
    if (paused) {
        if (!s->body_paused) {
            s->body_paused = 1;
            s->paused_ms = now;
        }
        return KEEL_OK;
    }
    if (!s->body_paused)
        return KEEL_OK;
    s->body_paused = 0;
    if (s->body_start_ms != 0)
        s->body_start_ms += now - s->paused_ms;
    s->progress_ms = now;
    /* From the loop (the core's promise): what was held goes now, and
     * the window with it. */
    h2_stream_pump_body(s);
    return KEEL_OK;
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
    if (!s->closed && !c->closing) {
        if (!s->final_sent) {
            h2_stream_answer(s, 500); /* the core gave up without an answer */
        } else if (!s->resp_ended) {
            h2_stream_reset(s, H2_INTERNAL_ERROR); /* cut short */
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
    .upgrade = h2_tunnel_upgrade, /* RFC 8441 extended CONNECT only (8.6: no 101) */
    .body_pause = sink_body_pause,
    .send_pieces = sink_send_pieces,
    /* every head was checked against the core's grammars (keel_http_valid) */
    .flags = KEEL_HTTP_SINK_CHECKED,
};

/* ---- the module's own answers ---------------------------------------------------- */

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
