/* keel/types.h — the types that cross the host/module boundary.
 *
 * Rules that keep this file binary compatible across minor versions:
 *   - every struct a module fills in starts with a `size` member that the
 *     module sets to sizeof(struct) as it was built; the host reads only the
 *     fields that size covers and treats missing callbacks as NULL;
 *   - structs only grow at the end;
 *   - everything else is an opaque handle reached through accessors.
 */
#ifndef KEEL_TYPES_H
#define KEEL_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Every fallible function returns KEEL_OK (0) or one of these
 * negative values; callbacks return them too. */
typedef enum keel_status {
    KEEL_OK = 0,
    KEEL_ERR_NOMEM = -1,        /* an allocation failed */
    KEEL_ERR_INVAL = -2,        /* an argument was invalid */
    KEEL_ERR_NOTFOUND = -3,     /* no such name (protocol, service, key, file) */
    KEEL_ERR_EXISTS = -4,       /* the name is already registered */
    KEEL_ERR_IO = -5,           /* the operating system reported an I/O error */
    KEEL_ERR_CLOSED = -6,       /* the connection is closed or closing */
    KEEL_ERR_STATE = -7,        /* not allowed now (wrong phase or thread) */
    KEEL_ERR_LIMIT = -8,        /* a configured limit was exceeded */
    KEEL_ERR_TIMEOUT = -9,      /* a timeout expired */
    KEEL_ERR_CONFIG = -10,      /* a configuration value is missing or invalid */
    KEEL_ERR_ABI = -11,         /* a module was built for an incompatible ABI */
    KEEL_ERR_SHUTDOWN = -12,    /* the server is shutting down */
    KEEL_ERR_PROTOCOL = -13,    /* the peer violated the protocol */
    KEEL_ERR_UNSUPPORTED = -14, /* not possible this way here: use another way (ABI 1.2) */
    KEEL_ERR_REFUSED = -15      /* the peer refused the connection (ABI 1.3) */
} keel_status;

/* What keel_worker_stopping returns once it is non-zero (ABI 1.5). */
enum keel_stopping {
    KEEL_STOPPING = 1,         /* keel is stopping */
    KEEL_STOPPING_REPLACED = 2 /* this process drains; a reload's new one serves */
};

/* Log levels, most severe first. */
typedef enum keel_log_level {
    KEEL_LOG_ERROR = 0,
    KEEL_LOG_WARN = 1,
    KEEL_LOG_INFO = 2,
    KEEL_LOG_DEBUG = 3
} keel_log_level;

/* Styles for keel_time_format. */
enum { KEEL_TIME_HTTP = 0, KEEL_TIME_CLF = 1, KEEL_TIME_ISO = 2 };

/* Opaque handles. Their lifetimes are documented where they are handed out. */
typedef struct keel_server keel_server;     /* one running instance of keel */
typedef struct keel_module keel_module;     /* a loaded module */
typedef struct keel_worker keel_worker;     /* one worker thread and its loop */
typedef struct keel_conn keel_conn;         /* one accepted connection */
typedef struct keel_timer keel_timer;       /* a one-shot or repeating timer */
typedef struct keel_appender keel_appender; /* a file appended to off the loop */
typedef struct keel_connect keel_connect;   /* an outbound connection being made (ABI 1.3) */
typedef struct keel_dgram keel_dgram;       /* one worker's socket of a UDP listener (ABI 1.9) */

/* A borrowed span of bytes, used for scatter-gather writes. Arrays of these
 * cross the boundary, so this struct never grows. A function taking an
 * array reads the array during the call only; whether the bytes are
 * borrowed beyond it is said where the function is. One span holds at
 * most KEEL_BUF_MAX bytes (larger writes are refused with KEEL_ERR_INVAL:
 * split them). */
#define KEEL_BUF_MAX 0x7fffffffu
typedef struct keel_buf {
    const void *base;
    size_t len;
} keel_buf;

/* One piece of output (ABI 1.8): either bytes in memory or a range of an
 * open file, so that a body made of both ("a head, a file range, a
 * trailer") goes to the connection in one call and in order, the file
 * ranges with sendfile where the connection allows it (nginx's ngx_buf_t,
 * h2o's h2o_sendvec_t). Arrays of these cross the boundary, so this
 * struct never grows. Build them with keel_piece_bytes / keel_piece_file.
 *
 * Ownership follows keel_buf and keel_conn_write_file: a function taking
 * an array reads the array during the call only, but the bytes a BYTES
 * piece points at and the descriptor of a FILE piece are borrowed until
 * the call's completion (keel_write_cb, or the response's release
 * callback): the core neither copies the bytes nor closes the descriptor,
 * and it reads files at explicit offsets, leaving their position alone.
 *
 * BYTES: `base` and `len` (at most KEEL_BUF_MAX); fd and offset unused.
 * FILE: bytes [offset, offset + len) of `fd` (offset + len at most 2^63);
 * base unused. A file shorter than offset + len is an I/O error found
 * while sending (the connection is then aborted: the peer would take what
 * follows for the missing bytes). Pieces of length 0 of either kind are
 * allowed and send nothing. */
enum { KEEL_PIECE_BYTES = 0, KEEL_PIECE_FILE = 1 };
typedef struct keel_piece {
    int kind;         /* KEEL_PIECE_BYTES or KEEL_PIECE_FILE */
    int fd;           /* FILE: an open file */
    const void *base; /* BYTES: the first byte */
    uint64_t offset;  /* FILE: the range's first byte */
    uint64_t len;     /* bytes in the piece */
} keel_piece;

static inline keel_piece keel_piece_bytes(const void *base, size_t len)
{
    keel_piece p = {KEEL_PIECE_BYTES, -1, base, 0, (uint64_t)len};
    return p;
}

static inline keel_piece keel_piece_file(int fd, uint64_t offset, uint64_t len)
{
    keel_piece p = {KEEL_PIECE_FILE, fd, NULL, offset, len};
    return p;
}

/* Called on the owning worker's thread once a write has left the process
 * (status KEEL_OK) or can never complete (KEEL_ERR_CLOSED, KEEL_ERR_IO).
 * The buffers passed to the write may be released from here. It is called
 * exactly once if, and only if, the write call returned KEEL_OK — possibly
 * after the protocol's on_close for a connection that closed meanwhile. */
typedef void (*keel_write_cb)(keel_conn *conn, int status, void *userdata);

/* Called on the timer's worker thread. The timer may be stopped from here. */
typedef void (*keel_timer_cb)(keel_timer *timer, void *userdata);

/* A function posted to a worker's thread with keel_worker_post(). */
typedef void (*keel_post_fn)(keel_worker *worker, void *userdata);

/* Back on the worker's thread after keel_worker_offload's work (ABI 1.3). */
typedef void (*keel_work_done_fn)(keel_worker *worker, int status, void *userdata);

/* An outbound connection could not be made (ABI 1.3): see
 * keel_conn_connect for the statuses. arg is the options' arg. */
typedef void (*keel_connect_error_fn)(keel_worker *worker, int status, void *arg);

/* What keel_conn_connect is asked to do (ABI 1.3). Set size to
 * sizeof(keel_connect_options); grows at the end. */
typedef struct keel_connect_options {
    size_t size;
    const char *host;               /* a name, an IPv4 / IPv6 literal (no brackets), or
                                       (ABI 1.9) unix:PATH / unix:@NAME */
    unsigned port;                  /* 1..65535; ignored for unix: */
    const char *protocol;           /* the registered protocol that drives the connection */
    void *arg;                      /* to the protocol's on_open(conn, arg), or to on_error */
    uint64_t timeout_ms;            /* resolution plus connect; 0: the server's connect_timeout */
    const char *transport;          /* NULL: plain TCP; else a registered transport ("tls") */
    keel_connect_error_fn on_error; /* required */
    /* (ABI 1.4) Bytes each read may take, for a connection that moves bulk
     * (a proxy's upstream): 0 means [keel] read_buffer_size. Capped at
     * read_buffer_max. The buffer is held only while bytes wait. */
    size_t read_buffer_size;
} keel_connect_options;

/* A connection-level protocol (echo, http1, websocket, ...). A module
 * registers it by name during load; a listener names it in the config.
 * All callbacks run on the connection's worker thread; any may be NULL. */
typedef struct keel_protocol {
    size_t size; /* sizeof(keel_protocol) as the module was built */
    const char *name;

    /* A connection starts using this protocol: accepted on a listener
     * (arg == NULL), opened by keel_conn_connect (arg is the options'
     * arg) or handed over by keel_conn_set_protocol (arg is the value
     * passed there). Returning a negative status closes the connection
     * without calling on_close. */
    int (*on_open)(keel_conn *conn, void *arg);

    /* Bytes arrived. `data` holds every byte not yet consumed, oldest first;
     * set *consumed to how many the protocol is done with (the rest are kept
     * and presented again, followed by newer bytes). `data` stays valid until
     * the callback returns, or for as long as reading is paused. Returning a
     * negative status aborts the connection.
     *
     * Unconsumed bytes are presented again only when something changes:
     * more bytes arrive (the next read), reading resumes
     * (keel_conn_resume, with or without new bytes), or the connection is
     * handed to another protocol (keel_conn_set_protocol: the new one gets
     * them). Never spontaneously: a protocol that leaves bytes unconsumed
     * without pausing waits for the peer. The same protocol is not called
     * twice for one read.
     *
     * The bytes are the connection's own read buffer, not shared with
     * anything else: a protocol may transform them in place (WebSocket
     * unmasking, say) by casting the const away. What it leaves
     * unconsumed is presented again as it left it. */
    int (*on_data)(keel_conn *conn, const char *data, size_t len, size_t *consumed);

    /* The write queue fell below the low watermark after having been over
     * the high one (reading was paused meanwhile and is resumed). */
    void (*on_drain)(keel_conn *conn);

    /* The connection's timeout expired (see keel_conn_set_timeout). NULL
     * means the core aborts the connection. The protocol may answer (e.g.
     * HTTP 408) and close. */
    void (*on_timeout)(keel_conn *conn);

    /* The server is stopping gracefully. The protocol should finish what it
     * is doing and then call keel_conn_close. NULL means the core closes the
     * connection as soon as its write queue is empty. Connections still open
     * at the shutdown deadline are aborted. */
    void (*on_shutdown)(keel_conn *conn);

    /* Last call for this connection: free per-connection state here.
     * status is KEEL_OK for an orderly close, otherwise why it ended. Not
     * called if on_open failed or never ran. */
    void (*on_close)(keel_conn *conn, int status);

    /* The peer shut down its sending side (ABI 1.1): no more bytes will
     * arrive, but writes still reach it. The protocol finishes what it is
     * doing and calls keel_conn_close. NULL means: close once the protocol
     * is not paused (an exchange in flight finishes first). */
    void (*on_eof)(keel_conn *conn);
} keel_protocol;

/* ---- Datagram protocols (ABI 1.9) ----------------------------------------
 * A datagram protocol is registered by name like a connection protocol
 * (keel_dgram_protocol_register) and named by a UDP listen line:
 *
 *     listen = 127.0.0.1:8125 statsd udp [batch=N] [send_queue=SIZE]
 *
 * Each worker has its own socket of such a listener where the system
 * balances one port over several sockets (SO_REUSEPORT: Linux, the BSDs);
 * elsewhere (Windows, macOS) one socket is served by worker 0. Either way a
 * keel_dgram is one worker's socket: every callback of it runs on that
 * worker's thread, and the keel_dgram is valid from on_open until on_close
 * returns. There is no connection: each datagram comes with its peer's
 * address, and replies go to an address (keel_dgram_send). */

/* A datagram's peer: an IPv4 address is held IPv4-mapped (::ffff:a.b.c.d,
 * as keel_ip in keel/util.h), an IPv6 one as itself. Passed by pointer and
 * in arrays, so this struct never grows. */
typedef struct keel_dgram_peer {
    unsigned char addr[16]; /* network order */
    uint16_t port;          /* host order */
    uint16_t reserved;      /* 0 */
    uint32_t scope_id;      /* IPv6 link-local zone; 0 otherwise */
} keel_dgram_peer;

/* The largest UDP payload (65,535 minus the IPv4 and UDP headers): a
 * longer datagram is refused by keel_dgram_send. */
#define KEEL_DGRAM_MAX 65507u

typedef struct keel_dgram_protocol {
    size_t size; /* sizeof(keel_dgram_protocol) as the module was built */
    const char *name;

    /* The worker opened its socket of a listener naming this protocol,
     * before any datagram. Keep per-socket state with keel_dgram_set_data.
     * A negative status stops the server's start (logged with the
     * listener). May be NULL. */
    int (*on_open)(keel_dgram *dgram);

    /* One datagram of len bytes (0 allowed) from peer. data and peer are
     * valid during the call only (they point into the worker's receive
     * batch). Datagrams longer than the listener's receive slot (64 KiB)
     * never get here: they are counted as dropped. Required. */
    void (*on_datagram)(keel_dgram *dgram, const char *data, size_t len,
                        const keel_dgram_peer *peer);

    /* The batch of datagrams one receive brought (up to the listener's
     * `batch`) has been handed over: a place to publish what was gathered
     * under one lock rather than one per datagram. May be NULL. */
    void (*on_batch_end)(keel_dgram *dgram);

    /* Last call: the socket is closing (the worker stops, or a reload's
     * successor took over). Free per-socket state here; no send may follow.
     * May be NULL. */
    void (*on_close)(keel_dgram *dgram);
} keel_dgram_protocol;

/* A transport's on_open defers the protocol (ABI 1.4): see
 * keel_transport_open_protocol. */
#define KEEL_TRANSPORT_DEFER 1

/* A byte-layer transport beneath the protocol (plain TCP is built into the
 * core; a TLS module registers one). A listener names it in the config. All
 * callbacks run on the connection's worker thread; any may be NULL. */
typedef struct keel_transport {
    size_t size; /* sizeof(keel_transport) as the module was built */
    const char *name;

    /* A connection was accepted on a listener using this transport (or
     * opened through it by keel_conn_connect). Store per-connection state
     * with keel_conn_set_transport_data. Return KEEL_OK to have the
     * protocol opened at once, KEEL_TRANSPORT_DEFER (ABI 1.4) to open it
     * later with keel_transport_open_protocol (once ALPN has chosen it),
     * or a negative status to refuse the connection. */
    int (*on_open)(keel_conn *conn);

    /* Raw bytes arrived from the socket. Hand decoded bytes to the protocol
     * with keel_transport_deliver, and send raw bytes (e.g. handshake
     * records) with keel_transport_send. A negative status aborts. */
    int (*on_read)(keel_conn *conn, const char *data, size_t len);

    /* The protocol wrote these bytes. Encode them and pass the result to
     * keel_transport_send before returning; the protocol's buffers are
     * released when this returns. A negative status aborts. */
    int (*on_write)(keel_conn *conn, const keel_buf *bufs, size_t nbufs);

    /* The connection is closing in order: send any closing record now with
     * keel_transport_send. */
    void (*on_shutdown)(keel_conn *conn);

    /* Last call: free per-connection state. */
    void (*on_close)(keel_conn *conn);

    /* (ABI 1.8) Only for a tunnel's transport (keel_conn_open_tunnel),
     * whose on_write keeps the bytes until its carrier sends them: how many
     * it still holds. They count as the connection's queued output
     * (keel_conn_write_queued, write_high_water, the pacing of write
     * completions) until it calls keel_tunnel_sent. NULL: none. */
    uint64_t (*queued)(keel_conn *conn);

    /* (ABI 1.8) Only for a tunnel's transport: the connection wants bytes
     * (wanted 1) or not (0: its protocol paused, or its output is over
     * write_high_water). A carrier with flow control holds back its
     * peer's credit while not wanted (HTTP/2: WINDOW_UPDATE). Called when
     * it changes, starting with 1 once the protocol is open. NULL:
     * ignored. */
    void (*on_read_wanted)(keel_conn *conn, int wanted);

    /* (ABI 1.9) What the transport offers its listeners, added to each
     * listener's start-up line: "listening on 0.0.0.0:443 (http1, tls:
     * TLS 1.2)". Writes a short text to buf (NUL-terminated, at most size
     * bytes; an empty one adds nothing). Main thread, once per listener,
     * after every module's load and before any worker runs. NULL: the
     * line names the transport only. */
    void (*describe)(char *buf, size_t size);
} keel_transport;

#ifdef __cplusplus
}
#endif

#endif
