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
 *                  in wire bytes per block, before nghttp2 (which caps
 *                  CONTINUATIONs itself only from 1.61, or Debian's
 *                  backport) would decode it.
 *   PING           CVE-2019-9512: each PING asks for an ACK.
 *   SETTINGS       CVE-2019-9515: each SETTINGS asks for an ACK.
 *   empty frames   CVE-2019-9518: DATA without payload or END_STREAM,
 *                  empty HEADERS/CONTINUATION, frames of unknown types
 *                  (ignored by the protocol, 5.5, but still parsed).
 *   priority       CVE-2019-9513: PRIORITY frames reshuffling a tree.
 *                  RFC 9113 5.3.2 deprecates the scheme and we tell the
 *                  client so (SETTINGS_NO_RFC7540_PRIORITIES), so
 *                  nghttp2 keeps no tree; the frames are still limited.
 *   reset flood    CVE-2019-9514: a peer that provokes our RST_STREAMs.
 *   HPACK bomb     RFC 7541 7.3: a decoded field list 16 times
 *                  max_header_list (the plain overshoot gets a 431).
 *   outbound ACKs  nghttp2's own limit (a peer that sends PINGs and does
 *                  not read the ACKs): NGHTTP2_ERR_FLOODED.
 */
#include "h2.h"

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
    c->calm = 1;
    h2_count(c, c->w->mod->m.flood[kind]);
    char peer[64];
    if (keel_conn_peer_name(c->conn, peer, sizeof peer) != KEEL_OK)
        strcpy(peer, "?");
    keel_log(c->w->module, KEEL_LOG_WARN, "%s: %s flood: GOAWAY ENHANCE_YOUR_CALM", peer,
             flood_names[kind]);
    /* GOAWAY naming the last stream taken; nghttp2 reads nothing more and
     * wants to be dropped once it is sent (h2_pump closes). */
    if (c->ng != NULL)
        nghttp2_session_terminate_session(c->ng, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* ---- per frame --------------------------------------------------------------------- */

int h2_limits_frame(h2_conn *c, const nghttp2_frame_hd *hd)
{
    const h2_config *cfg = c->w->cfg;
    int empty = 0;
    switch (hd->type) {
    case NGHTTP2_HEADERS:
        if (hd->stream_id > c->last_sid) {
            /* A new stream: over the limit nghttp2 answers (RST_STREAM
             * REFUSED_STREAM before our SETTINGS are acknowledged, a
             * connection error after, RFC 9113 5.1.2); this counts it. */
            c->last_sid = hd->stream_id;
            if (c->nopen >= cfg->max_concurrent_streams)
                h2_count(c, c->w->mod->m.limit[H2_LIMIT_STREAMS]);
        }
        c->block_frames = 1;
        c->block_bytes = (uint32_t)hd->length;
        empty = hd->length == 0;
        break;
    case NGHTTP2_CONTINUATION:
        c->block_frames++;
        c->block_bytes += (uint32_t)hd->length;
        empty = hd->length == 0;
        if (c->block_frames - 1 > cfg->max_continuations) {
            h2_calm(c, H2_FLOOD_CONTINUATION);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    case NGHTTP2_DATA:
        empty = hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM);
        break;
    case NGHTTP2_PRIORITY:
        /* Counted on arrival: with no priority tree nghttp2 drops them
         * without telling (5.3.2). */
        if (!h2_bucket_take(c, &c->b_priority, cfg->max_priority)) {
            h2_calm(c, H2_FLOOD_PRIORITY);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    default:
        /* Unknown and extension types are ignored (RFC 9113 5.5): free to
         * send, so they draw on the same bucket as empty frames. */
        empty = hd->type > NGHTTP2_CONTINUATION;
        break;
    }
    if ((hd->type == NGHTTP2_HEADERS || hd->type == NGHTTP2_CONTINUATION) &&
        c->block_bytes > cfg->max_header_block) {
        h2_calm(c, H2_FLOOD_CONTINUATION);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (empty && !h2_bucket_take(c, &c->b_empty, cfg->max_empty_frames)) {
        h2_calm(c, H2_FLOOD_EMPTY);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

int h2_limits_frame_recv(h2_conn *c, const nghttp2_frame *frame, h2_stream *s)
{
    const h2_config *cfg = c->w->cfg;
    switch (frame->hd.type) {
    case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) &&
            !h2_bucket_take(c, &c->b_ping, cfg->max_pings)) {
            h2_calm(c, H2_FLOOD_PING);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) &&
            !h2_bucket_take(c, &c->b_settings, cfg->max_settings)) {
            h2_calm(c, H2_FLOOD_SETTINGS);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    case NGHTTP2_RST_STREAM:
        h2_count_code(c, c->w->mod->m.rst_recv, frame->rst_stream.error_code);
        /* A stream given up before its response was complete: the work
         * the server did for it was wasted (CVE-2023-44487). */
        if (s != NULL && !(s->resp_ended && s->queue == NULL) &&
            !h2_bucket_take(c, &c->b_reset, cfg->max_resets)) {
            h2_calm(c, H2_FLOOD_RESET);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    default:
        break;
    }
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
    "limit=\"stream_timeout\"", "limit=\"idle_timeout\"", "limit=\"max_requests\""};

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
