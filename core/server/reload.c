/* Zero-downtime reload (server/reload.h).
 *
 * As nginx's binary upgrade, but in one step: the running keel (the old
 * process) starts a new one with the same arguments, the program file as
 * it is on disk now (an upgraded binary is picked up) and every listening
 * socket as descriptors 3, 4, ... (KEEL_LISTEN_FDS), plus one end of a
 * socket pair (KEEL_READY_FD). The new process reads its config, loads
 * its modules, adopts the sockets by address and starts its workers; both
 * processes then accept from the same queues, so no connection is refused.
 * Once it serves it writes one byte on the pair, and only then does the
 * old process stop accepting and drain its connections, as on SIGTERM.
 * A new process that fails (a bad config, a module that does not load)
 * exits without that byte: the old one logs it and serves on, untouched.
 *
 * Under systemd (Type=notify, NotifyAccess=all) the old process reports
 * RELOADING=1, and the new one MAINPID and READY=1, so the unit follows
 * the hand-over (sd_notify(3)). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/log.h"
#include "base/util.h"
#include "server/reload.h"
#include "server/server.h"
#include "net/worker.h"

struct kl_reload {
    keel_server *server;
    char *exe;   /* the program file's path, as it was at start-up */
    char **argv; /* NULL-terminated copy */
    uv_process_t child;
    uv_pipe_t ready; /* the successor writes one byte here once it serves */
    uv_timer_t timer;
    int child_open, ready_open, timer_open;
    int served;     /* the successor said it serves */
    int cancelled;  /* this process stops: the successor was told to stop */
    char buffer[8]; /* what it wrote */
};

#ifdef _WIN32

int keel_server_enable_reload(keel_server *s, char *const argv[])
{
    (void)s;
    (void)argv;
    return KEEL_ERR_UNSUPPORTED; /* no descriptor passing through CreateProcess */
}

void kl_reload_start(keel_server *s)
{
    (void)s;
}

void kl_reload_close(keel_server *s)
{
    (void)s;
}

void kl_reload_cancel(keel_server *s)
{
    (void)s;
}

#else

static void free_words(char **words)
{
    for (size_t i = 0; words && words[i]; i++)
        free(words[i]);
    free(words);
}

int keel_server_enable_reload(keel_server *s, char *const argv[])
{
    if (s == NULL || argv == NULL || argv[0] == NULL)
        return KEEL_ERR_INVAL;
    if (s->state != KL_NEW || s->reload != NULL)
        return KEEL_ERR_STATE;
    kl_reload *r = calloc(1, sizeof *r);
    size_t argc = 0;
    while (argv[argc] != NULL)
        argc++;
    char path[4096];
    size_t len = sizeof path;
    if (r == NULL || uv_exepath(path, &len) != 0 || (r->exe = kl_strndup(path, len)) == NULL ||
        (r->argv = calloc(argc + 1, sizeof *r->argv)) == NULL) {
        if (r != NULL)
            free(r->exe);
        free(r);
        return KEEL_ERR_NOMEM;
    }
    for (size_t i = 0; i < argc; i++)
        if ((r->argv[i] = kl_strdup(argv[i])) == NULL) {
            free_words(r->argv);
            free(r->exe);
            free(r);
            return KEEL_ERR_NOMEM;
        }
    r->server = s;
    s->reload = r;
    return KEEL_OK;
}

static void on_handle_closed(uv_handle_t *handle)
{
    kl_reload *r = handle->data;
    if (handle == (uv_handle_t *)&r->child)
        r->child_open = 0;
    else if (handle == (uv_handle_t *)&r->ready)
        r->ready_open = 0;
    else
        r->timer_open = 0;
}

static void close_handle(kl_reload *r, uv_handle_t *handle, int *open)
{
    if (*open && !uv_is_closing(handle)) {
        handle->data = r;
        uv_close(handle, on_handle_closed);
    }
}

static void close_handles(kl_reload *r)
{
    close_handle(r, (uv_handle_t *)&r->child, &r->child_open);
    close_handle(r, (uv_handle_t *)&r->ready, &r->ready_open);
    close_handle(r, (uv_handle_t *)&r->timer, &r->timer_open);
}

void kl_reload_close(keel_server *s)
{
    if (s->reload != NULL)
        close_handles(s->reload);
}

void kl_reload_cancel(keel_server *s)
{
    kl_reload *r = s->reload;
    if (r == NULL || r->served || !r->child_open || uv_is_closing((uv_handle_t *)&r->child))
        return;
    kl_log(KEEL_LOG_INFO, "stopping: the reload's new process (pid %d) is stopped too",
           r->child.pid);
    r->cancelled = 1;
    uv_process_kill(&r->child, SIGTERM);
}

static void on_child_exit(uv_process_t *child, int64_t status, int signal)
{
    kl_reload *r = child->data;
    int pid = child->pid;
    if (r->cancelled) {
        kl_log(KEEL_LOG_INFO, "the reload's new process (pid %d) stopped", pid);
    } else if (r->served) {
        kl_log(KEEL_LOG_WARN, "the new process (pid %d) exited (status %lld, signal %d)", pid,
               (long long)status, signal);
    } else {
        if (signal != 0)
            kl_log(KEEL_LOG_ERROR,
                   "reload failed: the new process (pid %d) ended by signal %d; "
                   "still serving with the old configuration",
                   pid, signal);
        else
            kl_log(KEEL_LOG_ERROR,
                   "reload failed: the new process (pid %d) exited with status %lld "
                   "(its log says why); still serving with the old configuration",
                   pid, (long long)status);
        kl_service_notify("READY=1"); /* the reload is over */
    }
    close_handles(r);
}

static void on_timeout(uv_timer_t *timer)
{
    kl_reload *r = timer->data;
    if (r->served || !r->child_open)
        return;
    kl_log(KEEL_LOG_ERROR,
           "reload failed: the new process (pid %d) did not serve within %llu ms: "
           "stopping it",
           r->child.pid, (unsigned long long)r->server->host.settings.reload_timeout_ms);
    uv_process_kill(&r->child, SIGKILL);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    kl_reload *r = handle->data;
    (void)suggested;
    *buf = uv_buf_init(r->buffer, sizeof r->buffer);
}

static void on_ready(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    kl_reload *r = stream->data;
    keel_server *s = r->server;
    if (nread > 0 && !r->served && !r->cancelled && buf->base[0] == 'R') {
        r->served = 1;
        uv_timer_stop(&r->timer);
        kl_log(KEEL_LOG_INFO, "reload: new process %d serving; draining this one (pid %d)",
               r->child.pid, (int)uv_os_getpid());
        /* Closing this process's descriptors leaves the sockets open and
         * queued in the new process. First every listener closes, with
         * the server still running, then the graceful stop: a connection
         * accepted meanwhile is served as usual, not as by a stopping
         * server (a readiness probe's 503, found by tests/cluster). */
        s->reloaded = 1;
        if (kl_atomic_load(&s->stopping_answer) != 0) /* already draining */
            kl_atomic_store(&s->stopping_answer, KEEL_STOPPING_REPLACED);
        if (s->host.settings.reuseport) {
            for (size_t i = 0; i < s->nworkers; i++)
                kl_worker_stop_accepting(s->host.workers[i]);
        } else {
            kl_listeners_stop_acceptor(&s->host);
            keel_server_stop(s);
        }
    }
    if (nread < 0)
        close_handle(r, (uv_handle_t *)&r->ready, &r->ready_open);
}

/* The environment for the successor: this one, less what described the
 * sockets this process inherited, plus what describes those it hands down. */
static char **successor_env(keel_server *s, size_t nfds)
{
    uv_env_item_t *items = NULL;
    int count = 0;
    if (uv_os_environ(&items, &count) != 0)
        return NULL;
    char **env = calloc((size_t)count + 4, sizeof *env);
    size_t n = 0;
    for (int i = 0; env != NULL && i < count; i++) {
        const char *name = items[i].name;
        if (strcmp(name, "LISTEN_PID") == 0 || strcmp(name, "LISTEN_FDS") == 0 ||
            strcmp(name, "LISTEN_FDNAMES") == 0 || strcmp(name, "KEEL_LISTEN_FDS") == 0 ||
            strcmp(name, "KEEL_READY_FD") == 0 || strcmp(name, "KEEL_LISTEN_OWNED") == 0)
            continue;
        size_t size = strlen(name) + strlen(items[i].value) + 2;
        if ((env[n] = malloc(size)) == NULL) {
            free_words(env);
            env = NULL;
            break;
        }
        snprintf(env[n++], size, "%s=%s", name, items[i].value);
    }
    uv_os_free_environ(items, count);
    char fds[48], ready[48];
    snprintf(fds, sizeof fds, "KEEL_LISTEN_FDS=%zu", nfds);
    snprintf(ready, sizeof ready, "KEEL_READY_FD=%zu", 3 + nfds);
    /* Whose socket files the successor may remove when it stops: '1' for
     * each descriptor of a Unix listener whose file this process made or
     * was handed as its own (net/inherit.c); not one systemd passed. */
    char *owned = malloc(nfds + sizeof "KEEL_LISTEN_OWNED=");
    if (owned != NULL) {
        size_t k =
            (size_t)snprintf(owned, nfds + sizeof "KEEL_LISTEN_OWNED=", "KEEL_LISTEN_OWNED=");
        for (size_t i = 0; i < s->host.nlisteners; i++)
            for (size_t j = 0; j < s->host.listeners[i].nsockets; j++)
                owned[k++] = s->host.listeners[i].file_owner != KL_FILE_NOT_OURS ? '1' : '0';
        owned[k] = '\0';
    }
    if (env != NULL && owned == NULL) {
        free_words(env);
        env = NULL;
    }
    if (env != NULL) {
        env[n++] = owned;
        owned = NULL;
    }
    free(owned);
    if (env != NULL &&
        ((env[n++] = kl_strdup(fds)) == NULL || (env[n++] = kl_strdup(ready)) == NULL)) {
        free_words(env);
        env = NULL;
    }
    return env;
}

static int spawn(kl_reload *r)
{
    keel_server *s = r->server;
    size_t nfds = 0;
    /* Every listener's sockets, the UDP ones too (net/inherit.h): one
     * socket outlives the hand-over, and its queued datagrams with it. */
    for (size_t i = 0; i < s->host.nlisteners; i++)
        nfds += s->host.listeners[i].nsockets;
    uv_stdio_container_t *stdio = calloc(nfds + 4, sizeof *stdio);
    char **env = successor_env(s, nfds);
    int rc = UV_ENOMEM;
    if (stdio != NULL && env != NULL) {
        for (int fd = 0; fd < 3; fd++)
            stdio[fd] = (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = fd};
        size_t k = 3;
        for (size_t i = 0; i < s->host.nlisteners; i++)
            for (size_t j = 0; j < s->host.listeners[i].nsockets; j++)
                stdio[k++] = (uv_stdio_container_t){
                    .flags = UV_INHERIT_FD, .data.fd = (int)s->host.listeners[i].sockets[j]};
        /* The flags say what the child may do with its end. */
        stdio[k++] = (uv_stdio_container_t){.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
                                            .data.stream = (uv_stream_t *)&r->ready};
        uv_pipe_init(&s->loop, &r->ready, 0);
        r->ready.data = r;
        r->ready_open = 1;
        uv_process_options_t options = {
            .exit_cb = on_child_exit,
            .file = r->exe,
            .args = r->argv,
            .env = env,
            .stdio_count = (int)k,
            .stdio = stdio,
        };
        rc = uv_spawn(&s->loop, &r->child, &options);
        /* The handle is initialised even when spawning fails, and must
         * be closed like any other. */
        r->child.data = r;
        r->child_open = 1;
        if (rc == 0)
            rc = uv_read_start((uv_stream_t *)&r->ready, on_alloc, on_ready);
    }
    free(stdio);
    free_words(env);
    return rc;
}

void kl_reload_start(keel_server *s)
{
    kl_reload *r = s->reload;
    if (r == NULL)
        return;
    uv_mutex_lock(&s->lock);
    int running = s->state == KL_RUNNING;
    uv_mutex_unlock(&s->lock);
    if (!running || s->workers_stopping) {
        kl_log(KEEL_LOG_WARN, "reload ignored: shutting down");
        return;
    }
    if (r->child_open || r->ready_open || r->timer_open) {
        kl_log(KEEL_LOG_WARN, "reload ignored: a reload is under way");
        return;
    }
    kl_log(KEEL_LOG_INFO, "reloading: starting %s", r->exe);
    kl_service_notify("RELOADING=1");
    r->served = 0;
    int rc = spawn(r);
    if (rc != 0) {
        kl_log(KEEL_LOG_ERROR, "reload failed: cannot start %s: %s; still serving", r->exe,
               uv_strerror(rc));
        kl_service_notify("READY=1");
        close_handles(r);
        return;
    }
    uv_timer_init(&s->loop, &r->timer);
    r->timer.data = r;
    r->timer_open = 1;
    uv_timer_start(&r->timer, on_timeout, s->host.settings.reload_timeout_ms, 0);
}

#endif

void kl_reload_free(keel_server *s)
{
    kl_reload *r = s->reload;
    if (r == NULL)
        return;
#ifndef _WIN32
    free_words(r->argv);
    free(r->exe);
#endif
    free(r);
    s->reload = NULL;
}

/* ---- asking a running keel ------------------------------------------------ */

static int read_pid_file(const char *path);

int keel_server_control(keel_server *s, const char *action)
{
    if (s == NULL || action == NULL)
        return KEEL_ERR_INVAL;
    int signum;
    if (strcmp(action, "reload") == 0)
        signum = SIGHUP;
    else if (strcmp(action, "stop") == 0)
        signum = SIGTERM;
#ifndef _WIN32
    else if (strcmp(action, "reopen") == 0)
        signum = SIGUSR1;
#endif
    else
        return KEEL_ERR_INVAL;
#ifdef _WIN32
    (void)signum;
    return KEEL_ERR_UNSUPPORTED; /* no signal stops a Windows process gracefully */
#else
    kl_settings settings;
    char err[512];
    int rc = kl_settings_load(&settings, s->config, s->exe_dir, err, sizeof err);
    if (rc != KEEL_OK) {
        kl_log(KEEL_LOG_ERROR, "%s", err);
        return rc;
    }
    if (settings.pid_file == NULL) {
        kl_log(KEEL_LOG_ERROR, "%s: the config names no [keel] pid_file to find keel by", action);
        kl_settings_free(&settings);
        return KEEL_ERR_CONFIG;
    }
    int pid = read_pid_file(settings.pid_file);
    rc = pid > 0 ? uv_kill(pid, signum) : UV_ENOENT;
    if (rc != 0)
        kl_log(KEEL_LOG_ERROR, "%s: no keel running as the pid file %s says (%s)", action,
               settings.pid_file, pid > 0 ? uv_strerror(rc) : "no pid in it");
    else
        kl_log(KEEL_LOG_INFO, "%s: signal sent to keel (pid %d)", action, pid);
    kl_settings_free(&settings);
    return rc == 0 ? KEEL_OK : KEEL_ERR_NOTFOUND;
#endif
}

/* ---- announcing --------------------------------------------------------- */

static int write_pid_file(const char *path, int pid)
{
    char text[32], tmp[4096];
    int len = snprintf(text, sizeof text, "%d\n", pid);
    if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, pid) >= (int)sizeof tmp)
        return UV_ENAMETOOLONG;
    /* Written aside and renamed: whoever reads it sees an old pid or the
     * new one, never half a number. */
    uv_fs_t req;
    int fd =
        uv_fs_open(NULL, &req, tmp, UV_FS_O_WRONLY | UV_FS_O_CREAT | UV_FS_O_TRUNC, 0644, NULL);
    uv_fs_req_cleanup(&req);
    if (fd < 0)
        return fd;
    uv_buf_t buf = uv_buf_init(text, (unsigned)len);
    int rc = uv_fs_write(NULL, &req, fd, &buf, 1, -1, NULL);
    uv_fs_req_cleanup(&req);
    uv_fs_close(NULL, &req, fd, NULL);
    uv_fs_req_cleanup(&req);
    if (rc >= 0 && rc != len)
        rc = UV_EIO;
    if (rc >= 0) {
        rc = uv_fs_rename(NULL, &req, tmp, path, NULL);
        uv_fs_req_cleanup(&req);
    }
    if (rc < 0) {
        uv_fs_unlink(NULL, &req, tmp, NULL);
        uv_fs_req_cleanup(&req);
    }
    return rc < 0 ? rc : 0;
}

/* The pid in the file, or -1. */
static int read_pid_file(const char *path)
{
    uv_fs_t req;
    int fd = uv_fs_open(NULL, &req, path, UV_FS_O_RDONLY, 0, NULL);
    uv_fs_req_cleanup(&req);
    if (fd < 0)
        return -1;
    char text[32] = {0};
    uv_buf_t buf = uv_buf_init(text, sizeof text - 1);
    int n = uv_fs_read(NULL, &req, fd, &buf, 1, 0, NULL);
    uv_fs_req_cleanup(&req);
    uv_fs_close(NULL, &req, fd, NULL);
    uv_fs_req_cleanup(&req);
    return n > 0 ? atoi(text) : -1;
}

int kl_reload_announce(keel_server *s)
{
    int pid = (int)uv_os_getpid();
    const char *path = s->host.settings.pid_file;
    if (path != NULL) {
        int rc = write_pid_file(path, pid);
        if (rc != 0) {
            kl_log(KEEL_LOG_ERROR, "cannot write pid_file %s: %s", path, uv_strerror(rc));
            return KEEL_ERR_IO;
        }
        s->pid_file_written = 1;
    }
    char state[64];
    snprintf(state, sizeof state, "MAINPID=%d\nREADY=1", pid);
    kl_service_notify(state);
    int fd = s->host.inherited.ready_fd;
    if (fd >= 0) {
        s->host.inherited.ready_fd = -1;
        char ready = 'R';
        uv_buf_t buf = uv_buf_init(&ready, 1);
        uv_fs_t req;
        uv_fs_write(NULL, &req, fd, &buf, 1, -1, NULL);
        uv_fs_req_cleanup(&req);
        uv_fs_close(NULL, &req, fd, NULL);
        uv_fs_req_cleanup(&req);
    }
    return KEEL_OK;
}

void kl_reload_exit(keel_server *s)
{
    const char *path = s->host.settings.pid_file;
    if (path == NULL || !s->pid_file_written)
        return;
    /* After a reload the file names the new process: not ours to remove. */
    if (read_pid_file(path) == (int)uv_os_getpid()) {
        uv_fs_t req;
        uv_fs_unlink(NULL, &req, path, NULL);
        uv_fs_req_cleanup(&req);
    }
}
