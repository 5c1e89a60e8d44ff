/* core/net/conn.h — the connection manager: one connection's reading,
 * delivery to its protocol, timeouts and close sequence. Its output (every
 * byte and file queued on it, and their completions) belongs to the output
 * unit, net/output.h. Worker thread only. */
#ifndef KEEL_CORE_CONN_H
#define KEEL_CORE_CONN_H

#include <keel/types.h>
#include <uv.h>

#include "net/peer_addr.h"
#include "net/timeouts.h"
#include "runtime/registry.h"
#include "net/host.h"

/* Reading and protocol state: independent facts, so bits. */
enum {
    KL_CONN_PAUSED = 1 << 0,         /* the protocol paused reading */
    KL_CONN_BACKPRESSURE = 1 << 1,   /* too many bytes queued: not reading */
    KL_CONN_READING = 1 << 2,        /* uv_read_start is in effect */
    KL_CONN_PENDING = 1 << 3,        /* on the worker's pending list */
    KL_CONN_DELIVER = 1 << 4,        /* ...to deliver buffered bytes again */
    KL_CONN_EOF = 1 << 5,            /* the peer sent EOF */
    KL_CONN_TRANSPORT_OPEN = 1 << 6, /* the transport's on_open succeeded */
    KL_CONN_PROTOCOL_OPEN = 1 << 7,  /* the protocol's on_open succeeded: on_close is owed */
    KL_CONN_IN_TRANSPORT = 1 << 8,   /* inside the transport's on_read */
    KL_CONN_IN_DATA = 1 << 9,        /* inside the protocol's on_data */
    KL_CONN_STARTED = 1 << 10,       /* counted in the worker's nconns */
    KL_CONN_DEFERRED = 1 << 11,      /* the transport opens the protocol later (ALPN) */
    KL_CONN_IDLE = 1 << 12,          /* on the worker's idle list (keel_conn_set_idle) */
    KL_CONN_SLOT_GIVEN = 1 << 13,    /* reclaimed: its max_connections slot went to a newer one */
    KL_CONN_EOF_OWED = 1 << 14,      /* EOF came behind bytes not yet delivered: told after them */
    KL_CONN_UNSEEN = 1 << 15,        /* bytes read while paused wait unpresented (lazy pause) */
    KL_CONN_PREAMBLE = 1 << 16,      /* the PROXY protocol header is awaited: no layer is open */
    KL_CONN_DEADLINE = 1 << 17,      /* keel_conn_set_deadline's deadline is in force */
    KL_CONN_LISTED = 1 << 18,        /* on the worker's reclaim list (idle, or on a deadline) */
    KL_CONN_PAUSE_OWN = 1 << 19      /* keel_conn_pause is in force (the protocol's own pause) */
};

/* The flags' top bits count the exchanges that paused the connection
 * (kl_conn_exchange_pause); KL_CONN_PAUSED is set while the protocol's own
 * pause or any of theirs holds. A count in the flags because keel_conn has
 * no byte to spare (its budget, below), and 4095 is beyond any number of
 * exchanges a connection carries at once. */
#define KL_CONN_EXCHANGE_PAUSE_SHIFT 20
#define KL_CONN_EXCHANGE_PAUSE_MAX   (UINT32_MAX >> KL_CONN_EXCHANGE_PAUSE_SHIFT)

/* The close sequence, one phase at a time (net/conn_close.c has the single
 * function that moves it on). A connection only ever moves down this list. */
typedef enum kl_phase {
    KL_PHASE_OPEN = 0,  /* reading and writing */
    KL_PHASE_DRAINING,  /* close asked: files and writes held behind them leave first */
    KL_PHASE_FLUSHING,  /* the transport's closing record is queued: libuv's queue empties */
    KL_PHASE_SHUTTING,  /* uv_shutdown in flight: the write side closes */
    KL_PHASE_LINGERING, /* write side shut: input read and discarded for LINGER_MS at most */
    KL_PHASE_CLOSING,   /* uv_close in flight (an abort, or the end of the above) */
    KL_PHASE_CLOSED     /* handle closed; teardown waits for a file read in flight */
} kl_phase;

/* What the connection's one timeout node means right now. */
typedef enum kl_timeout_kind {
    KL_TIMEOUT_READ = 0, /* inactivity: the protocol's timeout, or the server's idle_timeout */
    KL_TIMEOUT_WRITE,    /* output waits: write_timeout from the last progress */
    KL_TIMEOUT_LINGER,   /* the lingering close's total budget (never renewed) */
    KL_TIMEOUT_DEADLINE  /* keel_conn_set_deadline: the peer must be done by then (never renewed) */
} kl_timeout_kind;

typedef struct kl_output kl_output; /* net/output.h */

struct keel_conn {
    /* First, so the handle converts to the conn; its loop's data is the
     * worker (kl_conn_worker). Every idle connection pays for each field
     * below: what can be derived is not stored (the worker from the loop,
     * the transport from the origin, the worker's connections from
     * uv_walk), the output state exists only while output is owed, and the
     * transport's data only on a connection that has one (kl_conn_new). */
    uv_tcp_t tcp;
    const kl_origin *origin; /* protocol, transport, listener or remote host */
    const kl_protocol *protocol;
    void *protocol_data;
    keel_conn *pending_next; /* the worker's list of connections with work owed */
    kl_tnode timeout;
    uint64_t id;
    char *rbuf;                  /* NULL while no byte waits */
    uint32_t rcap, rstart, rlen; /* unconsumed bytes: rbuf[rstart..rlen) */
    uint32_t timeout_ms;         /* the protocol's read timeout; 0: the server's */
    uint32_t flags;
    uint8_t phase;        /* kl_phase */
    uint8_t timeout_kind; /* kl_timeout_kind */
    int16_t close_status; /* a keel_status: small negatives, and 16 bits keep the budget */
    kl_output *out;       /* net/output.c; NULL while nothing is queued or owed */
    /* The worker's reclaim list, oldest first: connections the protocol
     * says it can lose between messages (idle), and those whose peer has a
     * deadline to finish a handshake or a head, closed to admit new ones
     * at max_connections (kl_conn_reclaim_idle; nginx's reusable
     * connections queue, the same two pointers in ngx_connection_t). */
    keel_conn *idle_prev, *idle_next;
};

/* 112 bytes beside libuv's handle on 64-bit: with glibc's malloc a conn on
 * Linux (248-byte uv_tcp_t) takes a 368-byte chunk, and 8 bytes more would
 * take the next 16-byte step. Every idle connection pays for each byte
 * here: the timeout node's times are 32 bits (net/timeouts.h), and the
 * transport's pointer follows the conn only where there is a transport.
 * The idle list's links cost a whole malloc step, and the cheaper ways
 * (links laid over the read buffer's fields, which are unused while idle;
 * a side table that needs an index here anyway) make every read and write
 * path check the mark first, where a slip corrupts memory. 16 bytes per
 * connection buy admitting new clients instead of refusing them while idle
 * ones hold the slots (issue 13). */
_Static_assert(sizeof(void *) != 8 || sizeof(keel_conn) - sizeof(uv_tcp_t) <= 112,
               "keel_conn outgrew its budget");

static inline keel_worker *kl_conn_worker(const keel_conn *conn)
{
    return (keel_worker *)conn->tcp.loop->data;
}

/* The transport (TLS), or NULL for plain TCP. */
static inline const kl_transport *kl_conn_transport(const keel_conn *conn)
{
    return conn->origin->transport;
}

/* A tunnel (keel_conn_open_tunnel, net/tunnel.c): its handle is never
 * opened; reading, the write side's end and its output are its
 * transport's. */
static inline int kl_conn_is_tunnel(const keel_conn *conn)
{
    return conn->origin->tunnel;
}

/* Closing or closed: no new output, no delivery. */
static inline int kl_conn_closing(const keel_conn *conn)
{
    return conn->phase != KL_PHASE_OPEN;
}

/* The handle is closing or closed: nothing reaches the socket any more. */
static inline int kl_conn_handle_closed(const keel_conn *conn)
{
    return conn->phase >= KL_PHASE_CLOSING;
}

/* ---- life cycle (net/conn.c) ---------------------------------------------- */

/* Allocates a conn with its uv_tcp_t initialised on the worker's loop,
 * running what origin says (which must outlive it, and which the conn
 * keeps: an origin put in its place later must have the same transport).
 * tail extra bytes are allocated with it, zeroed, at kl_conn_tail() (an
 * outbound connection keeps its origin and host name there), and freed
 * with it; so is the transport's data pointer when origin has a transport
 * (a tunnel, whose origin comes later, keeps it in its own tail). */
keel_conn *kl_conn_new(keel_worker *w, const kl_origin *origin, size_t tail);
void *kl_conn_tail(keel_conn *conn);

/* Takes a connected handle (accepted, opened from a handed-over socket, or
 * connected outbound) and starts the transport, then the protocol with
 * on_open(conn, arg). On failure the conn is closed. Returns non-zero if
 * the protocol's on_open was called (whatever it returned), or is left to
 * the transport (KEEL_TRANSPORT_DEFER: the connection then owes on_error,
 * if given, should it end first): zero means the transport refused or
 * closed the connection first, and an outbound connection's caller must
 * still be told. */
int kl_conn_start(keel_conn *conn, void *arg, keel_connect_error_fn on_error);

/* An outbound connection whose transport deferred its protocol (TLS,
 * ALPN): keel_conn_connect's handle stays valid until the protocol opens
 * or the connection ends, when kl_connect_answered(attempt) releases it
 * (net/connect.c). Returns 0 if the connection is not deferred (its answer
 * has come already). */
int kl_conn_deferred_attach(keel_conn *conn, keel_connect *attempt);

/* keel_connect_cancel during the handshake: the caller hears nothing
 * more, and the connection is aborted. */
void kl_conn_deferred_cancel(keel_conn *conn);

/* net/connect.c: the deferred connection of an attempt has answered its
 * caller (protocol opened, or the connection ended): the handle goes. */
void kl_connect_answered(keel_connect *attempt);

/* The tail an accepted connection needs on its listener (kl_conn_new): the
 * client's address from a PROXY protocol header (net/preamble.h), kept in
 * the allocation of the conn itself, so only connections of PROXY
 * listeners pay for it and keel_conn keeps its size. */
size_t kl_conn_accept_tail(const kl_origin *origin);

/* Closes the handle of a conn that never started (limit, accept failure). */
void kl_conn_discard(keel_conn *conn);

/* Calls fn for each open connection of the worker (closing ones aside);
 * fn may close the connection it is given. */
void kl_conn_each(keel_worker *w, void (*fn)(keel_conn *conn, void *arg), void *arg);

/* From the worker's idle pass: buffered bytes to deliver again, then
 * completions owed (two passes, in that order, over the pending list). */
void kl_conn_run_delivery(keel_conn *conn);
void kl_conn_run_owed(keel_conn *conn);

/* Puts the connection on the worker's pending list (idempotent). */
void kl_conn_schedule(keel_conn *conn);

/* Clears the connection's idle mark: it leaves the reclaim list unless a
 * deadline keeps it there. */
void kl_conn_idle_unlink(keel_conn *conn);

/* Takes the connection off the reclaim list whatever put it there (it
 * closes). */
void kl_conn_unlist(keel_conn *conn);

/* At max_connections: closes the worker's least recently idle connection
 * that can be lost (keel_conn_set_idle, nothing unread, nothing queued),
 * or failing that the oldest one whose peer has a deadline to finish a
 * handshake or a head (keel_conn_set_deadline), and hands its
 * max_connections slot to the caller's new connection. Returns 1 if it
 * did, 0 if the worker has none. Worker thread. */
int kl_conn_reclaim_idle(keel_worker *w);
/* Marked idle by its protocol, no byte unconsumed, no output queued or
 * owed, no callback running: closing it now loses nothing. */
int kl_conn_reclaimable(const keel_conn *conn);

/* The server is stopping: let the protocol finish or close when drained. */
void kl_conn_shutdown(keel_conn *conn);

/* The worker's timeout heap expired this connection's node. */
void kl_conn_on_timeout(kl_timeouts *t, kl_tnode *node);

/* Re-reads the timeout's meaning from the connection's state (read,
 * write, linger) and sets the node when the meaning changed or `reset`. */
void kl_conn_retime(keel_conn *conn, int reset);

/* Reading on or off as the flags and phase say. */
void kl_conn_update_reading(keel_conn *conn);
/* Asks libuv to read a connection whose connect is in flight (libuv reads
 * nothing until it completes): the connect's write watch then turns into
 * the read watch with one epoll_ctl, where stopping it and starting to
 * read costs two (an ADD refused with EEXIST, then a MOD). */
void kl_conn_read_while_connecting(keel_conn *conn);

/* An exchange on the connection pauses (paused != 0) or resumes its
 * reading: the HTTP layer's keel_request_body_pause for a protocol whose
 * sink has no body_pause. Counted, and apart from the protocol's own
 * keel_conn_pause: reading resumes once neither holds. KEEL_ERR_LIMIT past
 * KL_CONN_EXCHANGE_PAUSE_MAX pauses, KEEL_ERR_STATE for a resume without
 * a pause. */
int kl_conn_exchange_pause(keel_conn *conn, int paused);

/* The rest of closing once the handle is closed and no file read is in
 * flight any more: completions owed, on_close, free. */
void kl_conn_teardown(keel_conn *conn);

/* ---- between conn.c, conn_read.c and conn_preamble.c ---------------------- */

/* The connection whose uv_tcp_t (its first member) this handle is. */
static inline keel_conn *kl_conn_of_handle(uv_handle_t *handle)
{
    return (keel_conn *)handle;
}

/* net/conn_read.c: hands buffered bytes to the protocol until it stops
 * consuming, pauses, closes, or has seen everything. */
void kl_conn_deliver(keel_conn *conn);
/* Delivers again from the worker's idle pass (kl_conn_run_delivery). */
void kl_conn_schedule_delivery(keel_conn *conn);
/* Gives the read buffer back to the pool once it holds nothing unread. */
void kl_conn_release_buffer(keel_conn *conn);
/* Raw bytes to the transport, which delivers what they decode to; a
 * negative status has aborted the connection. */
int kl_conn_transport_read(keel_conn *conn, const char *data, size_t len);

/* net/conn.c: opens the transport, then the protocol (kl_conn_start). 0 if
 * the connection closed or was left to the transport first. */
int kl_conn_open_layers(keel_conn *conn, void *arg, keel_connect_error_fn on_error);

/* net/conn_preamble.c: a PROXY listener's connection waits for the
 * header (0: refused, closed); bytes read meanwhile; the client's
 * address from it, or NULL (not a PROXY listener, not read yet, LOCAL). */
int kl_conn_preamble_start(keel_conn *conn);
void kl_conn_preamble_read(keel_conn *conn);
const struct sockaddr *kl_conn_proxied_peer(keel_conn *conn);

/* net/tunnel.c: a tunnel's reading on or off (its transport is told);
 * the peer's address, its carrier's; where its transport's data is. */
void kl_tunnel_update_reading(keel_conn *conn, int want);
int kl_tunnel_peer_addr(keel_conn *conn, kl_peer_addr *out);
void **kl_tunnel_transport_data(keel_conn *conn);

/* net/conn_read.c: the peer sent its last byte (EOF on the socket, or a
 * tunnel's keel_tunnel_eof). */
void kl_conn_on_eof(keel_conn *conn);

/* The peer's address (the PROXY header's client, else the socket's
 * peer): KEEL_OK, or KEEL_ERR_CLOSED once the handle has closed (a
 * PROXY connection's stays readable until it is freed). */
int kl_conn_peer_addr(keel_conn *conn, kl_peer_addr *out);

/* The connection's own address (getsockname): KEEL_OK, KEEL_ERR_CLOSED
 * once the socket has closed, KEEL_ERR_UNSUPPORTED for one that is not
 * IPv4 or IPv6. Worker thread. */
int kl_conn_local_addr(keel_conn *conn, kl_peer_addr *out);

/* ---- what the output unit reports (net/conn.c) ------------------------------ */

/* Bytes left the process: the write timeout starts again. */
void kl_conn_output_progress(keel_conn *conn);

/* The output queue grew: stop reading past write_high_water. */
void kl_conn_output_grew(keel_conn *conn);

/* The output state is gone (nothing queued or owed): an idle connection
 * waiting for it joins the reclaim list. */
void kl_conn_output_gone(keel_conn *conn);

/* The output queue shrank or emptied: back to the read timeout when
 * nothing waits, release back-pressure (on_drain), and let a close that
 * waited for the output go on. */
void kl_conn_output_settled(keel_conn *conn);

/* ---- the close sequence (net/conn_close.c) -------------------------------- */

/* Closes in order with `status` for on_close: output drains, the write
 * side shuts, input lingers, then the handle closes. Idempotent. */
void kl_conn_close(keel_conn *conn, int status);

/* Closes the handle now, dropping queued output. Idempotent. */
void kl_conn_abort_status(keel_conn *conn, int status);

/* net/conn.c: uv_close with the callback that ends in teardown. */
/* reset: close with SO_LINGER 0 (RST) rather than an orderly close. */
void kl_conn_close_handle(keel_conn *conn, int reset);

/* Moves a closing connection on as far as its state allows (after its
 * output settled, say). */
void kl_conn_advance_close(keel_conn *conn);

#endif
