/* chat — a chat room on the websocket module's pub/sub, written as a third
 * party would write it: it includes <keel/keel.h> and <keel/websocket.h>,
 * links nothing, and finds the websocket API as a service in load.
 *
 *     GET /chat/ws?name=NAME   the room (a WebSocket; text messages)
 *
 * Every client subscribes to the topic "room". A text message from one is
 * published to the topic as a JSON line {"type":"msg","name":...,"text":...},
 * so it reaches every client on every worker; joins and leaves are
 * announced the same way ({"type":"join"|"leave","name":...}). A newcomer
 * also learns who is already there: {"type":"members","names":[...]}, one
 * such line per worker that has members (see roll_call). With the
 * pubsub_redis module, messages, joins and leaves reach the members on
 * every keel instance; the roll call covers the newcomer's own instance
 * (the workers it can post to), so a list of members across instances
 * would need a store such as Redis itself. The page that
 * talks to it is examples/chat/www (served by the static module, see
 * chat.conf). */
#include <keel/keel.h>
#include <keel/websocket.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

KEEL_WEBSOCKET_DEFINE

#define TOPIC    "room"
#define MAX_NAME 32   /* bytes of UTF-8 */
#define MAX_TEXT 2000 /* bytes of UTF-8; the page checks it before sending */

/* A member of the room, on the list of its worker once it has joined. */
typedef struct member {
    struct member *prev, *next;
    int joined;
    char inbox[64]; /* its own topic, where other workers send the roll call */
    char name[MAX_NAME + 1];
} member;

/* Per worker (worker_state): its members, touched on its thread only. */
typedef struct chat_worker {
    member *members;
    uint64_t serial; /* numbers the inboxes */
} chat_worker;

static keel_module *self;
static unsigned long long instance; /* tells this process's inboxes from other instances' */
static unsigned nworkers;
static keel_worker **workers; /* recorded by each worker's start() */

/* Appends s as the inside of a JSON string (RFC 8259 7): quotes,
 * backslashes and control characters escaped; the bytes are UTF-8 already
 * (the websocket module validated the texts, chat_handshake the names).
 * Returns the new length, or 0 if out does not have room. */
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

/* Non-zero if s is well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF). A name arrives percent-decoded from the query,
 * so any byte may be in it; a text frame carrying a bad one would make
 * every browser in the room fail its connection (RFC 6455 8.1). */
static int utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1, cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2, cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3, cp = c & 0x07u;
        } else {
            return 0;
        }
        if (len - i <= n)
            return 0;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += n + 1;
    }
    return 1;
}

/* Publishes {"type":TYPE,"name":NAME[,"text":TEXT]} to the room. */
static void announce(keel_worker *w, const char *type, const member *m, const char *text,
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
    keel_ws_publish(w, TOPIC, KEEL_WS_TEXT, line, at);
}

/* The roll call: {"type":"members","names":[...]} with the members of
 * the calling worker (whose list this is), malloc'd, or NULL when it has
 * none. */
static char *roster(chat_worker *cw, size_t *len)
{
    static const char head[] = "{\"type\":\"members\",\"names\":[";
    size_t cap = sizeof head + 2, at = sizeof head - 1;
    for (member *m = cw->members; m != NULL; m = m->next)
        cap += 6 * MAX_NAME + 3; /* ,"NAME" with every byte escaped */
    if (cw->members == NULL)
        return NULL;
    char *line = malloc(cap);
    if (line == NULL)
        return NULL;
    memcpy(line, head, at);
    for (member *m = cw->members; m != NULL; m = m->next) {
        if (m != cw->members)
            line[at++] = ',';
        line[at++] = '"';
        at = json_escape(line, at, cap, m->name, strlen(m->name));
        if (at == 0) {
            free(line);
            return NULL;
        }
        line[at++] = '"';
    }
    memcpy(line + at, "]}", 2);
    *len = at + 2;
    return line;
}

/* On another worker: its members, to a newcomer's inbox by pub/sub. Each
 * worker answers for its own members on its own thread, so no list is
 * shared or locked. A member who joins meanwhile may be named twice (here
 * and by its join), never missed: the newcomer subscribed to the room
 * before asking. */
static void roll_call(keel_worker *w, void *inbox)
{
    size_t len;
    char *line = roster(keel_worker_state(w, self), &len);
    if (line != NULL)
        keel_ws_publish(w, inbox, KEEL_WS_TEXT, line, len);
    free(line);
    free(inbox);
}

/* Before the 101: the name comes from the query (?name=), 1..32 bytes of
 * UTF-8. */
static int chat_handshake(keel_request *req, const char *subprotocol, void **data, void *ud)
{
    (void)subprotocol;
    (void)ud;
    keel_str name;
    if (keel_request_query_param(req, "name", &name) != KEEL_OK || name.len == 0 ||
        name.len > MAX_NAME || !utf8_valid((const unsigned char *)name.ptr, name.len))
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
    keel_worker *w = keel_conn_worker(keel_ws_conn(ws));
    chat_worker *cw = keel_worker_state(w, self);
    unsigned id = keel_worker_id(w);
    /* Topics are global across instances once pubsub_redis bridges them:
     * an inbox named by worker and serial alone would collide with
     * another instance's and receive its roll calls. */
    snprintf(m->inbox, sizeof m->inbox, "chat.inbox:%llx:%u:%llu", instance, id,
             (unsigned long long)++cw->serial);
    if (keel_ws_subscribe(ws, TOPIC) != KEEL_OK || keel_ws_subscribe(ws, m->inbox) != KEEL_OK) {
        keel_ws_close(ws, KEEL_WS_CLOSE_INTERNAL, "cannot join");
        return;
    }
    /* Who is here: this worker's members at once, the other workers'
     * from their own threads (their answers come by pub/sub). */
    size_t len;
    char *line = roster(cw, &len);
    if (line != NULL)
        keel_ws_send_copy(ws, KEEL_WS_TEXT, line, len);
    free(line);
    size_t inbox_size = strlen(m->inbox) + 1;
    for (unsigned i = 0; i < nworkers; i++) {
        if (i == id || workers[i] == NULL)
            continue;
        char *inbox = malloc(inbox_size);
        if (inbox == NULL)
            break;
        memcpy(inbox, m->inbox, inbox_size);
        if (keel_worker_post(workers[i], roll_call, inbox) != KEEL_OK)
            free(inbox);
    }
    m->joined = 1;
    m->next = cw->members;
    if (m->next != NULL)
        m->next->prev = m;
    cw->members = m;
    announce(w, "join", m, NULL, 0);
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
    announce(keel_conn_worker(keel_ws_conn(ws)), "msg", keel_ws_data(ws), data, len);
}

/* Also called when the upgrade failed after chat_handshake accepted:
 * only a member who joined is announced as leaving. */
static void chat_close(keel_ws *ws, int code, const char *reason, size_t reason_len, void *ud)
{
    (void)code;
    (void)reason;
    (void)reason_len;
    (void)ud;
    member *m = keel_ws_data(ws);
    if (m == NULL)
        return;
    if (m->joined) {
        keel_worker *w = keel_conn_worker(keel_ws_conn(ws));
        chat_worker *cw = keel_worker_state(w, self);
        if (m->prev != NULL)
            m->prev->next = m->next;
        else
            cw->members = m->next;
        if (m->next != NULL)
            m->next->prev = m->prev;
        /* This connection no longer receives; the others do. */
        announce(w, "leave", m, NULL, 0);
    }
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

/* Different in every process, which is all an inbox name needs: the clock
 * and where the loader and the allocator put things (address-space layout
 * randomisation), mixed (MurmurHash3's finaliser). */
static unsigned long long instance_id(void)
{
    void *p = malloc(1);
    unsigned long long x = (unsigned long long)time(NULL) ^ (unsigned long long)clock() ^
                           ((unsigned long long)(uintptr_t)p << 12) ^
                           (unsigned long long)(uintptr_t)&instance;
    free(p);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static int chat_load(keel_module *module)
{
    self = module;
    instance = instance_id();
    int rc = keel_ws_bind(module);
    if (rc != KEEL_OK) {
        keel_log(module, KEEL_LOG_ERROR, "needs the websocket module: %s", keel_strerror(rc));
        return rc;
    }
    nworkers = keel_module_worker_count(module);
    workers = calloc(nworkers ? nworkers : 1, sizeof *workers);
    if (workers == NULL)
        return KEEL_ERR_NOMEM;
    rc = keel_ws_endpoint_add(module, &room);
    if (rc != KEEL_OK) {
        free(workers);
        workers = NULL;
    }
    return rc;
}

/* Where the roll call is posted. Every worker's start() runs before any
 * worker accepts a connection (as the websocket module relies on too). */
static int chat_start(keel_module *module, keel_worker *worker, void *state)
{
    (void)module;
    (void)state;
    unsigned id = keel_worker_id(worker);
    if (id < nworkers)
        workers[id] = worker;
    return KEEL_OK;
}

static void chat_unload(keel_module *module)
{
    (void)module;
    free(workers);
    workers = NULL;
}

static const char *const chat_dependencies[] = {"websocket", NULL};

KEEL_MODULE(chat, .version = "1.1.0", .dependencies = chat_dependencies,
            .worker_state_size = sizeof(chat_worker), .load = chat_load, .start = chat_start,
            .unload = chat_unload);
