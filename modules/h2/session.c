/* session.c — the nghttp2 callbacks: what nghttp2 parsed goes to the
 * streams (stream.c) and the flood counters (limits.c); what it produces
 * goes to the batch (output.c).
 *
 * Every callback runs inside nghttp2_session_mem_recv or _send, called
 * only from h2.c with c->depth raised: a sink call that happens meanwhile
 * (a handler answering at once) only submits, and the output is produced
 * when the outer call returns (h2_pump).
 */
#include "h2.h"

#include <string.h>

/* The stream of id. Consecutive callbacks are mostly about one stream
 * (a HEADERS frame's fields, then the frame), so the last one found is
 * remembered: nghttp2_session_get_stream_user_data is a hash lookup, and
 * was called eight times per request (callgrind: ~300 instructions). */
static h2_stream *stream_of(h2_conn *c, int32_t id)
{
    if (c->hot != NULL && c->hot->id == id)
        return c->hot;
    h2_stream *s = id > 0 ? nghttp2_session_get_stream_user_data(c->ng, id) : NULL;
    if (s != NULL)
        c->hot = s;
    return s;
}

/* Output may stop here: the peer has not taken what is in flight (our
 * writes not yet completed), or the connection's queue holds that much
 * (keel_conn_write_queued: through a transport, or behind a file). It goes
 * on when a write completes (output.c) or the connection drains
 * (on_drain). */
static int output_full(h2_conn *c, size_t more)
{
    size_t pending = h2_out_pending(c);
    size_t queued = keel_conn_write_queued(c->conn);
    size_t held = c->inflight > queued ? c->inflight : queued;
    if (held + pending + more > H2_INFLIGHT_MAX && held + pending > 0) {
        c->blocked = 1;
        return 1;
    }
    return 0;
}

/* Control frames and frame headers: copied (nghttp2 reuses its buffer). */
static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t length, int flags, void *ud)
{
    (void)ng;
    (void)flags;
    h2_conn *c = ud;
    if (output_full(c, length))
        return NGHTTP2_ERR_WOULDBLOCK;
    if (h2_out_copy(c, data, length) != KEEL_OK)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (h2_out_pending(c) >= H2_BATCH_MAX)
        h2_out_flush(c);
    return (ssize_t)length;
}

/* A DATA frame whose payload is a response piece (NGHTTP2_DATA_FLAG_NO_COPY):
 * the 9-byte header is copied, the payload borrowed. */
static int on_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *source, void *ud)
{
    (void)ng;
    h2_conn *c = ud;
    h2_stream *s = source->ptr;
    if (output_full(c, length + 9))
        return NGHTTP2_ERR_WOULDBLOCK;
    if (s->queue != NULL && s->queue->fd >= 0 && frame->data.padlen == 0) {
        /* From a file: the header, then the file's bytes (sendfile on
         * plain TCP); h2_stream_read never spans a file piece's end. */
        if (h2_stream_take_file(s, framehd, length) != 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        s->progress_ms = keel_worker_now_ms(c->w->worker);
        return 0;
    }
    if (h2_out_copy(c, framehd, 9) != KEEL_OK)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    /* We never pad (no select_padding callback), but a pad length would
     * precede the payload and its zeros follow it (RFC 9113 6.1). */
    size_t pad = frame->data.padlen;
    if (pad > 0) {
        uint8_t n = (uint8_t)(pad - 1);
        if (h2_out_copy(c, &n, 1) != KEEL_OK)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (h2_stream_take(s, length) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (pad > 1) {
        static const uint8_t zeros[256];
        if (h2_out_copy(c, zeros, pad - 1) != KEEL_OK)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    if (h2_out_pending(c) >= H2_BATCH_MAX)
        h2_out_flush(c);
    return 0;
}

static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud)
{
    (void)ng;
    h2_conn *c = ud;
    if (c->calm)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return h2_limits_frame(c, hd);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    h2_conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_stream *s = h2_stream_new(c, frame->hd.stream_id);
    if (s == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, s);
    c->hot = s;
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                     nghttp2_rcbuf *value, uint8_t flags, void *ud)
{
    (void)ng;
    (void)flags;
    h2_conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    h2_stream *s = stream_of(c, frame->hd.stream_id);
    if (s == NULL)
        return 0;
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        return h2_stream_field(s, name, value);
    /* Trailer fields (RFC 9113 8.1) count against the same list size as
     * the head. */
    s->list_size += nghttp2_rcbuf_get_buf(name).len + nghttp2_rcbuf_get_buf(value).len + 32;
    if (s->list_size > (uint64_t)c->w->cfg->max_header_list * 16) {
        h2_calm(c, H2_FLOOD_HPACK);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    /* Trailer fields (RFC 9113 8.1; nghttp2 refused pseudo-fields in them
     * and a trailer HEADERS without END_STREAM): kept for the core while
     * the exchange is live. Over max_header_list, as the head, they are
     * not kept and the stream is answered 431 (reset if the response
     * began) at END_STREAM. */
    if (s->list_size > c->w->cfg->max_header_list) {
        s->too_large = 1;
        return 0;
    }
    if (!s->exchange || s->bad)
        return 0; /* answered without reading: nobody will see them */
    return h2_stream_trailer(s, name, value);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    (void)ng;
    h2_conn *c = ud;
    h2_stream *s = stream_of(c, frame->hd.stream_id);
    if (c->calm)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    int rv = h2_limits_frame_recv(c, frame, s);
    if (rv != 0)
        return rv;
    if (s == NULL)
        return 0;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
            /* h2_stream_headers_done may answer and close the stream, but
             * nghttp2 keeps it (and s) until this callback returns. */
            int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
            if (end)
                s->remote_ended = 1;
            h2_stream_headers_done(s);
            if (end)
                h2_stream_remote_end(s);
        } else if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            if (s->too_large && s->exchange)
                h2_stream_answer(s, 431); /* trailers over max_header_list */
            else
                h2_stream_remote_end(s); /* after trailers */
        }
        break;
    case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            h2_stream_remote_end(s);
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    h2_conn *c = ud;
    h2_stream *s = stream_of(c, id);
    if (s == NULL || s->bad || !s->exchange) {
        /* Nobody will read it: give the window back at once. */
        nghttp2_session_consume(ng, id, len);
        return 0;
    }
    (void)c;
    h2_stream_data(s, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s = stream_of(c, id);
    if (s != NULL) {
        nghttp2_session_set_stream_user_data(ng, id, NULL);
        c->hot = NULL; /* closed: nghttp2 would no longer find it */
        h2_stream_on_close(s, error_code);
    }
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    h2_conn *c = ud;
    const h2_metrics *m = &c->w->mod->m;
    switch (frame->hd.type) {
    case NGHTTP2_RST_STREAM:
        h2_count_code(c, m->rst_sent, frame->rst_stream.error_code);
        if (h2_limits_rst_sent(c) != 0)
            h2_calm(c, H2_FLOOD_RST_SENT);
        break;
    case NGHTTP2_GOAWAY:
        h2_count_code(c, m->goaway_sent, frame->goaway.error_code);
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            /* RFC 9113 8.1: a server that answered before the request
             * ended may ask the client to stop sending with RST_STREAM
             * NO_ERROR; its unread body would otherwise hold windows. */
            h2_stream *s = stream_of(c, frame->hd.stream_id);
            if (s != NULL && !s->remote_ended)
                nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                          NGHTTP2_NO_ERROR);
        }
        break;
    default:
        break;
    }
    return 0;
}

static int on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *frame, int lib_error,
                            void *ud)
{
    (void)ng;
    (void)frame;
    (void)lib_error;
    (void)ud;
    return 0;
}

/* Frames of unknown types (RFC 9113 5.5) are handed to us only so that
 * on_begin_frame counts them (limits.c); their payload is dropped. */
static int on_extension_chunk(nghttp2_session *ng, const nghttp2_frame_hd *hd, const uint8_t *data,
                              size_t len, void *ud)
{
    (void)ng, (void)hd, (void)data, (void)len, (void)ud;
    return 0;
}

static int on_unpack_extension(nghttp2_session *ng, void **payload, const nghttp2_frame_hd *hd,
                               void *ud)
{
    (void)ng, (void)payload, (void)hd, (void)ud;
    return NGHTTP2_ERR_CANCEL; /* ignored, as the RFC says */
}

void h2_option_extensions(nghttp2_option *option)
{
    /* Every type past the ones RFC 9113 defines (0x0 .. 0x9). */
    for (int type = 0x0a; type <= 0xff; type++)
        nghttp2_option_set_user_recv_extension_type(option, (uint8_t)type);
}

int h2_callbacks_new(nghttp2_session_callbacks **out)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return KEEL_ERR_NOMEM;
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback2(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
    nghttp2_session_callbacks_set_on_extension_chunk_recv_callback(cb, on_extension_chunk);
    nghttp2_session_callbacks_set_unpack_extension_callback(cb, on_unpack_extension);
    *out = cb;
    return KEEL_OK;
}
