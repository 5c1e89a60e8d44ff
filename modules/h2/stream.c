/* stream.c — one HTTP/2 stream as one exchange of the core's HTTP layer,
 * and the sink through which the core answers it.
 *
 * Request: the fields nghttp2 decodes stay in its reference-counted
 * buffers, which the stream holds until it is freed, so the head the core
 * sees is views without a copy. `:authority` stands for Host (RFC 9113
 * 8.3.1), split cookie fields are joined again (8.2.3).
 *
 * Request body: DATA arrives whether or not the handler has asked for it
 * (HTTP/2 cannot pause one stream but by its window). Until the handler
 * asks, it is held here, at most one stream window per stream because the
 * window is only given back (WINDOW_UPDATE, RFC 9113 6.9) as the core takes
 * the bytes: a slow handler holds back its own client only. The
 * connection's window is given back on arrival, so other streams go on,
 * unless the connection holds more than [h2] body_buffer of such bytes.
 *
 * Response: send_head submits HEADERS with a data provider; each body
 * piece is queued, borrowed, and nghttp2 takes from the queue as the
 * peer's windows allow (NGHTTP2_ERR_DEFERRED while it is empty). A piece
 * is released once the write that carried its last byte completed, which
 * is what paces a streaming handler or the core's file reader.
 */
#include "h2.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- life cycle ------------------------------------------------------------ */

static void unhold(h2_stream *s);

h2_stream *h2_stream_new(h2_conn *c, int32_t id)
{
    h2_worker *w = c->w;
    h2_stream *s = w->free_streams;
    if (s != NULL) {
        w->free_streams = s->next;
        w->nfree_streams--;
    } else if ((s = malloc(sizeof *s)) == NULL) {
        return NULL;
    }
    /* The inline arrays are written before they are read: not cleared. */
    memset(s, 0, offsetof(h2_stream, inline_fields));
    memset(&s->method, 0, sizeof *s - offsetof(h2_stream, method));
    s->c = c;
    s->id = id;
    s->fields = s->inline_fields;
    s->refs = s->inline_refs;
    s->cap = H2_INLINE_FIELDS;
    s->content_length = -1;
    s->resp_left = -1;
    s->progress_ms = keel_worker_now_ms(w->worker);
    c->nopen++;
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    h2_tick_start(c);
    return s;
}

static void release_queue(h2_stream *s, int status)
{
    h2_piece *p = s->queue;
    s->queue = s->queue_tail = NULL;
    s->queued = 0;
    s->nfiles = 0;
    while (p != NULL) {
        h2_piece *next = p->next;
        h2_piece_unref(p, status);
        p = next;
    }
}

/* Body bytes nobody will read: their windows go back. */
static void drop_body(h2_stream *s)
{
    h2_conn *c = s->c;
    if (s->body_len > 0 || s->conn_held > 0) {
        c->body_buffered -= s->body_len;
        if (s->conn_held > 0 && c->ng != NULL)
            nghttp2_session_consume_connection(c->ng, s->conn_held);
        s->conn_held = 0;
        s->body_len = 0;
    }
    free(s->body);
    s->body = NULL;
    s->body_cap = 0;
}

void h2_stream_maybe_free(h2_stream *s)
{
    if (!s->closed || s->exchange || s->busy > 0)
        return;
    h2_conn *c = s->c;
    if (c->hot == s)
        c->hot = NULL;
    unhold(s);
    release_queue(s, KEEL_ERR_CLOSED);
    drop_body(s);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    for (size_t i = 0; i < 2 * s->nfields; i++)
        nghttp2_rcbuf_decref(s->refs[i]);
    for (size_t i = 0; i < s->npseudo; i++)
        nghttp2_rcbuf_decref(s->pseudo_refs[i]);
    if (s->fields != s->inline_fields) {
        free(s->fields);
        free(s->refs);
    }
    for (size_t i = 0; i < 2 * s->ntr; i++)
        nghttp2_rcbuf_decref(s->tr_refs[i]);
    free(s->tr_fields);
    free(s->tr_refs);
    free(s->cookie);
    free(s->trailer_mem);
    free(s->head_heap);
    h2_worker *w = c->w;
    if (w->nfree_streams < H2_POOL_MAX) {
        s->next = w->free_streams;
        w->free_streams = s;
        w->nfree_streams++;
    } else {
        free(s);
    }
}

/* ---- the request head ------------------------------------------------------- */

static int grow_fields(h2_stream *s)
{
    size_t cap = s->cap * 2;
    keel_header *f = malloc(cap * sizeof *f);
    nghttp2_rcbuf **r = malloc(2 * cap * sizeof *r);
    if (f == NULL || r == NULL) {
        free(f);
        free(r);
        return -1;
    }
    memcpy(f, s->fields, s->nfields * sizeof *f);
    memcpy(r, s->refs, 2 * s->nfields * sizeof *r);
    if (s->fields != s->inline_fields) {
        free(s->fields);
        free(s->refs);
    }
    s->fields = f;
    s->refs = r;
    s->cap = cap;
    return 0;
}

static keel_str view(nghttp2_rcbuf *b)
{
    nghttp2_vec v = nghttp2_rcbuf_get_buf(b);
    return (keel_str){(const char *)v.base, v.len};
}

static int is(keel_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

#define IS(s, lit) ((s).len == sizeof(lit) - 1 && memcmp((s).ptr, lit, sizeof(lit) - 1) == 0)

int h2_stream_field(h2_stream *s, nghttp2_rcbuf *name, nghttp2_rcbuf *value)
{
    h2_conn *c = s->c;
    keel_str n = view(name), v = view(value);
    /* RFC 9113 6.5.2: the size of a field list is the sum of its fields'
     * names and values, 32 bytes more each. Beyond the limit nothing more
     * is kept (431 follows); far beyond it, the decoded list is out of all
     * proportion to what arrived: an HPACK bomb (RFC 7541 7.3), whose
     * answer is the connection's end. */
    s->list_size += n.len + v.len + 32;
    if (s->list_size > (uint64_t)c->w->cfg->max_header_list * 16) {
        h2_calm(c, H2_FLOOD_HPACK);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (s->list_size > c->w->cfg->max_header_list) {
        s->too_large = 1;
        return 0;
    }
    if (n.len > 0 && n.ptr[0] == ':') {
        /* nghttp2 checked them (RFC 9113 8.3.1: known, once, before the
         * regular fields); keep the four a request has. */
        keel_str *slot = IS(n, ":method")      ? &s->method
                         : IS(n, ":path")      ? &s->path
                         : IS(n, ":authority") ? &s->authority
                         : IS(n, ":scheme")    ? &s->scheme
                                               : NULL;
        if (slot != NULL && s->npseudo < 4) {
            nghttp2_rcbuf_incref(value);
            s->pseudo_refs[s->npseudo++] = value;
            *slot = v;
        }
        return 0;
    }
    if (s->nfields == s->cap && grow_fields(s) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_rcbuf_incref(name);
    nghttp2_rcbuf_incref(value);
    s->refs[2 * s->nfields] = name;
    s->refs[2 * s->nfields + 1] = value;
    s->fields[s->nfields++] = (keel_header){n, v};
    if (IS(n, "content-length")) {
        int64_t cl = 0;
        for (size_t i = 0; i < v.len && cl >= 0; i++)
            cl = v.ptr[i] >= '0' && v.ptr[i] <= '9' && cl < INT64_MAX / 10 - 10
                     ? cl * 10 + (v.ptr[i] - '0')
                     : -1;
        s->content_length = v.len > 0 ? cl : -1; /* nghttp2 refuses a bad one */
    }
    return 0;
}

/* RFC 9113 8.2.3: a client may split Cookie into one field per crumb; the
 * core (and HTTP/1 handlers) expect one, joined with "; ". */
static int join_cookies(h2_stream *s)
{
    size_t count = 0, total = 0, first = 0;
    for (size_t i = 0; i < s->nfields; i++) {
        if (is(s->fields[i].name, "cookie")) {
            if (count++ == 0)
                first = i;
            total += s->fields[i].value.len + 2;
        }
    }
    if (count < 2)
        return 0;
    char *joined = malloc(total);
    if (joined == NULL)
        return -1;
    size_t at = 0, out = 0;
    for (size_t i = 0; i < s->nfields; i++) {
        if (is(s->fields[i].name, "cookie")) {
            if (at > 0) {
                joined[at++] = ';';
                joined[at++] = ' ';
            }
            memcpy(joined + at, s->fields[i].value.ptr, s->fields[i].value.len);
            at += s->fields[i].value.len;
            if (i != first)
                continue; /* dropped from the list; its rcbufs stay held */
        }
        s->fields[out] = s->fields[i];
        out++;
    }
    s->fields[first].value = (keel_str){joined, at};
    /* The dropped fields' buffers are still referenced: keep the count of
     * references (2 * nfields) intact by leaving the array as it was and
     * only shortening the view handed to the core. */
    s->cookie = joined;
    s->head_nfields = out;
    return 0;
}

static void count_limit(h2_conn *c, enum h2_limit l)
{
    h2_count(c, c->w->mod->m.limit[l]);
}

int h2_stream_trailer(h2_stream *s, nghttp2_rcbuf *name, nghttp2_rcbuf *value)
{
    if (s->ntr == s->tr_cap) {
        size_t cap = s->tr_cap ? 2 * s->tr_cap : 8;
        keel_header *f = realloc(s->tr_fields, cap * sizeof *f);
        if (f == NULL)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        s->tr_fields = f;
        nghttp2_rcbuf **r = realloc(s->tr_refs, 2 * cap * sizeof *r);
        if (r == NULL)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        s->tr_refs = r;
        s->tr_cap = cap;
    }
    nghttp2_rcbuf_incref(name);
    nghttp2_rcbuf_incref(value);
    s->tr_refs[2 * s->ntr] = name;
    s->tr_refs[2 * s->ntr + 1] = value;
    s->tr_fields[s->ntr++] = (keel_header){view(name), view(value)};
    return 0;
}

void h2_stream_headers_done(h2_stream *s)
{
    h2_conn *c = s->c;
    const h2_config *cfg = c->w->cfg;
    if (s->too_large) {
        count_limit(c, H2_LIMIT_HEADER_LIST);
        h2_stream_answer(s, 431); /* RFC 9113 10.5.1 */
        return;
    }
    if (is(s->method, "CONNECT")) {
        /* RFC 9113 8.5: a tunnel, or RFC 8441's extended CONNECT; neither
         * is offered (SETTINGS_ENABLE_CONNECT_PROTOCOL is not sent). */
        h2_stream_answer(s, 501);
        return;
    }
    if (s->method.ptr == NULL || s->path.ptr == NULL) {
        h2_stream_reset(s, NGHTTP2_PROTOCOL_ERROR); /* 8.3.1; nghttp2 checks it first */
        return;
    }
    s->head_nfields = s->nfields;
    if (join_cookies(s) != 0) {
        h2_stream_answer(s, 500);
        return;
    }
    /* RFC 9113 8.3.1: :authority is the target's authority; a Host field,
     * if also present, must not differ, and the core and handlers look
     * for Host. */
    int has_host = 0;
    for (size_t i = 0; i < s->head_nfields; i++)
        if (is(s->fields[i].name, "host"))
            has_host = 1;
    if (!has_host && s->authority.ptr != NULL) {
        if (s->nfields == s->cap && grow_fields(s) != 0) {
            h2_stream_answer(s, 500);
            return;
        }
        /* Appended after the counted fields: it holds no rcbuf of its own
         * (the pseudo-field's reference keeps the bytes). */
        if (s->head_nfields < s->nfields) {
            /* cookies were joined: the tail of the array is unused */
            s->fields[s->head_nfields] = (keel_header){{"host", 4}, s->authority};
        } else {
            s->fields[s->nfields] = (keel_header){{"host", 4}, s->authority};
        }
        s->head_nfields++;
    }
    if (s->remote_ended)
        s->content_length = 0;
    else if (s->content_length < 0)
        s->content_length = -1;
    if (s->content_length > 0 && (uint64_t)s->content_length > cfg->max_body) {
        count_limit(c, H2_LIMIT_BODY);
        h2_stream_answer(s, 413);
        return;
    }
    s->head = (keel_http_head){
        .size = sizeof(keel_http_head),
        .method = s->method,
        .target = s->path,
        .version = 20,
        .headers = s->fields,
        .nheaders = s->head_nfields,
        .content_length = s->content_length,
    };
    c->nstreams++;
    h2_count(c, c->w->mod->m.streams);
    if (cfg->max_requests != 0 && c->nstreams >= cfg->max_requests) {
        /* RFC 9113 6.8: the last stream it will take, then the end. */
        count_limit(c, H2_LIMIT_REQUESTS);
        h2_goaway(c);
    }
    s->counted = 1;
    c->nactive++;
    keel_metric_add(c->w->worker, c->w->mod->m.open_streams, 1);
    s->req = keel_http_request_start(c->conn, &h2_sink, s, &s->head);
    if (s->req == NULL) {
        h2_stream_answer(s, 500);
        return;
    }
    s->exchange = 1;
    s->dispatching = 1;
    s->busy++;
    keel_http_request_dispatch(s->req);
    s->dispatching = 0;
    s->busy--;
    h2_stream_pump_body(s);
}

/* ---- the request body --------------------------------------------------------- */

void h2_stream_consumed(h2_stream *s, size_t n)
{
    nghttp2_session *ng = s->c->ng;
    if (n == 0 || ng == NULL)
        return;
    nghttp2_session_consume_stream(ng, s->id, n);
    size_t held = s->conn_held < n ? s->conn_held : n;
    if (held > 0) {
        nghttp2_session_consume_connection(ng, held);
        s->conn_held -= held;
    }
}

void h2_stream_pump_body(h2_stream *s)
{
    if (!s->exchange || !s->want_body || s->dispatching || s->body_ended)
        return;
    h2_conn *c = s->c;
    s->busy++;
    if (s->body_len > 0) {
        size_t n = s->body_len;
        /* The core copies (or consumes) the bytes during the call. */
        keel_http_request_body(s->req, s->body, n, 0);
        c->body_buffered -= n;
        s->body_len = 0;
        h2_stream_consumed(s, n);
        free(s->body); /* a stream that waited is rare: hold nothing */
        s->body = NULL;
        s->body_cap = 0;
    }
    if (s->exchange && s->remote_ended && !s->body_ended) {
        s->body_ended = 1;
        /* RFC 9113 8.1: the trailers came with END_STREAM, after the data;
         * the core copies them. Out of memory it may answer 500 and end
         * the exchange. */
        if (s->ntr > 0)
            keel_http_request_trailers(s->req, s->tr_fields, s->ntr);
        if (s->exchange)
            keel_http_request_body(s->req, NULL, 0, 1);
    }
    h2_pump(c); /* WINDOW_UPDATEs; may close the stream, which stays ours while busy */
    s->busy--;
    h2_stream_maybe_free(s);
}

void h2_stream_data(h2_stream *s, const uint8_t *data, size_t len)
{
    h2_conn *c = s->c;
    const h2_config *cfg = c->w->cfg;
    s->body_seen += len;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    if (s->body_seen > cfg->max_body) {
        nghttp2_session_consume(c->ng, s->id, len);
        count_limit(c, H2_LIMIT_BODY);
        h2_stream_answer(s, 413);
        return;
    }
    if (s->want_body && s->body_len == 0 && !s->dispatching) {
        /* The handler reads: straight through, window given back now. */
        keel_http_request_body(s->req, (const char *)data, len, 0);
        nghttp2_session_consume(c->ng, s->id, len);
        return;
    }
    if (s->body_len + len > s->body_cap) {
        size_t cap = s->body_cap ? s->body_cap : 4096;
        while (cap < s->body_len + len)
            cap *= 2;
        char *grown = realloc(s->body, cap);
        if (grown == NULL) {
            nghttp2_session_consume(c->ng, s->id, len);
            h2_stream_answer(s, 500);
            return;
        }
        s->body = grown;
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, data, len);
    s->body_len += len;
    c->body_buffered += len;
    /* The stream's window stays taken until the handler reads. The
     * connection's goes back now, so that other streams go on, unless the
     * connection already holds more unread bodies than body_buffer. */
    if (c->body_buffered > cfg->body_buffer)
        s->conn_held += len;
    else
        nghttp2_session_consume_connection(c->ng, len);
}

void h2_stream_remote_end(h2_stream *s)
{
    s->remote_ended = 1;
    h2_stream_pump_body(s);
}

/* ---- ending streams -------------------------------------------------------------- */

void h2_stream_on_close(h2_stream *s, uint32_t error_code)
{
    h2_conn *c = s->c;
    (void)error_code;
    s->closed = 1;
    c->nopen--;
    /* Releasing the queue calls the core, which may end the exchange
     * (sink done) from inside: the stream stays until the end of this. */
    s->busy++;
    if (s->counted) {
        s->counted = 0;
        c->nactive--;
        keel_metric_add(c->w->worker, c->w->mod->m.open_streams, -1);
    }
    drop_body(s);
    int complete = s->resp_ended && s->queue == NULL;
    release_queue(s, KEEL_ERR_CLOSED);
    if (s->exchange && !complete) {
        /* Reset, by the peer or by us: the core finishes the exchange
         * without the sink (RFC 9113 8.1: nothing more is sent). */
        keel_request *req = s->req;
        s->exchange = 0;
        s->req = NULL;
        keel_http_request_abort(req);
    }
    s->busy--;
    h2_stream_maybe_free(s);
}

void h2_stream_reset(h2_stream *s, uint32_t code)
{
    h2_conn *c = s->c;
    unhold(s); /* RST_STREAM instead */
    if (!s->closed && c->ng != NULL)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, code);
    h2_pump(c);
}

/* The fields every response carries besides the handler's: date and
 * server (RFC 9110 6.6.1, 10.2.4). */
static size_t common_fields(h2_stream *s, nghttp2_nv *nv)
{
    h2_worker *w = s->c->w;
    size_t n = 0, len;
    const char *date = h2_date(w, &len);
    nv[n++] = (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date, 4, len, NGHTTP2_NV_FLAG_NONE};
    if (w->cfg->server_len > 0)
        nv[n++] = (nghttp2_nv){(uint8_t *)"server", (uint8_t *)w->cfg->server, 6,
                               w->cfg->server_len, NGHTTP2_NV_FLAG_NONE};
    return n;
}

/* :status is always three digits (RFC 9113 8.3.2, RFC 9110 15). */
static void put_status(h2_stream *s, int status)
{
    unsigned v = status >= 100 && status <= 999 ? (unsigned)status : 500;
    s->status[0] = (char)('0' + v / 100);
    s->status[1] = (char)('0' + v / 10 % 10);
    s->status[2] = (char)('0' + v % 10);
    s->status[3] = '\0';
}

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
    drop_body(s);
    if (s->closed || c->ng == NULL)
        return;
    if (s->final_sent) {
        h2_stream_reset(s, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    s->final_sent = s->head_sent = s->resp_ended = 1;
    put_status(s, status);
    nghttp2_nv nv[4];
    nv[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)s->status, 7, 3, NGHTTP2_NV_FLAG_NONE};
    size_t n = 1 + common_fields(s, nv + 1);
    nv[n++] =
        (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)"0", 14, 1, NGHTTP2_NV_FLAG_NONE};
    if (nghttp2_submit_response(c->ng, s->id, nv, n, NULL) != 0)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    h2_pump(c);
}

/* ---- response pieces ---------------------------------------------------------------- */

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
    if (w != NULL && w->nfree_pieces < H2_POOL_MAX) {
        p->next = w->free_pieces;
        w->free_pieces = p;
        w->nfree_pieces++;
    } else {
        free(p);
    }
}

h2_piece *h2_piece_new(h2_conn *c)
{
    h2_worker *w = c->w;
    h2_piece *p = w->free_pieces;
    if (p != NULL) {
        w->free_pieces = p->next;
        w->nfree_pieces--;
    } else if ((p = malloc(sizeof *p)) == NULL) {
        return NULL;
    }
    return p;
}

void h2_piece_pool_free(h2_worker *w)
{
    while (w->free_pieces != NULL) {
        h2_piece *p = w->free_pieces;
        w->free_pieces = p->next;
        free(p);
    }
    w->nfree_pieces = 0;
}

ssize_t h2_stream_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)buf;
    (void)ud;
    h2_stream *s = src->ptr;
    size_t n = s->queued < length ? (size_t)s->queued : length;
    /* A DATA frame's payload comes from one file piece or from memory
     * pieces, never both (a file goes out with sendfile, memory with
     * writev): stop at the boundary. */
    if (s->nfiles > 0) {
        size_t mem = 0;
        for (h2_piece *p = s->queue; p != NULL; p = p->next) {
            if (p->fd >= 0) {
                if (p == s->queue)
                    mem = p->left;
                break;
            }
            mem += p->left;
        }
        if (n > mem)
            n = mem;
    }
    if (s->queue != NULL && s->queue->loading)
        n = 0; /* its bytes are still being read (fileload.c) */
    if (n == 0 && (s->queued > 0 || !s->resp_ended)) {
        s->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (s->resp_ended && n == s->queued) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        /* RFC 9113 8.1: trailers close the stream instead of this DATA. */
        if (s->ntrailers > 0 && nghttp2_submit_trailer(ng, id, s->trailer_nv, s->ntrailers) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

int h2_stream_take_file(h2_stream *s, const uint8_t *framehd, size_t length)
{
    h2_piece *p = s->queue;
    if (p == NULL || p->fd < 0 || length > p->left)
        return -1;
    if (h2_out_file(s->c, framehd, 9, p, length) != KEEL_OK)
        return -1;
    p->foff += length;
    p->left -= length;
    s->queued -= length;
    if (p->left == 0) {
        s->queue = p->next;
        if (s->queue == NULL)
            s->queue_tail = NULL;
        s->nfiles--;
        h2_piece_unref(p, KEEL_OK); /* the queue's reference */
    }
    return 0;
}

int h2_stream_take(h2_stream *s, size_t length)
{
    h2_conn *c = s->c;
    while (length > 0) {
        h2_piece *p = s->queue;
        if (p == NULL)
            return -1;
        const keel_buf *b = &p->bufs[p->idx];
        size_t k = b->len - p->off < length ? b->len - p->off : length;
        /* A few bytes are copied after their frame header instead of
         * borrowed: as an iovec of their own they cost the kernel more
         * than the copy (a small response was two iovecs of a 200-iovec
         * writev). The piece is still held until the write completes. */
        const char *at = (const char *)b->base + p->off;
        int rc = k <= H2_COPY_MAX ? h2_out_copy(c, at, k) : h2_out_borrow(c, at, k);
        if (rc != KEEL_OK || h2_out_hold(c, p) != KEEL_OK)
            return -1;
        p->off += k;
        p->left -= k;
        s->queued -= k;
        length -= k;
        if (p->off == b->len) {
            p->idx++;
            p->off = 0;
        }
        if (p->left == 0) {
            s->queue = p->next;
            if (s->queue == NULL)
                s->queue_tail = NULL;
            h2_piece_unref(p, KEEL_OK); /* the queue's reference */
        }
    }
    return 0;
}

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
        s->no_body = is(s->method, "HEAD") || status == 204 || status == 304;
        s->resp_left = s->no_body ? 0 : content_length;
    }
    put_status(s, status);

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
static void unhold(h2_stream *s)
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
    drop_body(s);
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
