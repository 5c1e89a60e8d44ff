/* keel/websocket.h — the API of the `websocket` module (RFC 6455).
 *
 * The websocket module publishes this table as the service "websocket";
 * a handler module (or an embedding program) writes endpoints with it and
 * links nothing. It is also the example of how a third-party protocol
 * module offers an API to others: a versioned table of function pointers
 * looked up in load, and call wrappers that read like keel/api.h's.
 *
 *     #include <keel/keel.h>
 *     #include <keel/websocket.h>
 *
 *     KEEL_WEBSOCKET_DEFINE   // once per module, at file scope
 *
 *     static void on_message(keel_ws *ws, int kind, const char *data, size_t len, void *ud)
 *     {
 *         keel_ws_send_copy(ws, kind, data, len);   // echo
 *     }
 *
 *     static const keel_ws_endpoint echo = {
 *         .size = sizeof echo, .path = "/ws", .on_message = on_message,
 *     };
 *
 *     static int my_load(keel_module *m)
 *     {
 *         int rc = keel_ws_bind(m);              // list "websocket" in dependencies
 *         return rc == KEEL_OK ? keel_ws_endpoint_add(m, &echo) : rc;
 *     }
 *
 * Threads: a keel_ws belongs to its connection's worker; every function
 * taking one runs there. keel_ws_publish runs on any worker.
 */
#ifndef KEEL_WEBSOCKET_H
#define KEEL_WEBSOCKET_H

#include "keel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KEEL_WS_SERVICE     "websocket"
#define KEEL_WS_API_VERSION 1

/* One WebSocket connection (opaque). Valid from on_open until on_close
 * returns. */
typedef struct keel_ws keel_ws;

/* Message kinds: the data opcodes of RFC 6455 5.2. */
enum keel_ws_kind { KEEL_WS_TEXT = 1, KEEL_WS_BINARY = 2 };

/* Close codes of RFC 6455 7.4.1 that applications use. */
enum keel_ws_close_code {
    KEEL_WS_CLOSE_NORMAL = 1000,
    KEEL_WS_CLOSE_GOING_AWAY = 1001,
    KEEL_WS_CLOSE_PROTOCOL_ERROR = 1002,
    KEEL_WS_CLOSE_UNSUPPORTED = 1003,
    KEEL_WS_CLOSE_NO_STATUS = 1005, /* on_close only: the peer's close had no code */
    KEEL_WS_CLOSE_ABNORMAL = 1006,  /* on_close only: no close frame (the connection broke) */
    KEEL_WS_CLOSE_INVALID_DATA = 1007,
    KEEL_WS_CLOSE_POLICY = 1008,
    KEEL_WS_CLOSE_TOO_BIG = 1009,
    KEEL_WS_CLOSE_INTERNAL = 1011
};

/* An endpoint: a route and its callbacks. Set size to
 * sizeof(keel_ws_endpoint); grows at the end. Borrowed: it and the strings
 * it points to stay valid until the registering module's unload. Every
 * callback may be NULL and runs on the connection's worker. */
typedef struct keel_ws_endpoint {
    size_t size;
    const char *path; /* a GET route pattern, as keel_route_add takes */
    /* Subprotocols the endpoint speaks, in order of preference,
     * NULL-terminated (NULL: none). The first the client offers in
     * Sec-WebSocket-Protocol that is in this list is chosen; a client that
     * offers only others is still accepted, with none (RFC 6455 4.2.2). */
    const char *const *subprotocols;
    /* Origin values allowed, exact and case-insensitive
     * ("https://example.com"), NULL-terminated; NULL: any origin (or
     * none). A browser's handshake from elsewhere is refused with 403
     * (RFC 6455 10.2). */
    const char *const *origins;
    void *userdata; /* passed to every callback */

    /* The handshake is valid; decide before the 101. req shows the
     * request (headers, query, route parameters) during this call only;
     * subprotocol is the chosen one or NULL. Return KEEL_OK to accept,
     * storing per-connection data in *ws_data (keel_ws_data), or an HTTP
     * status >= 400 to refuse (sent as the answer). The request's own
     * filters (auth, logging) have run already. */
    int (*on_handshake)(keel_request *req, const char *subprotocol, void **ws_data, void *userdata);

    /* The connection is open: messages can be sent. */
    void (*on_open)(keel_ws *ws, void *userdata);

    /* A whole message (text is valid UTF-8), reassembled from its
     * fragments and decompressed, valid during the call only. Not called
     * when on_fragment is set. */
    void (*on_message)(keel_ws *ws, int kind, const char *data, size_t len, void *userdata);

    /* Streaming instead of whole messages: each piece of a message as it
     * arrives (after decompression; text pieces end on character
     * boundaries), first != 0 on its first piece, last != 0 on its final
     * one (len may be 0 then). Max message size does not apply; max frame
     * size does. */
    void (*on_fragment)(keel_ws *ws, int kind, const char *data, size_t len, int first, int last,
                        void *userdata);

    /* The send queue fell below [websocket] send_low_water after having
     * been above send_high_water: produce more. */
    void (*on_drain)(keel_ws *ws, void *userdata);

    /* A pong arrived (the answer to keel_ws_ping, or unsolicited). */
    void (*on_pong)(keel_ws *ws, const char *data, size_t len, void *userdata);

    /* Last call: the connection is closed. code is the peer's close code
     * (or KEEL_WS_CLOSE_NO_STATUS, or KEEL_WS_CLOSE_ABNORMAL when no close
     * frame came), reason its text (not NUL-terminated). Free ws_data
     * here. Its subscriptions end after this returns (nothing more is
     * sent to it meanwhile), so what it publishes here (a "left" notice)
     * reaches a bridge to other instances before its topics go idle. */
    void (*on_close)(keel_ws *ws, int code, const char *reason, size_t reason_len, void *userdata);
} keel_ws_endpoint;

/* What a bridge module registers with observer_add (main thread, from
 * load). Set size; grows at the end; borrowed until unload. Callbacks run
 * on a worker thread. */
typedef struct keel_ws_observer {
    size_t size;
    void *userdata;
    /* The first subscriber to topic on this server appeared / the last
     * one left (summed over workers: called once for the server). */
    void (*on_topic_active)(keel_worker *worker, const char *topic, size_t topic_len,
                            void *userdata);
    void (*on_topic_idle)(keel_worker *worker, const char *topic, size_t topic_len, void *userdata);
    /* A message was published here with keel_ws_publish. */
    void (*on_publish)(keel_worker *worker, const char *topic, size_t topic_len, int kind,
                       const void *data, size_t len, void *userdata);
} keel_ws_observer;

/* The service table, published as KEEL_WS_SERVICE. Grows at the end with
 * KEEL_WS_API_VERSION bumped. The statuses are keel's (keel_strerror). */
typedef struct keel_ws_api {
    size_t size;

    /* Registers an endpoint (its GET route). Main thread, from load.
     * KEEL_ERR_INVAL, KEEL_ERR_EXISTS (the route is taken), KEEL_ERR_NOMEM. */
    int (*endpoint_add)(keel_module *module, const keel_ws_endpoint *endpoint);

    /* Sends one message. The bytes are borrowed until free_fn(data,
     * userdata) is called (at once on error; with free_fn NULL they must
     * outlive the send). Text must be valid UTF-8 (not checked).
     * KEEL_ERR_CLOSED once a close was sent or received, KEEL_ERR_LIMIT
     * when the send queue is over [websocket] send_queue_limit (the
     * connection is then being closed with 1008: a peer that does not
     * read), KEEL_ERR_INVAL, KEEL_ERR_NOMEM. */
    int (*send)(keel_ws *ws, int kind, const void *data, size_t len, keel_free_fn free_fn,
                void *userdata);
    /* The same with a copy taken: data need only live during the call. */
    int (*send_copy)(keel_ws *ws, int kind, const void *data, size_t len);

    /* Streams one message in fragments: first != 0 on its first piece
     * (kind is read then), last != 0 on its final one. Copied. Nothing
     * else is sent on this connection between first and last except
     * control frames. KEEL_ERR_STATE for a message begun twice or
     * continued without a beginning. */
    int (*send_fragment)(keel_ws *ws, int kind, const void *data, size_t len, int first, int last);

    /* A ping (payload at most 125 bytes, copied). */
    int (*ping)(keel_ws *ws, const void *data, size_t len);

    /* Starts the closing handshake: code (1000, or 3000..4999 for
     * applications) and reason (at most 123 bytes of UTF-8, may be NULL).
     * Nothing more can be sent; on_close comes once the peer answered or
     * [websocket] close_timeout passed. Idempotent. */
    int (*close)(keel_ws *ws, int code, const char *reason);

    /* Per-connection data (set by on_handshake or here). */
    void (*set_data)(keel_ws *ws, void *data);
    void *(*data)(keel_ws *ws);

    /* Bytes accepted by send and not yet handed to the socket: the
     * back-pressure signal (compare with what on_drain promises). */
    size_t (*queued)(keel_ws *ws);

    /* The subprotocol chosen in the handshake, or NULL. */
    const char *(*subprotocol)(keel_ws *ws);

    /* The connection underneath (peer name, worker, id). */
    keel_conn *(*conn)(keel_ws *ws);

    /* ---- Pub/sub ------------------------------------------------------- */

    /* Subscribes ws to topic (copied; any bytes, at most 255). Idempotent.
     * Subscriptions end with the connection. KEEL_ERR_INVAL, NOMEM. */
    int (*subscribe)(keel_ws *ws, const char *topic);
    int (*unsubscribe)(keel_ws *ws, const char *topic);

    /* Sends a message to every subscriber of topic on every worker of this
     * server. The frame is built once per worker (and per compression
     * setting), and reaches other workers through their loops (a post),
     * not a lock per message. The data is copied. Returns the number of
     * local subscribers it was queued for now (other workers' deliveries
     * happen later), or a negative status. Worker thread (any worker). */
    int (*publish)(keel_worker *worker, const char *topic, int kind, const void *data, size_t len);

    /* For bridges between keel instances (a Redis module): an observer
     * learns when this server starts and stops having subscribers to a
     * topic, and sees every message published here; publish_local
     * delivers a message that came from elsewhere to this server's
     * subscribers without showing it to the observers again. */
    int (*observer_add)(keel_module *module, const keel_ws_observer *observer);
    int (*publish_local)(keel_worker *worker, const char *topic, int kind, const void *data,
                         size_t len);
} keel_ws_api;

/* ---- Call wrappers ---------------------------------------------------------
 * KEEL_WEBSOCKET_DEFINE defines the module's private pointer to the table
 * (once per module, in one source file); keel_ws_bind() fills it in load. */

#ifdef __cplusplus
#define KEEL_WEBSOCKET_DEFINE                                                                      \
    extern "C" {                                                                                   \
    KEEL_HIDDEN const keel_ws_api *keel__ws = 0;                                                   \
    }
#else
#define KEEL_WEBSOCKET_DEFINE KEEL_HIDDEN const keel_ws_api *keel__ws = 0;
#endif

extern KEEL_HIDDEN const keel_ws_api *keel__ws;

/* Looks the service up. Main thread, from load; list "websocket" in the
 * descriptor's dependencies. KEEL_ERR_NOTFOUND, KEEL_ERR_ABI. */
static inline int keel_ws_bind(keel_module *module)
{
    const void *table = 0;
    int rc = keel_service_lookup(module, KEEL_WS_SERVICE, KEEL_WS_API_VERSION, &table, 0);
    if (rc == KEEL_OK)
        keel__ws = (const keel_ws_api *)table;
    return rc;
}

static inline int keel_ws_endpoint_add(keel_module *module, const keel_ws_endpoint *endpoint)
{
    return keel__ws->endpoint_add(module, endpoint);
}
static inline int keel_ws_send(keel_ws *ws, int kind, const void *data, size_t len,
                               keel_free_fn free_fn, void *userdata)
{
    return keel__ws->send(ws, kind, data, len, free_fn, userdata);
}
static inline int keel_ws_send_copy(keel_ws *ws, int kind, const void *data, size_t len)
{
    return keel__ws->send_copy(ws, kind, data, len);
}
static inline int keel_ws_send_fragment(keel_ws *ws, int kind, const void *data, size_t len,
                                        int first, int last)
{
    return keel__ws->send_fragment(ws, kind, data, len, first, last);
}
static inline int keel_ws_ping(keel_ws *ws, const void *data, size_t len)
{
    return keel__ws->ping(ws, data, len);
}
static inline int keel_ws_close(keel_ws *ws, int code, const char *reason)
{
    return keel__ws->close(ws, code, reason);
}
static inline void keel_ws_set_data(keel_ws *ws, void *data)
{
    keel__ws->set_data(ws, data);
}
static inline void *keel_ws_data(keel_ws *ws)
{
    return keel__ws->data(ws);
}
static inline size_t keel_ws_queued(keel_ws *ws)
{
    return keel__ws->queued(ws);
}
static inline const char *keel_ws_subprotocol(keel_ws *ws)
{
    return keel__ws->subprotocol(ws);
}
static inline keel_conn *keel_ws_conn(keel_ws *ws)
{
    return keel__ws->conn(ws);
}
static inline int keel_ws_subscribe(keel_ws *ws, const char *topic)
{
    return keel__ws->subscribe(ws, topic);
}
static inline int keel_ws_unsubscribe(keel_ws *ws, const char *topic)
{
    return keel__ws->unsubscribe(ws, topic);
}
static inline int keel_ws_publish(keel_worker *worker, const char *topic, int kind,
                                  const void *data, size_t len)
{
    return keel__ws->publish(worker, topic, kind, data, len);
}
static inline int keel_ws_observer_add(keel_module *module, const keel_ws_observer *observer)
{
    return keel__ws->observer_add(module, observer);
}
static inline int keel_ws_publish_local(keel_worker *worker, const char *topic, int kind,
                                        const void *data, size_t len)
{
    return keel__ws->publish_local(worker, topic, kind, data, len);
}

#ifdef __cplusplus
}
#endif

#endif
