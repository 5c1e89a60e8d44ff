/* wstest — endpoints for the test_ws_*.c integration tests, written
 * against keel/websocket.h as any endpoint author would.
 *
 *   /t/app     text commands: "close", "close4000", "ping", "sub T",
 *              "unsub T", "pub T MSG", "local T MSG" (publish_local), "flood", "stream", "proto",
 *              "fill" (64 binary blocks of 64 KiB sent at the peer's pace:
 *              up to send_high_water, the rest from on_drain, then "done");
 *              anything else is echoed. Pongs are answered
 *              "pong:DATA". ?refuse=CODE refuses the handshake with CODE.
 *              Subprotocols "chat" and "superchat".
 *   /t/origin  only Origin https://good.example (or none)
 *   /t/frag    streaming: each piece answered as text "F<first><last>:" +
 *              the piece
 * Logs "wstest close code=C reason=R", "wstest drain", "wstest topic
 * active T" / "idle T" (an observer) and "wstest flood rc=S" so tests can
 * see what the endpoint saw.
 */
#include <keel/keel.h>
#include <keel/websocket.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

KEEL_WEBSOCKET_DEFINE

static keel_module *self;

static int handshake(keel_request *req, const char *subprotocol, void **data, void *ud)
{
    (void)subprotocol, (void)ud;
    keel_str v;
    if (keel_request_query_param(req, "refuse", &v) == KEEL_OK && v.len == 3)
        return (v.ptr[0] - '0') * 100 + (v.ptr[1] - '0') * 10 + (v.ptr[2] - '0');
    *data = malloc(16); /* freed in on_close: ASan sees a leak otherwise */
    return *data ? KEEL_OK : KEEL_ERR_NOMEM;
}

/* "fill": blocks sent so far on the one connection that asked. */
static keel_ws *filling;
static int filled;

static void fill_more(keel_ws *ws)
{
    static char block[65536];
    while (filled < 64 && keel_ws_queued(ws) <= 128 * 1024) {
        block[0] = (char)filled; /* changes: a copy, not a borrowed send */
        if (keel_ws_send_copy(ws, KEEL_WS_BINARY, block, sizeof block) != KEEL_OK)
            return;
        filled++;
    }
    if (filled == 64) {
        keel_ws_send_copy(ws, KEEL_WS_TEXT, "done", 4);
        filling = NULL;
    }
}

static void reply(keel_ws *ws, const char *fmt, ...) KEEL_PRINTF(2, 3);
static void reply(keel_ws *ws, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    keel_ws_send_copy(ws, KEEL_WS_TEXT, buf, (size_t)n);
}

static void on_message(keel_ws *ws, int kind, const char *data, size_t len, void *ud)
{
    (void)ud;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%.*s", (int)(len < 299 ? len : 299), data);
    keel_worker *worker = keel_conn_worker(keel_ws_conn(ws));
    if (kind == KEEL_WS_TEXT && strcmp(cmd, "close") == 0) {
        keel_ws_close(ws, 1000, "bye");
    } else if (kind == KEEL_WS_TEXT && strcmp(cmd, "close4000") == 0) {
        keel_ws_close(ws, 4000, "app");
    } else if (kind == KEEL_WS_TEXT && strcmp(cmd, "ping") == 0) {
        keel_ws_ping(ws, "p", 1);
    } else if (kind == KEEL_WS_TEXT && strncmp(cmd, "sub ", 4) == 0) {
        int rc = keel_ws_subscribe(ws, cmd + 4);
        reply(ws, "subscribed %s %d worker %u", cmd + 4, rc, keel_worker_id(worker));
    } else if (kind == KEEL_WS_TEXT && strncmp(cmd, "unsub ", 6) == 0) {
        int rc = keel_ws_unsubscribe(ws, cmd + 6);
        reply(ws, "unsubscribed %s %d", cmd + 6, rc);
    } else if (kind == KEEL_WS_TEXT && strncmp(cmd, "pub ", 4) == 0) {
        char *topic = cmd + 4, *msg = strchr(topic, ' ');
        if (!msg)
            return;
        *msg++ = 0;
        int n = keel_ws_publish(worker, topic, KEEL_WS_TEXT, msg, strlen(msg));
        reply(ws, "published %d", n);
    } else if (kind == KEEL_WS_TEXT && strcmp(cmd, "flood") == 0) {
        static char block[65536];
        int rc = KEEL_OK;
        size_t n = 0;
        while (rc == KEEL_OK && n < 100000) {
            rc = keel_ws_send(ws, KEEL_WS_BINARY, block, sizeof block, NULL, NULL);
            n++;
        }
        keel_log(self, KEEL_LOG_INFO, "wstest flood rc=%s after %zu", keel_strerror(rc), n);
    } else if (kind == KEEL_WS_TEXT && strncmp(cmd, "local ", 6) == 0) {
        char *topic = cmd + 6, *msg = strchr(topic, ' ');
        if (!msg)
            return;
        *msg++ = 0;
        int n = keel_ws_publish_local(worker, topic, KEEL_WS_TEXT, msg, strlen(msg));
        reply(ws, "published %d", n);
    } else if (kind == KEEL_WS_TEXT && strcmp(cmd, "fill") == 0) {
        filling = ws;
        filled = 0;
        fill_more(ws);
    } else if (kind == KEEL_WS_TEXT && strcmp(cmd, "stream") == 0) {
        keel_ws_send_fragment(ws, KEEL_WS_TEXT, "one ", 4, 1, 0);
        keel_ws_ping(ws, "mid", 3);
        int bad = keel_ws_send_copy(ws, KEEL_WS_TEXT, "x", 1);
        keel_ws_send_fragment(ws, KEEL_WS_TEXT, "two ", 4, 0, 0);
        keel_ws_send_fragment(ws, KEEL_WS_TEXT, bad == KEEL_ERR_STATE ? "three" : "WRONG", 5, 0, 1);
    } else if (kind == KEEL_WS_TEXT && strcmp(cmd, "proto") == 0) {
        const char *p = keel_ws_subprotocol(ws);
        reply(ws, "proto %s", p ? p : "(none)");
    } else {
        keel_ws_send_copy(ws, kind, data, len);
    }
}

static void on_pong(keel_ws *ws, const char *data, size_t len, void *ud)
{
    (void)ud;
    reply(ws, "pong:%.*s", (int)len, data);
}

static void on_drain(keel_ws *ws, void *ud)
{
    (void)ud;
    keel_log(self, KEEL_LOG_INFO, "wstest drain");
    if (ws == filling)
        fill_more(ws);
}

static void on_close(keel_ws *ws, int code, const char *reason, size_t len, void *ud)
{
    (void)ud;
    if (ws == filling)
        filling = NULL;
    free(keel_ws_data(ws));
    keel_log(self, KEEL_LOG_INFO, "wstest close code=%d reason=%.*s", code, (int)len, reason);
}

static const char *const protocols[] = {"chat", "superchat", NULL};
static const char *const origins[] = {"https://good.example", NULL};

static const keel_ws_endpoint app = {
    .size = sizeof app,
    .path = "/t/app",
    .subprotocols = protocols,
    .on_handshake = handshake,
    .on_message = on_message,
    .on_drain = on_drain,
    .on_pong = on_pong,
    .on_close = on_close,
};

static const keel_ws_endpoint origin = {
    .size = sizeof origin,
    .path = "/t/origin",
    .origins = origins,
    .on_message = on_message,
};

static void on_fragment(keel_ws *ws, int kind, const char *data, size_t len, int first, int last,
                        void *ud)
{
    (void)ud, (void)kind;
    reply(ws, "F%d%d:%.*s", first, last, (int)len, data);
}

static const keel_ws_endpoint frag = {
    .size = sizeof frag,
    .path = "/t/frag",
    .on_fragment = on_fragment,
};

static void topic_active(keel_worker *w, const char *topic, size_t len, void *ud)
{
    (void)ud;
    keel_log(self, KEEL_LOG_INFO, "wstest topic active %.*s on %u", (int)len, topic,
             keel_worker_id(w));
}

static void topic_idle(keel_worker *w, const char *topic, size_t len, void *ud)
{
    (void)ud;
    keel_log(self, KEEL_LOG_INFO, "wstest topic idle %.*s on %u", (int)len, topic,
             keel_worker_id(w));
}

static void published(keel_worker *w, const char *topic, size_t tlen, int kind, const void *data,
                      size_t len, void *ud)
{
    (void)w, (void)kind, (void)ud;
    keel_log(self, KEEL_LOG_INFO, "wstest observed %.*s: %.*s", (int)tlen, topic, (int)len,
             (const char *)data);
}

static const keel_ws_observer observer = {
    .size = sizeof observer,
    .on_topic_active = topic_active,
    .on_topic_idle = topic_idle,
    .on_publish = published,
};

static int wstest_load(keel_module *m)
{
    self = m;
    int rc;
    if ((rc = keel_ws_bind(m)) != KEEL_OK || (rc = keel_ws_endpoint_add(m, &app)) != KEEL_OK ||
        (rc = keel_ws_endpoint_add(m, &origin)) != KEEL_OK ||
        (rc = keel_ws_endpoint_add(m, &frag)) != KEEL_OK ||
        (rc = keel_ws_observer_add(m, &observer)) != KEEL_OK)
        return rc;
    return KEEL_OK;
}

static const char *const deps[] = {"websocket", NULL};

KEEL_MODULE(wstest, .version = "1.0.0", .dependencies = deps, .load = wstest_load);
