/* send.c — the frames the server writes (RFC 9113 6), straight into the
 * connection's batch (output.c), and the DATA scheduler: which stream's
 * body goes next as the peer's windows (6.9) and our output allow.
 *
 * Streams with body bytes that may go wait on c->ready, in the order they
 * became ready; each turn gives a stream one frame and puts it back at the
 * tail, so a large body does not hold back the small ones behind it
 * (round robin, as RFC 9218's default of equal urgency asks).
 */
#include "h2.h"

#include <string.h>

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

/* Answers to the peer's frames (ACKs, resets, window updates) piling up
 * unread past four times the in-flight limit: a peer that sends and never
 * reads (the outbound side of CVE-2019-9512/9515). */
static void check_outbound(h2_conn *c)
{
    size_t queued = keel_conn_write_queued(c->conn);
    if (!c->calm && h2_out_pending(c) + c->inflight + queued > 4 * (size_t)H2_INFLIGHT_MAX)
        h2_calm(c, H2_FLOOD_OUTBOUND);
}

/* Room for a frame of len bytes in the batch, or NULL: the connection
 * is closing, or out of memory (then the stream of bytes is broken and
 * the connection ends). */
static uint8_t *frame_room(h2_conn *c, size_t len)
{
    uint8_t *p = h2_out_room(c, len);
    if (p == NULL) {
        keel_conn_abort(c->conn);
        c->closing = 1;
    }
    return p;
}

/* A control frame the codec encoded: copied into the batch (unless the
 * connection is closing), then answers piling up are checked. */
static void send_control(h2_conn *c, const uint8_t *frame, size_t len)
{
    if (c->closing)
        return;
    uint8_t *f = frame_room(c, len);
    if (f == NULL)
        return;
    memcpy(f, frame, len);
    check_outbound(c);
}

void h2_send_preface(h2_conn *c)
{
    const h2_config *cfg = c->w->cfg;
    /* RFC 9113 3.4: the server's preface is a SETTINGS frame, which may go
     * before the client's arrives. These are the limits we enforce. */
    const h2_setting_value set[] = {
        {H2_SET_MAX_CONCURRENT_STREAMS, cfg->max_concurrent_streams},
        {H2_SET_INITIAL_WINDOW_SIZE, cfg->initial_window},
        {H2_SET_MAX_FRAME_SIZE, cfg->max_frame_size},
        {H2_SET_HEADER_TABLE_SIZE, cfg->header_table_size},
        {H2_SET_MAX_HEADER_LIST_SIZE, cfg->max_header_list},
        /* RFC 9218 2.1: the RFC 7540 priority tree is not used (RFC 9113
         * 5.3.2 deprecated it); it is what priority churn attacked. */
        {H2_SET_NO_RFC7540_PRIORITIES, 1},
        /* RFC 8441 3: extended CONNECT (tunnel.c); last, so that it can be
         * left out. */
        {H2_SET_ENABLE_CONNECT_PROTOCOL, 1},
    };
    size_t n = sizeof set / sizeof set[0] - !cfg->enable_connect_protocol;
    uint8_t f[H2_SETTINGS_FRAME(sizeof set / sizeof set[0])];
    send_control(c, f, h2_encode_settings(f, set, n));
}

void h2_send_settings_ack(h2_conn *c)
{
    uint8_t f[H2_FRAME_HD];
    send_control(c, f, h2_encode_settings_ack(f));
}

void h2_send_ping_ack(h2_conn *c, const uint8_t opaque[8])
{
    uint8_t f[H2_PING_FRAME];
    send_control(c, f, h2_encode_ping(f, H2_FLAG_ACK, opaque));
}

void h2_send_rst(h2_conn *c, uint32_t sid, uint32_t code)
{
    uint8_t f[H2_RST_STREAM_FRAME];
    send_control(c, f, h2_encode_rst_stream(f, sid, code));
    h2_count_code(c, c->w->mod->m.rst_sent, code);
    if (code != H2_NO_ERROR && h2_limits_rst_sent(c) != 0)
        h2_calm(c, H2_FLOOD_RST_SENT);
}

void h2_send_goaway(h2_conn *c, uint32_t code)
{
    /* 6.8: the last stream id we may have acted on; streams up to it
     * finish, later ones the client retries elsewhere. A later GOAWAY
     * (an error after a graceful one) must not name a higher id. */
    int32_t last = c->last_sid;
    if (c->goaway_sent && c->goaway_sid < last)
        last = c->goaway_sid;
    c->goaway_sent = 1;
    c->goaway_sid = last;
    uint8_t f[H2_GOAWAY_FRAME];
    send_control(c, f, h2_encode_goaway(f, last, code));
    h2_count_code(c, c->w->mod->m.goaway_sent, code);
}

void h2_send_window_update(h2_conn *c, uint32_t sid, uint32_t inc)
{
    uint8_t f[H2_WINDOW_UPDATE_FRAME];
    send_control(c, f, h2_encode_window_update(f, sid, inc));
}

void h2_send_headers(h2_conn *c, uint32_t sid, const uint8_t *block, size_t len, int end_stream)
{
    /* RFC 7541 4.2: after the peer changed SETTINGS_HEADER_TABLE_SIZE, our
     * next block says our table's size; ours is always 0 (hpack.h). */
    static const uint8_t size_update_zero = 0x20;
    size_t pre = c->enc_update ? 1 : 0;
    c->enc_update = 0;
    size_t max = c->peer_max_frame;
    uint8_t *f = frame_room(c, h2_headers_size(pre + len, max));
    if (f != NULL)
        h2_encode_headers(f, sid, end_stream, &size_update_zero, pre, block, len, max);
}

/* ---- DATA ---------------------------------------------------------------------- */

void h2_ready(h2_stream *s)
{
    if (s->ready || s->closed || s->held || !s->final_sent || !s->has_data || s->reset_pending ||
        s->local_ended)
        return;
    h2_conn *c = s->c;
    s->ready = 1;
    s->ready_next = NULL;
    if (c->ready_tail != NULL)
        c->ready_tail->ready_next = s;
    else
        c->ready = s;
    c->ready_tail = s;
}

static h2_stream *ready_pop(h2_conn *c)
{
    h2_stream *s = c->ready;
    c->ready = s->ready_next;
    if (c->ready == NULL)
        c->ready_tail = NULL;
    s->ready = 0;
    return s;
}

static void ready_push_front(h2_conn *c, h2_stream *s)
{
    s->ready = 1;
    s->ready_next = c->ready;
    c->ready = s;
    if (c->ready_tail == NULL)
        c->ready_tail = s;
}

/* One DATA frame of s, or nothing. 1 if output stopped (blocked). */
static int send_one(h2_conn *c, h2_stream *s)
{
    size_t n = h2_stream_sendable(s);
    int all = s->resp_ended && n == s->queued;
    if (n == 0 && !all)
        return 0; /* waits for the body (sink.c) or a file being read */
    int64_t win = s->send_window < c->send_window ? s->send_window : c->send_window;
    if (n > 0 && win <= 0)
        return 0; /* waits for WINDOW_UPDATE, which makes it ready again */
    size_t k = n;
    if (k > 0 && (uint64_t)k > (uint64_t)win)
        k = (size_t)win;
    if (k > c->peer_max_frame)
        k = c->peer_max_frame;
    if (output_full(c, k + H2_FRAME_HD)) {
        ready_push_front(c, s);
        return 1;
    }
    int end = all && k == n;
    int trailers = end && s->trailer_block != NULL;
    uint8_t hd[H2_FRAME_HD];
    h2_put_hd(hd, k, H2_DATA, end && !trailers ? H2_FLAG_END_STREAM : 0, (uint32_t)s->id);
    int rc = 0;
    if (k > 0 && s->queue->fd >= 0) {
        /* From a file: the header, then the file's bytes (sendfile on
         * plain TCP); h2_stream_sendable never spans a file piece's end. */
        rc = h2_stream_take_file(s, hd, k);
    } else if (k > 0 || !trailers) {
        rc = h2_out_copy(c, hd, sizeof hd) != KEEL_OK ? -1 : h2_stream_take(s, k);
    }
    if (rc != 0) {
        keel_conn_abort(c->conn);
        c->closing = 1;
        return 1;
    }
    s->send_window -= (int64_t)k;
    c->send_window -= (int64_t)k;
    s->progress_ms = keel_worker_now_ms(c->w->worker);
    if (end) {
        if (trailers) /* RFC 9113 8.1: trailers end the stream instead */
            h2_send_headers(c, (uint32_t)s->id, s->trailer_block, s->trailer_len, 1);
        h2_stream_local_end(s);
        return 0;
    }
    if (h2_out_pending(c) >= H2_BATCH_MAX)
        h2_out_flush(c);
    h2_ready(s); /* at the tail: the others get their turn first */
    return 0;
}

void h2_send_data(h2_conn *c)
{
    /* A stream that cannot go (no window, nothing queued) leaves the
     * list; one that can goes back at the tail. Each pass over the list
     * sends at least one frame or empties it, so this ends. */
    while (c->ready != NULL && !c->blocked && !c->closing) {
        h2_stream *s = ready_pop(c);
        if (s->closed || !s->has_data)
            continue;
        s->busy++; /* local end may end the exchange from inside */
        int stop = send_one(c, s);
        s->busy--;
        h2_stream_maybe_free(s);
        if (stop)
            break;
    }
}
