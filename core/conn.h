/* core/conn.h — the connection manager: one accepted connection's
 * buffers, writes, timeouts and protocol. Worker thread only. */
#ifndef KEEL_CORE_CONN_H
#define KEEL_CORE_CONN_H

#include <keel/types.h>
#include <uv.h>

#include "registry.h"
#include "server.h"
#include "timeouts.h"

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
    KL_CONN_IN_TRANSPORT = 1 << 11    /* inside the transport's on_read */
};

struct keel_conn {
    uv_tcp_t tcp; /* first, so the handle converts to the conn */
    keel_worker *worker;
    kl_listener *listener;
    const kl_protocol *protocol;
    void *protocol_data;
    const kl_transport *transport;
    void *transport_data;
    keel_conn *prev, *next;  /* worker's list of connections */
    keel_conn *pending_next; /* worker's list of pending deliveries */
    kl_tnode timeout;
    uint64_t timeout_ms; /* 0: the server's idle timeout */
    uint64_t id;
    char *rbuf;                  /* NULL while no byte waits */
    uint32_t rcap, rstart, rlen; /* unconsumed bytes: rbuf[rstart..rlen) */
    uint32_t flags;
    uint32_t writes_pending; /* uv_write requests in flight */
    int close_status;
};

/* Takes an accepted handle (already initialised and accepted/opened into
 * conn->tcp) and starts the protocol. On failure the conn is closed. */
void kl_conn_start(keel_conn *conn);

/* Allocates a conn with its uv_tcp_t initialised on the worker's loop. */
keel_conn *kl_conn_new(keel_worker *w, kl_listener *listener);

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

#endif
