/* core/net/worker.h — a worker: one thread, one uv_loop, its connections. */
#ifndef KEEL_CORE_WORKER_H
#define KEEL_CORE_WORKER_H

#include <keel/types.h>
#include <uv.h>

#include "base/freelist.h"
#include "net/bufpool.h"
#include "net/host.h"
#include "net/soon.h"
#include "net/timeouts.h"
#include "platform/platform.h"

typedef struct kl_post kl_post;

/* Bytes a transport reads raw before decoding (keel_worker.scratch). */
#define KL_SCRATCH_SIZE (64 * 1024)

/* A listening socket a worker accepts on itself (reuseport mode), with
 * kl_accept rather than libuv's uv_listen (worker.c, accept_failed, says
 * why). */
typedef struct kl_worker_listener {
    uv_poll_t poll;   /* readable: connections wait in the kernel's queue */
    uv_timer_t retry; /* restarts the poll after an accept ran out of descriptors */
    kl_socket sock;   /* closed with the handles (the listener's `given`) */
    kl_listener *listener;
    keel_worker *worker;
} kl_worker_listener;

/* A socket the single acceptor accepted and handed over. */
typedef struct kl_handoff {
    kl_socket sock;
    kl_listener *listener;
    int reclaim; /* over max_connections: admitted only by closing an idle connection */
} kl_handoff;

struct keel_worker {
    kl_host *host;
    unsigned id;
    uv_thread_t thread;
    int thread_started;
    /* keel_worker_loop_idle_seconds_total: the thread's time off the CPU
     * since start_ns (uv_hrtime), where its CPU time can be asked for;
     * libuv's idle-time metric otherwise (kl_worker_loop_idle_ns). */
    int idle_from_cpu;
    uint64_t start_ns;
    uv_loop_t loop;
    uv_sem_t started; /* posted once the modules have started on the thread */
    int start_status;
    uv_sem_t go; /* posted by the main thread: every worker started */
    int go_status;

    /* Shared with other threads, under `lock`. */
    uv_mutex_t lock;
    uv_async_t wakeup;
    kl_post *posts, *posts_tail;
    kl_handoff *handoffs;
    size_t nhandoffs, handoffs_cap;
    int stop_requested;        /* graceful shutdown asked */
    int accept_stop_requested; /* a reload: close the listeners only (kl_worker_stop_accepting) */
    int force_requested;       /* abort everything now */
    int closed;                /* no more posts accepted */

    /* Owned by the worker thread. */
    const char *connect_detail; /* inside a connect's on_error: keel_connect_error_detail */
    void **module_state;        /* indexed by keel_module.index */
    size_t modules_started;
    kl_worker_listener *listeners;
    size_t nlisteners;
    keel_dgram *dgrams; /* its sockets of UDP listeners (net/udp.c) */
    uint64_t nconns;
    keel_conn *idle_head, *idle_tail; /* the idle list (net/conn.c), oldest first */
    int64_t nidle; /* its length; read by the acceptor (relaxed) to pick a worker */
    kl_timeouts timeouts;
    kl_bufpool pool;
    char *scratch;             /* raw reads for connections with a transport */
    uv_idle_t idle;            /* runs the work connections are owed */
    keel_conn *pending;        /* connections with deliveries or completions owed */
    kl_soon *soon, *soon_tail; /* kl_worker_soon's queue */
    kl_freelist output_cache;  /* spare output states (net/output.c) */
    kl_freelist done_cache;    /* spare completion records */
    kl_freelist piece_cache;   /* spare file-piece buffers (net/file_reader.c) */
    keel_timer *timers;        /* module timers, freed on stop */
    keel_connect *connects;    /* outbound attempts until their handles are closed (connect.c) */
    uint64_t offloads;         /* keel_worker_offload calls whose done has not run (offload.c) */
    uv_timer_t shutdown_timer;
    uv_tcp_t first_stream;   /* closed at once: see kl_worker_new */
    kl_log_limit accept_log; /* accept errors: a line a second per worker */
    int stopping;
    int finishing;
    int accepting_stopped; /* its listener handles are closed */

    void *slots[KL_SLOT_MAX]; /* the subsystems' per-worker state (kl_slot_type) */

    uint64_t accepted;
    uint64_t rejected;
    int64_t *metrics; /* this worker's metric slots (runtime/metrics.h) */
};

/* A core subsystem's per-worker block (see kl_slot_type), NULL if the
 * subsystem is not in use. Worker thread. */
static inline void *kl_worker_slot(keel_worker *w, int slot)
{
    return w->slots[slot];
}

keel_worker *kl_worker_new(kl_host *host, unsigned id);
void kl_worker_free(keel_worker *w);

/* Starts the thread: it starts every module and reports through
 * start_status (waited for inside). Main thread. */
int kl_worker_start(keel_worker *w);

/* Second phase, once every worker has started: accept connections
 * (status KEEL_OK) or wind down (an error). Main thread. */
void kl_worker_go(keel_worker *w, int status);

/* Asks for a graceful stop (force: abort every connection). Any thread. */
void kl_worker_request_stop(keel_worker *w, int force);

/* A reload handed the sockets over: the worker closes its listeners (and
 * nothing else); once every worker has, the server stops gracefully. Any
 * thread. */
void kl_worker_stop_accepting(keel_worker *w);

/* Waits for the thread to end. Main thread. */
void kl_worker_join(keel_worker *w);

/* keel_worker_loop_idle_seconds_total's nanoseconds. Any thread. */
uint64_t kl_worker_loop_idle_ns(keel_worker *w);

/* Queues an accepted socket for the worker. reclaim: the socket holds no
 * max_connections slot (the limit was reached) and gets one only if the
 * worker can close one of its idle connections (kl_conn_reclaim_idle).
 * Any thread. */
int kl_worker_handoff(keel_worker *w, kl_socket sock, kl_listener *listener, int reclaim);

/* ---- accept errors (net/listener.c): the acceptor's and the workers' ---- */

/* How long accepting pauses after an accept ran out of descriptors or
 * memory. The connection stays queued and the socket readable, so
 * without a pause the loop would spin on it; nginx disables its accept
 * events for accept_mutex_delay (500 ms) the same way. */
#define KL_ACCEPT_PAUSE_MS 100

/* 1 if kl_accept's error concerns that one connection (reset before it
 * was taken, refused by a firewall): the next may be accepted at once.
 * Any other error pauses accepting. */
int kl_accept_error_transient(int uv_error);

/* keel_accept_errors_total's reason (KL_ACCEPT_*) for such an error. */
int kl_accept_error_reason(int uv_error);

/* The error's line (level error: it is written at every log_level),
 * at most one a second through limit, with the count of those held back.
 * where names the listener (and the worker). */
void kl_accept_error_log(kl_log_limit *limit, uint64_t now_ms, const char *where, int uv_error);

/* Runs cb(conn, status, userdata) from the loop soon, not from inside the
 * caller: owed on the connection (net/output.c). Worker thread. */
int kl_worker_defer_write_cb(keel_worker *w, keel_conn *conn, keel_write_cb cb, void *ud,
                             int status);

/* Queues soon->fn(soon) for the worker's idle pass: once per call, in
 * order, never inside the caller; when the worker finishes, before any
 * module stops. soon must stay put until it has run. Worker thread. */
void kl_worker_soon(keel_worker *w, kl_soon *soon);

/* Makes sure the idle handle runs (there is deferred work). */
void kl_worker_kick(keel_worker *w);

/* A connection closed: the worker may now finish a shutdown. */
void kl_worker_conn_closed(keel_worker *w);

/* Something a graceful stop waits for besides connections ended (an
 * outbound attempt's last handle closed, an offload's done ran): the
 * worker finishes if it is stopping and nothing else is left. */
void kl_worker_try_finish(keel_worker *w);

/* net/posts.c: runs and frees a list taken from w->posts, in order. */
void kl_posts_run(keel_worker *w, kl_post *list);

/* net/timers.c: stops and frees every module timer (the worker stops). */
void kl_timers_close_all(keel_worker *w);

/* net/connect.c: the worker begins to stop: every outbound attempt still
 * in progress ends with on_error(KEEL_ERR_SHUTDOWN). Their handles close
 * afterwards; w->connects empties as they do. */
void kl_connects_stop(keel_worker *w);

#endif
