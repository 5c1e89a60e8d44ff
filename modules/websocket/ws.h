/* ws.h — the websocket module's internal header: the per-connection state
 * (struct keel_ws), the module's configuration and per-worker state, and
 * what each source file offers the others. Nothing here is public: the
 * module is built with hidden visibility and exports only its descriptor;
 * endpoint authors see include/keel/websocket.h.
 */
#ifndef KEEL_WS_INTERNAL_H
#define KEEL_WS_INTERNAL_H

#include <keel/keel.h>
#include <keel/deflate.h>
#include <keel/websocket.h>

#include <stddef.h>
#include <stdint.h>

/* ---- RFC 6455 5.2 opcodes ------------------------------------------------ */
enum {
    WS_OP_CONT = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xA
};

/* ---- Configuration: the [websocket] section (docs/websocket.md) ---------- */
typedef struct ws_config {
    uint64_t max_frame;        /* largest frame payload accepted → 1009 */
    uint64_t max_message;      /* largest (decompressed) message → 1009 */
    uint64_t idle_timeout_ms;  /* nothing read for this long: close 1001 */
    uint64_t ping_interval_ms; /* quiet this long: send a ping (0: never) */
    uint64_t close_timeout_ms; /* wait this long for the peer's close */
    uint64_t send_queue_limit; /* queued bytes beyond which the peer is dropped */
    uint64_t send_high_water;  /* on_drain is promised above this ... */
    uint64_t send_low_water;   /* ... and kept once the queue is below this */
    /* permessage-deflate (RFC 7692), offered only if a deflate module is
     * loaded (keel_deflate_bind succeeded) and compression is on. */
    int compression;
    int context_takeover;       /* 0: ask for no context takeover both ways */
    uint64_t threshold;         /* messages shorter than this go uncompressed */
    int64_t window_bits;        /* our compressor's window, 9..15 */
    int64_t client_window_bits; /* what we ask of the client's, 8..15 */
    int64_t mem_level;          /* zlib memLevel for our compressor, 1..9 */
    int64_t level;              /* 1..9, 0: [deflate] level */
} ws_config;

/* A registered endpoint: the author's struct (borrowed) and its module. */
typedef struct ws_endpoint {
    const keel_ws_endpoint *ep; /* borrowed until the author's unload */
    keel_module *owner;
    struct ws_endpoint *next;
} ws_endpoint;

typedef struct ws_observer {
    keel_ws_observer obs; /* copied up to the author's size */
    struct ws_observer *next;
} ws_observer;

typedef struct ws_topic ws_topic;

/* Per-worker state (the descriptor's worker_state_size). */
typedef struct ws_worker {
    keel_worker *worker;
    ws_topic **buckets; /* topic hash table (pubsub.c) */
    size_t nbuckets, ntopics;
} ws_worker;

/* The module, found from any worker through ws_g (websocket.c says why). */
typedef struct ws_module {
    keel_module *module;
    ws_config cfg;
    int deflate_ok; /* the deflate service was bound */
    ws_endpoint *endpoints;
    ws_observer *observers;
    unsigned nworkers;
    keel_worker **workers; /* recorded by each worker's start() */
    keel_metric *m_conns, *m_in, *m_out;
} ws_module;

extern ws_module *ws_g;

/* ---- Per-connection state ------------------------------------------------- */

typedef struct ws_buf { /* a message being reassembled */
    size_t len, cap;
    char data[];
} ws_buf;

typedef struct ws_pmd ws_pmd; /* permessage-deflate state (deflate_ext.c) */

enum ws_state { WS_HEADER = 0, WS_PAYLOAD = 1 };

enum ws_flag {
    WS_CLOSE_SENT = 1 << 0,   /* our close frame is queued: send nothing more */
    WS_CLOSE_RCVD = 1 << 1,   /* the peer's close came: read nothing more */
    WS_APP_CLOSED = 1 << 2,   /* the endpoint's on_close has run */
    WS_DRAIN_WANTED = 1 << 3, /* queue went over send_high_water */
    WS_OUT_OPEN = 1 << 4,     /* send_fragment began a message */
    WS_OPENED = 1 << 5,       /* on_open ran */
    WS_DISCARD = 1 << 6       /* closing: frames are parsed, data dropped */
};

struct keel_ws {
    keel_conn *conn;
    const ws_endpoint *ep;
    void *data;              /* the endpoint's per-connection pointer */
    const char *subprotocol; /* one of the endpoint's strings, or NULL */
    ws_buf *msg;             /* only while a message spans reads or frames */
    ws_pmd *pmd;             /* only when permessage-deflate was negotiated */
    ws_topic **subs;         /* topics subscribed to (pubsub.c), or NULL */
    uint64_t remaining;      /* payload bytes of the current frame still to come */
    uint64_t msg_len;        /* bytes of the current message so far (decompressed) */
    uint64_t last_read_ms;   /* loop time of the last byte read */
    uint64_t close_by_ms;    /* after our close frame: abort if the peer's has not come */
    uint32_t nsubs, capsubs;
    uint8_t mask[4];
    uint8_t mask_off;   /* position within mask of the next payload byte */
    uint8_t state;      /* enum ws_state */
    uint8_t frame_op;   /* opcode of the frame being read */
    uint8_t frame_fin;  /* its FIN bit */
    uint8_t msg_kind;   /* 0, or KEEL_WS_TEXT/BINARY of the message in flight */
    uint8_t msg_rsv1;   /* that message is compressed */
    uint8_t utf8;       /* UTF-8 DFA state across fragments (utf8.c) */
    uint8_t flags;      /* enum ws_flag */
    uint8_t out_kind;   /* send_fragment: the streamed message's kind */
    uint8_t carry_n;    /* on_fragment: bytes of a split character held back */
    uint8_t carry[3];   /* ... which are these */
    uint8_t first_sent; /* on_fragment: the first piece went out */
    uint8_t dead;       /* the connection is gone; freed by the last write callback */
    uint8_t pad_;
    uint32_t pending; /* our writes whose callback is still owed */
};

/* What an idle connection costs beyond the core's keel_conn: this struct
 * (RFC 6455 frame state, no buffers). 128 bytes is one malloc size class
 * on 64-bit glibc; keep it there. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct keel_ws) <= 128, "keel_ws outgrew its budget");

/* ---- sha1.c, base64.c --------------------------------------------------- */
void ws_sha1(const void *data, size_t len, uint8_t out[20]);
/* Writes the base64 of len bytes and a NUL into out (4*ceil(len/3)+1 bytes). */
void ws_base64_encode(const uint8_t *in, size_t len, char *out);
/* Decodes standard padded base64; the length decoded, or -1 if invalid. */
long ws_base64_decode(const char *in, size_t len, uint8_t *out, size_t cap);

/* ---- utf8.c ---------------------------------------------------------------- */
enum { WS_UTF8_ACCEPT = 0, WS_UTF8_REJECT = 1 };
/* Runs the DFA from *state over len bytes; returns the new state
 * (WS_UTF8_REJECT as soon as a byte makes the text invalid). */
uint8_t ws_utf8_run(uint8_t state, const uint8_t *s, size_t len);
/* How many trailing bytes of s[0,len) are an unfinished character. */
size_t ws_utf8_tail(const uint8_t *s, size_t len);

/* ---- frame.c: reading ------------------------------------------------------ */
int ws_on_data(keel_conn *conn, const char *data, size_t len, size_t *consumed);
/* XORs len bytes in place with the mask, starting at *off (updated). */
void ws_unmask(uint8_t *p, size_t len, const uint8_t mask[4], uint8_t *off);

/* ---- send.c: writing ------------------------------------------------------- */
/* Writes a frame header for a server frame (unmasked); returns its length. */
size_t ws_frame_header(uint8_t *out, int fin, int rsv1, int opcode, uint64_t len);
int ws_send(keel_ws *ws, int kind, const void *data, size_t len, keel_free_fn free_fn,
            void *userdata);
int ws_send_copy(keel_ws *ws, int kind, const void *data, size_t len);
int ws_send_fragment(keel_ws *ws, int kind, const void *data, size_t len, int first, int last);
int ws_ping(keel_ws *ws, const void *data, size_t len);
int ws_pong(keel_ws *ws, const void *data, size_t len);
int ws_close(keel_ws *ws, int code, const char *reason);
/* Queues a close frame (code 0: none) and starts close_timeout. */
int ws_send_close(keel_ws *ws, int code, const char *reason, size_t reason_len);
/* Fails the connection (RFC 6455 7.1.7): a close frame with code, then
 * the TCP close without waiting for the peer's; reading stops
 * (WS_CLOSE_RCVD is set, so on_data discards the rest). */
void ws_fail(keel_ws *ws, int code, const char *reason);
/* Queues a prebuilt, shared frame (pubsub): [hdr, payload]; cb with ud
 * runs exactly once if KEEL_OK is returned. */
int ws_send_shared(keel_ws *ws, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud);
/* Checks the queue against send_queue_limit before len more bytes. */
int ws_queue_check(keel_ws *ws, size_t len);
/* The endpoint's on_close, once, and what goes with it. */
void ws_app_close(keel_ws *ws, int code, const char *reason, size_t reason_len);
void ws_check_drain(keel_ws *ws);
/* The connection is gone: frees ws now, or after its last write callback. */
void ws_release(keel_ws *ws);

/* ---- handshake.c ------------------------------------------------------------ */
int ws_handshake(keel_request *req, keel_response *res, void *userdata);

/* ---- pubsub.c ---------------------------------------------------------------- */
int ws_subscribe(keel_ws *ws, const char *topic);
int ws_unsubscribe(keel_ws *ws, const char *topic);
int ws_publish(keel_worker *worker, const char *topic, int kind, const void *data, size_t len);
int ws_publish_local(keel_worker *worker, const char *topic, int kind, const void *data,
                     size_t len);
void ws_unsubscribe_all(keel_ws *ws);
void ws_pubsub_stop(ws_worker *w);

/* ---- deflate_ext.c ----------------------------------------------------------- */
/* Negotiates from the request's Sec-WebSocket-Extensions (RFC 7692 5, 7).
 * On success *pmd is the connection's state (or NULL: no extension) and
 * answer holds the response's field value ("" if none). */
int ws_pmd_negotiate(keel_request *req, ws_pmd **pmd, char *answer, size_t cap);
void ws_pmd_free(ws_pmd *pmd);
/* Decompresses one frame's payload piece; out gets the bytes. last: the
 * message's final piece (the 00 00 ff ff tail is appended then).
 * KEEL_ERR_LIMIT past max_out, KEEL_ERR_PROTOCOL for corrupt data. */
int ws_pmd_inflate(ws_pmd *pmd, const void *in, size_t len, int last, uint64_t max_out,
                   keel_deflate_out_fn out, void *ud);
/* Compresses a whole message into a malloc'd buffer with room for a frame
 * header in front (*hdr_room bytes); NULL if it is not worth it or fails. */
uint8_t *ws_pmd_deflate(ws_pmd *pmd, const void *data, size_t len, size_t hdr_room,
                        size_t *out_len);
/* For pub/sub: the window bits of a connection whose compressor keeps no
 * context between messages (a frame compressed once fits all of them), 0
 * if it keeps context (it then gets uncompressed frames). */
int ws_pmd_shared_bits(const ws_pmd *pmd);
/* Compresses data from an empty window of 2^bits; malloc'd, NULL if it
 * does not pay or fails. */
uint8_t *ws_pmd_deflate_shared(int bits, const void *data, size_t len, size_t *out_len);
/* The message is over: give the streams' memory back if no context
 * takeover was negotiated. */
void ws_pmd_idle(ws_pmd *pmd, int rx);

#endif
