/* websocket.c — the websocket module's glue: the [websocket] section, the
 * "websocket" protocol a handshake hands connections to, the service table
 * published as "websocket" (include/keel/websocket.h), and the module's
 * life cycle.
 *
 * ws_g: the service's functions receive a keel_ws or a keel_worker, never
 * the module, yet need its configuration and its per-worker state
 * (publish). keel offers no way from a keel_worker to a module's state
 * without the module's handle, so the module keeps one pointer to itself,
 * set in load and cleared in unload. One websocket module per process
 * (load refuses a second one in an embedding program that runs two servers
 * at once).
 */
#include "ws.h"

#include <stdlib.h>
#include <string.h>

KEEL_DEFLATE_DEFINE

ws_module *ws_g = NULL;

/* ---- The protocol ------------------------------------------------------------------- */

static uint64_t quiet_timeout(void)
{
    const ws_config *c = &ws_g->cfg;
    if (c->ping_interval_ms && c->ping_interval_ms < c->idle_timeout_ms)
        return c->ping_interval_ms;
    return c->idle_timeout_ms;
}

static int proto_open(keel_conn *conn, void *arg)
{
    keel_ws *ws = arg;
    if (!ws)
        return KEEL_ERR_INVAL; /* only a handshake opens a websocket */
    ws->conn = conn;
    ws->flags |= WS_OPENED;
    keel_conn_set_data(conn, ws);
    keel_worker *w = keel_conn_worker(conn);
    ws->last_read_ms = keel_worker_now_ms(w);
    keel_conn_set_timeout(conn, quiet_timeout());
    keel_metric_add(w, ws_g->m_conns, 1);
    const keel_ws_endpoint *ep = ws->ep->ep;
    if (ep->on_open)
        ep->on_open(ws, ep->userdata);
    return KEEL_OK;
}

/* The connection's inactivity timeout (nothing read or written for its
 * length): a ping after ping_interval, a close after idle_timeout without
 * a byte from the peer, an abort once close_timeout passed after our
 * close frame. */
static void proto_timeout(keel_conn *conn)
{
    keel_ws *ws = keel_conn_data(conn);
    if (ws->flags & WS_CLOSE_SENT) {
        keel_conn_abort(conn); /* the peer never answered our close (7.1.1) */
        return;
    }
    uint64_t now = keel_worker_now_ms(keel_conn_worker(conn));
    if (now - ws->last_read_ms >= ws_g->cfg.idle_timeout_ms) {
        ws_send_close(ws, KEEL_WS_CLOSE_GOING_AWAY, "idle timeout", 12);
        return;
    }
    ws_ping(ws, NULL, 0);
    keel_conn_set_timeout(conn, quiet_timeout());
}

static void proto_drain(keel_conn *conn)
{
    ws_check_drain(keel_conn_data(conn));
}

static void proto_shutdown(keel_conn *conn)
{
    keel_ws *ws = keel_conn_data(conn);
    if (ws->flags & WS_CLOSE_SENT)
        return;
    ws_send_close(ws, KEEL_WS_CLOSE_GOING_AWAY, "server shutting down", 20);
}

static void proto_eof(keel_conn *conn)
{
    /* The peer stopped sending without a close frame: nothing more can
     * complete the handshake. */
    keel_conn_close(conn);
}

static void proto_close(keel_conn *conn, int status)
{
    (void)status;
    keel_ws *ws = keel_conn_data(conn);
    if (!ws)
        return;
    ws_app_close(ws, KEEL_WS_CLOSE_ABNORMAL, "", 0);
    keel_metric_add(keel_conn_worker(conn), ws_g->m_conns, -1);
    keel_conn_set_data(conn, NULL);
    ws_release(ws);
}

static const keel_protocol ws_protocol = {
    .size = sizeof(keel_protocol),
    .name = "websocket",
    .on_open = proto_open,
    .on_data = ws_on_data,
    .on_drain = proto_drain,
    .on_timeout = proto_timeout,
    .on_shutdown = proto_shutdown,
    .on_close = proto_close,
    .on_eof = proto_eof,
};

/* ---- The service --------------------------------------------------------------------- */

static int endpoint_add(keel_module *module, const keel_ws_endpoint *endpoint)
{
    if (!module || !endpoint || endpoint->size < offsetof(keel_ws_endpoint, on_handshake) ||
        !endpoint->path)
        return KEEL_ERR_INVAL;
    ws_endpoint *e = calloc(1, sizeof *e);
    if (!e)
        return KEEL_ERR_NOMEM;
    /* An author's struct smaller than ours (built against an older header)
     * is copied into a zeroed one so that later fields read as NULL. */
    keel_ws_endpoint *copy = calloc(1, sizeof *copy);
    if (!copy) {
        free(e);
        return KEEL_ERR_NOMEM;
    }
    memcpy(copy, endpoint, endpoint->size < sizeof *copy ? endpoint->size : sizeof *copy);
    e->ep = copy;
    e->owner = module;
    int rc = keel_route_add(module, "GET", endpoint->path, ws_handshake, e);
    /* RFC 8441: over HTTP/2 the handshake is a CONNECT on the same path. */
    if (rc == KEEL_OK)
        rc = keel_route_add(module, "CONNECT", endpoint->path, ws_handshake, e);
    if (rc != KEEL_OK) {
        free(copy);
        free(e);
        return rc;
    }
    e->next = ws_g->endpoints;
    ws_g->endpoints = e;
    return KEEL_OK;
}

static int observer_add(keel_module *module, const keel_ws_observer *observer)
{
    if (!module || !observer || observer->size < sizeof(size_t))
        return KEEL_ERR_INVAL;
    ws_observer *o = calloc(1, sizeof *o);
    if (!o)
        return KEEL_ERR_NOMEM;
    memcpy(&o->obs, observer, observer->size < sizeof o->obs ? observer->size : sizeof o->obs);
    o->next = ws_g->observers;
    ws_g->observers = o;
    return KEEL_OK;
}

static void set_data(keel_ws *ws, void *data)
{
    ws->data = data;
}
static void *get_data(keel_ws *ws)
{
    return ws->data;
}
static size_t queued(keel_ws *ws)
{
    return ws->conn ? keel_conn_write_queued(ws->conn) : 0;
}
static const char *subprotocol(keel_ws *ws)
{
    return ws->subprotocol;
}
static keel_conn *conn_of(keel_ws *ws)
{
    return ws->conn;
}

static const keel_ws_api ws_api = {
    .size = sizeof(keel_ws_api),
    .endpoint_add = endpoint_add,
    .send = ws_send,
    .send_copy = ws_send_copy,
    .send_fragment = ws_send_fragment,
    .ping = ws_ping,
    .close = ws_close,
    .set_data = set_data,
    .data = get_data,
    .queued = queued,
    .subprotocol = subprotocol,
    .conn = conn_of,
    .subscribe = ws_subscribe,
    .unsubscribe = ws_unsubscribe,
    .publish = ws_publish,
    .observer_add = observer_add,
    .publish_local = ws_publish_local,
};

/* ---- Configuration -------------------------------------------------------------------- */

/* The [websocket] section as declared (keel/config.h), read straight into
 * the ws_config the connections use; read_config checks what the keys'
 * ranges cannot (one against another). Compression defaults to level 1
 * with the full window: messages are small and latency-bound, and a small
 * window slides and rehashes twice per 4 KiB message, so level 6 with a
 * 2 KiB window costs far more instructions (docs/websocket.md).
 * Without context takeover the compressor is released after each message,
 * so the window costs no idle memory. */
static const keel_config_key ws_keys[] = {
    KEEL_KEY(ws_config, max_frame, "max_frame", KEEL_CONFIG_SIZE, .def = "1m", .min = 1,
             .max = (int64_t)1 << 40, .doc = "largest frame payload accepted; 1009 above it"),
    KEEL_KEY(ws_config, max_message, "max_message", KEEL_CONFIG_SIZE, .def = "1m", .min = 1,
             .max = (int64_t)1 << 40, .doc = "largest message (its frames together); 1009"),
    KEEL_KEY(ws_config, idle_timeout_ms, "idle_timeout", KEEL_CONFIG_DURATION, .def = "2m",
             .min = 1, .max = 86400000, .doc = "a connection that sends nothing this long closes"),
    KEEL_KEY(ws_config, ping_interval_ms, "ping_interval", KEEL_CONFIG_DURATION, .def = "30s",
             .doc = "a ping after this much silence; 0: never"),
    KEEL_KEY(ws_config, close_timeout_ms, "close_timeout", KEEL_CONFIG_DURATION, .def = "5s",
             .min = 1, .max = 3600000, .doc = "how long a close handshake waits for the peer's"),
    KEEL_KEY(ws_config, send_queue_limit, "send_queue_limit", KEEL_CONFIG_SIZE, .def = "4m",
             .min = 1024, .max = (int64_t)1 << 40,
             .doc = "bytes queued to a peer before it is closed as too slow (1008)"),
    KEEL_KEY(ws_config, send_high_water, "send_high_water", KEEL_CONFIG_SIZE, .def = "64k",
             .doc = "queued bytes above which the peer counts as slow (on_drain later)"),
    KEEL_KEY(ws_config, send_low_water, "send_low_water", KEEL_CONFIG_SIZE, .def = "16k",
             .doc = "queued bytes below which a slow peer's on_drain runs"),
    KEEL_KEY(ws_config, compression, "compression", KEEL_CONFIG_BOOL, .def = "on",
             .doc = "offer permessage-deflate (RFC 7692) when deflate is loaded"),
    KEEL_KEY(ws_config, context_takeover, "compression_context_takeover", KEEL_CONFIG_BOOL,
             .def = "off", .doc = "keep the compression window between messages"),
    KEEL_KEY(ws_config, threshold, "compression_threshold", KEEL_CONFIG_SIZE, .def = "64",
             .doc = "messages shorter than this go uncompressed"),
    KEEL_KEY(ws_config, window_bits, "compression_window_bits", KEEL_CONFIG_INT, .def = "15",
             .min = 9, .max = 15, .doc = "our compressor's window, 2^N bytes"),
    KEEL_KEY(ws_config, client_window_bits, "compression_client_window_bits", KEEL_CONFIG_INT,
             .def = "12", .min = 8, .max = 15, .doc = "the window asked of the client's"),
    KEEL_KEY(ws_config, mem_level, "compression_mem_level", KEEL_CONFIG_INT, .def = "4", .min = 1,
             .max = 9, .doc = "zlib memLevel of our compressor"),
    KEEL_KEY(ws_config, level, "compression_level", KEEL_CONFIG_INT, .def = "1", .min = 0, .max = 9,
             .doc = "zlib level of our compressor; 0: [deflate] level"),
};
KEEL_CONFIG_SCHEMA(ws_schema, ws_config, ws_keys);

static int read_config(keel_module *m, ws_config *c)
{
    *c = *(const ws_config *)keel_module_config(m);
    if (c->max_message > SIZE_MAX / 2)
        return keel_config_error(m, "max_message", "must fit in memory");
    if (c->send_low_water > c->send_high_water)
        return keel_config_error(m, "send_low_water", "must not be above send_high_water");
    if (c->send_high_water > c->send_queue_limit)
        return keel_config_error(m, "send_high_water", "must not be above send_queue_limit");
    return KEEL_OK;
}

/* ---- Life cycle -------------------------------------------------------------------------- */

static void metric(keel_module *m, const char *name, const char *help, int type, const char *labels,
                   keel_metric **out)
{
    keel_metric_desc d = {
        .size = sizeof d, .name = name, .help = help, .type = type, .labels = labels};
    if (keel_metric_register(m, &d, out) != KEEL_OK)
        *out = NULL; /* keel_metric_add on NULL does nothing */
}

static int ws_load(keel_module *m)
{
    if (ws_g)
        return KEEL_ERR_EXISTS;
    ws_module *g = calloc(1, sizeof *g);
    if (!g)
        return KEEL_ERR_NOMEM;
    g->module = m;
    int rc = read_config(m, &g->cfg);
    if (rc != KEEL_OK)
        goto fail;
    g->nworkers = keel_module_worker_count(m);
    g->workers = calloc(g->nworkers ? g->nworkers : 1, sizeof *g->workers);
    if (!g->workers) {
        rc = KEEL_ERR_NOMEM;
        goto fail;
    }
    /* permessage-deflate only with a deflate module (an optional
     * dependency: "?deflate" makes it load first when listed). */
    g->deflate_ok = keel_deflate_bind(m) == KEEL_OK;
    if (g->cfg.compression && !g->deflate_ok)
        keel_log(m, KEEL_LOG_DEBUG, "no deflate module: permessage-deflate not offered");
    ws_g = g;
    if ((rc = keel_protocol_register(m, &ws_protocol)) != KEEL_OK ||
        (rc = keel_service_publish(m, KEEL_WS_SERVICE, KEEL_WS_API_VERSION, &ws_api)) != KEEL_OK)
        goto fail;
    metric(m, "websocket_connections", "Open WebSocket connections", KEEL_METRIC_GAUGE, NULL,
           &g->m_conns);
    metric(m, "websocket_messages_total", "WebSocket messages", KEEL_METRIC_COUNTER, "dir=\"in\"",
           &g->m_in);
    metric(m, "websocket_messages_total", "WebSocket messages", KEEL_METRIC_COUNTER, "dir=\"out\"",
           &g->m_out);
    keel_module_set_data(m, g);
    return KEEL_OK;
fail:
    ws_g = NULL;
    free(g->workers);
    free(g);
    return rc;
}

static int ws_start(keel_module *m, keel_worker *worker, void *state)
{
    (void)m;
    ws_worker *w = state;
    w->worker = worker;
    unsigned id = keel_worker_id(worker);
    if (id < ws_g->nworkers)
        ws_g->workers[id] = worker; /* where publish posts (pubsub.c) */
    return KEEL_OK;
}

static void ws_stop(keel_module *m, keel_worker *worker, void *state)
{
    (void)m, (void)worker;
    ws_pubsub_stop(state);
}

static void ws_unload(keel_module *m)
{
    ws_module *g = keel_module_data(m);
    if (!g)
        return;
    for (ws_endpoint *e = g->endpoints, *next; e; e = next) {
        next = e->next;
        free((void *)e->ep);
        free(e);
    }
    for (ws_observer *o = g->observers, *next; o; o = next) {
        next = o->next;
        free(o);
    }
    free(g->workers);
    free(g);
    ws_g = NULL;
}

static const char *const ws_dependencies[] = {"?deflate", NULL};

KEEL_MODULE(websocket, .version = "1.0.0", .dependencies = ws_dependencies,
            .worker_state_size = sizeof(ws_worker), .load = ws_load, .start = ws_start,
            .stop = ws_stop, .unload = ws_unload, .config = &ws_schema);
