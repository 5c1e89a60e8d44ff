/* limits.c — the flood counters: how the published HTTP/2 attacks are
 * recognised and answered, and the module's metrics.
 *
 * Each attack makes the server work (or hold memory) for frames that cost
 * the client next to nothing. Each kind of such frame draws on a token
 * bucket per connection: [h2] max_<kind> at once, refilled at a tenth of
 * that per second. An empty bucket ends the connection with GOAWAY
 * ENHANCE_YOUR_CALM (RFC 9113 5.4.1, 7), counted in h2_floods_total. Only
 * the offending connection pays; the state is a few bytes per bucket.
 *
 *   rapid reset    CVE-2023-44487: streams opened and reset by the client
 *                  before their response is complete. Concurrency limits
 *                  do not help (a reset stream no longer counts), so the
 *                  resets themselves are limited.
 *   CONTINUATION   CVE-2024-27316 and its family (VU#421644): a header
 *                  block that never ends. Limited in frames per block and
 *                  in wire bytes per block, before it is decoded.
 *   PING           CVE-2019-9512: each PING asks for an ACK.
 *   SETTINGS       CVE-2019-9515: each SETTINGS asks for an ACK.
 *   empty frames   CVE-2019-9518: DATA without payload or END_STREAM,
 *                  empty HEADERS/CONTINUATION, frames of unknown types
 *                  (ignored by the protocol, 5.5, but still parsed).
 *   priority       CVE-2019-9513: PRIORITY frames reshuffling a tree.
 *                  RFC 9113 5.3.2 deprecates the scheme and we tell the
 *                  client so (SETTINGS_NO_RFC7540_PRIORITIES); no tree
 *                  is kept, but the frames are still limited.
 *   reset flood    CVE-2019-9514: a peer that provokes our RST_STREAMs.
 *   HPACK bomb     RFC 7541 7.3: a decoded field list 16 times
 *                  max_header_list (the plain overshoot gets a 431).
 *   outbound       answers piling up unread: a peer that sends PINGs or
 *                  provokes resets and does not read (send.c).
 */
#include "writer.h"

#include <string.h>

/* ---- token buckets ---------------------------------------------------------- */

static uint64_t now_ms(h2_conn *c)
{
    return keel_worker_now_ms(c->w->worker);
}

void h2_limits_init(h2_conn *c)
{
    const h2_config *cfg = c->w->cfg;
    uint64_t now = now_ms(c);
    c->b_reset = (h2_bucket){cfg->max_resets, now};
    c->b_rst_sent = (h2_bucket){cfg->max_resets, now};
    c->b_ping = (h2_bucket){cfg->max_pings, now};
    c->b_settings = (h2_bucket){cfg->max_settings, now};
    c->b_empty = (h2_bucket){cfg->max_empty_frames, now};
    c->b_priority = (h2_bucket){cfg->max_priority, now};
}

int h2_bucket_take(h2_conn *c, h2_bucket *b, uint32_t cap)
{
    if (cap == 0)
        return 1; /* no limit */
    uint64_t now = now_ms(c);
    uint64_t add = (now - b->at_ms) * cap / 10000;
    if (add > 0) {
        b->tokens = b->tokens + add >= cap ? cap : (uint32_t)(b->tokens + add);
        b->at_ms = now;
    }
    if (b->tokens == 0)
        return 0;
    b->tokens--;
    return 1;
}

static const char *const flood_names[H2_FLOOD_COUNT] = {
    "rapid_reset",  "ping",       "settings",     "empty_frames",  "priority",
    "continuation", "hpack_bomb", "outbound_ack", "reset_provoked"};

void h2_calm(h2_conn *c, enum h2_flood kind)
{
    if (c->calm)
        return;
    h2_count(c, c->w->mod->m.flood[kind]);
    char peer[64];
    if (keel_conn_peer_name(c->conn, peer, sizeof peer) != KEEL_OK)
        strcpy(peer, "?");
    keel_log(c->w->module, KEEL_LOG_WARN, "%s: %s flood: GOAWAY ENHANCE_YOUR_CALM", peer,
             flood_names[kind]);
    /* GOAWAY naming the last stream taken; nothing more is read, and the
     * connection closes once it is written. */
    h2_fail(c, H2_ENHANCE_YOUR_CALM);
}

/* ---- per frame --------------------------------------------------------------------- */

static int calm(h2_conn *c, enum h2_flood kind)
{
    h2_calm(c, kind);
    return -1;
}

int h2_limits_frame(h2_conn *c, uint8_t type, uint8_t flags, uint32_t length)
{
    const h2_config *cfg = c->w->cfg;
    int empty = 0;
    switch (type) {
    case H2_HEADERS:
        c->block_frames = 1;
        c->block_bytes = length;
        empty = length == 0;
        break;
    case H2_CONTINUATION:
        c->block_frames++;
        c->block_bytes += length;
        empty = length == 0;
        if (c->block_frames - 1 > cfg->max_continuations)
            return calm(c, H2_FLOOD_CONTINUATION);
        break;
    case H2_DATA:
        empty = length == 0 && !(flags & H2_FLAG_END_STREAM);
        break;
    case H2_PRIORITY:
        /* Counted on arrival: there is no priority tree for them to change
         * (5.3.2), but each is still parsed. */
        if (!h2_bucket_take(c, &c->b_priority, cfg->max_priority))
            return calm(c, H2_FLOOD_PRIORITY);
        break;
    case H2_PING:
        if (!(flags & H2_FLAG_ACK) && !h2_bucket_take(c, &c->b_ping, cfg->max_pings))
            return calm(c, H2_FLOOD_PING);
        break;
    case H2_SETTINGS:
        if (!(flags & H2_FLAG_ACK) && !h2_bucket_take(c, &c->b_settings, cfg->max_settings))
            return calm(c, H2_FLOOD_SETTINGS);
        break;
    default:
        /* Unknown and extension types are ignored (RFC 9113 5.5): free to
         * send, so they draw on the same bucket as empty frames. */
        empty = type > H2_CONTINUATION;
        break;
    }
    if ((type == H2_HEADERS || type == H2_CONTINUATION) && c->block_bytes > cfg->max_header_block)
        return calm(c, H2_FLOOD_CONTINUATION);
    if (empty && !h2_bucket_take(c, &c->b_empty, cfg->max_empty_frames))
        return calm(c, H2_FLOOD_EMPTY);
    return 0;
}

int h2_limits_reset(h2_conn *c, uint32_t code, int wasted)
{
    h2_count_code(c, c->w->mod->m.rst_recv, code);
    /* A stream given up before its response was complete: the work the
     * server did for it was wasted (CVE-2023-44487). */
    if (wasted && !h2_bucket_take(c, &c->b_reset, c->w->cfg->max_resets))
        return calm(c, H2_FLOOD_RESET);
    return 0;
}

int h2_limits_rst_sent(h2_conn *c)
{
    return !h2_bucket_take(c, &c->b_rst_sent, c->w->cfg->max_resets);
}

/* ---- metrics ------------------------------------------------------------------------- */

static const char *const code_labels[H2_ERROR_CODES] = {"code=\"NO_ERROR\"",
                                                        "code=\"PROTOCOL_ERROR\"",
                                                        "code=\"INTERNAL_ERROR\"",
                                                        "code=\"FLOW_CONTROL_ERROR\"",
                                                        "code=\"SETTINGS_TIMEOUT\"",
                                                        "code=\"STREAM_CLOSED\"",
                                                        "code=\"FRAME_SIZE_ERROR\"",
                                                        "code=\"REFUSED_STREAM\"",
                                                        "code=\"CANCEL\"",
                                                        "code=\"COMPRESSION_ERROR\"",
                                                        "code=\"CONNECT_ERROR\"",
                                                        "code=\"ENHANCE_YOUR_CALM\"",
                                                        "code=\"INADEQUATE_SECURITY\"",
                                                        "code=\"HTTP_1_1_REQUIRED\""};

static const char *const flood_labels[H2_FLOOD_COUNT] = {
    "kind=\"rapid_reset\"",  "kind=\"ping\"",         "kind=\"settings\"",
    "kind=\"empty_frames\"", "kind=\"priority\"",     "kind=\"continuation\"",
    "kind=\"hpack_bomb\"",   "kind=\"outbound_ack\"", "kind=\"reset_provoked\""};

static const char *const limit_labels[H2_LIMIT_COUNT] = {
    "limit=\"header_list\"",    "limit=\"body\"",         "limit=\"concurrent_streams\"",
    "limit=\"stream_timeout\"", "limit=\"idle_timeout\"", "limit=\"max_requests\"",
    "limit=\"header_timeout\"", "limit=\"body_min_rate\""};

static void reg(keel_module *m, const char *name, const char *help, int type, const char *labels,
                keel_metric **out)
{
    keel_metric_desc d = {
        .size = sizeof d, .name = name, .help = help, .type = type, .labels = labels};
    if (keel_metric_register(m, &d, out) != KEEL_OK)
        *out = NULL; /* counting is best effort: a NULL metric is a no-op */
}

void h2_metrics_register(keel_module *m, h2_metrics *mx)
{
    reg(m, "h2_connections_total", "HTTP/2 connections opened", KEEL_METRIC_COUNTER, NULL,
        &mx->conns);
    reg(m, "h2_connections", "HTTP/2 connections open", KEEL_METRIC_GAUGE, NULL, &mx->open_conns);
    reg(m, "h2_streams_total", "HTTP/2 requests (streams) started", KEEL_METRIC_COUNTER, NULL,
        &mx->streams);
    reg(m, "h2_streams", "HTTP/2 streams in flight", KEEL_METRIC_GAUGE, NULL, &mx->open_streams);
    reg(m, "h2_malformed_total", "HTTP/2 requests reset as malformed (RFC 9113 8.1.1)",
        KEEL_METRIC_COUNTER, NULL, &mx->malformed);
    reg(m, "h2_tunnels_total", "HTTP/2 streams handed to a protocol by extended CONNECT (RFC 8441)",
        KEEL_METRIC_COUNTER, NULL, &mx->tunnels);
    reg(m, "h2_tunnels", "HTTP/2 streams running a protocol (RFC 8441) now", KEEL_METRIC_GAUGE,
        NULL, &mx->open_tunnels);
    for (int i = 0; i < H2_FLOOD_COUNT; i++)
        reg(m, "h2_floods_total", "HTTP/2 connections ended with ENHANCE_YOUR_CALM, by attack",
            KEEL_METRIC_COUNTER, flood_labels[i], &mx->flood[i]);
    for (int i = 0; i < H2_LIMIT_COUNT; i++)
        reg(m, "h2_limits_total", "HTTP/2 limits reached, by limit", KEEL_METRIC_COUNTER,
            limit_labels[i], &mx->limit[i]);
    for (int i = 0; i < H2_ERROR_CODES; i++) {
        reg(m, "h2_rst_stream_sent_total", "RST_STREAM frames sent, by error code",
            KEEL_METRIC_COUNTER, code_labels[i], &mx->rst_sent[i]);
        reg(m, "h2_rst_stream_received_total", "RST_STREAM frames received, by error code",
            KEEL_METRIC_COUNTER, code_labels[i], &mx->rst_recv[i]);
        reg(m, "h2_goaway_sent_total", "GOAWAY frames sent, by error code", KEEL_METRIC_COUNTER,
            code_labels[i], &mx->goaway_sent[i]);
    }
}

void h2_count_code(h2_conn *c, keel_metric *const *family, uint32_t code)
{
    if (code < H2_ERROR_CODES)
        h2_count(c, family[code]);
}
