/* The server: the embedding API, start-up in a fixed order (config, log,
 * modules, listeners, workers) and the graceful stop driven from the main
 * thread's loop. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/log.h"
#include "runtime/crash.h"
#include "server/appender.h"
#include "server/reload.h"
#include "server/server.h"
#include "base/util.h"
#include "net/worker.h"

static char *executable_dir(void)
{
    char path[4096];
    size_t len = sizeof path;
    if (uv_exepath(path, &len) != 0)
        return kl_strdup(".");
    while (len > 0 && path[len - 1] != '/' && path[len - 1] != '\\')
        len--;
    if (len > 1)
        len--; /* drop the separator */
    return len ? kl_strndup(path, len) : kl_strdup(".");
}

#ifndef KEEL_INSTALL_DATA_DIR_FROM_BINDIR
#define KEEL_INSTALL_DATA_DIR_FROM_BINDIR "../share/keel"
#endif

/* keel's shipped data: beside the executable in a build tree
 * (build/share/keel), else where an install puts it relative to bin/. */
const char *keel_server_data_dir(keel_server *s)
{
    if (s->data_dir == NULL) {
        char *build = kl_path_join(s->exe_dir, "share/keel");
        uv_fs_t req;
        int here = build != NULL && uv_fs_stat(NULL, &req, build, NULL) == 0;
        if (build != NULL)
            uv_fs_req_cleanup(&req);
        if (here)
            s->data_dir = build;
        else {
            free(build);
            s->data_dir = kl_path_join(s->exe_dir, KEEL_INSTALL_DATA_DIR_FROM_BINDIR);
        }
    }
    return s->data_dir ? s->data_dir : ".";
}

/* ---- what a worker asks of the server (net/host.h) ---------------------- */

static keel_server *server_of_host(kl_host *h)
{
    return (keel_server *)(void *)((char *)h - offsetof(keel_server, host));
}

static void host_stop(kl_host *h)
{
    keel_server_stop(server_of_host(h));
}

static int host_stopping(kl_host *h)
{
    return (int)kl_atomic_load(&server_of_host(h)->stopping_answer);
}

/* The last one to end wakes the main loop, which then closes its handles. */
static void host_worker_done(kl_host *h)
{
    keel_server *s = server_of_host(h);
    kl_atomic_add(&s->workers_done, 1);
    uv_async_send(&s->wakeup);
}

keel_server *keel_server_new(void)
{
    kl_platform_init();
    kl_log_init();
    keel_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->config = kl_config_new();
    s->exe_dir = executable_dir();
    s->http = kl_http_new();
    if (s->config == NULL || s->exe_dir == NULL || s->http == NULL ||
        uv_mutex_init(&s->lock) != 0) {
        kl_config_free(s->config);
        free(s->exe_dir);
        kl_http_free(s->http);
        free(s);
        return NULL;
    }
    kl_host *h = &s->host;
    h->registry = &s->registry;
    h->metrics = &s->metrics;
    h->loop = &s->loop;
    h->stop = host_stop;
    h->stopping = host_stopping;
    h->worker_done = host_worker_done;
    return s;
}

void keel_server_free(keel_server *s)
{
    if (s == NULL || s->state == KL_RUNNING || s->state == KL_STOPPING)
        return;
    kl_config_free(s->config);
    if (s->settings_read)
        kl_settings_free(&s->host.settings);
    kl_registry_free(&s->registry);
    kl_http_free(s->http);
    kl_metrics_free(&s->metrics);
    free(s->builtins);
    kl_reload_free(s);
    free(s->exe_dir);
    free(s->data_dir);
    uv_mutex_destroy(&s->lock);
    free(s);
}

static int config_error(int rc, const char *err)
{
    kl_log(KEEL_LOG_ERROR, "%s", err);
    return rc;
}

int keel_server_load_config_file(keel_server *s, const char *path)
{
    char err[512];
    if (s->config_read)
        return KEEL_ERR_STATE;
    int rc = kl_config_parse_file(s->config, path, err, sizeof err);
    s->config_read = 1;
    return rc == KEEL_OK ? rc : config_error(rc, err);
}

int keel_server_load_config_string(keel_server *s, const char *text, const char *name)
{
    char err[512];
    if (s->config_read)
        return KEEL_ERR_STATE;
    int rc = kl_config_parse_string(s->config, text, name ? name : "(config)", err, sizeof err);
    s->config_read = 1;
    return rc == KEEL_OK ? rc : config_error(rc, err);
}

int kl_server_set_from(keel_server *s, const char *assignment, const char *label)
{
    char err[512];
    int rc = kl_config_override_from(s->config, assignment, label, err, sizeof err);
    return rc == KEEL_OK ? rc : config_error(rc, err);
}

int keel_server_set(keel_server *s, const char *assignment)
{
    /* An embedding program has no command line: its messages name the call. */
    return kl_server_set_from(s, assignment, "keel_server_set");
}

int keel_server_add_module(keel_server *s, const keel_module_desc *desc)
{
    if (desc == NULL || desc->name == NULL) {
        kl_log(KEEL_LOG_ERROR, "keel_server_add_module: %s",
               desc ? "the descriptor has no name" : "no descriptor");
        return KEEL_ERR_INVAL;
    }
    if (s->state != KL_NEW)
        return KEEL_ERR_INVAL;
    for (size_t i = 0; i < s->nbuiltins; i++)
        if (strcmp(s->builtins[i]->name, desc->name) == 0)
            return KEEL_ERR_EXISTS;
    if (kl_grow((void **)&s->builtins, &s->builtins_cap, s->nbuiltins + 1, sizeof *s->builtins))
        return KEEL_ERR_NOMEM;
    s->builtins[s->nbuiltins++] = desc;
    return KEEL_OK;
}

unsigned keel_server_listener_port(keel_server *s, unsigned index)
{
    uv_mutex_lock(&s->lock);
    unsigned port = index < s->host.nlisteners ? s->host.listeners[index].port : 0;
    uv_mutex_unlock(&s->lock);
    return port;
}

/* ---- start-up ---------------------------------------------------------- */

/* Raises the descriptor limit as far as it goes and says, in one line,
 * when max_connections cannot be had within it. The estimate
 * (docs/operations.md): each connection's socket and one more descriptor
 * while it is answered (the file static sends, the proxy's upstream
 * connection), every listening socket, 4 a worker (its loop's epoll and
 * eventfd, libuv's reserve descriptor, a file being sent's socket
 * watcher) and 64 for the rest (standard streams, logs, the main loop,
 * module roots and caches). */
static void check_descriptors(keel_server *s)
{
    uint64_t before = 0, limit = 0;
    int rc = kl_nofile_raise(&before, &limit);
    if (rc == UV_ENOSYS)
        return;
    if (rc != 0)
        kl_log(KEEL_LOG_WARN, "cannot raise the descriptor limit (%llu) to the hard limit: %s",
               (unsigned long long)before, uv_strerror(rc));
    else if (limit != before)
        kl_log(KEEL_LOG_DEBUG, "descriptor limit raised from %llu to %llu",
               (unsigned long long)before, (unsigned long long)limit);
    const kl_settings *cfg = &s->host.settings;
    uint64_t sockets = (uint64_t)cfg->nlisten * (cfg->reuseport ? s->nworkers : 1);
    uint64_t need = 2 * cfg->max_connections + sockets + 4 * (uint64_t)s->nworkers + 64;
    if (s->checking)
        kl_log(KEEL_LOG_INFO,
               "descriptors: limit %llu%s; max_connections = %llu with %zu worker%s and %llu "
               "listening socket%s needs up to %llu (2 per connection, 1 per listening socket, "
               "4 per worker, 64 more)%s",
               (unsigned long long)limit, limit == UINT64_MAX ? " (unlimited)" : "",
               (unsigned long long)cfg->max_connections, s->nworkers, s->nworkers == 1 ? "" : "s",
               (unsigned long long)sockets, sockets == 1 ? "" : "s", (unsigned long long)need,
               limit >= need ? ": enough" : "");
    if (limit >= need)
        return;
    kl_log(KEEL_LOG_WARN,
           "the descriptor limit (%llu) is below the %llu that max_connections = %llu may need "
           "(2 per connection, 1 per listening socket, 4 per worker, 64 more): raise the hard "
           "limit (ulimit -Hn, systemd's LimitNOFILE=) or lower max_connections",
           (unsigned long long)limit, (unsigned long long)need,
           (unsigned long long)cfg->max_connections);
}

/* Whether the log file could be opened for appending: an existing one is
 * opened and closed, a missing one needs its folder. */
static int check_log_file(const char *path, char *err, size_t errlen)
{
    uv_fs_t req;
    int fd = uv_fs_open(NULL, &req, path, UV_FS_O_WRONLY | UV_FS_O_APPEND, 0, NULL);
    uv_fs_req_cleanup(&req);
    if (fd >= 0) {
        uv_fs_close(NULL, &req, fd, NULL);
        uv_fs_req_cleanup(&req);
        return KEEL_OK;
    }
    size_t dir_len = kl_path_dir_len(path);
    char *dir = fd != UV_ENOENT ? NULL : dir_len ? kl_strndup(path, dir_len) : kl_strdup(".");
    int rc = fd;
    if (dir != NULL) {
        rc = uv_fs_stat(NULL, &req, dir, NULL);
        uv_fs_req_cleanup(&req);
        free(dir);
        if (rc == 0)
            return KEEL_OK; /* created at start-up */
    }
    snprintf(err, errlen, "cannot open log file %s: %s", path, uv_strerror(rc));
    return KEEL_ERR_IO;
}

/* Reads [keel], points the log where it says, sizes the worker pool. */
/* [keel] read and the log set up: all that describing a module needs. */
static int read_settings(keel_server *s)
{
    char err[512];
    int rc = kl_settings_load(&s->host.settings, s->config, s->exe_dir, err, sizeof err);
    if (rc != KEEL_OK)
        return config_error(rc, err);
    s->settings_read = 1;
    const char *target = s->host.settings.log_target;
    if (s->checking && target != NULL && strcmp(target, "stderr") != 0) {
        /* A check answers whoever runs it (keel -t, keel -s reload): the
         * log file is only tried, never created (a check run as root
         * would leave a file the keel it checks for, running as [keel]
         * user, could not open). */
        if ((rc = check_log_file(target, err, sizeof err)) != KEEL_OK)
            return config_error(rc, err);
        target = "stderr";
    }
    rc = kl_log_configure(target, s->host.settings.log_level, err, sizeof err);
    if (rc != KEEL_OK)
        return config_error(rc, err);
    kl_log_set_format(s->host.settings.log_format);
    return KEEL_OK;
}

static int prepare(keel_server *s)
{
    int rc = read_settings(s);
    if (rc != KEEL_OK)
        return rc;
    if (s->host.settings.workers == 0) {
        unsigned n = (unsigned)uv_available_parallelism();
        s->host.settings.workers = n ? n : 1;
    }
    s->nworkers = s->host.nworkers = s->host.settings.workers;
    /* The user to drop to exists and can be had: `keel -t` says so, and a
     * reload's new process (already that user) fails on another one. */
    if (s->host.settings.user != NULL) {
        char err[512], where[300];
        rc = kl_privileges_check(s->host.settings.user, s->host.settings.group, err, sizeof err);
        if (rc != KEEL_OK) {
            kl_log(KEEL_LOG_ERROR, "%s: %s",
                   kl_config_where(s->host.settings.user_where, where, sizeof where), err);
            return rc;
        }
    }
    check_descriptors(s);
    size_t n = s->host.settings.nlisten;
    kl_listener *listeners = calloc(n ? n : 1, sizeof *listeners);
    if (listeners == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        listeners[i].host = &s->host;
        listeners[i].spec = &s->host.settings.listen[i];
        listeners[i].index = (unsigned)i;
    }
    /* Published under the lock: keel_server_listener_port reads them from
     * any thread. */
    uv_mutex_lock(&s->lock);
    s->host.listeners = listeners;
    s->host.nlisteners = n;
    uv_mutex_unlock(&s->lock);
    if (uv_loop_init(&s->loop) != 0)
        return KEEL_ERR_IO;
    s->loop_ready = 1;
    /* From here on module code runs: a crash in it names the module. */
    if (s->host.settings.crash_report) {
        if (kl_crash_enable() == KEEL_OK)
            s->crash_reporting = 1;
        else
            kl_log(KEEL_LOG_WARN, "crash reports unavailable: cannot install signal handlers");
    }
    return KEEL_OK;
}

static void release(keel_server *s)
{
    if (!s->reloaded)
        kl_listeners_remove_files(&s->host, s->served);
    kl_listeners_close(&s->host);
    /* Modules unload before the workers are freed: a module's own thread
     * may still call keel_worker_post until its unload joins it (and gets
     * KEEL_ERR_SHUTDOWN, not a freed worker). */
    kl_modules_unload(s);
    for (size_t i = 0; i < s->nworkers && s->host.workers; i++)
        kl_worker_free(s->host.workers[i]);
    free(s->host.workers);
    s->host.workers = NULL;
    kl_modules_free(s);
    uv_mutex_lock(&s->lock);
    kl_listener *listeners = s->host.listeners;
    s->host.listeners = NULL;
    s->host.nlisteners = 0;
    uv_mutex_unlock(&s->lock);
    free(listeners);
    if (s->loop_ready) {
        /* Run once more so closed handles finish before the loop goes. */
        uv_run(&s->loop, UV_RUN_NOWAIT);
        uv_loop_close(&s->loop);
        s->loop_ready = 0;
    }
    if (s->crash_reporting) {
        kl_crash_disable();
        s->crash_reporting = 0;
    }
}

/* What running and checking share: the start time, the settings, the
 * listeners' records and the modules loaded. */
static int prepare_and_load(keel_server *s)
{
    uv_timeval64_t now;
    if (uv_gettimeofday(&now) == 0)
        s->start_time_ms = now.tv_sec * 1000 + now.tv_usec / 1000;
    int rc = prepare(s);
    return rc == KEEL_OK ? kl_modules_load(s) : rc;
}

int keel_server_check(keel_server *s)
{
    if (s->state != KL_NEW)
        return KEEL_ERR_STATE;
    s->checking = 1;
    int rc = prepare_and_load(s);
    /* What keel_server_run would refuse, a check refuses. */
    if (rc == KEEL_OK && s->host.nlisteners == 0) {
        kl_log(KEEL_LOG_ERROR, "nothing to serve: the config has no [keel] listen line "
                               "(listen = ADDRESS:PORT PROTOCOL)");
        rc = KEEL_ERR_CONFIG;
    }
    release(s);
    s->state = KL_STOPPED;
    return rc;
}

int keel_server_describe_module(keel_server *s, const char *name, int markdown, FILE *out)
{
    if (s->state != KL_NEW)
        return KEEL_ERR_STATE;
    int rc = read_settings(s);
    if (rc == KEEL_OK)
        rc = kl_module_describe(s, name, markdown, out);
    release(s);
    s->state = KL_STOPPED;
    return rc;
}

/* ---- stopping ---------------------------------------------------------- */

static void close_main_handles(keel_server *s)
{
    kl_listeners_stop_acceptor(&s->host);
    for (size_t i = 0; i < s->nsignals; i++)
        uv_close((uv_handle_t *)&s->signals[i], NULL);
    s->nsignals = 0;
    uv_mutex_lock(&s->lock);
    int close_wakeup = s->wakeup_ready;
    s->wakeup_ready = 0;
    uv_mutex_unlock(&s->lock);
    if (close_wakeup)
        uv_close((uv_handle_t *)&s->wakeup, NULL);
    if (s->drain_timer_ready)
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
    s->drain_timer_ready = 0;
    kl_reload_close(s);
}

/* Stop accepting, then let every worker wind down (force: close every
 * connection now). */
static void stop_workers(keel_server *s, int force)
{
    if (!s->workers_stopping) {
        s->workers_stopping = 1;
        if (s->drain_timer_ready)
            uv_timer_stop(&s->drain_timer);
        kl_listeners_stop_acceptor(&s->host);
    }
    if (force)
        kl_log(KEEL_LOG_WARN, "second stop request: closing all connections now");
    for (size_t i = 0; i < s->nworkers; i++)
        kl_worker_request_stop(s->host.workers[i], force);
}

static void on_drain_end(uv_timer_t *timer)
{
    keel_server *s = timer->data;
    kl_log(KEEL_LOG_INFO, "shutdown_delay over: closing the listeners");
    stop_workers(s, 0);
}

/* Runs on the main loop for stop requests, signals and finished workers. */
static void on_wakeup(uv_async_t *async)
{
    keel_server *s = async->data;
    uv_mutex_lock(&s->lock);
    int requests = s->stop_requests;
    int handled = s->stop_handled;
    s->stop_handled = requests;
    if (requests > 0 && s->state == KL_RUNNING) {
        s->state = KL_STOPPING;
        /* reloaded is set on this thread before a reload's stop request. */
        kl_atomic_store(&s->stopping_answer, s->reloaded ? KEEL_STOPPING_REPLACED : KEEL_STOPPING);
    }
    uv_mutex_unlock(&s->lock);

    if (requests > handled) {
        int force = requests > 1;
        /* After a reload the sockets stay open in the new process: a
         * balancer has nothing to notice, so no delay. */
        uint64_t delay = s->reloaded ? 0 : s->host.settings.shutdown_delay_ms;
        if (handled == 0 && !s->reloaded) {
            kl_service_notify("STOPPING=1");
            kl_reload_cancel(s);
        }
        if (handled == 0) {
            if (s->reloaded)
                kl_log(KEEL_LOG_INFO, "shutting down: the new process took over");
            else if (s->signal_number)
                kl_log(KEEL_LOG_INFO, "shutting down (%s)", kl_signal_name(s->signal_number));
            else
                kl_log(KEEL_LOG_INFO, "shutting down");
        }
        if (handled == 0 && !force && delay > 0 && s->drain_timer_ready) {
            /* Draining: keel_worker_stopping is true from now on (the
             * state above), so readiness probes fail, while everything
             * is still served; a second request ends the wait. */
            kl_log(KEEL_LOG_INFO, "draining: still serving for %llu ms (shutdown_delay)",
                   (unsigned long long)delay);
            uv_timer_start(&s->drain_timer, on_drain_end, delay, 0);
        } else {
            stop_workers(s, force);
        }
    }
    if (kl_atomic_load(&s->workers_done) == s->nworkers)
        close_main_handles(s);
}

void keel_server_stop(keel_server *s)
{
    /* Sent under the lock so that the main loop cannot close the async
     * handle between the state check and the send. */
    uv_mutex_lock(&s->lock);
    if ((s->state == KL_RUNNING || s->state == KL_STOPPING) && s->wakeup_ready) {
        s->stop_requests++;
        uv_async_send(&s->wakeup);
    } else if (s->state == KL_NEW) {
        /* Still starting: remembered, acted on once the loop runs. */
        s->stop_requests++;
    }
    uv_mutex_unlock(&s->lock);
}

/* ---- running ----------------------------------------------------------- */

static void log_listeners(keel_server *s)
{
    for (size_t i = 0; i < s->host.nlisteners; i++) {
        const kl_listener *l = &s->host.listeners[i];
        const kl_listen_spec *spec = l->spec;
        char host[120] = "?";
        if (spec->addr.ss_family == AF_UNIX) {
            kl_unix_name(&spec->addr, host, sizeof host);
            kl_log(KEEL_LOG_INFO, "listening on %s (%s%s%s)", host, spec->protocol,
                   l->transport ? ", " : "", l->transport ? l->transport->cb.name : "");
            continue;
        }
        if (spec->addr.ss_family == AF_INET6)
            uv_ip6_name((const struct sockaddr_in6 *)&spec->addr, host, sizeof host);
        else
            uv_ip4_name((const struct sockaddr_in *)&spec->addr, host, sizeof host);
        int v6 = spec->addr.ss_family == AF_INET6;
        const char *transport = l->dgram ? "udp" : l->transport ? l->transport->cb.name : "";
        /* What the transport offers (a TLS module: its versions). */
        char offers[128] = "";
        if (l->transport != NULL && l->transport->cb.describe != NULL)
            l->transport->cb.describe(offers, sizeof offers);
        offers[sizeof offers - 1] = '\0';
        kl_log(KEEL_LOG_INFO, "listening on %s%s%s:%u (%s%s%s%s%s)", v6 ? "[" : "", host,
               v6 ? "]" : "", l->port, spec->protocol, transport[0] ? ", " : "", transport,
               offers[0] ? ": " : "", offers);
    }
}

/* After the listeners are bound and the logs, certificates and modules'
 * files open, before any worker runs: [keel] user and group, for good
 * (platform/posix/privileges.c). Running as root without them is allowed,
 * and said loudly. */
static int drop_privileges(keel_server *s)
{
    const kl_settings *cfg = &s->host.settings;
    if (cfg->user == NULL) {
        if (kl_privileged())
            kl_log(KEEL_LOG_WARN,
                   "running as root without [keel] user: every worker and module runs as root; "
                   "set user = NAME to drop privileges once the listeners are bound "
                   "(docs/security.md)");
        return KEEL_OK;
    }
    int was_root = kl_privileged();
    char err[512];
    int rc = kl_privileges_drop(cfg->user, cfg->group, err, sizeof err);
    if (rc != KEEL_OK) {
        kl_log(KEEL_LOG_ERROR, "cannot drop privileges: %s", err);
        return rc;
    }
    if (was_root)
        kl_log(KEEL_LOG_INFO, "running as user %s%s%s", cfg->user, cfg->group ? ", group " : "",
               cfg->group ? cfg->group : "");
    return KEEL_OK;
}

/* Starts every worker; if one fails, stops those already running. */
static int start_workers(keel_server *s)
{
    s->host.workers = calloc(s->nworkers, sizeof *s->host.workers);
    if (s->host.workers == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < s->nworkers; i++)
        if ((s->host.workers[i] = kl_worker_new(&s->host, (unsigned)i)) == NULL)
            return KEEL_ERR_NOMEM;
    int rc = KEEL_OK;
    size_t started = 0;
    while (started < s->nworkers && rc == KEEL_OK) {
        rc = kl_worker_start(s->host.workers[started]);
        if (rc != KEEL_OK && !s->host.workers[started]->thread_started)
            break;
        started++;
    }
    /* Second phase: all accept, or all wind down without having accepted. */
    for (size_t i = 0; i < started; i++)
        kl_worker_go(s->host.workers[i], rc == KEEL_OK ? KEEL_OK : KEEL_ERR_SHUTDOWN);
    if (rc != KEEL_OK)
        for (size_t i = 0; i < started; i++)
            kl_worker_join(s->host.workers[i]);
    return rc;
}

int keel_server_run(keel_server *s)
{
    if (s->state != KL_NEW)
        return KEEL_ERR_STATE;
    int rc = prepare_and_load(s);
    if (rc == KEEL_OK && s->host.nlisteners == 0) {
        kl_log(KEEL_LOG_ERROR, "nothing to serve: the config has no [keel] listen line "
                               "(listen = ADDRESS:PORT PROTOCOL)");
        rc = KEEL_ERR_CONFIG;
    }
    if (rc == KEEL_OK)
        rc = kl_inherit_read(&s->host.inherited);
    if (rc == KEEL_OK) {
        uv_mutex_lock(&s->lock);
        rc = kl_listeners_bind(&s->host);
        uv_mutex_unlock(&s->lock);
    }
    if (rc == KEEL_OK) {
        if (uv_async_init(&s->loop, &s->wakeup, on_wakeup) == 0)
            s->wakeup_ready = 1;
        else
            rc = KEEL_ERR_IO;
        s->wakeup.data = s;
    }
    if (rc == KEEL_OK && uv_timer_init(&s->loop, &s->drain_timer) == 0) {
        s->drain_timer.data = s;
        s->drain_timer_ready = 1;
    }
    if (rc == KEEL_OK)
        rc = kl_server_watch_signals(s);
    if (rc == KEEL_OK)
        rc = drop_privileges(s);
    if (rc == KEEL_OK) {
        uv_mutex_lock(&s->lock);
        s->state = KL_RUNNING;
        uv_mutex_unlock(&s->lock);
        rc = start_workers(s);
    }
    if (rc == KEEL_OK)
        rc = kl_listeners_start_acceptor(&s->host);
    if (rc != KEEL_OK) {
        if (s->state == KL_RUNNING) {
            for (size_t i = 0; s->host.workers && i < s->nworkers; i++)
                if (s->host.workers[i] && s->host.workers[i]->thread_started) {
                    kl_worker_request_stop(s->host.workers[i], 1);
                    kl_worker_join(s->host.workers[i]);
                }
            close_main_handles(s);
        } else {
            close_main_handles(s);
        }
        uv_mutex_lock(&s->lock);
        s->state = KL_STOPPED;
        uv_mutex_unlock(&s->lock);
        release(s);
        return rc;
    }

    uv_mutex_lock(&s->lock);
    if (s->stop_requests > 0)
        uv_async_send(&s->wakeup); /* asked to stop while starting */
    uv_mutex_unlock(&s->lock);
    kl_log(KEEL_LOG_INFO, "keel %s started: %zu worker%s, %s", KEEL_VERSION_STRING, s->nworkers,
           s->nworkers == 1 ? "" : "s",
           s->host.settings.reuseport ? "one listening socket per worker" : "one acceptor");
    log_listeners(s);
    s->served = 1;
    int run_rc = kl_reload_announce(s);
    if (run_rc != KEEL_OK)
        keel_server_stop(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);

    for (size_t i = 0; i < s->nworkers; i++) {
        kl_worker_join(s->host.workers[i]);
        /* A worker that could not listen after start-up stopped the server. */
        if (run_rc == KEEL_OK && s->host.workers[i]->start_status != KEEL_OK)
            run_rc = s->host.workers[i]->start_status;
    }
    if (s->host.acceptor_rejected > 0)
        kl_log(KEEL_LOG_INFO, "acceptor rejected %llu connections over max_connections",
               (unsigned long long)s->host.acceptor_rejected);
    kl_reload_exit(s);
    uv_mutex_lock(&s->lock);
    s->state = KL_STOPPED;
    uv_mutex_unlock(&s->lock);
    release(s);
    kl_log(KEEL_LOG_INFO, "stopped");
    return run_rc;
}

int kl_status_from_uv(int uv_error)
{
    switch (uv_error) {
    case 0:
        return KEEL_OK;
    case UV_ENOMEM:
        return KEEL_ERR_NOMEM;
    case UV_EINVAL:
        return KEEL_ERR_INVAL;
    case UV_ENOENT:
        return KEEL_ERR_NOTFOUND;
    case UV_EEXIST:
        return KEEL_ERR_EXISTS;
    case UV_ETIMEDOUT:
        return KEEL_ERR_TIMEOUT;
    case UV_ECANCELED:
    case UV_EOF:
    case UV_EPIPE:
    case UV_ECONNRESET:
        return KEEL_ERR_CLOSED;
    default:
        return KEEL_ERR_IO;
    }
}
