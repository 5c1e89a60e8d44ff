/* core/net/host.h — what the network layer is given by the layer that runs
 * it (core/server): the settings, registries, metrics and connection
 * counters that workers and listeners use, the per-worker slots of the
 * subsystems above the network layer, and the three things a worker asks
 * of the server. Workers see this rather than the whole server, so that
 * net depends on nothing above it (docs/architecture.md, "The layers"). */
#ifndef KEEL_CORE_HOST_H
#define KEEL_CORE_HOST_H

#include <keel/api.h> /* libkeel's prototypes (KEEL_LINKED), checked against the definitions */
#include <keel/types.h>
#include <uv.h>

#include "base/atomic.h"
#include "base/log.h"
#include "net/inherit.h"
#include "platform/platform.h"
#include "runtime/metrics.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/scopes.h"
#include "runtime/settings.h"

typedef struct kl_host kl_host;

/* What a connection runs and where it came from: its first protocol, its
 * transport, and either the listener's options (accepted) or the host it
 * was asked to reach (outbound, net/connect.c). Connections point to one
 * rather than carrying the fields. */
typedef struct kl_origin {
    const kl_protocol *protocol;
    const kl_transport *transport; /* NULL: plain TCP */
    const kl_listen_spec *spec;    /* accepted: the listen line; NULL for outbound */
    const char *remote_host;       /* outbound: as asked for; NULL for accepted */
    uint32_t read_buffer;          /* outbound: bytes a read may take (0: the server's) */
    /* A tunnel (net/tunnel.c): no socket; the transport is its carrier,
     * which holds the bytes the protocol writes and feeds it its peer's. */
    uint8_t tunnel;
    /* Accepted: every socket of the listener has TCP_NODELAY set, which
     * the sockets it accepts inherit (kl_listen_nodelay). */
    uint8_t nodelay_inherited;
} kl_origin;

/* One `listen` line once bound (net/listener.c). */
typedef struct kl_listener {
    kl_host *host;
    const kl_listen_spec *spec;
    const kl_protocol *protocol;
    const kl_transport *transport; /* NULL: plain TCP */
    unsigned index;
    unsigned port;        /* the port actually bound */
    kl_socket *sockets;   /* one per worker (reuseport) or a single one; kept, */
    unsigned char *given; /* ... and 1 where a worker's handle owns (and closes) it */
    size_t nsockets;
    size_t inherited; /* the first `inherited` sockets were handed down */
    uv_poll_t poll;   /* single-acceptor mode: readable = pending accept */
    uv_timer_t retry; /* restarts the poll after running out of fds */
    kl_log_limit accept_log;
    int polling;
    unsigned next_worker;
    kl_origin origin; /* for its connections; set when bound */
    /* A UDP listener (the `udp` word, net/udp.c): its datagram protocol,
     * datagrams per receive and the send queue's bound in bytes. NULL for
     * a stream listener. */
    const kl_dgram_protocol *dgram;
    uint32_t dgram_batch;
    uint64_t dgram_send_queue;

    /* A unix:PATH listener's socket file, removed when keel stops (not when
     * a reload's successor takes the socket over) if this process or the
     * keel it replaced made it; one a service manager passed is its own. */
    kl_unix_file file;
    enum { KL_FILE_NOT_OURS, KL_FILE_BOUND_HERE, KL_FILE_HANDED_DOWN } file_owner;
} kl_listener;

/* Per-worker state of a subsystem above the network layer, the mechanism
 * modules get through worker_state_size: the worker knows sizes and
 * disposers, not subsystems. A subsystem fills its slot (its index is its
 * own: http/http.h has KL_SLOT_HTTP) before the workers are made; each
 * worker allocates the block zeroed (kl_worker_slot) and disposes of it
 * when the worker is freed. */
#define KL_SLOT_MAX 2
typedef struct kl_slot_type {
    size_t size; /* 0: the slot is not in use */
    /* May be NULL; runs on the zeroed block, with arg, before the thread. */
    void (*init)(void *state, void *arg);
    /* May be NULL; the block itself is freed by the worker. */
    void (*dispose)(void *state);
    void *arg;
} kl_slot_type;

struct kl_host {
    kl_settings settings; /* [keel] */
    const kl_registry *registry;
    keel_module **modules; /* in load order: started and stopped on each worker */
    size_t nmodules;
    const kl_metrics *metrics;    /* sizes each worker's metric slots */
    kl_core_metrics core_metrics; /* the core's own series */
    kl_slot_type slots[KL_SLOT_MAX];
    kl_scopes *scopes; /* listeners, sites, paths (runtime/scopes.c); NULL: none */

    kl_listener *listeners;
    size_t nlisteners;
    kl_inheritance inherited; /* sockets handed down, until the listeners adopt them */
    keel_worker **workers;
    size_t nworkers;
    uv_loop_t *loop; /* the main thread's: the single acceptor runs on it */

    /* What a worker asks of the server, which sets them. Any thread. */
    void (*stop)(kl_host *host);        /* stop gracefully (keel_server_stop) */
    int (*stopping)(kl_host *host);     /* keel_worker_stopping's answer */
    void (*worker_done)(kl_host *host); /* a worker's loop has ended */

    volatile uint64_t connections; /* open connections, all workers: max_connections */
    volatile uint64_t next_conn_id;
    volatile uint64_t workers_not_accepting; /* after a reload's hand-over (net/worker.c) */
    volatile uint64_t acceptor_rejected;     /* single-acceptor mode: written by the main thread */
    volatile uint64_t acceptor_errors[KL_ACCEPT_NREASONS]; /* ... by the main thread too */
};

/* max_connections, checked here and nowhere else: takes a slot for a new
 * connection and returns 1, or returns 0 at the limit (the caller may then
 * make room by closing an idle connection, kl_conn_reclaim_idle). Any
 * thread. */
static inline int kl_host_admit(kl_host *h)
{
    if (kl_atomic_add(&h->connections, 1) <= h->settings.max_connections)
        return 1;
    kl_atomic_sub(&h->connections, 1);
    return 0;
}

/* Gives back a slot kl_host_admit took (the connection ended or never
 * started). Any thread. */
static inline void kl_host_release(kl_host *h)
{
    kl_atomic_sub(&h->connections, 1);
}

/* ---- listeners (net/listener.c), main thread ---- */

/* Binds every listener's socket(s) and logs nothing yet. */
int kl_listeners_bind(kl_host *host);
/* Starts accepting in single-acceptor mode (main loop). */
int kl_listeners_start_acceptor(kl_host *host);
void kl_listeners_stop_acceptor(kl_host *host);
void kl_listeners_close(kl_host *host);
/* Removes the unix:PATH listeners' socket files this process may remove:
 * those it bound, and, once it has served (`served`), those handed down by
 * the keel it replaced. Not after a reload's hand-over: the successor
 * serves on them. */
void kl_listeners_remove_files(kl_host *host, int served);

#endif
