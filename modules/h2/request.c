/* request.c — a stream's request: head, trailers and body.
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
 */
#include "h2.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
        if (h2_str_is(s->fields[i].name, "cookie")) {
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
        if (h2_str_is(s->fields[i].name, "cookie")) {
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
    if (h2_str_is(s->method, "CONNECT")) {
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
        if (h2_str_is(s->fields[i].name, "host"))
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
