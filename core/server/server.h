/* core/server/server.h — the server instance: the top of the core, which
 * loads the modules, makes the workers and runs them (docs/architecture.md). */
#ifndef KEEL_CORE_SERVER_H
#define KEEL_CORE_SERVER_H

#include <stdio.h>

#include <keel/embed.h>
#include <uv.h>

#include "base/log.h"
#include "http/http.h"
#include "net/host.h"
#include "platform/platform.h"
#include "runtime/config.h"
#include "runtime/metrics.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/settings.h"

enum kl_server_state { KL_NEW, KL_RUNNING, KL_STOPPING, KL_STOPPED };

struct keel_server {
    /* What the workers and listeners are given (net/host.h): the settings,
     * the listeners, the workers, the connection counters and the core's
     * own series live there. */
    kl_host host;
    kl_config *config;
    int config_read;
    int settings_read;
    char *exe_dir;
    char *data_dir;      /* keel_server_data_dir, found on first use */
    int crash_reporting; /* kl_crash_enable succeeded: disable in release */

    const keel_module_desc **builtins;
    size_t nbuiltins, builtins_cap;

    keel_module **modules; /* in load order */
    size_t nmodules;
    int loading;  /* registries accept entries only while modules load */
    int checking; /* keel_server_check: report, bind nothing, keep the log on stderr */
    kl_registry registry;
    kl_http *http;            /* routes and filters (core/http), made with the server */
    keel_appender *appenders; /* closed after unload */
    size_t nworkers;          /* host.nworkers, for the module API */

    uv_loop_t loop; /* the main thread's: signals, stop requests, acceptor */
    int loop_ready;
    uv_async_t wakeup; /* keel_server_stop and finished workers */
    int wakeup_ready;
    uv_signal_t signals[6];
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
    int served;               /* started serving: listeners logged (their files removable) */
    int reloaded;             /* stopping because a successor serves: no delay, no STOPPING=1 */
    int signal_after_reload;  /* a stop signal came while draining after the hand-over */
    int pid_file_written;
    int signal_number;

    volatile uint64_t workers_done;
    /* keel_worker_stopping's answer, read by every worker without the
     * lock (proxies ask it per request): 0 until the state turns
     * KL_STOPPING, then KEEL_STOPPING or KEEL_STOPPING_REPLACED. Written
     * by the main thread only. */
    volatile uint64_t stopping_answer;

    kl_metrics metrics;    /* the registry (runtime/metrics.c) */
    int64_t start_time_ms; /* keel_server_run began (Unix ms) */
};

/* Loads every module (file or compiled in) in config order, runs load(),
 * and checks what only the loaded set can tell: unknown sections and keys,
 * listeners naming unknown protocols or transports. Logs the first error. */
/* keel_server_set with the override labelled `label` in messages (a
 * static string): main.c passes "--set", keel_server_set its own name. */
int kl_server_set_from(keel_server *server, const char *assignment, const char *label);

int kl_modules_load(keel_server *server);

/* Calls unload() in reverse order. Shared objects stay mapped until the
 * process exits (callbacks may still be referenced by late frees). */
void kl_modules_unload(keel_server *server);
/* Prints a module's declared keys (keel --help-module) without loading it:
 * its descriptor is found and checked, its load is not run. */
int kl_module_describe(keel_server *server, const char *name, int markdown, FILE *out);

/* Frees the module records (after the workers, whose state they size). */
void kl_modules_free(keel_server *server);

/* server/metrics.c: registers the core's own series (into host's
 * core_metrics). Main thread, before modules load. */
int kl_metrics_register_core(keel_server *server);

/* Normalises a status from libuv into keel's codes. */
int kl_status_from_uv(int uv_error);

/* Starts watching the signals that stop, reload and reopen (signals.c);
 * KEEL_ERR_IO if libuv cannot. Main thread, once, as the server runs. */
int kl_server_watch_signals(keel_server *server);

/* A stop signal's name for the log ("SIGTERM", "Ctrl-Break"). */
const char *kl_signal_name(int signum);

#endif
