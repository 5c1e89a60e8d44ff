/* chat — a chat room on the websocket module's pub/sub, written as a third
 * party would write it: it includes <keel/keel.h> and <keel/websocket.h>,
 * links nothing, and finds the websocket API as a service in load.
 *
 *     GET /chat/ws?name=NAME   the room (a WebSocket; text messages)
 *
 * Every client subscribes to the topic "room". A text message from one is
 * published to the topic as a JSON line {"type":"msg","name":...,"text":...},
 * so it reaches every client on every worker; joins and leaves are
 * announced the same way. The page that talks to it is examples/chat/www
 * (served by the static module, see chat.conf). */
#include <keel/keel.h>
#include <keel/websocket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

KEEL_WEBSOCKET_DEFINE

#define TOPIC    "room"
#define MAX_NAME 32
#define MAX_TEXT 2000

typedef struct member {
    char name[MAX_NAME + 1];
} member;

/* Appends s as the inside of a JSON string (RFC 8259 7): quotes,
 * backslashes and control characters escaped; the bytes are UTF-8 already
 * (the websocket module validated them). Returns the new length, or 0 if
 * out does not have room. */
static size_t json_escape(char *out, size_t at, size_t cap, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t n;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            n = 2;
        } else if (c < 0x20) {
            n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
        } else {
            esc[0] = (char)c;
            n = 1;
        }
        if (at + n >= cap)
            return 0;
        memcpy(out + at, esc, n);
        at += n;
    }
    return at;
}

/* Publishes {"type":TYPE,"name":NAME[,"text":TEXT]} to the room. */
static void announce(keel_ws *ws, const char *type, const member *m, const char *text,
                     size_t text_len)
{
    char line[64 + 6 * (MAX_NAME + MAX_TEXT)];
    size_t at = (size_t)snprintf(line, sizeof line, "{\"type\":\"%s\",\"name\":\"", type);
    at = json_escape(line, at, sizeof line, m->name, strlen(m->name));
    if (at == 0)
        return;
    if (text != NULL) {
        static const char mid[] = "\",\"text\":\"";
        memcpy(line + at, mid, sizeof mid - 1);
        at = json_escape(line, at + sizeof mid - 1, sizeof line, text, text_len);
        if (at == 0)
            return;
    }
    if (at + 3 > sizeof line)
        return;
    memcpy(line + at, "\"}", 2);
    at += 2;
    keel_ws_publish(keel_conn_worker(keel_ws_conn(ws)), TOPIC, KEEL_WS_TEXT, line, at);
}

/* Before the 101: the name comes from the query (?name=), 1..32 bytes. */
static int chat_handshake(keel_request *req, const char *subprotocol, void **data, void *ud)
{
    (void)subprotocol;
    (void)ud;
    keel_str name;
    if (keel_request_query_param(req, "name", &name) != KEEL_OK || name.len == 0 ||
        name.len > MAX_NAME)
        return 400;
    member *m = calloc(1, sizeof *m);
    if (m == NULL)
        return 503;
    memcpy(m->name, name.ptr, name.len);
    *data = m;
    return KEEL_OK;
}

static void chat_open(keel_ws *ws, void *ud)
{
    (void)ud;
    member *m = keel_ws_data(ws);
    if (keel_ws_subscribe(ws, TOPIC) != KEEL_OK) {
        keel_ws_close(ws, KEEL_WS_CLOSE_INTERNAL, "cannot join");
        return;
    }
    announce(ws, "join", m, NULL, 0);
}

static void chat_message(keel_ws *ws, int kind, const char *data, size_t len, void *ud)
{
    (void)ud;
    if (kind != KEEL_WS_TEXT) {
        keel_ws_close(ws, KEEL_WS_CLOSE_UNSUPPORTED, "text only");
        return;
    }
    if (len > MAX_TEXT) {
        keel_ws_close(ws, KEEL_WS_CLOSE_TOO_BIG, "message too long");
        return;
    }
    announce(ws, "msg", keel_ws_data(ws), data, len);
}

static void chat_close(keel_ws *ws, int code, const char *reason, size_t reason_len, void *ud)
{
    (void)code;
    (void)reason;
    (void)reason_len;
    (void)ud;
    member *m = keel_ws_data(ws);
    if (m == NULL)
        return;
    /* Published by the worker, not this connection: it no longer
     * receives, but the others do. */
    announce(ws, "leave", m, NULL, 0);
    free(m);
}

static const keel_ws_endpoint room = {
    .size = sizeof(keel_ws_endpoint),
    .path = "/chat/ws",
    .on_handshake = chat_handshake,
    .on_open = chat_open,
    .on_message = chat_message,
    .on_close = chat_close,
};

static int chat_load(keel_module *module)
{
    int rc = keel_ws_bind(module);
    if (rc != KEEL_OK) {
        keel_log(module, KEEL_LOG_ERROR, "needs the websocket module: %s", keel_strerror(rc));
        return rc;
    }
    return keel_ws_endpoint_add(module, &room);
}

static const char *const chat_dependencies[] = {"websocket", NULL};

KEEL_MODULE(chat, .version = "1.0.0", .dependencies = chat_dependencies, .load = chat_load);
