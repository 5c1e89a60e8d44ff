/* writer.c — the frames the server writes other than DATA (RFC 9113 6),
 * encoded by the codec straight into the connection's batch (output.c),
 * and connection errors (5.4.1). Answers piling up unread are the
 * outbound side of the floods limits.c counts.
 *
 * Nothing here calls up: a connection error asks for output through the
 * connection's events (ev->output), which the module points at the pump.
 */
#include "writer.h"

#include <string.h>

void h2_count(h2_conn *c, keel_metric *m)
{
    if (m != NULL)
        keel_metric_add(c->w->worker, m, 1);
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

void h2_fail(h2_conn *c, uint32_t code)
{
    if (c->closing || c->failed)
        return;
    c->failed = 1;
    c->calm = 1;
    h2_send_goaway(c, code);
    c->ev->output(c);
}
