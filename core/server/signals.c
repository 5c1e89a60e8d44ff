/* The main thread's signals: stop (SIGINT, SIGTERM; on Windows Ctrl-C,
 * Ctrl-Break and the console's close), reload (SIGHUP), reopen the logs
 * (SIGUSR1), and SIGUSR2 ignored rather than fatal. */
#include <signal.h>
#include <stddef.h>

#include "base/log.h"
#include "base/util.h"
#include "runtime/crash.h"
#include "server/appender.h"
#include "server/reload.h"
#include "server/server.h"

const char *kl_signal_name(int signum)
{
    switch (signum) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
#ifdef _WIN32
    case SIGBREAK:
        return "Ctrl-Break";
    case SIGHUP:
        return "console closed";
#endif
    default:
        return "signal";
    }
}

#ifndef _WIN32
/* SIGUSR1, as nginx's: logrotate renames the files, then asks for new
 * ones (docs/running.md). The error log first, so that the line saying
 * so is in the new file. */
static void reopen_logs(keel_server *s)
{
    char err[512];
    kl_log(KEEL_LOG_INFO, "SIGUSR1: reopening the log files");
    if (kl_log_reopen(err, sizeof err) != KEEL_OK)
        kl_log(KEEL_LOG_ERROR, "%s; still writing to the file opened before", err);
    kl_appenders_reopen(s);
    /* Then the modules' own files (ABI 1.8), on this thread: see
     * keel_module_desc.reopen. */
    for (size_t i = 0; i < s->nmodules; i++) {
        keel_module *m = s->modules[i];
        if (m->loaded && m->desc.reopen != NULL)
            KL_IN_MODULE(m->name, m->desc.reopen(m));
    }
    kl_log(KEEL_LOG_INFO, "log files reopened");
}
#endif

static void on_signal(uv_signal_t *handle, int signum)
{
    keel_server *s = handle->data;
#ifndef _WIN32
    if (signum == SIGHUP) {
        kl_reload_start(s);
        return;
    }
    if (signum == SIGUSR1) {
        reopen_logs(s);
        return;
    }
    if (signum == SIGUSR2) {
        /* nginx's binary upgrade: a reload (SIGHUP) already starts the
         * program file as it is on disk now. Ignored rather than fatal. */
        kl_log(KEEL_LOG_WARN, "SIGUSR2 ignored: keel does not use it (SIGHUP reloads, and picks "
                              "up an upgraded binary; SIGUSR1 reopens the logs)");
        return;
    }
#endif
    /* Draining after a reload hand-over, the first stop signal (systemd's
     * SIGTERM to every process of the unit, say) finds it already
     * stopping gracefully: it must not count as the second request that
     * closes everything at once. A second signal still does. */
    if (s->reloaded && !s->signal_after_reload) {
        s->signal_after_reload = 1;
        kl_log(KEEL_LOG_INFO, "%s: already draining after a reload", kl_signal_name(signum));
        return;
    }
    s->signal_number = signum;
    keel_server_stop(s);
}

int kl_server_watch_signals(keel_server *s)
{
    /* On Windows libuv turns Ctrl-C into SIGINT, Ctrl-Break into SIGBREAK
     * and closing the console into SIGHUP. */
    static const int signals[] = {
        SIGINT,   SIGTERM, SIGHUP, /* POSIX: a reload, watched only if enabled */
#ifndef _WIN32
        SIGUSR1, /* reopen the logs */
        SIGUSR2, /* ignored, not fatal */
#endif
#ifdef _WIN32
        SIGBREAK,
#endif
    };
    for (size_t i = 0; i < KL_ARRAY_SIZE(signals); i++) {
#ifndef _WIN32
        if (signals[i] == SIGHUP && s->reload == NULL)
            continue; /* left to its default (or the program's handler) */
#endif
        uv_signal_t *h = &s->signals[s->nsignals];
        if (uv_signal_init(&s->loop, h) != 0)
            return KEEL_ERR_IO;
        h->data = s;
        s->nsignals++;
        if (uv_signal_start(h, on_signal, signals[i]) != 0)
            return KEEL_ERR_IO;
    }
    return KEEL_OK;
}
