/* core/net/conn.h — the connection manager: one accepted connection's
 * buffers, writes, timeouts and protocol. Worker thread only. */
#ifndef KEEL_CORE_CONN_H
#define KEEL_CORE_CONN_H

#include <keel/types.h>
#include <uv.h>

#include "runtime/registry.h"
#include "runtime/server.h"
#include "net/timeouts.h"

enum {
    KL_CONN_PAUSED = 1 << 0,       /* the protocol paused reading */
    KL_CONN_BACKPRESSURE = 1 << 1, /* too many bytes queued: not reading */
    KL_CONN_READING = 1 << 2,      /* uv_read_start is in effect */
    KL_CONN_CLOSING = 1 << 3,      /* close or abort was asked */
    KL_CONN_FLUSHING = 1 << 4,     /* closing after the queue drains */
    KL_CONN_LINGERING = 1 << 5,    /* write side shut, draining input */
    KL_CONN_HANDLE_CLOSED = 1 << 6,
    KL_CONN_PENDING = 1 << 7,         /* on the worker's pending list */
    KL_CONN_SILENT_CLOSE = 1 << 8,    /* on_open failed: no on_close */
    KL_CONN_SHUTDOWN_SEEN = 1 << 9,   /* the peer sent EOF */
    KL_CONN_TRANSPORT_OPEN = 1 << 10, /* the transport's on_open succeeded */
    KL_CONN_IN_TRANSPORT = 1 << 11,   /* inside the transport's on_read */
    KL_CONN_FILE_ACTIVE = 1 << 12,    /* the file at the head of ops is being sent */
    KL_CONN_CLOSE_OWED = 1 << 13,     /* a graceful close waits for ops to drain */
    KL_CONN_IN_WRITE_FILE = 1 << 14,  /* inside keel_conn_write_file */
    KL_CONN_TEARDOWN_WAIT = 1 << 15,  /* handle closed; a file read is still in flight */
    KL_CONN_STARTED = 1 << 16,        /* counted in the worker's nconns */
    KL_CONN_IN_DATA = 1 << 17         /* inside the protocol's on_data */
};

/* A file transfer, or a write held behind one, and their queue
 * (core/conn_file.c). */
typedef struct kl_op kl_op;
typedef struct kl_ops kl_ops;
typedef struct kl_deferred kl_deferred; /* core/worker.c */

struct keel_conn {
    /* First, so the handle converts to the conn; its loop's data is the
     * worker (kl_conn_worker). Every idle connection pays for each field
     * below: what can be derived is not stored (the worker from the loop,
     * the transport from the listener, the worker's connections from
     * uv_walk). */
    uv_tcp_t tcp;
    const kl_origin *origin; /* protocol, transport, listener or remote host */
    const kl_protocol *protocol;
    void *protocol_data;
    void *transport_data;
    keel_conn *pending_next; /* worker's list of pending deliveries */
    kl_tnode timeout;
    uint64_t timeout_ms; /* 0: the server's idle timeout */
    uint64_t id;
    char *rbuf;                  /* NULL while no byte waits */
    uint32_t rcap, rstart, rlen; /* unconsumed bytes: rbuf[rstart..rlen) */
    uint32_t flags;
    uint32_t writes_pending; /* uv_write requests in flight */
    int close_status;
    /* While a file is being sent, later writes wait in this queue, in
     * order behind it (conn_file.c). NULL until the connection sends a
     * file, and again once the queue has drained. */
    kl_ops *ops;
};

/* 128 bytes beside libuv's handle on 64-bit: with glibc's malloc a conn on
 * Linux (248-byte uv_tcp_t) fits a 384-byte chunk. */
_Static_assert(sizeof(void *) != 8 || sizeof(keel_conn) - sizeof(uv_tcp_t) <= 128,
               "keel_conn outgrew its budget");

static inline keel_worker *kl_conn_worker(const keel_conn *conn)
{
    return (keel_worker *)conn->tcp.loop->data;
}

/* The listener's transport (TLS), or NULL for plain TCP. */
const kl_transport *kl_conn_transport(const keel_conn *conn);

/* Calls fn for each open connection of the worker (closing ones aside);
 * fn may close the connection it is given. */
void kl_conn_each(keel_worker *w, void (*fn)(keel_conn *conn, void *arg), void *arg);

/* Takes a connected handle (accepted, opened from a handed-over socket, or
 * connected outbound) and starts the transport, then the protocol with
 * on_open(conn, arg). On failure the conn is closed. */
void kl_conn_start(keel_conn *conn, void *arg);

/* Allocates a conn with its uv_tcp_t initialised on the worker's loop,
 * running what origin says (which must outlive it). tail extra bytes are
 * allocated with it, zeroed, at kl_conn_tail() (an outbound connection
 * keeps its origin and host name there), and freed with it. */
keel_conn *kl_conn_new(keel_worker *w, const kl_origin *origin, size_t tail);
void *kl_conn_tail(keel_conn *conn);

/* Closes the handle of a conn that never started (limit, accept failure). */
void kl_conn_discard(keel_conn *conn);

/* Delivers buffered bytes again (from the worker's idle pass). */
void kl_conn_deliver_pending(keel_conn *conn);

/* The server is stopping: let the protocol finish or close when drained. */
void kl_conn_shutdown(keel_conn *conn);

/* A connection's timeout node expired. */
void kl_conn_on_timeout(kl_timeouts *t, kl_tnode *node);

/* Closes immediately with the given status. */
void kl_conn_abort_status(keel_conn *conn, int status);

/* ---- between conn.c and conn_file.c ---- */

/* Writes now, bypassing the queue of ops: through the transport if there
 * is one, else to the socket. On KEEL_ERR_IO the connection is aborted.
 * cb is called (later) only if this returns KEEL_OK. */
int kl_conn_send(keel_conn *conn, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud);

/* Bytes are waiting to leave (libuv's queue or ops): the write timeout
 * applies rather than the idle one. */
int kl_conn_writing(keel_conn *conn);

/* A transfer started: the write timeout runs from now. */
void kl_conn_arm_write_timeout(keel_conn *conn);

/* Bytes left: the write timeout starts again. */
void kl_conn_progress(keel_conn *conn);

/* ops_bytes grew: stop reading past write_high_water. */
void kl_conn_check_pressure(keel_conn *conn);

/* Something queued finished: back to the idle timeout when nothing waits,
 * release back-pressure, and go on with a close that waited for it. */
void kl_conn_settle(keel_conn *conn);

/* The rest of closing once the handle is closed and no file read is in
 * flight any more: callbacks owed, on_close, free. */
void kl_conn_teardown(keel_conn *conn);

/* conn_file.c: non-zero while a file or writes held behind one wait. */
int kl_ops_pending(const keel_conn *conn);

/* conn_file.c: held bytes plus file bytes not yet sent. */
uint64_t kl_ops_bytes(const keel_conn *conn);

/* conn_file.c: frees the queue once it has drained (an idle connection
 * keeps no trace of the files it sent). */
void kl_ops_trim(keel_conn *conn);

/* A write through a transport completes for its caller once libuv's
 * queue holds no more than this: the transport takes the bytes at once,
 * and a caller that writes again on completion must still be paced by the
 * peer (a file's pieces, a streamed response). */
#define KL_PACE_BYTES (64 * 1024)

/* conn_file.c: holds a transport write's completion until libuv's queue
 * is down to KL_PACE_BYTES; KEEL_ERR_NOMEM if it cannot (the caller then
 * completes it at once). */
int kl_ops_park(keel_conn *conn, kl_deferred *completion);

/* conn_file.c: libuv's queue shrank (a write completed): completions held
 * by kl_ops_park go out once it is down to KL_PACE_BYTES. */
void kl_ops_on_drain(keel_conn *conn);

/* conn_file.c: holds a write behind the file in progress (copying the
 * bytes with `copy`, else only the keel_buf array). */
int kl_ops_hold(keel_conn *conn, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *ud,
                int copy);

/* conn_file.c: starts what waits at the head of ops once libuv's own
 * queue is empty (a file) or writes held writes. */
void kl_ops_run(keel_conn *conn);

/* conn_file.c: the connection is being aborted: stop watching the socket
 * (the duplicated descriptor would keep it open). */
void kl_ops_abort(keel_conn *conn);

/* conn_file.c: non-zero while a read of the thread pool still uses the
 * file: teardown must wait for it (the caller may close fd from its cb). */
int kl_ops_reading(keel_conn *conn);

/* conn_file.c: every op left gets its callback with an error; from
 * teardown. */
void kl_ops_fail(keel_conn *conn);

#endif
