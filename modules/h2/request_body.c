/* request_body.c — a stream's request body.
 *
 * DATA arrives whether or not the handler has asked for it (HTTP/2 cannot
 * pause one stream but by its window). Until the handler asks, and while
 * it has paused its body (keel_request_body_pause: a proxy whose upstream
 * does not keep up), it is held here, at most one stream window per
 * stream because the window is only given back (WINDOW_UPDATE, RFC 9113
 * 6.9) as the core takes the bytes: a slow handler holds back its own
 * client only. The connection's window is given back on arrival, so other
 * streams go on, unless the connection holds more than [h2] body_buffer of
 * such bytes.
 */
#include "h2.h"

#include <stdlib.h>
#include <string.h>

void h2_stream_pump_body(h2_stream *s)
{
    if (!s->exchange || !s->want_body || s->dispatching || s->body_ended || s->body_paused ||
        s->ext_connect)
        return;
    h2_conn *c = s->c;
    s->busy++;
    if (s->body_len > 0) {
        size_t n = s->body_len;
        /* The core copies (or consumes) the bytes during the call. */
        keel_http_request_body(s->req, s->body, n, 0);
        s->body_len = 0;
        h2_window_read(s, n);
        free(s->body); /* a stream that waited is rare: hold nothing */
        s->body = NULL;
        s->body_cap = 0;
    }
    /* The handler may have paused inside the call: the end waits too. */
    if (s->exchange && s->remote_ended && !s->body_ended && !s->body_paused) {
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

/* Body bytes for the handler: straight through if it reads, else held. */
static void body_data(h2_stream *s, const uint8_t *data, size_t len)
{
    h2_conn *c = s->c;
    const h2_config *cfg = c->w->cfg;
    s->body_seen += len;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    if (s->content_length >= 0 && s->body_seen > (uint64_t)s->content_length) {
        h2_window_back(s, len);
        h2_stream_malformed(s); /* 8.1.1: more than declared */
        return;
    }
    if (s->body_seen > cfg->max_body) {
        h2_window_back(s, len);
        h2_count(c, c->w->mod->m.limit[H2_LIMIT_BODY]);
        h2_stream_answer(s, 413);
        return;
    }
    if (s->want_body && s->body_len == 0 && !s->dispatching && !s->body_paused) {
        /* The handler reads: straight through, window given back now. */
        keel_http_request_body(s->req, (const char *)data, len, 0);
        h2_window_back(s, len);
        return;
    }
    h2_stream_hold_data(s, data, len);
}

void h2_stream_hold_data(h2_stream *s, const uint8_t *data, size_t len)
{
    if (s->body_len + len > s->body_cap) {
        size_t cap = s->body_cap ? s->body_cap : 4096;
        while (cap < s->body_len + len)
            cap *= 2;
        char *grown = realloc(s->body, cap);
        if (grown == NULL) {
            h2_window_back(s, len);
            h2_stream_answer(s, 500);
            return;
        }
        s->body = grown;
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, data, len);
    s->body_len += len;
    h2_window_hold(s, len);
}

/* Request body bytes nobody will read (the exchange ended, or the module
 * answered): their windows go back, and they still count toward the
 * declared content-length (8.1.1). */
static void data_unread(h2_stream *s, size_t len)
{
    h2_window_unread(s, len);
    /* RFC 9113 8.1.1: the DATA is the content whose length content-length
     * declared whether or not anyone reads it: a body the handler did not
     * read (a 404, a 405 answered at once) must not look short at its end,
     * or a valid request's complete answer would give way to a reset. The
     * module's own refusals (bad) are not checked further. */
    s->body_seen += len;
    if (!s->bad && !s->rst_after && s->content_length >= 0 &&
        s->body_seen > (uint64_t)s->content_length)
        h2_stream_malformed(s);
}

void h2_stream_data(h2_stream *s, const uint8_t *data, size_t len)
{
    if (s->tunnel != NULL)
        h2_tunnel_data(s, data, len); /* RFC 8441: the protocol's bytes */
    else if (s->bad || !s->exchange || s->rst_after)
        data_unread(s, len); /* nobody reads it, but it counts (8.1.1) */
    else if (s->ext_connect)
        h2_tunnel_data(s, data, len); /* kept for the protocol the handler may switch to */
    else
        body_data(s, data, len);
}

void h2_stream_remote_end(h2_stream *s)
{
    s->remote_ended = 1;
    if (s->tunnel != NULL)
        h2_tunnel_remote_end(s);
    if (s->content_length >= 0 && s->body_seen != (uint64_t)s->content_length && !s->bad &&
        !s->rst_after) {
        h2_stream_malformed(s); /* 8.1.1: less than declared */
        return;
    }
    if (s->local_ended) {
        h2_stream_close(s, H2_NO_ERROR, 0); /* the response went first */
        return;
    }
    h2_stream_pump_body(s);
}
