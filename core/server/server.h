/* core/server/server.h — the server instance, loaded modules and listeners. */
#ifndef KEEL_CORE_SERVER_H
#define KEEL_CORE_SERVER_H

#include <keel/embed.h>
#include <uv.h>

#include "base/log.h"
#include "runtime/config.h"
#include "net/inherit.h"
#include "http/http.h"
#include "platform/platform.h"
#include "runtime/metrics.h"
#include "runtime/registry.h"
#include "runtime/settings.h"

struct keel_module {
    keel_server *server;
    keel_module_desc desc; /* host-layout copy of the module's descriptor */
    char *name;
    char *path; /* NULL for a module compiled into the program */
    uv_lib_t lib;
    int lib_open;
    int loaded;   /* load() succeeded: unload() is due */
    size_t index; /* position in load order = per-worker state slot */
    void *data;   /* keel_module_set_data */
    kl_config_section *section;
};

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
} kl_origin;

/* One `listen` line once bound. */
typedef struct kl_listener {
    keel_server *server;
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
} kl_listener;

enum kl_server_state { KL_NEW, KL_RUNNING, KL_STOPPING, KL_STOPPED };

/* The core's own per-worker state, one slot per subsystem above the
 * network layer: the mechanism modules get through worker_state_size,
 * so that the worker knows sizes and disposers, not subsystems. A
 * subsystem describes its slot in server->slots while modules load; each
 * worker allocates it zeroed (kl_worker_slot) and disposes of it when the
 * worker is freed. */
enum { KL_SLOT_HTTP, KL_SLOT_COUNT };
typedef struct kl_slot_type {
    size_t size;                  /* 0: the subsystem is not in use */
    void (*init)(void *state);    /* may be NULL; on the zeroed block, before the thread runs */
    void (*dispose)(void *state); /* may be NULL; the block itself is freed by the worker */
} kl_slot_type;

struct keel_server {
    kl_config *config;
    int config_read;
    kl_settings settings;
    int settings_read;
    char *exe_dir;
    char *data_dir;      /* keel_server_data_dir, found on first use */
    int crash_reporting; /* kl_crash_enable succeeded: disable in release */

    const keel_module_desc **builtins;
    size_t nbuiltins, builtins_cap;

    keel_module **modules; /* in load order */
    size_t nmodules;
    int loading; /* registries accept entries only while modules load */
    kl_registry registry;
    kl_http http; /* routes and filters */
    kl_slot_type slots[KL_SLOT_COUNT];
    keel_appender *appenders; /* closed after unload */

    kl_listener *listeners;
    size_t nlisteners;
    kl_inheritance inherited; /* sockets handed down, until the listeners adopt them */
    keel_worker **workers;
    size_t nworkers;

    uv_loop_t loop; /* the main thread's: signals, stop requests, acceptor */
    int loop_ready;
    uv_async_t wakeup; /* keel_server_stop and finished workers */
    int wakeup_ready;
    uv_signal_t signals[4];
    size_t nsignals;
    uv_mutex_t lock; /* guards state across threads */
    int state;
    int stop_requests; /* how many stops were asked for (2nd forces) */
    int stop_handled;
    /* shutdown_delay: after the first stop request keel keeps accepting
     * and serving for this long, with keel_worker_stopping already true
     * (a readiness probe answers 503), so a balancer stops sending new
     * connections before the listeners close. Main thread only. */
    uv_timer_t drain_timer;
    int drain_timer_ready;
    int workers_stopping;     /* the workers were asked to stop */
    struct kl_reload *reload; /* keel_server_enable_reload (server/reload.c); NULL: off */
    int reloaded;             /* stopping because a successor serves: no delay, no STOPPING=1 */
    int signal_after_reload;  /* a stop signal came while draining after the hand-over */
    int pid_file_written;
    int signal_number;

    volatile uint64_t connections; /* open connections, all workers */
    volatile uint64_t next_conn_id;
    volatile uint64_t workers_done;
    volatile uint64_t workers_not_accepting; /* after a reload's hand-over (net/worker.c) */
    volatile uint64_t acceptor_rejected;     /* single-acceptor mode: written by the main thread */
    volatile uint64_t acceptor_errors[KL_ACCEPT_NREASONS]; /* ... by the main thread too */

    kl_metrics metrics;           /* the registry (runtime/metrics.c) */
    kl_core_metrics core_metrics; /* the core's own series */
    int64_t start_time_ms;        /* keel_server_run began (Unix ms) */
};

/* Loads every module (file or compiled in) in config order, runs load(),
 * and checks what only the loaded set can tell: unknown sections and keys,
 * listeners naming unknown protocols or transports. Logs the first error. */
int kl_modules_load(keel_server *server);

/* Calls unload() in reverse order. Shared objects stay mapped until the
 * process exits (callbacks may still be referenced by late frees). */
void kl_modules_unload(keel_server *server);

/* Frees the module records (after the workers, whose state they size). */
void kl_modules_free(keel_server *server);

/* Binds every listener's socket(s) and logs nothing yet. */
int kl_listeners_bind(keel_server *server);
/* Starts accepting in single-acceptor mode (main loop). */
int kl_listeners_start_acceptor(keel_server *server);
void kl_listeners_stop_acceptor(keel_server *server);
void kl_listeners_close(keel_server *server);

/* Normalises a status from libuv into keel's codes. */
int kl_status_from_uv(int uv_error);

#endif
