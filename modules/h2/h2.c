/* h2.c — the h2 module: its configuration, the "h2" protocol's connection
 * callbacks, and driving a connection (input, output, its end).
 *
 * A connection reaches "h2" three ways and on_open does not care which: a
 * listener `listen = ... h2` (prior knowledge, RFC 9113 3.3), http1 handing
 * over a connection that opened with the preface (the preface still
 * unconsumed), or a transport that negotiated ALPN "h2" (RFC 9113 3.2,
 * keel_transport_open_protocol). In every case the first bytes on_data sees
 * are the client's preface, which input.c checks.
 *
 * Input is parsed where it lies (input.c); output is produced once per
 * on_data or asynchronous event (h2_pump, send.c) and leaves as one write
 * (output.c). The layers below tell the module what happened through the
 * table of events it fills here (h2_module_events): a stream's fields,
 * body and end go to its exchange (request.c), its close ends the
 * exchange and the scheduler's hold on it.
 */
#include "h2.h"

#include <keel/util.h>

#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------- */

const char *h2_date(h2_worker *w, size_t *len)
{
    /* RFC 9110 6.6.1: Date on every response. The value alone: HPACK
     * carries a field's name and value, not a line. */
    size_t n;
    const char *line = date_cache_line(&w->date, w->worker, &n);
    if (n < DATE_LINE_FRAMING) {
        *len = 0;
        return "";
    }
    *len = n - DATE_LINE_FRAMING;
    return line + DATE_LINE_PREFIX;
}

void h2_goaway(h2_conn *c)
{
    if (c->goaway || c->closing || c->failed)
        return;
    c->goaway = 1;
    h2_send_goaway(c, H2_NO_ERROR);
    /* Streams awaiting the rest of a request after their response
     * (stream.c) are not waited for: the client is asked to stop (8.1).
     * Resets are only queued inside the walk; h2_pump sends them. */
    c->depth++;
    for (h2_stream *s = c->streams; s != NULL; s = s->next)
        if (s->local_ended && !s->closed)
            h2_stream_reset(s, H2_NO_ERROR);
    c->depth--;
    h2_pump(c);
}

/* Idle since the last tick at most: what only a busy connection needs
 * goes (a few allocations if it wakes up). */
static void trim(h2_conn *c)
{
    if (!c->in_block) {
        free(c->block);
        c->block = NULL;
        c->block_cap = c->block_len = 0;
    }
    if (c->nopen == 0) {
        free(c->table);
        c->table = NULL;
        c->table_mask = 0;
    }
    h2_headcache_free(c);
}

/* ---- stream timeouts -------------------------------------------------------------- */

/* Waiting on the peer, not on the handler: response bytes queued that the
 * peer's window does not let out (a zero-window stall holding them), or a
 * request body the handler wants (and has not paused) that does not come. */
static int waits_on_peer(const h2_stream *s)
{
    return !s->closed && (s->queued > 0 || s->local_ended ||
                          (s->exchange && s->want_body && !s->remote_ended && !s->body_paused));
}

/* [h2] body_min_rate, as http1's (and Apache mod_reqtimeout's MinRate): a
 * request body gets stream_timeout to get going plus one second per
 * body_min_rate bytes received, from when the handler asks for it (the
 * time a handler takes before that, or holding its body paused, is its
 * own: sink.c moves the start on by the pause). stream_timeout alone is
 * renewed by every byte: it bounds a pause, not a body trickled a byte at
 * a time. */
static int body_too_slow(const h2_config *cfg, const h2_stream *s, uint64_t now)
{
    if (cfg->body_min_rate == 0 || s->body_start_ms == 0 || s->closed || !s->exchange ||
        s->remote_ended || s->reset_pending || s->body_paused)
        return 0;
    uint64_t got = s->body_seen, rate = cfg->body_min_rate;
    uint64_t secs = got / rate;
    uint64_t grace =
        secs > UINT64_MAX / 2000 ? UINT64_MAX / 2 : secs * 1000 + got % rate * 1000 / rate;
    uint64_t base = s->body_start_ms + cfg->stream_timeout_ms;
    return now >= base && now - base >= grace;
}

/* The header block (or frame) in progress is not whole by header_timeout
 * (input.c): the connection cannot go on without it (6.2: no other frame
 * may come between a HEADERS and its CONTINUATIONs, and its HPACK state
 * is the connection's), so it ends with GOAWAY ENHANCE_YOUR_CALM, the
 * answer to the other blocks that never end (max_continuations,
 * max_header_block): the peer holds memory and gives nothing for it. The
 * stream of the block is not named as taken (never opened). */
static void header_timeout(h2_conn *c)
{
    c->core_deadline = 0; /* passed: the core cleared it */
    if (c->closing || c->failed)
        return;
    h2_count(c, c->w->mod->m.limit[H2_LIMIT_HEADER_TIMEOUT]);
    char peer[64];
    if (keel_conn_peer_name(c->conn, peer, sizeof peer) != KEEL_OK)
        strcpy(peer, "?");
    keel_log(c->w->module, KEEL_LOG_INFO,
             "%s: header block not whole within header_timeout: GOAWAY ENHANCE_YOUR_CALM", peer);
    h2_fail(c, H2_ENHANCE_YOUR_CALM);
}

static void on_tick(keel_timer *timer, void *userdata)
{
    h2_conn *c = userdata;
    (void)timer;
    uint64_t now = keel_worker_now_ms(c->w->worker);
    if (c->block_deadline_ms != 0 && now >= c->block_deadline_ms && !c->core_deadline) {
        header_timeout(c);
        return;
    }
    if (c->streams == NULL && (c->block_deadline_ms == 0 || c->core_deadline)) {
        /* Kept one idle tick, so a connection that goes back and forth
         * between streams and none does not allocate a timer each time. */
        if (c->tick_idle) {
            keel_timer_stop(c->tick);
            c->tick = NULL;
        } else {
            trim(c);
        }
        c->tick_idle = 1;
        return;
    }
    c->tick_idle = 0;
    const h2_config *cfg = c->w->cfg;
    uint64_t limit = cfg->stream_timeout_ms;
    int any = 0;
    /* Only asked for here: the resets take effect in h2_pump, which may
     * free streams, after the walk. */
    c->depth++;
    for (h2_stream *s = c->streams; s != NULL; s = s->next) {
        if (waits_on_peer(s) && now - s->progress_ms >= limit) {
            s->progress_ms = now; /* once */
            if (s->local_ended) {
                /* The rest of a body after the response never came: the
                 * response is complete, so the end is NO_ERROR (8.1). */
                h2_stream_reset(s, H2_NO_ERROR);
                any = 1;
                continue;
            }
            h2_count(c, c->w->mod->m.limit[H2_LIMIT_STREAM_TIMEOUT]);
            h2_stream_reset(s, H2_CANCEL);
            any = 1;
        } else if (body_too_slow(cfg, s, now)) {
            h2_count(c, c->w->mod->m.limit[H2_LIMIT_BODY_RATE]);
            /* RFC 9110 15.5.9 if nothing was answered yet, as http1 */
            if (!s->final_sent)
                h2_stream_answer(s, 408);
            else
                h2_stream_reset(s, H2_CANCEL);
            any = 1;
        }
    }
    c->depth--;
    if (any)
        h2_pump(c);
}

void h2_tick_start(h2_conn *c)
{
    c->tick_idle = 0;
    if (c->tick != NULL || c->closing)
        return;
    const h2_config *cfg = c->w->cfg;
    uint64_t period = (cfg->header_timeout_ms < cfg->stream_timeout_ms ? cfg->header_timeout_ms
                                                                       : cfg->stream_timeout_ms) /
                      4;
    if (period < 50)
        period = 50;
    if (period > 1000)
        period = 1000;
    c->tick = keel_timer_start(c->w->worker, period, period, on_tick, c);
}

/* ---- what the connection's state reports (writer.h: h2_events) ------------------ */

/* The stream closed: the exchange and the scheduler let go of it. */
static void stream_closed(h2_stream *s, uint32_t code)
{
    h2_conn *c = s->c;
    (void)code;
    if (s->counted) {
        s->counted = 0;
        c->nactive--;
        keel_metric_add(c->w->worker, c->w->mod->m.open_streams, -1);
    }
    int complete = s->resp_ended && s->queue == NULL;
    /* Releasing the queue calls the core, which may end the exchange
     * (sink done) from inside: the state holds the stream meanwhile. */
    h2_sched_forget(s, KEEL_ERR_CLOSED);
    if (s->tunnel != NULL)
        h2_tunnel_stream_gone(s); /* RST_STREAM, or our end: the protocol's close */
    if (s->exchange && !complete) {
        /* Reset, by the peer or by us: the core finishes the exchange
         * without the sink (RFC 9113 8.1: nothing more is sent). */
        keel_request *req = s->req;
        s->exchange = 0;
        s->req = NULL;
        keel_http_request_abort(req);
    }
}

static void stream_release(h2_stream *s)
{
    h2_sched_release(s, KEEL_ERR_CLOSED);
}

static const h2_events h2_module_events = {
    .output = h2_pump,
    .timer = h2_tick_start,
    .field = h2_stream_field,
    .headers = h2_stream_headers_done,
    .trailers = h2_stream_trailers_done,
    .data = h2_stream_data,
    .end = h2_stream_remote_end,
    .closed = stream_closed,
    .release = stream_release,
    .window = h2_window_grew,
};

/* ---- protocol callbacks ------------------------------------------------------------ */

static int h2_on_open(keel_conn *conn, void *arg)
{
    (void)arg;
    h2_worker *w = keel_worker_state(keel_conn_worker(conn), keel_conn_module(conn));
    const h2_config *cfg = w->cfg;
    h2_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return KEEL_ERR_NOMEM;
    c->conn = conn;
    c->w = w;
    c->ev = &h2_module_events;
    /* RFC 9113 6.5.2, 6.9.2: the peer's values until its SETTINGS say
     * otherwise; our connection window once h2_window_open widened it. */
    c->peer_initial_window = H2_DEFAULT_WINDOW;
    c->peer_max_frame = H2_DEFAULT_FRAME_SIZE;
    c->send_window = H2_DEFAULT_WINDOW;
    h2_window_conn_init(c);
    /* RFC 7541 4.2: until our SETTINGS are acknowledged the client may
     * use the default 4,096 bytes of table (input.c lowers it then). */
    h2_hpack_init(&c->dec, cfg->header_table_size > 4096 ? cfg->header_table_size : 4096);
    h2_send_preface(c);
    h2_window_open(c);
    h2_limits_init(c);
    keel_conn_set_data(conn, c);
    c->timeout_ms = cfg->idle_timeout_ms;
    keel_conn_set_timeout(conn, c->timeout_ms);
    h2_count(c, w->mod->m.conns);
    keel_metric_add(w->worker, w->mod->m.open_conns, 1);
    h2_pump(c);
    return KEEL_OK;
}

static int h2_on_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    h2_conn *c = keel_conn_data(conn);
    *consumed = len;
    if (c == NULL || c->closing || c->calm)
        return KEEL_OK; /* ending: what comes now is dropped */
    c->idle_marked = 0; /* the core cleared it: bytes came */
    c->depth++;
    h2_input(c, (const uint8_t *)data, len, consumed);
    c->depth--;
    h2_pump(c);
    return KEEL_OK;
}

static void h2_on_drain(keel_conn *conn)
{
    h2_conn *c = keel_conn_data(conn);
    if (c != NULL) {
        c->blocked = 0;
        h2_pump(c);
    }
}

static void h2_on_timeout(keel_conn *conn)
{
    h2_conn *c = keel_conn_data(conn);
    if (c == NULL)
        return;
    if (c->core_deadline) {
        header_timeout(c); /* the core's deadline (input.c), not idleness */
        return;
    }
    if (c->nactive == 0) {
        /* Idle: say goodbye properly (6.8) rather than vanish. */
        h2_count(c, c->w->mod->m.limit[H2_LIMIT_IDLE_TIMEOUT]);
        if (c->goaway) {
            h2_close(c);
            return;
        }
        h2_goaway(c);
        h2_close(c);
    }
    /* Streams at work: their own timeouts apply (on_tick); the core
     * re-arms the connection's. */
}

static void h2_on_shutdown(keel_conn *conn)
{
    h2_conn *c = keel_conn_data(conn);
    if (c != NULL)
        h2_goaway(c); /* in-flight streams finish, then h2_pump closes */
}

static void h2_on_eof(keel_conn *conn)
{
    h2_conn *c = keel_conn_data(conn);
    if (c == NULL)
        return;
    c->eof = 1; /* answers still reach the peer; no new stream can come */
    h2_tunnel_conn_eof(c);
    h2_pump(c);
    if (c->nactive == 0)
        h2_close(c);
}

static void h2_on_close(keel_conn *conn, int status)
{
    (void)status;
    h2_conn *c = keel_conn_data(conn);
    if (c == NULL)
        return;
    keel_conn_set_data(conn, NULL);
    c->closing = 1;
    h2_load_orphan(c);
    /* Every stream ends: exchanges in flight are aborted (the core calls
     * no sink function after that), queued pieces released. */
    c->resets = c->ready = c->ready_tail = NULL; /* they all go */
    while (c->streams != NULL) {
        h2_stream *s = c->streams;
        s->closed = 1;
        s->busy = 0;
        s->reset_pending = 0;
        s->ready = 0;
        if (s->counted) {
            s->counted = 0;
            c->nactive--;
            keel_metric_add(c->w->worker, c->w->mod->m.open_streams, -1);
        }
        if (s->exchange) {
            keel_request *req = s->req;
            s->exchange = 0;
            s->req = NULL;
            keel_http_request_abort(req);
        }
        if (s->tunnel != NULL)
            h2_tunnel_stream_gone(s); /* before the core's on_close: RFC 8441 tunnels end too */
        if (c->streams == s)
            h2_stream_maybe_free(s);
    }
    h2_out_discard(c);
    h2_out_orphan(c);
    if (c->tick != NULL)
        keel_timer_stop(c->tick);
    h2_hpack_free(&c->dec);
    h2_headcache_free(c);
    free(c->block);
    free(c->table);
    keel_metric_add(c->w->worker, c->w->mod->m.open_conns, -1);
    free(c);
}

const keel_protocol h2_protocol = {
    .size = sizeof(keel_protocol),
    .name = "h2",
    .on_open = h2_on_open,
    .on_data = h2_on_data,
    .on_drain = h2_on_drain,
    .on_timeout = h2_on_timeout,
    .on_shutdown = h2_on_shutdown,
    .on_close = h2_on_close,
    .on_eof = h2_on_eof,
};

/* ---- configuration ------------------------------------------------------------------- */

/* The [h2] section (keel/config.h), with RFC 9113 6.5.2's bounds: windows
 * up to 2^31-1, frames 2^14..2^24-1. header_timeout and body_min_rate are
 * http1's, with its defaults. The core reads it straight into the
 * h2_config the connections use (writer.h); finish_config adds what
 * follows from it. */
#define DAY_MS 86400000

static const keel_config_key h2_keys[] = {
    KEEL_KEY(h2_config, max_concurrent_streams, "max_concurrent_streams", KEEL_CONFIG_INT,
             .def = "100", .min = 1, .max = 0x7fffffff,
             .doc = "streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS)"),
    KEEL_KEY(h2_config, initial_window, "initial_window", KEEL_CONFIG_SIZE, .def = "65535",
             .min = 0, .max = 0x7fffffff, .doc = "each stream's receive window"),
    KEEL_KEY(h2_config, conn_window, "conn_window", KEEL_CONFIG_SIZE, .def = "1m", .min = 65535,
             .max = 0x7fffffff, .doc = "the connection's receive window"),
    KEEL_KEY(h2_config, max_frame_size, "max_frame_size", KEEL_CONFIG_SIZE, .def = "16384",
             .min = 16384, .max = 16777215, .doc = "largest frame keel accepts"),
    KEEL_KEY(h2_config, header_table_size, "header_table_size", KEEL_CONFIG_SIZE, .def = "4096",
             .min = 0, .max = 1 << 20, .doc = "HPACK decoder's dynamic table"),
    KEEL_KEY(h2_config, max_header_list, "max_header_list", KEEL_CONFIG_SIZE, .def = "32k",
             .min = 1024, .max = 16 << 20,
             .doc = "largest decoded field list of a request (RFC 9113 6.5.2); 431"),
    KEEL_KEY(h2_config, max_header_block, "max_header_block", KEEL_CONFIG_SIZE, .min = 0,
             .max = 0x7fffffff,
             .doc = "largest header block on the wire; 0: twice max_header_list plus a frame"),
    KEEL_KEY(h2_config, max_body, "max_body", KEEL_CONFIG_SIZE, .def = "1m",
             .doc = "largest request body a handler reads whole; 413 above it"),
    KEEL_KEY(h2_config, body_buffer, "body_buffer", KEEL_CONFIG_SIZE, .def = "1m",
             .doc = "body bytes a connection holds for handlers that have not read them"),
    KEEL_KEY(h2_config, idle_timeout_ms, "idle_timeout", KEEL_CONFIG_DURATION, .def = "60s",
             .min = 1, .max = DAY_MS,
             .doc = "no stream open and nothing read or written this long: GOAWAY and close"),
    KEEL_KEY(h2_config, stream_timeout_ms, "stream_timeout", KEEL_CONFIG_DURATION, .def = "30s",
             .min = 1, .max = DAY_MS,
             .doc = "a stream waiting on its peer without progress this long: RST_STREAM"),
    KEEL_KEY(h2_config, header_timeout_ms, "header_timeout", KEEL_CONFIG_DURATION, .def = "10s",
             .min = 1, .max = DAY_MS,
             .doc = "time for a header block to arrive whole (no frame renews it)"),
    KEEL_KEY(h2_config, body_min_rate, "body_min_rate", KEEL_CONFIG_SIZE, .def = "1k",
             .doc = "bytes a second a request body must average after stream_timeout; 0: none"),
    KEEL_KEY(h2_config, max_requests, "max_requests", KEEL_CONFIG_INT, .def = "0", .min = 0,
             .max = INT64_MAX, .doc = "streams per connection before GOAWAY; 0: unlimited"),
    KEEL_KEY(h2_config, max_resets, "max_resets", KEEL_CONFIG_INT, .def = "500", .min = 0,
             .max = 1000000,
             .doc =
                 "streams reset before their response completes, per 10 s (rapid reset); 0: off"),
    KEEL_KEY(h2_config, max_pings, "max_pings", KEEL_CONFIG_INT, .def = "100", .min = 0,
             .max = 1000000, .doc = "PING frames per 10 s before ENHANCE_YOUR_CALM; 0: off"),
    KEEL_KEY(h2_config, max_settings, "max_settings", KEEL_CONFIG_INT, .def = "50", .min = 0,
             .max = 1000000, .doc = "SETTINGS frames per 10 s; 0: off"),
    KEEL_KEY(h2_config, max_empty_frames, "max_empty_frames", KEEL_CONFIG_INT, .def = "100",
             .min = 0, .max = 1000000,
             .doc = "empty frames and frames of unknown types per 10 s; 0: off"),
    KEEL_KEY(h2_config, max_priority, "max_priority", KEEL_CONFIG_INT, .def = "1000", .min = 0,
             .max = 1000000, .doc = "PRIORITY frames per 10 s; 0: off"),
    KEEL_KEY(h2_config, max_continuations, "max_continuations", KEEL_CONFIG_INT, .def = "8",
             .min = 0, .max = 10000,
             .doc = "CONTINUATION frames one header block may take; 0: off"),
    KEEL_KEY(h2_config, server, "server", KEEL_CONFIG_STRING, .def = "keel",
             .doc = "the server field of every response; empty: none"),
    KEEL_KEY(h2_config, enable_connect_protocol, "enable_connect_protocol", KEEL_CONFIG_BOOL,
             .def = "on",
             .doc = "offer RFC 8441 extended CONNECT (WebSocket over a stream) in SETTINGS"),
};
KEEL_CONFIG_SCHEMA(h2_schema, h2_config, h2_keys);

/* The server field's value: a product or two with their comments (RFC
 * 9110 10.2.4); a longer one is a mistake, not a name. */
#define SERVER_MAX 207

static int finish_config(keel_module *m, h2_config *cfg)
{
    /* A header block's wire size: HPACK rarely makes a field list larger
     * than it decodes to, so twice the list plus a frame is generous. */
    if (cfg->max_header_block == 0)
        cfg->max_header_block = 2 * cfg->max_header_list + cfg->max_frame_size;
    if (cfg->max_header_block > 0x7fffffff)
        cfg->max_header_block = 0x7fffffff;
    size_t len = strlen(cfg->server);
    if (len > SERVER_MAX)
        return keel_config_error(m, "server", "longer than %d characters", SERVER_MAX);
    size_t bad = keel_field_value_check(cfg->server, len);
    if (bad < len)
        return keel_config_error(m, "server", "control character 0x%02x at %zu",
                                 (unsigned char)cfg->server[bad], bad);
    cfg->server_len = len;
    return KEEL_OK;
}

/* ---- module life cycle ----------------------------------------------------------------- */

static void module_free(h2_module *mod)
{
    free(mod);
}

static int h2_module_load(keel_module *m)
{
    h2_module *mod = calloc(1, sizeof *mod);
    if (mod == NULL)
        return KEEL_ERR_NOMEM;
    mod->cfg = *(const h2_config *)keel_module_config(m);
    int rc = finish_config(m, &mod->cfg);
    if (rc != KEEL_OK) {
        module_free(mod);
        return rc;
    }
    h2_metrics_register(m, &mod->m);
    rc = keel_protocol_register(m, &h2_protocol);
    if (rc != KEEL_OK) {
        module_free(mod);
        return rc;
    }
    keel_module_set_data(m, mod);
    return KEEL_OK;
}

static void h2_unload(keel_module *m)
{
    h2_module *mod = keel_module_data(m);
    if (mod != NULL)
        module_free(mod);
}

static int h2_start(keel_module *m, keel_worker *worker, void *state)
{
    h2_worker *w = state;
    w->worker = worker;
    w->module = m;
    w->mod = keel_module_data(m);
    w->cfg = &w->mod->cfg;
    return KEEL_OK;
}

static void h2_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    (void)worker;
    h2_worker *w = state;
    h2_batch_pool_free(w);
    h2_piece_pool_free(w);
    h2_stream_pool_free(w);
    h2_scratch_free(&w->scratch);
}

KEEL_MODULE(h2, .version = "1.0.0", .worker_state_size = sizeof(h2_worker), .load = h2_module_load,
            .start = h2_start, .stop = h2_stop, .unload = h2_unload, .config = &h2_schema);
